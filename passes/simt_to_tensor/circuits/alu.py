"""`Alu`: every circuit family over one `ProgramBuilder`.

The families are classes of their own modules, each deriving from the ones
it builds on (`AluCore` at the root); `Alu` is their union.
"""

from __future__ import annotations

from qgc.passes.simt_to_tensor.circuits.bitfields import BitFieldCircuits
from qgc.passes.simt_to_tensor.circuits.compare import CompareCircuits
from qgc.passes.simt_to_tensor.circuits.counts import CountCircuits
from qgc.passes.simt_to_tensor.circuits.multipliers import MultiplierCircuits
from qgc.passes.simt_to_tensor.circuits.shifts import ShiftCircuits


class Alu(MultiplierCircuits, CompareCircuits, ShiftCircuits, BitFieldCircuits, CountCircuits):
    """Builds exact integer circuits into a `ProgramBuilder`.

    `narrow` picks the multipliers (mul_lo, mad_lo, mul_hi): True the
    digit-serial ones (narrow, deeper), False the all-at-once ones (wide,
    shallow), None (default) narrow when both factors have at least
    `narrow_min_bits` variable bits; each method's own `narrow` argument
    overrides it. `digit_bits`: rows of y per digit of the narrow ones."""
