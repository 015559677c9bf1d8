"""Compares: setp, eq, min, max.

Compares. Digits of ≤ 6 bits, GT_d = [A_d − B_d ≥ 1], GE_d = [A_d − B_d ≥ 0]
(signed: the top bit literal is flipped), then U = Σ_d 2^d (GT_d + GE_d − 1)
has the sign of a − b: 2 layers (1 for W ≤ 8, where Σ 2^j (a_j − b_j) fits
one row; eq/ne always take 2).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from qgc.passes.simt_to_tensor.circuits.forms import Row, fsum
from qgc.passes.simt_to_tensor.circuits.logic import LogicCircuits

CONDS = ("eq", "ne", "lt.s", "le.s", "gt.s", "ge.s", "lt.u", "le.u", "gt.u", "ge.u")
#: The widest order compare that is one row (Σ 2^j (a_j − b_j) within the gadget bounds).
ONE_ROW_COMPARE_BITS = 8


class CompareCircuits(LogicCircuits):
    """setp over `CONDS`, eq, and min / max (the compare gating a select)."""

    def _cmp_row(self, cond: str, x: SSAValue, y: SSAValue) -> Row:
        """The final row [F ≥ t] of a compare (its digit layer already emitted)."""
        if cond not in CONDS:
            raise ValueError(f"unknown compare '{cond}' (one of {', '.join(CONDS)})")
        w = self._same(x, y)
        xs, ys = list(self.bits(x)), list(self.bits(y))
        if cond.endswith(".s"):
            xs[-1], ys[-1] = 1 - xs[-1], 1 - ys[-1]
        op = cond.split(".")[0]
        if op in ("lt", "le", "gt", "ge") and w <= ONE_ROW_COMPARE_BITS:
            diff = fsum([(a - b) * (1 << i) for i, (a, b) in enumerate(zip(xs, ys,
                                                                              strict=True))])
            return {"gt": (diff, 1), "ge": (diff, 0), "lt": (-diff, 1), "le": (-diff, 0)}[op]
        n = (w + 5) // 6
        sizes = [w // n + (1 if d < w % n else 0) for d in range(n)]
        rows: list[Row] = []
        base = 0
        for size in sizes:
            diff = fsum([(xs[base + i] - ys[base + i]) * (1 << i) for i in range(size)])
            rows += [(diff, 1), (diff, 0)]
            base += size
        g = self.bits(self.emit(rows))
        gt, ge = g[0::2], g[1::2]
        if op in ("eq", "ne"):
            e = fsum([a - b for a, b in zip(ge, gt, strict=True)])   # digits equal
            return (e, n) if op == "eq" else (-e, 1 - n)
        u = fsum([(a + b - 1) * (1 << d) for d, (a, b) in enumerate(zip(gt, ge, strict=True))])
        return {"gt": (u, 1), "ge": (u, 0), "lt": (-u, 1), "le": (-u, 0)}[op]

    def setp(self, cond: str, x: SSAValue, y: SSAValue) -> SSAValue:
        """One bit [x cond y] (signed: two's complement). Order compares: 2 layers
        at W = 32 (1 for W ≤ 8), 26 neurons (2 per digit row, 6 digits, and
        the final row); eq/ne: 2 layers at every width, 25 neurons."""
        return self.emit([self._cmp_row(cond, x, y)])

    def eq(self, x: SSAValue, y: SSAValue) -> SSAValue:
        """[x == y]: 2 layers, 25 neurons at W = 32."""
        return self.setp("eq", x, y)

    def min(self, x: SSAValue, y: SSAValue, signed: bool) -> SSAValue:
        """min(x, y): the compare's final row gates the select directly:
        2 layers, 152 neurons at W = 32."""
        return self._minmax("le", x, y, signed)

    def max(self, x: SSAValue, y: SSAValue, signed: bool) -> SSAValue:
        """max(x, y): 2 layers, 152 neurons at W = 32."""
        return self._minmax("ge", x, y, signed)

    def _minmax(self, op: str, x: SSAValue, y: SSAValue, signed: bool) -> SSAValue:
        cond = f"{op}.{'s' if signed else 'u'}"

        def fused() -> SSAValue:
            return self._select_row(self._cmp_row(cond, x, y), x, y)

        def plain() -> SSAValue:
            return self.select(self.setp(cond, x, y), x, y)

        return self._attempt(fused, plain)
