"""Bit fields: bfe and bfi.

One-hot sums. When at most one of several ANDs can be 1 (pos equals one q),
their OR is their sum: one sum row of AND parts, no OR layer. Bit fields
read the low 8 bits of pos and len through one layer of monotone rows R(m) =
[pos ≥ m], L(j) = [len ≥ j], S(k) = [pos + len ≥ k] (weights ≥ the threshold
cut to it, so an 8-bit operand fits a row), and [pos == q] = R(q) ∧ ¬R(q +
1) is a pair of literals: 2 layers.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from qgc.passes.simt_to_tensor.circuits.core import AluCore
from qgc.passes.simt_to_tensor.circuits.forms import (
    Bound,
    Form,
    Row,
    Sum,
    fsum,
    one_hot,
    step,
)


def _at_least(terms: Sequence[tuple[Form, int]], k: int) -> Row:
    """[Σ w·f ≥ k] for k ≥ 1 with every weight ≥ k cut to k (any such bit alone
    reaches k), or an OR of those bits when the others cannot reach k: an
    8-bit operand's row stays within the gadget bounds."""
    light = [(f, w) for f, w in terms if w < k]
    heavy = [f for f, w in terms if w >= k]
    if sum(w for _, w in light) < k:
        return fsum(heavy), 1
    return fsum([f * w for f, w in light] + [f * k for f in heavy]), k


def _and_of(literals: Sequence[Form]) -> Sum:
    """The AND of 0/1 Forms as one part (constant literals fold)."""
    return step(fsum(literals), len(literals))


class BitFieldCircuits(AluCore):
    """bfe (unsigned, signed) and bfi over the bounds of pos and len."""

    def _field_bounds(self, pos: SSAValue, length: SSAValue, w: int,
                      sums: bool) -> tuple[Bound, Bound, Bound]:
        """One layer of rows over the low 8 bits of pos and len (PTX reads
        only those): R(m) = [pos ≥ m], L(j) = [len ≥ j] (m, j ≤ W) and, with
        `sums`, S(k) = [pos' + len' ≥ k] over the bits below W of each
        (exact while pos, len < W, i.e. when ¬R(W) ∧ ¬L(W))."""
        ps, ls = self.bits(pos)[:8], self.bits(length)[:8]
        nb = (w - 1).bit_length()
        rows = [_at_least([(f, 1 << j) for j, f in enumerate(ps)], m) for m in range(1, w + 1)]
        rows += [_at_least([(f, 1 << j) for j, f in enumerate(ls)], j) for j in range(1, w + 1)]
        if sums:
            low = [(f, 1 << j) for j, f in enumerate(ps[:nb])]
            low += [(f, 1 << j) for j, f in enumerate(ls[:nb])]
            rows += [_at_least(low, k) for k in range(1, w + 1)]
        got = self.bits(self.emit(rows))

        def table(start: int) -> Bound:
            # index ≤ 0 is the constant 1 (every value is ≥ 0)
            return lambda k: got[start + k - 1] if k > 0 else Form(const=1)

        return table(0), table(w), table(2 * w)

    def bfe(self, x: SSAValue, pos: SSAValue, length: SSAValue, signed: bool) -> SSAValue:
        """Bit field extract (PTX bfe; p, l the low 8 bits of pos, len): bit i
        is x_{p+i} while i < min(l, W − p), then the fill: 0, or (signed) the
        field's top bit x_{min(p+l, W) − 1} (0 when l = 0). Layer 1: R, L (and
        S) of `_field_bounds`; layer 2, bit i as a sum row of ANDs:
        Σ_p [p = P] ∧ x_{p+i} ∧ [l > i], plus (signed) the fill
        Σ_k [min(p + l, W) = k] ∧ x_{k−1} ∧ [l ≥ 1] ∧ [p ≥ k − i].
        2 layers, 644 (bfe.u) / 1,298 (bfe.s) neurons at W = 32; views for
        constant pos and len."""
        xs = self.bits(x)
        w = len(xs)
        R, L, S = self._field_bounds(pos, length, w, signed)
        rows = []
        for i in range(w):
            parts = [_and_of([R(p), 1 - R(p + 1), xs[p + i], L(i + 1)]) for p in range(w - i)]
            if signed:
                parts += [_and_of([S(k), 1 - S(k + 1), 1 - R(w), 1 - L(w), xs[k - 1], L(1), R(k - i)])
                          for k in range(1, w)]
                # min(p + l, W) = W: pos ≥ W, len ≥ W or pos + len ≥ W
                parts.append(step(R(w) + L(w) + S(w) + 3 * (R(w - i) + L(1) + xs[w - 1]), 10))
            rows.append(one_hot(parts))
        return self.emit(rows)

    def bfi(self, f: SSAValue, base: SSAValue, pos: SSAValue, length: SSAValue) -> SSAValue:
        """Bit field insert (PTX bfi; p, l the low 8 bits of pos, len): bit i
        is f_{i−p} for p ≤ i < p + l, else base_i. Layer 2, bit i as a sum row:
        Σ_{q ≤ i} [p = q] ∧ [l ≥ i + 1 − q] ∧ f_{i−q}
        + base_i ∧ ([p > i] ∨ ([p + l ≤ i] ∧ [l < W])).
        2 layers, 771 neurons at W = 32; views for constant pos and len."""
        w = self._same(f, base)
        fs, bs = self.bits(f), self.bits(base)
        R, L, S = self._field_bounds(pos, length, w, True)
        rows = []
        for i in range(w):
            parts = [_and_of([R(q), 1 - R(q + 1), L(i + 1 - q), fs[i - q]]) for q in range(i + 1)]
            # base_i ∧ (i < p ∨ (p + l ≤ i ∧ l < W)), i.e. outside the field
            parts.append(step(3 * bs[i] + 2 * R(i + 1) + 2 - S(i + 1) - L(w), 5))
            rows.append(one_hot(parts))
        return self.emit(rows)
