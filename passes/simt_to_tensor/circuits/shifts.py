"""Shifts: shl, shr, the funnel shift shf and the byte permute prmt.

Shifts. t_{i,s} = [y == s] ∧ x_{i−s} (one row over all bits of y), OR over
s: 2 layers; amounts ≥ W match no s (0), and shr.s ORs in the sign fill
x_{W−1} ∧ [y ≥ W − 1 − i].

One-hot sums (shf, and bfe, bfi in `bitfields`). When at most one of several
ANDs can be 1 (the amount equals one s), their OR is their sum: one sum row
of AND parts, no OR layer. Funnel shifts: Σ_s [n == s] ∧ src(i, s), 1 layer.
Byte permutes the same over the selector bits that name each result byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.ir import SSAValue

from qgc.dialects import tensor as T
from qgc.passes.simt_to_tensor.circuits.core import AluCore
from qgc.passes.simt_to_tensor.circuits.forms import Form, Row, fsum, one_hot, step


def _matches(bits: Sequence[Form], s: int) -> tuple[Form, int]:
    """(Σ literals, count): the literals of bits == s are all 1 exactly then."""
    return fsum([f if (s >> k) & 1 else 1 - f for k, f in enumerate(bits)]), len(bits)


class ShiftCircuits(AluCore):
    """shl, shr (logical, arithmetic), shf (wrap, clamp) and byte permutes."""

    def _match(self, y: SSAValue, s: int) -> tuple[Form, int]:
        """(Σ literals, count): the literals of y == s are all 1 exactly then."""
        ys = self.bits(y)
        lits = [f if (s >> k) & 1 else 1 - f for k, f in enumerate(ys)]
        return fsum(lits), len(ys)

    def _shift(self, x: SSAValue, y: SSAValue, kind: str) -> SSAValue:
        xs = self.bits(x)
        w, ny = len(xs), T.width_of(y)
        reach = min(w, 1 << ny) if ny < 31 else w       # amounts y can name below W
        rows: list[Row] = []
        terms: list[list[int]] = [[] for _ in range(w)]
        matches = [self._match(y, s) for s in range(reach)]    # the same for every bit
        for i in range(w):
            for s in range(reach):
                j = i - s if kind == "shl" else i + s
                if not 0 <= j < w or (kind == "shr.s" and j == w - 1):
                    continue
                m, n = matches[s]
                terms[i].append(len(rows))
                rows.append((m + xs[j], n + 1))
        if kind == "shr.s":
            ys = self.bits(y)
            nb = (w - 1).bit_length()
            nl = min(nb, ny)
            ky = (1 << nl) - 1
            ylow = fsum([ys[j] * (1 << j) for j in range(nl)])
            sign = xs[w - 1]
            fill: dict[int, int] = {}
            for k in range(w):
                if k == 0:
                    fill[k] = len(rows)
                    rows.append((sign, 1))
                elif k <= ky:
                    big = ky - k + 1                    # x_top ∧ [y_low ≥ k]
                    fill[k] = len(rows)
                    rows.append((ylow + big * sign, k + big))
            high = None
            if ny > nb:
                mm = ny - nb                            # x_top ∧ OR(y_j, j ≥ nb)
                high = len(rows)
                rows.append((fsum(ys[nb:]) + mm * sign, mm + 1))
            for i in range(w):
                k = w - 1 - i
                if k in fill:
                    terms[i].append(fill[k])
                if high is not None:
                    terms[i].append(high)
        t = self.bits(self.emit(rows))
        return self.emit([(fsum([t[r] for r in terms[i]]), 1) for i in range(w)])

    def shl(self, x: SSAValue, y: SSAValue) -> SSAValue:
        """x << y (amounts ≥ W give 0): t_{i,s} = [y == s] ∧ x_{i−s}, OR over s.
        2 layers, 559 neurons at W = 32 (views for a constant y)."""
        return self._shift(x, y, "shl")

    def shr(self, x: SSAValue, y: SSAValue, signed: bool) -> SSAValue:
        """x >> y, logical or arithmetic (amounts ≥ W give 0 / the sign fill).
        2 layers, 559 (shr.u) / 591 (shr.s) neurons at W = 32 (views for a
        constant y)."""
        return self._shift(x, y, "shr.s" if signed else "shr.u")

    def shf(self, lo: SSAValue, hi: SSAValue, amount: SSAValue, left: bool,
            clamp: bool) -> SSAValue:
        """Funnel shift of the 2W-bit pair {hi, lo} by n = amount mod W (wrap)
        or min(amount, W) (clamp): the high word of pair << n (left) or the
        low word of pair >> n (right). [n == s] is one-hot, so bit i is the
        sum row Σ_s [n == s] ∧ src(i, s) of W ANDs: 1 layer, 1,024 (wrap) /
        1,088 (clamp) neurons at W = 32, views for a constant amount.
        Power-of-two W only (PTX has shf.b32)."""
        w = self._same(lo, hi)
        if w & (w - 1):
            raise ValueError(f"funnel shifts take a power-of-two width, not {w}")
        los, his, cs = self.bits(lo), self.bits(hi), self.bits(amount)
        nb = w.bit_length() - 1
        named = cs if clamp else cs[:nb]                 # the bits n == s reads

        def src(i: int, n: int) -> Form:         # bit i + W − n (left) / i + n of {hi, lo}
            j = i + w - n if left else i + n
            return los[j] if j < w else his[j - w]

        rows = []
        matches = [_matches(named, s) for s in range(min(w, 1 << len(named)))]
        for i in range(w):
            parts = []
            for s, (m, count) in enumerate(matches):
                parts.append(step(m + src(i, s), count + 1))
            heavy = cs[nb:]                              # clamp: amount ≥ W shifts by W
            if clamp and heavy:
                parts.append(step(fsum(heavy) + len(heavy) * src(i, w), len(heavy) + 1))
            rows.append(one_hot(parts))
        return self.emit(rows)

    def byte_select(self, a: SSAValue, b: SSAValue, selector: SSAValue,
                    choices: Sequence[Any]) -> SSAValue:
        """Byte permute (prmt): result byte i is the byte of the pair {b, a},
        or its sign replicated, that `choices[i]` (a `ByteChoice` of the
        opcode table) names for the value v of its selector bits. [v == s] is
        one-hot, so every bit is one sum row of ANDs: 1 layer, 288 neurons at
        W = 32 (prmt; its modes, two selector bits, 64 to 128); views for a
        constant selector."""
        pair, sel = self.bits(a) + self.bits(b), self.bits(selector)
        rows = []
        for choice in choices:
            named = [sel[k] for k in choice.bits]
            matches = [_matches(named, v) for v in range(len(choice.codes))]
            for j in range(8):
                parts = []
                for (m, count), code in zip(matches, choice.codes, strict=True):
                    source = pair[8 * (code & 7) + (7 if code & 8 else j)]
                    parts.append(step(m + source, count + 1))
                rows.append(one_hot(parts))
        return self.emit(rows)
