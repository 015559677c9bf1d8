"""Adders: x + y, x − y and −x by digit carry lookahead.

Digits and lookahead. Columns hold at most two bits each. Layer 1, per 4-bit
digit D_d = A_d + B_d: G_d = [D_d ≥ 16], P_d = [D_d ≥ 15] and the carries
into bits 1..3 of the digit for a digit carry-in of 0 (c0) and 1 (c1). Layer
2: carry into digit d is [T_d ≥ 1] with T_d = Σ_{j<d} 2^j (G_j + P_j − 1)
(the highest non-propagating digit decides its sign), and the carry into bit
k of digit d is c0 ∨ (c1 ∧ C_d) = [2^d (c0 + c1 − 1) + T_d ≥ 1]. The sum
bits come out of the same layer as sum rows, s_i = a_i + b_i + c_i −
2·c_{i+1} with the carries as parts: 2 layers. For W ≤ 8 every carry
[Σ_{j<i} 2^j (a_j + b_j) ≥ 2^i] fits one part: 1 layer. Beyond 32 columns
(mul_hi's 2W) the digits grow to ⌈columns/8⌉ bits, so the lookahead still
has 8 digits; where such a digit row breaks the gadget bounds even tightened
(`forms.tighten`), the high 32 columns' carries for either carry-in and the
low half's carry out C are computed side by side and [2·x0 + x1 + C ≥ 2]
picks: 3 layers.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from qgc.passes.simt_to_tensor.circuits.core import AluCore
from qgc.passes.simt_to_tensor.circuits.forms import Form, Row, Sum, fsum, linear, low_sum, step


class AdderCircuits(AluCore):
    """add, sub, neg and the adder of columns of ≤ 2 bits that the counters
    and multipliers finish with."""

    def add(self, x: SSAValue, y: SSAValue, carry_in: SSAValue | None = None) -> SSAValue:
        """x + y (+ carry_in) mod 2^W. Digit carry lookahead: 2 layers at W = 32
        (1 for W ≤ 8); 229 neurons at W = 32."""
        self._same(x, y)
        cin = self.bits(carry_in)[0] if carry_in is not None else None
        return self._add_columns([[a, b] for a, b in zip(self.bits(x), self.bits(y),
                                                         strict=True)], cin)

    def sub(self, x: SSAValue, y: SSAValue) -> SSAValue:
        """x − y = x + ~y + 1 mod 2^W (the literals 1 − y fold into the rows):
        2 layers at W = 32 (1 for W ≤ 8), 229 neurons."""
        self._same(x, y)
        return self._add_columns([[a, 1 - b] for a, b in zip(self.bits(x), self.bits(y),
                                                             strict=True)], Form(const=1))

    def neg(self, x: SSAValue) -> SSAValue:
        """−x = ~x + 1 mod 2^W: 2 layers at W = 32 (1 for W ≤ 8), 96 neurons."""
        return self._add_columns([[1 - a] for a in self.bits(x)], Form(const=1))

    def _add_columns(self, cols: list[list[Form]], cin: Form | None,
                     lo_bit: int = 0) -> SSAValue:
        """Bits lo_bit.. of Σ_i 2^i Σ cols[i] (+ cin) mod 2^W, every column ≤ 2 bits."""
        assert all(len(c) <= 2 for c in cols)

        def flat() -> list[Form]:
            return [f for c in cols for f in c]

        def direct() -> SSAValue:
            return self._add_sums([fsum(c) for c in cols], cin, lo_bit)

        def materialised() -> SSAValue:
            mat = self.materialize(flat() + ([cin] if cin is not None else []))
            it = iter(mat)
            new_cols = [[next(it) for _ in c] for c in cols]
            new_cin = next(it) if cin is not None else None
            return self._add_sums([fsum(c) for c in new_cols], new_cin, lo_bit)

        return self._attempt(direct, materialised)

    def _add_sums(self, s: list[Form], cin: Form | None, lo_bit: int = 0) -> SSAValue:
        """Bits lo_bit.. of Σ 2^i s_i + cin: the sum rows s_i = a_i + b_i + c_i −
        2·c_{i+1}, with the carries as parts, come out in the layer that
        computes the carries."""
        w = len(s)
        c_in = cin if cin is not None else Form()
        wanted = range(lo_bit, w + 1)

        def sums(carry: dict[int, Sum]) -> SSAValue:
            return self.emit([linear(s[i]) + carry[i] + carry[i + 1] * -2
                              for i in range(lo_bit, w)])

        def lookahead(size: int) -> SSAValue:
            return sums({i: step(t, 1) for i, t in self._carry_forms(s, c_in, wanted,
                                                                     size).items()})

        if w <= 8:
            return sums({i: step(low_sum(s, i, 0) + c_in, 1 << i) for i in wanted})
        if w <= 32:
            return lookahead(4)
        # at most 8 digits keep the lookahead row's weights within 2^7
        return self._attempt(lambda: lookahead(-(-w // 8)),
                             lambda: sums(self._split_carries(s, c_in, wanted)))

    def _carry_forms(self, s: list[Form], c_in: Form | None, wanted: range,
                     size: int = 4) -> dict[int, Form]:
        """T_i for the wanted bits i (one layer of rows per digit of `size`
        columns, at most 8 digits): the carry into bit i is [T_i ≥ 1]. With
        c_in None the carry-in is open: T_i = 0 when every digit below i
        propagates, so [T_i ≥ 0] is the carry for a carry-in of 1."""
        extra = c_in if c_in is not None else Form()

        def row(key: tuple) -> Row:
            kind, d, *k = key
            n, ext = (k[0] if k else size), (extra if d == 0 else Form())
            low = low_sum(s, n, size * d)
            if kind in ("G", "c0"):
                return low + ext, 1 << n
            return low, (1 << n) - 1               # P, c1: the carry for a carry-in of 1

        keys: dict[tuple, None] = {}
        for i in wanted:
            d, k = divmod(i, size)
            if k:
                keys.update({("c0", d, k): None} | ({("c1", d, k): None}
                                                    if d or c_in is None else {}))
            for j in range(d):
                keys.update({("G", j): None} | ({("P", j): None} if j or c_in is None else {}))
        idx = {key: n for n, key in enumerate(keys)}
        g1 = self.bits(self.emit([row(key) for key in keys])) if keys else []

        def trit(kind_g: str, kind_p: str, *at: int) -> Form:
            """+1 generate, 0 propagate, −1 kill (digit 0 with a known carry-in never propagates)."""
            g = g1[idx[(kind_g, *at)]]
            if at[0] == 0 and c_in is not None:
                return g * 2 - 1
            return g + g1[idx[(kind_p, *at)]] - 1

        out: dict[int, Form] = {}
        for i in wanted:
            d, k = divmod(i, size)
            # the highest digit that does not propagate decides the sign
            terms = [trit("G", "P", j) * (1 << j) for j in range(d)]
            if k:
                terms.append(trit("c0", "c1", d, k) * (1 << d))
            elif i == 0 and c_in is not None:
                terms.append(c_in)
            out[i] = fsum(terms)
        return out

    def _split_carries(self, s: list[Form], c_in: Form, wanted: range) -> dict[int, Sum]:
        """Carries of a 33..64-bit sum in three layers: the low 32 columns'
        carries (its carry out C as a bit) and the high columns' carries for
        either carry-in (x0 = [T ≥ 1], x1 = [T ≥ 0]) in two, then
        x0 ∨ (x1 ∧ C) = [2·x0 + x1 + C ≥ 2]. (One lookahead over 64 columns
        needs digits of 8 columns, whose rows break the gadget bounds where
        columns hold one bit.)"""
        n = 32
        low = self._carry_forms(s[:n], c_in, range(min(wanted.start, n), n + 1))
        high = self._carry_forms(s[n:], None, range(max(wanted.start, n) - n, len(s) - n + 1))
        rows: list[Row] = [(low[n], 1)]
        for t in high.values():
            rows += [(t, 1), (t, 0)]
        g2 = self.bits(self.emit(rows))
        carry = {i: step(t, 1) for i, t in low.items() if i in wanted and i < n}
        for m, i in enumerate(high):
            carry[n + i] = step(g2[1 + 2 * m] * 2 + g2[2 + 2 * m] + g2[0], 2)
        return carry
