"""Bitwise logic and select: not, and, or, xor, mask, select.

Select. `p ? x : y` is not a threshold function but the sum row [x + p ≥ 2]
+ [y − p ≥ 1] (never both 1): 1 layer. A predicate still given as a row [F ≥
t] (min/max) gates straight in: [F + K·x ≥ t + K].
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from qgc.passes.simt_to_tensor.circuits.core import AluCore
from qgc.passes.simt_to_tensor.circuits.forms import Row, linear, step


class LogicCircuits(AluCore):
    """not, and, or, xor, mask and select, one layer each."""

    def not_(self, x: SSAValue) -> SSAValue:
        """~x. 1 layer, W neurons (1 per bit)."""
        return self.value([1 - f for f in self.bits(x)])

    def and_(self, x: SSAValue, y: SSAValue) -> SSAValue:
        """x & y = [x + y ≥ 2]. 1 layer, W neurons."""
        self._same(x, y)
        return self.emit([(a + b, 2) for a, b in zip(self.bits(x), self.bits(y), strict=True)])

    def or_(self, x: SSAValue, y: SSAValue) -> SSAValue:
        """x | y = [x + y ≥ 1]. 1 layer, W neurons."""
        self._same(x, y)
        return self.emit([(a + b, 1) for a, b in zip(self.bits(x), self.bits(y), strict=True)])

    def xor(self, x: SSAValue, y: SSAValue) -> SSAValue:
        """x ^ y = x + y − 2·[x + y ≥ 2] (XOR is no threshold function, but a
        sum row). 1 layer, 3W neurons (W when y or x is constant)."""
        self._same(x, y)
        return self.emit([linear(a) + linear(b) + step(a + b, 2) * -2
                          for a, b in zip(self.bits(x), self.bits(y), strict=True)])

    def mask(self, x: SSAValue, p: SSAValue) -> SSAValue:
        """p ? x : 0 = [x + p ≥ 2] per bit. 1 layer, W neurons."""
        pf = self.bits(p)[0]
        return self.emit([(a + pf, 2) for a in self.bits(x)])

    def select(self, p: SSAValue, x: SSAValue, y: SSAValue) -> SSAValue:
        """p ? x : y = (x ∧ p) + (y ∧ ¬p), the two never both 1: one sum row
        per bit, 1 layer, 2W = 64 neurons."""
        self._same(x, y)
        return self._select_row((self.bits(p)[0], 1), x, y)

    def _select_row(self, pred: Row, x: SSAValue, y: SSAValue) -> SSAValue:
        f, t = pred
        k1 = f.hi() - t + 1                 # x ∧ [f ≥ t] = [f + k1·x ≥ t + k1]
        k2 = (-f).hi() - (1 - t) + 1        # y ∧ [−f ≥ 1 − t]
        return self.emit([step(f + k1 * a, t + k1) + step(-f + k2 * b, 1 - t + k2)
                          for a, b in zip(self.bits(x), self.bits(y), strict=True)])
