"""Multipliers: mul_lo, mad_lo, mul_hi and mul_wide, wide or narrow.

Narrow multipliers (the default for two variable factors). All products at
once keep ~2/3 of them alive after the first layer (one mul_hi lane: 700
bits). Digit-serial instead: y's rows in digits (3, then ~4 rows; mul_lo's
digits grow as its rows shorten), each digit's products full adders of ANDs
(one layer) and one counter level from the digit's lowest column up into a
carry-save accumulator of ≤ 2 bits per column, the next digit's full adders
in the same layer. Columns below the next digit are final: a block adder (≤
8 columns, one layer, beside the next digit) turns them into result bits and
a carry. Live: the factors, one digit's full-adder bits, the accumulator and
a carry. Signed products need no constants: x_s·(−Y') becomes ANDs of x_s
and ¬y_j plus single x_s bits. At W = 32: mul_lo 8 layers (about 175 bits
live at most for one lane against 404), mul_hi 10 (about 220 against 704). A
narrow mul_hi keeps both words of x·y: mul_lo of the same factors is its low
word, and mul_hi of the other signedness its high word corrected by x_s·Y +
y_s·X (4 layers more, no second multiplier). `Alu(narrow=...)`, `digit_bits`
and each method's `narrow` choose; `mul_wide` gives both words at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from qgc.dialects import tensor as T
from qgc.passes.simt_to_tensor.circuits.counters import CounterCircuits
from qgc.passes.simt_to_tensor.circuits.forms import (
    Form,
    Level,
    Row,
    Sum,
    fsum,
    linear,
    low_sum,
    step,
)
from qgc.passes.simt_to_tensor.circuits.templates import Templates


def _variable(forms: Sequence[Form]) -> int:
    """How many of the bits are not constants."""
    return sum(1 for f in forms if not f.is_const)


def _fa(f1: Form, f2: Form, f3: Form) -> tuple[Sum, Sum]:
    """(sum, carry) of the ANDs [f ≥ 2] of three two-literal Forms as sum rows:
    with p_m the ANDs and q the ANDs of their pairs and triple,
    carry = Σ q_mn − 2·q_123 and sum = Σ p_m − 2·carry (7 shared neurons)."""
    carry = (step(f1 + f2, 4) + step(f1 + f3, 4) + step(f2 + f3, 4)
             + step(f1 + f2 + f3, 6) * -2)
    return step(f1, 2) + step(f2, 2) + step(f3, 2) + carry * -2, carry


class MultiplierCircuits(CounterCircuits):
    """The multipliers; `narrow` and `digit_bits` choose between them and
    shape the narrow ones (`Alu`)."""

    def __init__(self, builder: T.ProgramBuilder, narrow: bool | None = None,
                 digit_bits: int = 4, templates: Templates | None = None):
        if digit_bits < 1:
            raise ValueError(f"digit_bits must be at least 1, not {digit_bits}")
        super().__init__(builder, templates)
        self.narrow = narrow
        self.digit_bits = digit_bits
        #: (x, y) → the low word of x·y that a narrow mul_hi / mul_wide made
        self._low_words: dict[tuple[SSAValue, SSAValue], SSAValue] = {}
        #: (x, y, signed) → the high word of x·y that a narrow mul_hi / mul_wide made
        self._high_words: dict[tuple[SSAValue, SSAValue, bool], SSAValue] = {}

    def _side_tables(self) -> list[dict]:
        return [*super()._side_tables(), self._low_words, self._high_words]

    def mul_lo(self, x: SSAValue, y: SSAValue, narrow: bool | None = None,
               high_later: bool | None = None) -> SSAValue:
        """Low W bits of x·y. Wide (all at once): partial products a_i ∧ b_j
        (i + j < W) as full adders of ANDs in one layer, two counter levels,
        then the digit adder: 5 layers, 2,556 neurons at W = 32. Narrow
        (digit-serial, `_narrow_product`; the default when both factors have
        `narrow_min_bits` variable bits): 8 layers, 3,018 neurons, about 175
        bits live at most against 404 (one lane, factors and result included).
        `narrow` overrides the `Alu`'s choice (None: `Alu.narrow`).
        `high_later`: the signedness of a mul_hi of x, y that follows; narrow,
        both words come from one circuit then (`mul_wide`)."""
        self._same(x, y)
        if self._use_narrow(x, y, narrow):
            made = self._low_words.get((x, y))
            if made is not None:            # a narrow mul_hi / mul_wide of x, y made it
                return made
            if high_later is not None:
                return self._narrow_wide(x, y, high_later)[0]
            return self._narrow_product(x, y, T.width_of(x), False)
        return self._column_sum(self._products(x, y))

    def mad_lo(self, x: SSAValue, y: SSAValue, z: SSAValue,
               narrow: bool | None = None) -> SSAValue:
        """Low W bits of x·y + z: z joins the partial-product columns (wide:
        same depth as mul_lo, 5 layers, 2,663 neurons at W = 32; narrow: z
        joins the first digit's full adders, 8 layers, 3,229 neurons)."""
        self._same(x, y)
        self._same(x, z)
        if self._use_narrow(x, y, narrow):
            return self._narrow_product(x, y, T.width_of(x), False, z)
        cols = self._products(x, y)
        for i, f in enumerate(self.bits(z)):
            cols[i].append(f)
        return self._column_sum(cols)

    def mul_hi(self, x: SSAValue, y: SSAValue, signed: bool,
               narrow: bool | None = None) -> SSAValue:
        """High W bits of the 2W-bit x·y (signed: two's complement). Wide
        (Baugh–Wooley partial products): mul_lo's counters over 2W columns,
        and only the adder's top half (8-bit digits keep its lookahead at 8
        digits): 5 layers, 4,989 (unsigned) / 4,964 (signed) neurons at
        W = 32; a constant factor drops the products it zeroes. Narrow
        (digit-serial, the default for two variable factors): 10 layers,
        5,880 / 5,902 neurons, about 220 bits live at most against 704 / 724;
        both words are kept (`_narrow_wide`: a later mul_lo of x, y is free,
        a later mul_hi of the other signedness a 4-layer correction)."""
        w = self._same(x, y)
        if self._use_narrow(x, y, narrow):
            return self._narrow_wide(x, y, signed)[1]
        return self._column_sum(self._products(x, y, 2 * w, signed), lo_bit=w)

    def mul_wide(self, x: SSAValue, y: SSAValue, signed: bool,
                 narrow: bool | None = None) -> tuple[SSAValue, SSAValue]:
        """(low, high) W bits of the 2W-bit x·y (PTX mul.wide) from one
        circuit: mul_hi's, its blocks giving their sum bits too. Narrow at
        W = 32: 10 layers; four lanes keep about 890 bits alive at most
        against 1,360 for mul_lo then mul_hi (two circuits; 28k neurons
        against 42k). mul_hi then mul_lo shares the same way."""
        w = self._same(x, y)
        if self._use_narrow(x, y, narrow):
            return self._narrow_wide(x, y, signed)
        both = self._column_sum(self._products(x, y, 2 * w, signed))
        return self.b.slice(both, 0, w), self.b.slice(both, w, 2 * w)

    def _narrow_wide(self, x: SSAValue, y: SSAValue, signed: bool) -> tuple[SSAValue, SSAValue]:
        """Both words of x·y, narrow. The low word (the same signed or not) is
        kept for a later mul_lo of x, y (its blocks' sum bits cost about 4
        neurons a column more than their carry alone), the high word for a
        later mul_hi of the other signedness (`_resigned`)."""
        w = T.width_of(x)
        lo = self._low_words.get((x, y))
        hi = self._high_words.get((x, y, signed))
        other = self._high_words.get((x, y, not signed))
        if lo is not None and hi is not None:
            return lo, hi
        if lo is not None and other is not None:
            hi = self._resigned(other, x, y, signed)
        else:
            both = self._narrow_product(x, y, 2 * w, signed)
            lo, hi = self.b.slice(both, 0, w), self.b.slice(both, w, 2 * w)
        for key in ((x, y), (y, x)):
            self._low_words.setdefault(key, lo)
            self._high_words.setdefault((*key, signed), hi)
        return lo, hi

    def _resigned(self, hi: SSAValue, x: SSAValue, y: SSAValue, signed: bool) -> SSAValue:
        """The high word of x·y of one signedness from the other's: with X, Y
        the unsigned readings, x·y (signed) = X·Y − 2^W (x_s·Y + y_s·X) mod
        2^{2W}, so hi.s = hi.u − x_s·Y − y_s·X and hi.u = hi.s + x_s·Y + y_s·X
        mod 2^W, where −x_s·Y = x_s·¬Y + x_s mod 2^W: ANDs of two literals and
        single bits, one layer of full adders, counters, the adder (4 layers
        at W = 32, some 1,000 neurons against a second multiplier's 5,800)."""
        xs, ys, hs = self.bits(x), self.bits(y), self.bits(hi)
        w = len(xs)
        sx, sy = xs[w - 1], ys[w - 1]
        items = [(i, f + 1) for i, f in enumerate(hs)]
        for s, other in ((sx, ys), (sy, xs)):
            if signed:                              # − s·V = s·¬V + s
                items += [(i, s + 1 - v) for i, v in enumerate(other)] + [(0, s + 1)]
            else:                                   # + s·V
                items += [(i, s + v) for i, v in enumerate(other)]
        items = [(c, f) for c, f in items if f.hi() >= 2]
        return self._column_sum(self._full_adders(items, w))

    # ------------------------------------------------------------ narrow multiplier

    #: Least variable bits of the digit operand (the one with fewer) for which
    #: the automatic choice takes the narrow multiplier.
    narrow_min_bits = 12

    def _use_narrow(self, x: SSAValue, y: SSAValue, narrow: bool | None) -> bool:
        """The method's `narrow`, else the Alu's, else automatic: narrow when
        both factors have at least `narrow_min_bits` variable bits (a constant
        factor or a zero-extended byte stays wide: few products, shallow)."""
        if narrow is None:
            narrow = self.narrow
        if narrow is not None:
            return narrow
        return min(_variable(self.bits(x)), _variable(self.bits(y))) >= self.narrow_min_bits

    def _narrow_product(self, x: SSAValue, y: SSAValue, ncols: int, signed: bool,
                        z: SSAValue | None = None, lo_bit: int = 0) -> SSAValue:
        """Bits lo_bit..ncols − 1 of x·y (+ z), digit-serial: the rows of the
        factor with fewer variable bits (y below; a row per variable y_j) are
        cut into digits (`_digit_plan`: the first 3 rows, 2 with z, which
        joins it; then about `digit_bits` rows). Digit r's partial products
        x_i ∧ y_j enter as full adders of ANDs (`_fa_level`, one layer) and
        one counter level (`_counter_level` from the digit's lowest column
        up) adds them to a carry-save accumulator of ≤ 2 bits per column.
        Below the next digit's lowest column nothing more arrives: that block
        of columns is added with the carry out of the block before
        (`_block_level`, one layer): result bits and a carry (below lo_bit the
        carry alone). Each layer is one `tensor.threshold` with digit r's counter,
        digit r + 1's full adders and block r − 1 (so no scheduler can run
        the digits' full adders early, all at once). Live: the factors, one
        digit's full-adder bits, the accumulator's ≤ 2 rows and one carry;
        depth: 1 + one layer per further digit + the last block's adder (1
        layer; mul_hi: 2, its high half taking the low block's carry one
        layer late, `_last_block`). Single-bit products (a constant y_j)
        merge by weight into the digits that reach their columns.

        Signed (mul_hi): x·y = Σ_{i,j<W−1} 2^{i+j} x_i y_j + 2^{2W−2} x_s y_s
        − 2^{W−1} (x_s·Y' + y_s·X'), and mod 2^{2W}
        −2^{W−1} x_s·Y' = Σ_{j<W−1} 2^{W−1+j} (x_s ∧ ¬y_j)
        + x_s·(2^{W−1} + 2^{2W−2} + 2^{2W−1}): every partial product is an AND
        of two literals (full-adder material) and the sign bits join as
        single bits, no constants."""
        xs, ys = list(self.bits(x)), list(self.bits(y))
        w = len(xs)
        if _variable(xs) < _variable(ys):
            xs, ys = ys, xs

        def item(i: int, j: int) -> Form:
            """The partial product x_i ∧ y_j (signed, of one sign bit: x_s ∧ ¬y_j
            or y_s ∧ ¬x_i) as [item ≥ 2]."""
            if signed and (i == w - 1) != (j == w - 1):
                return xs[i] + (1 - ys[j]) if i == w - 1 else ys[j] + (1 - xs[i])
            return xs[i] + ys[j]

        rows: dict[int, list[tuple[int, Form]]] = {}       # variable y_j: its row
        loose: dict[tuple, tuple[Form, int]] = {}           # one literal or a constant: Σ weights

        def add_loose(c: int, f: Form) -> None:
            key = (tuple(sorted(f.terms.items(), key=repr)), f.const)
            g, weight = loose.get(key, (f, 0))
            loose[key] = (g, (weight + (1 << c)) % (1 << ncols))

        for j in range(w):
            got = [(i + j, f) for i in range(w) if i + j < ncols
                   if (f := item(i, j)).hi() >= 2]            # a constant-0 factor: no product
            if not ys[j].is_const and got:
                rows[j] = got
            else:
                for c, f in got:
                    add_loose(c, f)
        if signed:
            for bit in (xs[w - 1], ys[w - 1]):
                for c in (w - 1, 2 * w - 2, 2 * w - 1):
                    if c < ncols and (bit + 1).hi() >= 2:
                        add_loose(c, bit + 1)
        first_items: list[tuple[int, Form]] = []
        if z is not None:
            for c, f in enumerate(self.bits(z)):
                if f.is_const:
                    if f.const:
                        add_loose(c, f + 1)
                else:
                    first_items.append((c, f + 1))
        spare = [(c, f) for f, weight in loose.values() for c in range(ncols) if weight >> c & 1]
        js = sorted(rows)
        if not js:
            cols = [[] for _ in range(ncols)]
            if first_items or spare:
                cols = self._full_adders(first_items + spare, ncols)
            return self._column_sum(cols, lo_bit)
        digits: list[list[int]] = []
        first = min(len(js), 2 if z is not None else 3)
        digits.append(js[:first])
        rest = js[first:]
        digits += self._digit_plan([len(rows[j]) for j in rest], rest, ncols > w)
        items_of = [[it for j in dig for it in rows[j]] for dig in digits]
        items_of[0] += first_items
        starts = [min(c for c, _ in its) for its in items_of]
        for c, f in spare:          # the last digit that reaches the column (the first: any)
            r = max([r for r, lo in enumerate(starts) if lo <= c], default=0)
            items_of[r].append((c, f))
        fronts = [min(c for c, _ in its) for its in items_of]
        for r in reversed(range(len(fronts) - 1)):      # blocks never go back
            fronts[r] = min(fronts[r], fronts[r + 1])
        out: dict[int, Form] = {c: Form() for c in range(lo_bit, min(fronts[0], ncols))}
        n = len(items_of)
        carry: list[Form | None] = [None]       # the carry into the next block

        def fa(r: int) -> list[Level]:
            return [self._fa_level(items_of[r], ncols, 2 if r == 0 else None)] if r < n else []

        def block(cols: list[list[Form]], lo: int, hi: int) -> list[Level]:
            """The block of columns lo..hi − 1 (final) as rows of this layer."""
            if hi <= lo:
                return []
            if hi - lo > 8:            # a wide block (skipped digits): an adder of its own
                got, carry[0] = self._block(cols[lo:hi], carry[0], lo_bit - lo)
                out.update(zip(range(max(lo_bit, lo), hi), got, strict=True))
                return []

            def done(bits: tuple[list[Form], Form]) -> None:
                out.update(zip(range(max(lo_bit, lo), hi), bits[0], strict=True))
                carry[0] = bits[1]

            rows, finish = self._block_level(cols[lo:hi], carry[0], lo_bit - lo)
            return [(rows, lambda got: done(finish(got)))]

        # layer 1: digits 0 and 1 (digit 0's bits are the accumulator as they come)
        acc, new = (self._together(fa(0) + fa(1)) + [None])[:2]
        acc = self._reduce(acc, fronts[0])
        for r in range(1, n):
            # layer r + 1: digit r joins the accumulator (one counter level), digit
            # r + 1's full adders, the block that digit r − 1 left final
            cols = [a + b for a, b in zip(acc, new, strict=True)]
            levels = block(acc, fronts[r - 1], fronts[r]) + fa(r + 1)
            if any(len(c) > 2 for c in cols[fronts[r]:]):
                cols, *rest = self._together([self._counter_level(cols, fronts[r])] + levels)
            else:
                rest = self._together(levels)
            new = rest[-1] if r + 1 < n else None
            acc = self._reduce([[] if c < fronts[r] else col for c, col in enumerate(cols)],
                               fronts[r])
        got = self._last_block(acc[fronts[-1]:], carry[0], lo_bit - fronts[-1])
        out.update(zip(range(max(lo_bit, fronts[-1]), ncols), got, strict=True))
        return self.value([out[c] for c in range(lo_bit, ncols)])

    def _digit_plan(self, sizes: list[int], js: list[int], even: bool) -> list[list[int]]:
        """The rows js (of sizes items each) cut into digits. `even` (mul_hi,
        every row as long): digits of about `digit_bits` rows, the longer ones
        last. Else (mul_lo, shorter rows further up): each digit takes rows
        while it holds at most (digit_bits − 1)·(the longest row) items, up to
        8 rows, so the digits grow as the rows and the accumulator shrink."""
        if not js:
            return []
        d = self.digit_bits
        if even:
            n = max(1, round(len(js) / d))
            size, big = divmod(len(js), n)
            takes = [size + (1 if r >= n - big else 0) for r in range(n)]
        else:
            budget, takes = max(d - 1, 1) * max(sizes), []
            count = items = 0
            for m in sizes:
                if count and (count == 8 or items + m > budget):
                    takes.append(count)
                    count = items = 0
                count += 1
                items += m
            takes.append(count)
        out, at = [], 0
        for take in takes:
            out.append(js[at:at + take])
            at += take
        return out

    def _full_adders(self, items: list[tuple[int, Form]], ncols: int) -> list[list[Form]]:
        """`_fa_level` as one layer."""
        return self._together([self._fa_level(items, ncols)])[0]

    def _fa_level(self, items: list[tuple[int, Form]], ncols: int,
                  height: int | None = None) -> Level:
        """Columns of the ANDs [f ≥ 2] for the (column, f) items, three of a
        column at a time as a full adder (`_fa`, the top column's without its
        carry), the rest as they are, or two as a half adder where a column
        would otherwise come out over `height` bits."""
        by_col: list[list[Form]] = [[] for _ in range(ncols)]
        for c, f in items:
            by_col[c].append(f)
        rows: list[Row | Sum] = []
        where: list[int] = []
        carries = 0                                 # bits the column below sends up
        for k, pos in enumerate(by_col):
            top = k + 1 == ncols
            n3 = len(pos) // 3
            for m in range(n3):
                total, carry = _fa(*pos[3 * m:3 * m + 3])
                rows.append(total)
                where.append(k)
                if not top:
                    rows.append(carry)
                    where.append(k + 1)
            rest = pos[3 * n3:]
            half = (height is not None and len(rest) == 2 and not top
                    and carries + n3 + 2 > height)
            if half:
                f1, f2 = rest
                both = step(f1 + f2, 4)
                rows += [step(f1, 2) + step(f2, 2) + both * -2, both]
                where += [k, k + 1]
                rest = []
            for f in rest:
                rows.append((f, 2))
                where.append(k)
            carries = n3 + int(half)

        def finish(bits: list[Form]) -> list[list[Form]]:
            cols: list[list[Form]] = [[] for _ in range(ncols)]
            for c, f in zip(where, bits, strict=True):
                if not (f.is_const and f.const == 0):
                    cols[c].append(f)
            return cols

        return rows, finish

    def _block(self, cols: list[list[Form]], cin: Form | None,
               lo: int) -> tuple[list[Form], Form]:
        """(bits lo.. of Σ_i 2^i cols[i] + cin, the carry out), every column ≤ 2
        bits: up to 8 columns one layer (`_block_level`), else the lookahead
        (2 layers)."""
        if len(cols) <= 8:
            return self._together([self._block_level(cols, cin, lo)])[0]
        got = self.bits(self._add_columns(cols + [[]], cin, min(max(lo, 0), len(cols))))
        return list(got[:-1]), got[-1]

    def _block_level(self, cols: list[list[Form]], cin: Form | None, lo: int) -> Level:
        """Rows of `_block` for ≤ 8 columns: every carry
        [Σ_{j<i} 2^j s_j + cin ≥ 2^i] fits a row, the sum bits are sum rows."""
        n = len(cols)
        lo = min(max(lo, 0), n)
        s = [fsum(c) for c in cols]
        c_in = cin if cin is not None else Form()
        carry = {i: step(low_sum(s, i, 0) + c_in, 1 << i) for i in range(lo, n + 1)}
        rows: list[Row | Sum] = [linear(s[i]) + carry[i] + carry[i + 1] * -2
                                 for i in range(lo, n)] + [carry[n]]
        return rows, lambda bits: (list(bits[:-1]), bits[-1])

    def _last_block(self, cols: list[list[Form]], cin: Form | None, lo: int) -> list[Form]:
        """Bits lo.. of Σ_i 2^i cols[i] + cin (no carry out), every column ≤ 2
        bits: ≤ 8 columns in one layer (`_block`). Else a few low columns
        (those below lo, mul_hi's, or beyond 32 high ones) are a block whose
        carry out C is one row, and the high columns' lookahead runs beside
        it with its carry-in open (`_carry_forms`): carry i is [T_i + C ≥ 1].
        2 layers for ≤ 32 high columns."""
        n, lo = len(cols), max(lo, 0)
        if n <= 8:
            return self._block(cols, cin, lo)[0]
        split = max(lo, n - 32)
        if 0 < split <= 8 and n - split <= 32:
            def late() -> SSAValue:
                low, c = self._block(cols[:split], cin, lo)
                s = [fsum(col) for col in cols[split:]]
                m = len(s)
                if m <= 8:
                    carry = {i: step(low_sum(s, i, 0) + c, 1 << i) for i in range(m + 1)}
                else:
                    carry = {i: step(t + c, 1) for i, t in
                             self._carry_forms(s, None, range(m + 1)).items()}
                high = self.bits(self.emit([linear(s[i]) + carry[i] + carry[i + 1] * -2
                                            for i in range(m)]))
                return self.value(low + list(high))

            return list(self.bits(self._attempt(
                late, lambda: self._add_columns(cols, cin, lo))))
        return list(self.bits(self._add_columns(cols, cin, lo)))

    def _products(self, x: SSAValue, y: SSAValue, ncols: int | None = None,
                  signed: bool = False) -> list[list[Form]]:
        """The partial products a_i ∧ b_j (i + j < ncols, default W) by columns,
        three at a time as a full adder of ANDs (one layer): with p_m the ANDs
        and q the ANDs of their pairs and triple, carry = Σ q_mn − 2·q_123 and
        sum = Σ p_m − 2·carry, 7 shared neurons for 2 bits of 3 products.
        `signed` (Baugh–Wooley): a product of one sign bit and one other bit
        weighs −2^k, so it enters as 1 − p and −2^k joins a constant whose
        bits become constant-1 bits of their columns."""
        xs, ys = self.bits(x), self.bits(y)
        w = len(xs)
        ncols = w if ncols is None else ncols
        rows: list[Row | Sum] = []
        where: list[tuple[int, bool]] = []
        const = 0
        for k in range(ncols):
            pos: list[Form] = []
            for i in range(max(0, k - w + 1), min(k, w - 1) + 1):
                f = xs[i] + ys[k - i]
                if f.hi() < 2:                            # a constant-0 factor: no product
                    continue
                if signed and (i == w - 1) != (k - i == w - 1):
                    rows.append((f, 2))
                    where.append((k, True))
                    const -= 1 << k
                else:
                    pos.append(f)
            n3 = len(pos) // 3 if k + 1 < ncols else 0    # the top column has no carry out
            for m in range(n3):
                total, carry = _fa(*pos[3 * m:3 * m + 3])
                rows.append(total)
                where.append((k, False))
                rows.append(carry)
                where.append((k + 1, False))
            for f in pos[3 * n3:]:
                rows.append((f, 2))
                where.append((k, False))
        cols: list[list[Form]] = [[] for _ in range(ncols)]
        for k in range(ncols):
            if (const >> k) & 1:
                cols[k].append(Form(const=1))
        if not rows:        # a factor is the constant 0: no products at all
            return cols
        for (c, negated), f in zip(where, self.bits(self.emit(rows)), strict=True):
            f = 1 - f if negated else f
            if not (f.is_const and f.const == 0):
                cols[c].append(f)
        return cols
