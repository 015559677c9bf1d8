"""Exact integer circuits of `tensor.threshold` ops: the ALU of one SIMT lane.

Every function builds the ops for ONE lane value (a `!tensor.bits<W>`, bit i
weighs 2^i, W = 1..32); callers instantiate it per lane. A threshold output is
`[Σ w·x ≥ t]` over bits x ∈ {0, 1}; one output costs 0–2 SwiGLU neurons and
every chain of threshold ops costs one MLP layer per op (slices and concats
are free views). `ThresholdRow.gadget` bounds every row: weights of 8
significant bits, at most 255 units on the active side of `L = Σ w·b − T`,
and T near the midpoint Σw/2 — so no row may look at a whole 32-bit sum.

Construction (the same ideas as `../shared/demo/alu_demo.py`, in pure
threshold rows):

- **Affine forms.** Internally a bit is a `Form`: an integer combination of
  real bits plus a constant that is known to be 0 or 1. Literals (x, 1 − x),
  constants (folded away, so `add(x, const(5, W))` is cheaper than a generic
  add) and *virtual* bits (a bit that is a linear combination of other
  thresholds, see counters below) are all Forms; a row over Forms expands to
  a row over real bits. Rows that reduce to a constant or a copy of one bit
  become views, not neurons.
- **Digits and lookahead (add/sub/neg).** Columns hold at most two bits each.
  Layer 1, per 4-bit digit D_d = A_d + B_d: G_d = [D_d ≥ 16], P_d = [D_d ≥ 15]
  and the carries into bits 1..3 of the digit for a digit carry-in of 0 (c0)
  and 1 (c1). Layer 2: carry into digit d is [T_d ≥ 1] with
  T_d = Σ_{j<d} 2^j (G_j + P_j − 1) (the highest non-propagating digit
  decides its sign), and the carry into bit k of digit d is c0 ∨ (c1 ∧ C_d)
  = [2^d (c0 + c1 − 1) + T_d ≥ 1]. The sum bits come out of the same layer
  as sum rows, s_i = a_i + b_i + c_i − 2·c_{i+1} with the carries as parts:
  2 layers. For W ≤ 8 every carry [Σ_{j<i} 2^j (a_j + b_j) ≥ 2^i] fits one
  part: 1 layer.
- **Compares.** Digits of ≤ 6 bits, GT_d = [A_d − B_d ≥ 1], GE_d = [A_d − B_d ≥ 0]
  (signed: the top bit literal is flipped), then
  U = Σ_d 2^d (GT_d + GE_d − 1) has the sign of a − b: 2 layers (1 for W ≤ 8,
  where Σ 2^j (a_j − b_j) fits one row; eq/ne always take 2).
- **Counters (sum, mul_lo, mad_lo).** A column sum of many bits is reduced
  by counters: for a group of g adjacent columns with weighted sum D ≤ 127,
  bit t of D is the staircase sum row Σ_k (bit_t(k) − bit_t(k−1))·[D ≥ k]
  (the group's bits share the parts [D ≥ k]), one layer per level. Levels
  (group size chosen per level) repeat until every column holds ≤ 2 bits,
  then the digit adder finishes. mul_lo's partial products enter three at a
  time as full adders of ANDs (sum and carry share 7 neurons), so at W = 32
  it is 1 + 2 levels + 2 = 5 layers. A counter whose sum breaks the gadget
  bounds has its composite bits materialised first (one copy row each).
- **Select.** `p ? x : y` is not a threshold function but the sum row
  [x + p ≥ 2] + [y − p ≥ 1] (never both 1): 1 layer. A predicate still given
  as a row [F ≥ t] (min/max) gates straight in: [F + K·x ≥ t + K].
- **Shifts.** t_{i,s} = [y == s] ∧ x_{i−s} (one row over all bits of y),
  OR over s: 2 layers; amounts ≥ W match no s (0), and shr.s ORs in the sign
  fill x_{W−1} ∧ [y ≥ W − 1 − i].

Depths below are MLP layers at W = 32 after `schedule` (fewer for small W or
constant operands); neurons are per lane at W = 32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from xdsl.ir import SSAValue
from xdsl.utils.exceptions import VerifyException

from qgc.dialects import tensor as T

Key = tuple[SSAValue, int]

CONDS = ("eq", "ne", "lt.s", "le.s", "gt.s", "ge.s", "lt.u", "le.u", "gt.u", "ge.u")


class Form:
    """Σ w·bit + const over real bits (keys (value, index)); the value of a
    Form used as a bit is known to be 0 or 1."""

    __slots__ = ("terms", "const")

    def __init__(self, terms: dict[Key, int] | None = None, const: int = 0):
        self.terms = {k: w for k, w in (terms or {}).items() if w}
        self.const = const

    @staticmethod
    def bit(value: SSAValue, index: int) -> Form:
        return Form({(value, index): 1})

    def __add__(self, other: Form | int) -> Form:
        if isinstance(other, int):
            return Form(self.terms, self.const + other)
        terms = dict(self.terms)
        for k, w in other.terms.items():
            terms[k] = terms.get(k, 0) + w
        return Form(terms, self.const + other.const)

    __radd__ = __add__

    def __neg__(self) -> Form:
        return Form({k: -w for k, w in self.terms.items()}, -self.const)

    def __sub__(self, other: Form | int) -> Form:
        return self + (-other)

    def __rsub__(self, other: int) -> Form:
        return (-self) + other

    def __mul__(self, s: int) -> Form:
        return Form({k: w * s for k, w in self.terms.items()}, self.const * s)

    __rmul__ = __mul__

    @property
    def is_const(self) -> bool:
        return not self.terms

    @property
    def is_real(self) -> bool:
        """A plain real bit (weight 1, no constant)."""
        return self.const == 0 and len(self.terms) == 1 and next(iter(self.terms.values())) == 1

    def hi(self) -> int:
        return self.const + sum(w for w in self.terms.values() if w > 0)

    def lo(self) -> int:
        return self.const + sum(w for w in self.terms.values() if w < 0)


def fsum(forms: Sequence[Form | int]) -> Form:
    out = Form()
    for f in forms:
        out = out + f
    return out


Row = tuple[Form, int]   # [form ≥ t]
Part = tuple[int, Form, int | Fraction]   # c·[form ≥ t]


@dataclass(frozen=True)
class Sum:
    """A bit as Σ c·[form ≥ t] (a `tensor.threshold` sum row, one layer): the
    caller promises it is 0 or 1. Parts equal within one op share neurons."""

    parts: tuple[Part, ...]

    def __add__(self, other: Sum) -> Sum:
        return Sum(self.parts + other.parts)

    def __mul__(self, c: int) -> Sum:
        return Sum(tuple((k * c, f, t) for k, f, t in self.parts))


def linear(form: Form) -> Sum:
    """A Form that is 0 or 1 as a sum row: a copy part [x ≥ 1] per bit and the
    constant as [0 ≥ 0]."""
    parts: list[Part] = [(w, Form({key: 1}), 1) for key, w in form.terms.items()]
    if form.const:
        parts.append((form.const, Form(), 0))
    return Sum(tuple(parts))


def step(form: Form, t: int | Fraction) -> Sum:
    return Sum(((1, form, t),))


def _threshold_row(form: Form, t: int | Fraction) -> T.ThresholdRow:
    keys = list(form.terms)
    return T.ThresholdRow(tuple((i, form.terms[k]) for i, k in enumerate(keys)),
                          Fraction(t) - form.const)


def _constant(form: Form, t: int | Fraction) -> int | None:
    """[form ≥ t] when it is the same for every input, else None."""
    if form.is_const or form.hi() < t or form.lo() >= t:
        return int(form.lo() >= t)
    return None


def row_ok(form: Form, t: int) -> bool:
    """Whether [form ≥ t] passes the gadget bounds as one row."""
    try:
        _threshold_row(form, t).gadget()
    except VerifyException:
        return False
    return True


def _bit_of_count(t: int, dmax: int, d: Form) -> Sum:
    """Bit t of D (0 ≤ D ≤ dmax) as a staircase: Σ_k (bit_t(k) − bit_t(k−1))·[D ≥ k]."""
    parts = []
    for k in range(1, dmax + 1):
        c = ((k >> t) & 1) - (((k - 1) >> t) & 1)
        if c:
            parts.append((c, d, k))
    return Sum(tuple(parts))


class Alu:
    """Builds exact integer circuits into a `ProgramBuilder`."""

    def __init__(self, builder: T.ProgramBuilder):
        self.b = builder
        self._cache: dict[SSAValue, list[Form]] = {}
        self._built: dict[tuple, SSAValue] = {}

    # ------------------------------------------------------------ plumbing

    def bits(self, value: SSAValue) -> list[Form]:
        """The Forms of a value's bits, through slices/concats, constants folded."""
        cached = self._cache.get(value)
        if cached is not None:
            return cached
        op = value.owner
        if isinstance(op, T.SliceOp):
            out = self.bits(op.input)[op.lo.value.data:op.hi.value.data]
        elif isinstance(op, T.ConcatOp):
            out = [f for v in op.inputs for f in self.bits(v)]
        elif isinstance(op, T.ThresholdOp):
            out = []
            for j, row in enumerate(op.row_list()):
                if row.terms:
                    out.append(Form.bit(value, j))
                else:
                    out.append(Form(const=row.value([])))
        else:
            out = [Form.bit(value, i) for i in range(T.width_of(value))]
        self._cache[value] = out
        return out

    def emit(self, rows: Sequence[Row | Sum]) -> SSAValue:
        """One `tensor.threshold` for the rows ([form ≥ t] or a `Sum`); constant
        rows and copies of one bit become views. Raises VerifyException for a
        row the gadget bounds reject."""
        kinds: list[tuple[str, object]] = []
        real: list[Row | list[Part]] = []
        consts: list[int] = []
        for row in rows:
            folded = self._fold_row(row)
            if isinstance(folded, int):
                kinds.append(("const", len(consts)))
                consts.append(folded)
            elif isinstance(folded, tuple) and (copy := self._copy_of(*folded)) is not None:
                kinds.append(("copy", copy))
            else:
                kinds.append(("row", len(real)))
                real.append(folded)
        parts: list[tuple[SSAValue, int]] = []
        if real:
            operands: list[SSAValue] = []
            offset: dict[SSAValue, int] = {}
            forms = [f for r in real for f in ([r[0]] if isinstance(r, tuple) else
                                               [p[1] for p in r])]
            for form in forms:
                for v, _i in form.terms:
                    if v not in offset:
                        offset[v] = sum(T.width_of(o) for o in operands)
                        operands.append(v)

            def spec(form: Form, t: int | Fraction) -> tuple[dict[int, int], Fraction]:
                return ({offset[v] + i: w for (v, i), w in form.terms.items()},
                        Fraction(t) - form.const)

            specs = [spec(*r) if isinstance(r, tuple) else [(c, *spec(f, t)) for c, f, t in r]
                     for r in real]
            rv = self._threshold(operands, specs)
        if consts:
            cv = self.b.threshold([], [({}, 0 if c else 1) for c in consts])
        for kind, what in kinds:
            if kind == "row":
                parts.append((rv, what))
            elif kind == "const":
                parts.append((cv, what))
            else:
                parts.append(what)
        return self._view(parts)

    def _threshold(self, operands: list[SSAValue], specs: list) -> SSAValue:
        """A `tensor.threshold`, or the one already built for the same rows over
        the same operands (lanes computing on uniform values share it)."""
        def frozen(spec):
            if isinstance(spec, tuple):
                return (tuple(sorted(spec[0].items())), spec[1])
            return tuple((c, tuple(sorted(t.items())), th) for c, t, th in spec)

        key = (tuple(operands), tuple(frozen(sp) for sp in specs))
        if key not in self._built:
            self._built[key] = self.b.threshold(operands, specs)
        return self._built[key]

    @staticmethod
    def _copy_of(form: Form, t: int | Fraction) -> Key | None:
        """The bit a one-term row [w·x + k ≥ t] merely copies, if it does."""
        if len(form.terms) != 1:
            return None
        (key, w), = form.terms.items()
        return key if w > 0 and 0 < t - form.const <= w else None

    @staticmethod
    def _fold_row(row: Row | Sum) -> int | Row | list[Part]:
        """A constant (0/1), a plain row, or the real parts of a sum row (its
        constant as a [0 ≥ 0] part); checks every real part's gadget."""
        if not isinstance(row, Sum):
            value = _constant(*row)
            if value is not None:
                return value
            _threshold_row(*row).gadget()
            return row
        const, real = 0, []
        for c, form, t in row.parts:
            value = _constant(form, t)
            if value is not None:
                const += c * value
            else:
                _threshold_row(form, t).gadget()
                real.append((c, form, t))
        if not real:
            if const not in (0, 1):
                raise ValueError(f"a sum row folds to the constant {const}, not a bit")
            return const
        if len(real) == 1 and real[0][0] == 1 and const == 0:
            return real[0][1], real[0][2]
        if const:
            real.append((const, Form(), 0))
        return real

    def _view(self, parts: list[tuple[SSAValue, int]]) -> SSAValue:
        """Concatenation of single bits, grouped into runs of slices."""
        runs: list[list] = []
        for v, i in parts:
            if runs and runs[-1][0] is v and runs[-1][2] == i:
                runs[-1][2] = i + 1
            else:
                runs.append([v, i, i + 1])
        pieces = []
        for v, lo, hi in runs:
            pieces.append(v if (lo == 0 and hi == T.width_of(v)) else self.b.slice(v, lo, hi))
        return pieces[0] if len(pieces) == 1 else self.b.concat(pieces)

    def value(self, forms: Sequence[Form]) -> SSAValue:
        """An SSA value whose bits are the given 0/1 Forms."""
        return self.emit([(f, 1) for f in forms])

    def materialize(self, forms: Sequence[Form]) -> list[Form]:
        """Forms → real bits (copy rows for composite ones, one layer)."""
        idx = [i for i, f in enumerate(forms) if not (f.is_const or f.is_real)]
        if not idx:
            return list(forms)
        v = self.value([forms[i] for i in idx])
        got = self.bits(v)
        out = list(forms)
        for j, i in enumerate(idx):
            out[i] = got[j]
        return out

    def _attempt(self, first: Callable[[], SSAValue],
                 fallback: Callable[[], SSAValue]) -> SSAValue:
        """Run `first`; if one of its rows breaks the gadget bounds, undo its ops
        and run `fallback`."""
        block = self.b.block
        mark = block.last_op
        try:
            return first()
        except VerifyException:
            while block.last_op is not mark:
                op = block.last_op
                assert op is not None
                for r in op.results:
                    self._cache.pop(r, None)
                self._built = {k: v for k, v in self._built.items() if v.owner is not op}
                op.detach()
                op.erase()
            return fallback()

    @staticmethod
    def _same(x: SSAValue, y: SSAValue) -> int:
        w = T.width_of(x)
        if T.width_of(y) != w:
            raise ValueError(f"operand widths differ: {w} and {T.width_of(y)}")
        return w

    # ------------------------------------------------------------ constants, logic

    def const(self, value: int, width: int) -> SSAValue:
        """Constant bits of `value` mod 2^width: rows without terms, 0 neurons."""
        return self.b.threshold([], [({}, 0 if (value >> i) & 1 else 1) for i in range(width)])

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

    # ------------------------------------------------------------ add / sub

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

    def _add_columns(self, cols: list[list[Form]], cin: Form | None) -> SSAValue:
        """Σ_i 2^i Σ cols[i] (+ cin) mod 2^W, every column ≤ 2 bits."""
        assert all(len(c) <= 2 for c in cols)

        def flat() -> list[Form]:
            return [f for c in cols for f in c]

        def direct() -> SSAValue:
            return self._add_sums([fsum(c) for c in cols], cin)

        def materialised() -> SSAValue:
            mat = self.materialize(flat() + ([cin] if cin is not None else []))
            it = iter(mat)
            new_cols = [[next(it) for _ in c] for c in cols]
            new_cin = next(it) if cin is not None else None
            return self._add_sums([fsum(c) for c in new_cols], new_cin)

        return self._attempt(direct, materialised)

    def _add_sums(self, s: list[Form], cin: Form | None) -> SSAValue:
        w = len(s)
        c_in = cin if cin is not None else Form()

        def low(k: int, base: int) -> Form:           # Σ_{i<k} 2^i s_{base+i}
            return fsum([s[base + i] * (1 << i) for i in range(k)])

        # carry into bit i, as a sum row part: the sums come out in the layer
        # that computes the carries, s_i = a_i + b_i + c_i − 2·c_{i+1}
        carry: list[Sum | None] = [None] * (w + 1)
        carry[0] = linear(c_in)
        if w <= 8:
            for i in range(1, w + 1):
                carry[i] = step(low(i, 0) + c_in, 1 << i)
        else:
            n_dig = (w + 3) // 4
            rows1: list[Row] = []
            idx: dict[tuple, int] = {}

            def put(key: tuple, row: Row) -> None:
                idx[key] = len(rows1)
                rows1.append(row)

            for d in range(n_dig):
                base = 4 * d
                width = min(4, w - base)
                extra = c_in if d == 0 else Form()
                if width == 4 and 4 * (d + 1) <= w:
                    dig = low(4, base) + extra
                    put(("G", d), (dig, 16))
                    if d:
                        put(("P", d), (dig, 15))
                # carries into bits base+1 .. base+width (the last one only when
                # it is the carry out of a partial digit)
                for k in range(1, width + 1):
                    if k == 4:
                        break
                    if base + k > w:
                        break
                    put(("c0", d, k), (low(k, base) + extra, 1 << k))
                    if d:
                        put(("c1", d, k), (low(k, base), (1 << k) - 1))
            g1 = self.bits(self.emit(rows1))

            def lookahead(d: int) -> Form:
                terms = []
                for j in range(d):
                    if j == 0:
                        terms.append(g1[idx[("G", 0)]] * 2 - 1)
                    else:
                        terms.append((g1[idx[("G", j)]] + g1[idx[("P", j)]] - 1) * (1 << j))
                return fsum(terms)

            for i in range(1, w + 1):
                d, k = divmod(i, 4)
                if d == 0:
                    carry[i] = linear(g1[idx[("c0", 0, k)]])
                elif k == 0:
                    carry[i] = step(lookahead(d), 1)
                else:
                    carry[i] = step(lookahead(d) + (g1[idx[("c0", d, k)]]
                                                    + g1[idx[("c1", d, k)]] - 1) * (1 << d), 1)
        rows: list[Sum] = []
        for i in range(w):
            ci, co = carry[i], carry[i + 1]
            assert ci is not None and co is not None
            rows.append(linear(s[i]) + ci + co * -2)
        return self.emit(rows)

    # ------------------------------------------------------------ multi-operand

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

    def mul_lo(self, x: SSAValue, y: SSAValue) -> SSAValue:
        """Low W bits of x·y: partial products a_i ∧ b_j (i + j < W) as full
        adders of ANDs in one layer, two counter levels, then the digit adder:
        5 layers, 2,625 neurons at W = 32."""
        self._same(x, y)
        return self._column_sum(self._products(x, y))

    def mad_lo(self, x: SSAValue, y: SSAValue, z: SSAValue) -> SSAValue:
        """Low W bits of x·y + z: z joins the partial-product columns (same depth
        as mul_lo: 5 layers, 2,739 neurons at W = 32)."""
        self._same(x, y)
        self._same(x, z)
        cols = self._products(x, y)
        for i, f in enumerate(self.bits(z)):
            cols[i].append(f)
        return self._column_sum(cols)

    def _products(self, x: SSAValue, y: SSAValue) -> list[list[Form]]:
        """The partial products a_i ∧ b_j (i + j < W) by columns, three at a
        time as a full adder of ANDs (one layer): with p_m the ANDs and q the
        ANDs of their pairs and triple, carry = Σ q_mn − 2·q_123 and sum =
        Σ p_m − 2·carry, 7 shared neurons for 2 bits of 3 products."""
        xs, ys = self.bits(x), self.bits(y)
        w = len(xs)
        rows: list[Row | Sum] = []
        where: list[int] = []
        for k in range(w):
            pp = [xs[i] + ys[k - i] for i in range(k + 1)]
            pp = [f for f in pp if f.hi() == 2]           # a constant-0 factor: no product
            n3 = len(pp) // 3 if k + 1 < w else 0         # the top column has no carry out
            for m in range(n3):
                f1, f2, f3 = pp[3 * m:3 * m + 3]
                carry = (step(f1 + f2, 4) + step(f1 + f3, 4) + step(f2 + f3, 4)
                         + step(f1 + f2 + f3, 6) * -2)
                rows.append(step(f1, 2) + step(f2, 2) + step(f3, 2) + carry * -2)
                where.append(k)
                rows.append(carry)
                where.append(k + 1)
            for f in pp[3 * n3:]:
                rows.append((f, 2))
                where.append(k)
        cols: list[list[Form]] = [[] for _ in range(w)]
        if not rows:        # a factor is the constant 0: no products at all
            return cols
        for c, f in zip(where, self.bits(self.emit(rows)), strict=True):
            if not (f.is_const and f.const == 0):
                cols[c].append(f)
        return cols

    def _column_sum(self, cols: list[list[Form]]) -> SSAValue:
        w = len(cols)
        cols = [self._fold(c) for c in cols]
        for _ in range(32):
            if all(len(c) <= 2 for c in cols):
                break
            cols = self._compress(cols)
        else:
            raise AssertionError("column compression does not converge")
        return self._add_columns(cols, None) if w else self.const(0, 0)

    @staticmethod
    def _fold(col: list[Form]) -> list[Form]:
        """Drop constant-0 bits; constant-1 bits stay (they are plain Forms)."""
        return [f for f in col if not (f.is_const and f.const == 0)]

    #: Largest weighted sum one counter takes (its `[D ≥ k]` parts keep the
    #: restoring gadget within bfloat16's 8 bits).
    counter_max = 127

    def _plan(self, cols: list[list[Form]], g: int) -> tuple[list[int], int] | None:
        """Heights after one counter level of group size g, and its neurons."""
        w = len(cols)
        heights = [0] * w
        neurons = 0
        for base in range(0, w, g):
            group = range(base, min(base + g, w))
            if all(len(cols[c]) <= 2 for c in group):
                for c in group:
                    heights[c] += len(cols[c])
                continue
            dmax = sum(len(cols[c]) << (c - base) for c in group)
            if dmax > self.counter_max:
                return None
            neurons += 2 * dmax
            for t in range(dmax.bit_length()):
                if base + t < w:
                    heights[base + t] += 1
        return heights, neurons

    def _compress(self, cols: list[list[Form]]) -> list[list[Form]]:
        """One counter level (one layer): the column sum D of each group of
        adjacent columns, bit by bit, each bit a staircase sum row over the
        parts [D ≥ k] (shared by the group's bits)."""
        w = len(cols)
        best = None
        for g in (1, 2, 3, 4):
            plan = self._plan(cols, g)
            if plan is None:
                continue
            score = (max(plan[0], default=0), plan[1])
            if best is None or score < best[0]:
                best = (score, g)
        assert best is not None
        g = best[1]
        groups = [list(range(base, min(base + g, w))) for base in range(0, w, g)]
        groups = [grp for grp in groups if any(len(cols[c]) > 2 for c in grp)]
        need = [c for grp in groups if not self._counter_fits(cols, grp) for c in grp]
        if need:      # composite bits whose sums break the gadget bounds: copy them first
            flat = [f for c in need for f in cols[c]]
            mat = iter(self.materialize(flat))
            cols = [list(c) for c in cols]
            for c in need:
                cols[c] = [next(mat) for _ in cols[c]]
        rows: list[Sum] = []
        where: list[int] = []
        for grp in groups:
            d, dmax = self._group_sum(cols, grp), self._group_max(cols, grp)
            for t in range(dmax.bit_length()):
                if grp[0] + t < w:
                    rows.append(_bit_of_count(t, dmax, d))
                    where.append(grp[0] + t)
        out: list[list[Form]] = [[] for _ in range(w)]
        counted = {c for grp in groups for c in grp}
        for c in range(w):
            if c not in counted:
                out[c].extend(cols[c])
        for c, f in zip(where, self.bits(self.emit(rows)), strict=True):
            if not (f.is_const and f.const == 0):
                out[c].append(f)
        return out

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

    # ------------------------------------------------------------ compares

    def _cmp_row(self, cond: str, x: SSAValue, y: SSAValue) -> Row:
        """The final row [F ≥ t] of a compare (its digit layer already emitted)."""
        if cond not in CONDS:
            raise ValueError(f"unknown compare '{cond}' (one of {', '.join(CONDS)})")
        w = self._same(x, y)
        xs, ys = list(self.bits(x)), list(self.bits(y))
        if cond.endswith(".s"):
            xs[-1], ys[-1] = 1 - xs[-1], 1 - ys[-1]
        op = cond.split(".")[0]
        if op in ("lt", "le", "gt", "ge") and w <= 8:
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

    # ------------------------------------------------------------ shifts

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
        for i in range(w):
            for s in range(reach):
                j = i - s if kind == "shl" else i + s
                if not 0 <= j < w or (kind == "shr.s" and j == w - 1):
                    continue
                m, n = self._match(y, s)
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
