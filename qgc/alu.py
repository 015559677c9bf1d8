"""Exact integer circuits of `tensor.threshold` ops: the machine's ALU.

Each function builds the ops for ONE lane value, a `!tensor.bits<W>` (bit i
is 2^i, LSB first), for any width W; the lowering instantiates it per lane.
Every output bit is a single threshold `[Σ w·x ≥ t]` with small integer
weights, so every row is exact in float32 and bfloat16 (`ThresholdRow.gadget`).

This is v0, built for exactness, not depth: addition is ripple-carry (two
thresholds per bit: the majority carry, then the sum `[a + b + c − 2·c_out ≥
1]`), multiplication is shift-and-add, compares run a borrow chain. That is
all the ideal `tensor` engine needs; the layer count of these circuits (tens
of layers per 32-bit add) is too deep for the model, where the carry-lookahead
forms over 4-bit digits of `tests/test_tensor_core.py` (a 32-bit add in three
layers) take their place.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from qgc.dialects import tensor as T


class Alu:
    """Circuit builders on a `tensor.ProgramBuilder`."""

    def __init__(self, builder: T.ProgramBuilder):
        self.b = builder

    # ------------------------------------------------------------ plumbing
    def _bit(self, x: SSAValue, i: int) -> SSAValue:
        return self.b.slice(x, i, i + 1)

    def _cat(self, bits: Sequence[SSAValue]) -> SSAValue:
        return self.b.concat(list(bits)) if len(bits) > 1 else bits[0]

    def _bitwise(self, x: SSAValue, y: SSAValue, terms: dict[int, int], t: int) -> SSAValue:
        """Per bit i: [terms over (x_i, y_i) ≥ t] (term 0 is x_i, term 1 is y_i)."""
        n = T.width_of(x)
        return self.b.threshold([x, y], [({i + n * k: w for k, w in terms.items()}, t)
                                         for i in range(n)])

    # ------------------------------------------------------------ logic
    def const(self, value: int, width: int) -> SSAValue:
        """Constant bits: rows without terms (no neuron)."""
        return self.b.threshold([], [({}, 0 if (value >> i) & 1 else 1) for i in range(width)])

    def not_(self, x: SSAValue) -> SSAValue:
        return self.b.threshold([x], [({i: -1}, 0) for i in range(T.width_of(x))])

    def and_(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self._bitwise(x, y, {0: 1, 1: 1}, 2)

    def or_(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self._bitwise(x, y, {0: 1, 1: 1}, 1)

    def xor(self, x: SSAValue, y: SSAValue) -> SSAValue:
        both = self.and_(x, y)
        n = T.width_of(x)
        return self.b.threshold([x, y, both], [({i: 1, n + i: 1, 2 * n + i: -2}, 1)
                                               for i in range(n)])

    def mask(self, x: SSAValue, p: SSAValue) -> SSAValue:
        """p ? x : 0 (p one bit)."""
        n = T.width_of(x)
        return self.b.threshold([x, p], [({i: 1, n: 1}, 2) for i in range(n)])

    def select(self, p: SSAValue, x: SSAValue, y: SSAValue) -> SSAValue:
        """p ? x : y (p one bit): two layers."""
        n = T.width_of(x)
        on = self.mask(x, p)
        off = self.b.threshold([y, p], [({i: 1, n: -1}, 1) for i in range(n)])
        return self.or_(on, off)

    # ------------------------------------------------------------ arithmetic
    def add(self, x: SSAValue, y: SSAValue, carry_in: SSAValue | None = None) -> SSAValue:
        """x + y (+ carry_in) mod 2^W, ripple-carry."""
        c = carry_in if carry_in is not None else self.const(0, 1)
        out = []
        for i in range(T.width_of(x)):
            a, b = self._bit(x, i), self._bit(y, i)
            carry = self.b.threshold([a, b, c], [({0: 1, 1: 1, 2: 1}, 2)])
            out.append(self.b.threshold([a, b, c, carry], [({0: 1, 1: 1, 2: 1, 3: -2}, 1)]))
            c = carry
        return self._cat(out)

    def sub(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.add(x, self.not_(y), self.const(1, 1))

    def neg(self, x: SSAValue) -> SSAValue:
        return self.sub(self.const(0, T.width_of(x)), x)

    def sum(self, values: Sequence[SSAValue]) -> SSAValue:
        """Σ values mod 2^W, as a balanced tree of adds."""
        vals = list(values)
        while len(vals) > 1:
            vals = [self.add(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i]
                    for i in range(0, len(vals), 2)]
        return vals[0]

    def mul_lo(self, x: SSAValue, y: SSAValue) -> SSAValue:
        """The low W bits of x·y: the shifted partial products, summed."""
        n = T.width_of(x)
        parts = [self.mask(self._shifted(x, i), self._bit(y, i)) for i in range(n)]
        return self.sum(parts)

    def mad_lo(self, x: SSAValue, y: SSAValue, z: SSAValue) -> SSAValue:
        return self.add(self.mul_lo(x, y), z)

    def _shifted(self, x: SSAValue, k: int) -> SSAValue:
        """x << k within W bits (a view and constant zeros)."""
        n = T.width_of(x)
        if k == 0:
            return x
        return self._cat([self.const(0, k)] + ([self.b.slice(x, 0, n - k)] if k < n else []))

    # ------------------------------------------------------------ compares
    def eq(self, x: SSAValue, y: SSAValue) -> SSAValue:
        diff = self.xor(x, y)
        return self.b.threshold([diff], [({i: -1 for i in range(T.width_of(x))}, 0)])

    def _ge_unsigned(self, x: SSAValue, y: SSAValue) -> SSAValue:
        """x ≥ y: the carry out of x + ~y + 1."""
        c = self.const(1, 1)
        ny = self.not_(y)
        for i in range(T.width_of(x)):
            c = self.b.threshold([self._bit(x, i), self._bit(ny, i), c],
                                 [({0: 1, 1: 1, 2: 1}, 2)])
        return c

    def setp(self, cond: str, x: SSAValue, y: SSAValue) -> SSAValue:
        """PTX comparisons (`simt.SETP_CONDS`): one bit."""
        if cond in ("eq", "ne"):
            e = self.eq(x, y)
            return e if cond == "eq" else self.not_(e)
        base, kind = cond.split(".")
        if kind == "s":      # signed: flip the sign bits, compare unsigned
            top = self.const(1 << (T.width_of(x) - 1), T.width_of(x))
            x, y = self.xor(x, top), self.xor(y, top)
        if base in ("gt", "le"):
            x, y = y, x       # x > y ⇔ y < x;  x ≤ y ⇔ y ≥ x
        ge = self._ge_unsigned(x, y)
        return ge if base in ("ge", "le") else self.not_(ge)

    def min(self, x: SSAValue, y: SSAValue, signed: bool) -> SSAValue:
        return self.select(self.setp("lt." + ("s" if signed else "u"), x, y), x, y)

    def max(self, x: SSAValue, y: SSAValue, signed: bool) -> SSAValue:
        return self.select(self.setp("gt." + ("s" if signed else "u"), x, y), x, y)

    # ------------------------------------------------------------ shifts
    def shl(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self._shift(x, y, left=True, fill=None)

    def shr(self, x: SSAValue, y: SSAValue, signed: bool) -> SSAValue:
        n = T.width_of(x)
        return self._shift(x, y, left=False, fill=self._bit(x, n - 1) if signed else None)

    def _shift(self, x: SSAValue, y: SSAValue, left: bool, fill: SSAValue | None) -> SSAValue:
        """A barrel shifter over the amount's bits; an amount ≥ W gives the
        fill (PTX clamps shift amounts)."""
        n = T.width_of(x)
        zero = fill if fill is not None else self.const(0, 1)
        stages = max(1, (n - 1).bit_length())
        for k in range(stages):
            step = 1 << k
            moved = []
            for i in range(n):
                src = i - step if left else i + step
                moved.append(self._bit(x, src) if 0 <= src < n else zero)
            x = self.select(self._bit(y, k), self._cat(moved), x)
        high = [self._bit(y, k) for k in range(stages, T.width_of(y))]
        if not high:
            return x
        big = self.b.threshold(high, [({i: 1 for i in range(len(high))}, 1)])
        return self.select(big, self._cat([zero] * n), x)
