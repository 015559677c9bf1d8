"""Counters: column sums of many bits (sum, and the multipliers' partial products).

Counters (sum, mul_lo, mad_lo). A column sum of many bits is reduced by
counters: for a group of g adjacent columns with weighted sum D ≤ 127, bit t
of D is the staircase sum row Σ_k (bit_t(k) − bit_t(k−1))·[D ≥ k] (the
group's bits share the parts [D ≥ k]), one layer per level. Levels (group
size chosen per level) repeat until every column holds ≤ 2 bits, then the
digit adder finishes. mul_lo's partial products enter three at a time as
full adders of ANDs (sum and carry share 7 neurons), so at W = 32 it is 1 +
2 levels + 2 = 5 layers. A level also counts the groups that its carries
would push over 2 bits (so no carry ripples into one more level). A counter
whose sum breaks the gadget bounds has its composite bits materialised first
(one copy row each). mul_hi runs the same over 2W columns (signed:
Baugh–Wooley, a product of one sign bit weighs −2^k and enters as 1 − p with
the constants as constant-1 bits) and keeps only the adder's high half: 5
layers.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from qgc.dialects import tensor as T
from qgc.passes.simt_to_tensor.circuits.adders import AdderCircuits
from qgc.passes.simt_to_tensor.circuits.forms import (
    Form,
    Level,
    Row,
    Sum,
    bit_of_count,
    fsum,
    row_ok,
)


class CounterCircuits(AdderCircuits):
    """Column sums: counter levels (one layer each) down to ≤ 2 bits a
    column, then the digit adder."""

    def sum(self, values: list[SSAValue]) -> SSAValue:
        """Σ values mod 2^W (2..8 operands): counter levels (one layer each) down
        to two bits per column, then the digit adder. At W = 32: 2 layers for 2
        operands, 3 for 3 operands (353 neurons), more levels for more."""
        if not values:
            raise ValueError("sum takes at least one operand")
        w = T.width_of(values[0])
        for v in values:
            self._same(values[0], v)
        cols = [[self.bits(v)[i] for v in values] for i in range(w)]
        return self._column_sum(cols)

    def _column_sum(self, cols: list[list[Form]], lo_bit: int = 0) -> SSAValue:
        """Bits lo_bit.. of the column sum: counter levels, then the digit adder."""
        w = len(cols)
        cols = [self._fold(c) for c in cols]
        for _ in range(32):
            if all(len(c) <= 2 for c in cols):
                break
            cols = self._compress(cols)
        else:
            raise AssertionError("column compression does not converge")
        if w and all(len(c) <= 1 for c in cols):         # no carries: the bits themselves
            return self.value([c[0] if c else Form() for c in cols[lo_bit:]])
        return self._add_columns(cols, None, lo_bit) if w else self.const(0, 0)

    @staticmethod
    def _fold(col: list[Form]) -> list[Form]:
        """Drop constant-0 bits; constant-1 bits stay (they are plain Forms)."""
        return [f for f in col if not (f.is_const and f.const == 0)]

    #: Largest weighted sum one counter takes (its `[D ≥ k]` parts keep the
    #: restoring gadget within bfloat16's 8 bits).
    counter_max = 127

    def _plan(self, cols: list[list[Form]], g: int,
              base: int = 0) -> tuple[list[list[int]], list[int], int] | None:
        """One counter level of group size g: the groups it counts (those with
        a column over 2 bits, and those the counted groups' carries would push
        over 2, so that no carry ripples into one more level), the heights
        after it, and its neurons. Groups start at column `base` (the columns
        below it stay as they are)."""
        w = len(cols)
        groups = [list(range(lo, min(lo + g, w))) for lo in range(base, w, g)]
        counted = [any(len(cols[c]) > 2 for c in grp) for grp in groups]
        while True:
            heights = [len(c) for c in cols[:base]] + [0] * (w - base)
            neurons = 0
            for grp, on in zip(groups, counted, strict=True):
                if not on:
                    for c in grp:
                        heights[c] += len(cols[c])
                    continue
                dmax = self._group_max(cols, grp)
                if dmax > self.counter_max:
                    return None
                neurons += 2 * dmax
                for t in range(dmax.bit_length()):
                    if grp[0] + t < w:
                        heights[grp[0] + t] += 1
            spill = [n for n, (grp, on) in enumerate(zip(groups, counted, strict=True))
                     if not on and any(heights[c] > 2 for c in grp)]
            if not spill:
                return [grp for grp, on in zip(groups, counted, strict=True) if on], heights, neurons
            for n in spill:
                counted[n] = True

    def _compress(self, cols: list[list[Form]], base: int = 0) -> list[list[Form]]:
        """One counter level (one layer): the column sum D of each group of
        adjacent columns (from column `base` up), bit by bit, each bit a
        staircase sum row over the parts [D ≥ k] (shared by the group's bits)."""
        return self._together([self._counter_level(cols, base)])[0]

    def _counter_level(self, cols: list[list[Form]], base: int = 0) -> Level:
        """`_compress`'s rows and how their bits make the new columns (composite
        bits whose sums break the gadget bounds are copied first, one layer of
        its own)."""
        w = len(cols)
        best = None
        for g in (1, 2, 3, 4):
            plan = self._plan(cols, g, base)
            if plan is None:
                continue
            score = (max(plan[1], default=0), plan[2])
            if best is None or score < best[0]:
                best = (score, plan[0])
        assert best is not None
        groups = best[1]
        need = [c for grp in groups if not self._counter_fits(cols, grp) for c in grp]
        if need:      # composite bits whose sums break the gadget bounds: copy them first
            flat = [f for c in need for f in cols[c]]
            mat = iter(self.materialize(flat))
            cols = [list(c) for c in cols]
            for c in need:
                cols[c] = [next(mat) for _ in cols[c]]
        rows: list[Row | Sum] = []
        where: list[int] = []
        for grp in groups:
            d, dmax = self._group_sum(cols, grp), self._group_max(cols, grp)
            for t in range(dmax.bit_length()):
                if grp[0] + t < w:
                    rows.append(bit_of_count(t, dmax, d))
                    where.append(grp[0] + t)
        counted = {c for grp in groups for c in grp}

        def finish(bits: list[Form]) -> list[list[Form]]:
            out: list[list[Form]] = [[] if c in counted else list(cols[c]) for c in range(w)]
            for c, f in zip(where, bits, strict=True):
                if not (f.is_const and f.const == 0):
                    out[c].append(f)
            return out

        return rows, finish

    def _together(self, levels: Sequence[Level]) -> list:
        """The levels' rows as one `tensor.threshold` (one layer), each level's
        result made from its own bits."""
        rows = [r for level in levels for r in level[0]]
        bits = list(self.bits(self.emit(rows))) if rows else []
        out, at = [], 0
        for level_rows, finish in levels:
            out.append(finish(bits[at:at + len(level_rows)]))
            at += len(level_rows)
        return out

    def _reduce(self, cols: list[list[Form]], base: int) -> list[list[Form]]:
        """Further counter levels (a layer each) until the columns from `base` up
        hold ≤ 2 bits."""
        for _ in range(32):
            if all(len(c) <= 2 for c in cols[base:]):
                return cols
            cols = self._compress(cols, base)
        raise AssertionError("column compression does not converge")

    def _counter_fits(self, cols: list[list[Form]], group: list[int]) -> bool:
        """Whether every part [D ≥ k] of the group's counter passes the gadget bounds."""
        d = self._group_sum(cols, group)
        return all(row_ok(d, k) for k in range(1, self._group_max(cols, group) + 1))

    @staticmethod
    def _group_sum(cols: list[list[Form]], group: list[int]) -> Form:
        return fsum([f * (1 << (c - group[0])) for c in group for f in cols[c]])

    @staticmethod
    def _group_max(cols: list[list[Form]], group: list[int]) -> int:
        return sum(len(cols[c]) << (c - group[0]) for c in group)
