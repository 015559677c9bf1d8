"""Bit counts and abs: popc, clz, bfind, brev, abs.

Staircases over x (popc, clz, bfind). popc is the counter of one column, bit
t of D = Σ x_i over the parts [D ≥ k]; clz and bfind are functions v(n) of n
= the number of leading bits equal to the sign (0 for unsigned), and z_k =
[n ≥ k] is one row over x (the top k bits all 0, or signed a sum of the two
parts all 0 / all 1), so bit t of v(n) is the sum row bit_t(v(0)) + Σ_k
(bit_t(v(k)) − bit_t(v(k−1)))·z_k: 1 layer.

XOR with a row (abs). a XOR [F ≥ t] = a + [F ≥ t] − 2·[F + K·a ≥ t + K] is
one sum row; bit i of −x is x_i XOR (x_j for some j < i), so |x| is 1 layer.
brev is a view.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import SSAValue

from qgc.dialects import tensor as T
from qgc.passes.simt_to_tensor.circuits.core import AluCore
from qgc.passes.simt_to_tensor.circuits.forms import (
    Form,
    Sum,
    bit_of_count,
    fsum,
    linear,
    step,
)


def _xor_step(a: Form, form: Form, t: int) -> Sum:
    """a XOR [form ≥ t] as one sum row: a + [form ≥ t] − 2·(a ∧ [form ≥ t]),
    the AND being [form + K·a ≥ t + K] for K past form's range."""
    k = max(1, form.hi() - t + 1)
    return linear(a) + step(form, t) + step(form + k * a, t + k) * -2


class CountCircuits(AluCore):
    """popc, clz, bfind, brev and abs: one layer or a view."""

    def brev(self, x: SSAValue) -> SSAValue:
        """Bits reversed: a view, no neurons."""
        w = T.width_of(x)
        return self._view([(x, w - 1 - i) for i in range(w)])

    def popc(self, x: SSAValue) -> SSAValue:
        """Number of 1 bits: bit t of D = Σ x_i as a staircase over the parts
        [D ≥ k]: 1 layer, 62 neurons at W = 32."""
        xs = self.bits(x)
        d = fsum(xs)
        return self.emit([bit_of_count(t, d.hi(), d) for t in range(len(xs))])

    def clz(self, x: SSAValue) -> SSAValue:
        """Leading zeros (W for 0): z_k = [the top k bits are 0] = [clz ≥ k],
        bit t of clz = Σ_k (bit_t(k) − bit_t(k − 1))·z_k: 1 layer, 32 neurons
        at W = 32."""
        return self._of_leading(x, False, lambda k: k)

    def bfind(self, x: SSAValue, signed: bool, shiftamt: bool) -> SSAValue:
        """Position of the most significant non-sign bit, or its distance from
        the top (`shiftamt`); all ones when there is none. A staircase over
        z_k = [the top k bits equal the sign] (unsigned: are 0), like clz:
        1 layer, 32 (unsigned) / 62 (signed) neurons at W = 32."""
        w = T.width_of(x)
        m = (1 << w) - 1
        return self._of_leading(x, signed, lambda k: m if k == w else
                                (k if shiftamt else w - 1 - k))

    def _of_leading(self, x: SSAValue, signed: bool, v: Callable[[int], int]) -> SSAValue:
        """v(n) for n the number of leading bits equal to the sign bit
        (unsigned: leading zeros), as staircases over z_k = [n ≥ k]."""
        xs = self.bits(x)
        w = len(xs)
        z: list[Sum] = []
        for k in range(1, w + 1):
            top = fsum(xs[w - k:])
            if signed and k == 1:
                z.append(linear(Form(const=1)))          # the sign bit equals itself
            else:
                z.append(step(-top, 0) + step(top, k) if signed else step(-top, 0))
        rows = []
        for t in range(w):
            bit = [(v(k) >> t) & 1 for k in range(w + 1)]
            row = linear(Form(const=bit[0]))
            for k in range(1, w + 1):
                if bit[k] != bit[k - 1]:
                    row = row + z[k - 1] * (bit[k] - bit[k - 1])
            rows.append(row)
        return self.emit(rows)

    def abs(self, x: SSAValue) -> SSAValue:
        """|x| (two's complement, abs(INT_MIN) = INT_MIN): for x < 0 bit i of −x
        is x_i XOR (x_j for some j < i), so bit i = x_i XOR c_i with
        c_i = [Σ_{j<i} x_j + i·x_{W−1} ≥ i + 1], the XOR as one sum row:
        1 layer, 153 neurons at W = 32."""
        xs = self.bits(x)
        sign = xs[-1]
        return self.emit([_xor_step(a, fsum(xs[:i]) + sign * i, i + 1) for i, a in enumerate(xs)])
