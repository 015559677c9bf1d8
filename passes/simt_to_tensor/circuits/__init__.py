"""Exact integer circuits of `tensor.threshold` ops: the ALU of one SIMT lane.

Every function builds the ops for ONE lane value (a `!tensor.bits<W>`, bit i
weighs 2^i, W = 1..32); callers instantiate it per lane. A threshold output is
`[Σ w·x ≥ t]` over bits x ∈ {0, 1}; one output costs 0–2 SwiGLU neurons and
every chain of threshold ops costs one MLP layer per op (slices and concats
are free views). `ThresholdRow.gadget` bounds every row: weights of 8
significant bits, at most 255 units on the active side of `L = Σ w·b − T`,
and T near the midpoint Σw/2 — so no row may look at a whole 32-bit sum.

Construction (the same ideas as `../shared/demo/alu_demo.py`, in pure
threshold rows), one module per concern, each docstring telling its part:

- `forms`: affine forms (`Form`), rows and sum rows (`Sum`), tightening;
- `core`: the plumbing (`AluCore`): a value's Forms, one `tensor.threshold`
  for rows, views for constants and copies, undo on a gadget failure;
- `templates`: a circuit built once per (operation, input shape) and cloned
  for the other lanes (`AluCore.instantiated`);
- `logic`: not, and, or, xor, mask, select;
- `adders`: add, sub, neg (digit carry lookahead);
- `counters`: sum, and the column sums the multipliers end in;
- `multipliers`: mul_lo, mad_lo, mul_hi, mul_wide (wide and narrow);
- `compare`: setp, eq, min, max;
- `shifts`: shl, shr, shf, prmt;
- `bitfields`: bfe, bfi;
- `counts`: popc, clz, bfind, brev, abs;
- `alu`: `Alu`, all of them over one `ProgramBuilder`.

Depths below are MLP layers at W = 32 after `schedule` (fewer for small W or
constant operands); neurons are per lane at W = 32:

    op               layers  neurons     op               layers  neurons
    add, sub            2      229       abs                 1      153
    neg                 2       96       popc                1       62
    setp (order)        2       26       clz, bfind.u        1       32
    eq, setp.eq/ne      2       25       bfind.s             1       62
    select              1       64       brev                0        0
    and, or, mask       1       32       bfe.u               2      644
    xor                 1       96       bfe.s               2    1,298
    min, max            2      152       bfi                 2      771
    shl, shr.u          2      559       shf (wrap)          1    1,024
    shr.s               2      591       shf (clamp)         1    1,088
                                         prmt                1      288
    sum of 3            3      353       mul_hi.u (wide)     5    4,989
    mul_lo (wide)       5    2,556       mul_hi.s (wide)     5    4,964
    mad_lo (wide)       5    2,663       mul_hi.u (narrow)  10    5,880
    mul_lo (narrow)     8    3,018       mul_hi.s (narrow)  10    5,902
    mad_lo (narrow)     8    3,229

Constant pos/len (bfe, bfi) and shift amounts (shl, shr, shf) leave views
only; a constant factor drops the products it zeroes (mul.hi.s by
−1840700269, x / 7: 4 layers, 1,706 neurons; a constant or byte factor
keeps the wide multiplier).
"""

from qgc.passes.simt_to_tensor.circuits.alu import Alu
from qgc.passes.simt_to_tensor.circuits.compare import CONDS
from qgc.passes.simt_to_tensor.circuits.forms import Form, Sum, fsum, linear, step, tighten

__all__ = ["CONDS", "Alu", "Form", "Sum", "fsum", "linear", "step", "tighten"]
