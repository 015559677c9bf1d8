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
  part: 1 layer. Beyond 32 columns (mul_hi's 2W) the digits grow to
  ⌈columns/8⌉ bits, so the lookahead still has 8 digits; where such a digit
  row breaks the gadget bounds even tightened (below), the high 32 columns'
  carries for either carry-in and the low half's carry out C are computed
  side by side and [2·x0 + x1 + C ≥ 2] picks: 3 layers.
- **Tightening.** A row whose threshold sits far from the middle of its range
  (a digit of one-bit columns: [D ≥ 256] with D ≤ 318) is rewritten with
  smaller weights for the same function: a bit the row needs only needs to
  lift the rest's maximum past t, a bit that decides alone only needs to
  reach t from the rest's minimum (`_tighten`, tried when a row fails).
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
  it is 1 + 2 levels + 2 = 5 layers. A level also counts the groups that
  its carries would push over 2 bits (so no carry ripples into one more
  level). A counter whose sum breaks the gadget bounds has its composite
  bits materialised first (one copy row each). mul_hi runs the same over 2W
  columns (signed: Baugh–Wooley, a product of one sign bit weighs −2^k and
  enters as 1 − p with the constants as constant-1 bits) and keeps only the
  adder's high half: 5 layers.
- **Narrow multipliers (the default for two variable factors).** All
  products at once keep ~2/3 of them alive after the first layer (one
  mul_hi lane: 700 bits). Digit-serial instead: y's rows in digits (3, then
  ~4 rows; mul_lo's digits grow as its rows shorten), each digit's products
  full adders of ANDs (one layer) and one counter level from the digit's
  lowest column up into a carry-save accumulator of ≤ 2 bits per column,
  the next digit's full adders in the same layer. Columns below the next
  digit are final: a block adder (≤ 8 columns, one layer, beside the next
  digit) turns them into result bits and a carry. Live: the factors, one
  digit's full-adder bits, the accumulator and a carry. Signed products
  need no constants: x_s·(−Y') becomes ANDs of x_s and ¬y_j plus single x_s
  bits. At W = 32: mul_lo 8 layers (about 175 bits live at most for one
  lane against 404), mul_hi 10 (about 220 against 704). A narrow mul_hi
  keeps both words of x·y: mul_lo of the same factors is its low word, and
  mul_hi of the other signedness its high word corrected by x_s·Y + y_s·X
  (4 layers more, no second multiplier). `Alu(narrow=...)`, `digit_bits`
  and each method's `narrow` choose; `mul_wide` gives both words at once.
- **Select.** `p ? x : y` is not a threshold function but the sum row
  [x + p ≥ 2] + [y − p ≥ 1] (never both 1): 1 layer. A predicate still given
  as a row [F ≥ t] (min/max) gates straight in: [F + K·x ≥ t + K].
- **Shifts.** t_{i,s} = [y == s] ∧ x_{i−s} (one row over all bits of y),
  OR over s: 2 layers; amounts ≥ W match no s (0), and shr.s ORs in the sign
  fill x_{W−1} ∧ [y ≥ W − 1 − i].
- **One-hot sums (shf, bfe, bfi).** When at most one of several ANDs can be
  1 (the amount equals one s; pos equals one q), their OR is their sum: one
  sum row of AND parts, no OR layer. Funnel shifts: Σ_s [n == s] ∧ src(i, s),
  1 layer. Bit fields read the low 8 bits of pos and len through one layer
  of monotone rows R(m) = [pos ≥ m], L(j) = [len ≥ j], S(k) = [pos + len ≥ k]
  (weights ≥ the threshold cut to it, so an 8-bit operand fits a row), and
  [pos == q] = R(q) ∧ ¬R(q + 1) is a pair of literals: 2 layers.
- **Staircases over x (popc, clz, bfind).** popc is the counter of one
  column, bit t of D = Σ x_i over the parts [D ≥ k]; clz and bfind are
  functions v(n) of n = the number of leading bits equal to the sign (0 for
  unsigned), and z_k = [n ≥ k] is one row over x (the top k bits all 0, or
  signed a sum of the two parts all 0 / all 1), so bit t of v(n) is the sum
  row bit_t(v(0)) + Σ_k (bit_t(v(k)) − bit_t(v(k−1)))·z_k: 1 layer.
- **XOR with a row (abs).** a XOR [F ≥ t] = a + [F ≥ t] − 2·[F + K·a ≥ t + K]
  is one sum row; bit i of −x is x_i XOR (x_j for some j < i), so |x| is
  1 layer. brev is a view.

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

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

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
Bound = Callable[[int], Form]   # k -> the bit [value ≥ k]
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


#: Rows for one layer and how their output bits (in row order) make a result:
#: several levels can share one `tensor.threshold` (`Alu._together`).
Level = tuple[list[Row | Sum], Callable[[list[Form]], Any]]


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


def _checked(form: Form, t: int | Fraction) -> Row:
    """The row, or its `_tighten`ed equivalent when it breaks the gadget
    bounds (VerifyException when that does too)."""
    if row_ok(form, t):
        return form, t
    tight = _tighten(form, t)
    _threshold_row(*tight).gadget()
    return tight


def _tighten(form: Form, t: int | Fraction) -> Row:
    """The same threshold function with smaller weights: a bit the row needs
    (the rest cannot reach t without it) only needs a weight that lifts the
    rest's maximum past the threshold, and a bit that decides the row alone
    only needs to reach it from the rest's minimum. Rows whose threshold sits
    far from the middle of their range (a digit of one-bit columns) come back
    within the gadget bounds."""
    terms, t = dict(form.terms), math.ceil(Fraction(t) - form.const)   # integer sums
    changed = True
    while changed:
        changed = False
        for key in sorted(terms, key=lambda k: -abs(terms[k])):
            w = terms[key]
            rest = Form({k: v for k, v in terms.items() if k != key})
            # a negative weight as a positive one on the complement: w·x = w + |w|·(1 − x)
            a, th = abs(w), t - min(w, 0)
            if rest.hi() < th:                    # needed: x ∧ [rest ≥ th − a]
                new_a = rest.hi() - (th - a) + 1
                new_th = th - a + new_a
            elif rest.lo() + a >= th:             # enough: x ∨ [rest ≥ th]
                new_a, new_th = th - rest.lo(), th
            else:
                continue
            if 0 < new_a < a:
                terms[key] = new_a if w > 0 else -new_a
                t = new_th + min(terms[key], 0)
                changed = True
    return Form(terms), t


def _bit_of_count(t: int, dmax: int, d: Form) -> Sum:
    """Bit t of D (0 ≤ D ≤ dmax) as a staircase: Σ_k (bit_t(k) − bit_t(k−1))·[D ≥ k]."""
    parts = []
    for k in range(1, dmax + 1):
        c = ((k >> t) & 1) - (((k - 1) >> t) & 1)
        if c:
            parts.append((c, d, k))
    return Sum(tuple(parts))


def _low(s: Sequence[Form], k: int, base: int) -> Form:
    """Σ_{i<k} 2^i s_{base+i}."""
    return fsum([s[base + i] * (1 << i) for i in range(k)])


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


def _one_hot(parts: Sequence[Sum]) -> Sum:
    """The OR of parts of which at most one is 1: their sum, one sum row."""
    return Sum(tuple(p for part in parts for p in part.parts))


def _matches(bits: Sequence[Form], s: int) -> tuple[Form, int]:
    """(Σ literals, count): the literals of bits == s are all 1 exactly then."""
    return fsum([f if (s >> k) & 1 else 1 - f for k, f in enumerate(bits)]), len(bits)


def _xor_step(a: Form, form: Form, t: int) -> Sum:
    """a XOR [form ≥ t] as one sum row: a + [form ≥ t] − 2·(a ∧ [form ≥ t]),
    the AND being [form + K·a ≥ t + K] for K past form's range."""
    k = max(1, form.hi() - t + 1)
    return linear(a) + step(form, t) + step(form + k * a, t + k) * -2


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


class Alu:
    """Builds exact integer circuits into a `ProgramBuilder`.

    `narrow` picks the multipliers (mul_lo, mad_lo, mul_hi): True the
    digit-serial ones (narrow, deeper), False the all-at-once ones (wide,
    shallow), None (default) narrow when both factors have at least
    `narrow_min_bits` variable bits; each method's own `narrow` argument
    overrides it. `digit_bits`: rows of y per digit of the narrow ones."""

    def __init__(self, builder: T.ProgramBuilder, narrow: bool | None = None,
                 digit_bits: int = 4):
        if digit_bits < 1:
            raise ValueError(f"digit_bits must be at least 1, not {digit_bits}")
        self.b = builder
        self.narrow = narrow
        self.digit_bits = digit_bits
        self._cache: dict[SSAValue, list[Form]] = {}
        self._built: dict[tuple, SSAValue] = {}
        #: (x, y) → the low word of x·y that a narrow mul_hi / mul_wide made
        self._low_words: dict[tuple[SSAValue, SSAValue], SSAValue] = {}
        #: (x, y, signed) → the high word of x·y that a narrow mul_hi / mul_wide made
        self._high_words: dict[tuple[SSAValue, SSAValue, bool], SSAValue] = {}

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
        constant as a [0 ≥ 0] part); checks every real part's gadget, and
        tightens a part that breaks the bounds (`_tighten`)."""
        if not isinstance(row, Sum):
            value = _constant(*row)
            if value is not None:
                return value
            return _checked(*row)
        const, real = 0, []
        for c, form, t in row.parts:
            value = _constant(form, t)
            if value is not None:
                const += c * value
            else:
                real.append((c, *_checked(form, t)))
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
            return sums({i: step(_low(s, i, 0) + c_in, 1 << i) for i in wanted})
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
            low = _low(s, n, size * d)
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

    def _reduce(self, cols: list[list[Form]], base: int) -> list[list[Form]]:
        """Further counter levels (a layer each) until the columns from `base` up
        hold ≤ 2 bits."""
        for _ in range(32):
            if all(len(c) <= 2 for c in cols[base:]):
                return cols
            cols = self._compress(cols, base)
        raise AssertionError("column compression does not converge")

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
        carry = {i: step(_low(s, i, 0) + c_in, 1 << i) for i in range(lo, n + 1)}
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
                    carry = {i: step(_low(s, i, 0) + c, 1 << i) for i in range(m + 1)}
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
                    rows.append(_bit_of_count(t, dmax, d))
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
        for i in range(w):
            parts = []
            for s in range(min(w, 1 << len(named))):
                m, count = _matches(named, s)
                parts.append(step(m + src(i, s), count + 1))
            heavy = cs[nb:]                              # clamp: amount ≥ W shifts by W
            if clamp and heavy:
                parts.append(step(fsum(heavy) + len(heavy) * src(i, w), len(heavy) + 1))
            rows.append(_one_hot(parts))
        return self.emit(rows)

    # ------------------------------------------------------------ bit fields

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
            rows.append(_one_hot(parts))
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
            rows.append(_one_hot(parts))
        return self.emit(rows)

    # ------------------------------------------------------------ bit counts, abs

    def brev(self, x: SSAValue) -> SSAValue:
        """Bits reversed: a view, no neurons."""
        w = T.width_of(x)
        return self._view([(x, w - 1 - i) for i in range(w)])

    def popc(self, x: SSAValue) -> SSAValue:
        """Number of 1 bits: bit t of D = Σ x_i as a staircase over the parts
        [D ≥ k]: 1 layer, 62 neurons at W = 32."""
        xs = self.bits(x)
        d = fsum(xs)
        return self.emit([_bit_of_count(t, d.hi(), d) for t in range(len(xs))])

    def clz(self, x: SSAValue) -> SSAValue:
        """Leading zeros (W for 0): z_k = [the top k bits are 0] = [clz ≥ k],
        bit t of clz = Σ_k (bit_t(k) − bit_t(k − 1))·z_k: 1 layer, 32 neurons
        at W = 32."""
        return self._of_leading(x, False, lambda k: k)

    def bfind(self, x: SSAValue, signed: bool, shiftamt: bool) -> SSAValue:
        """Position of the most significant non-sign bit, or its distance from
        the top (`shiftamt`); all ones when there is none. A staircase over
        z_k = [the top k bits equal the sign] (unsigned: are 0), like clz:
        1 layer, 32 (unsigned) / 62 (signed) neurons at W = 32."""
        w = T.width_of(x)
        m = (1 << w) - 1
        return self._of_leading(x, signed, lambda k: m if k == w else
                                (k if shiftamt else w - 1 - k))

    def _of_leading(self, x: SSAValue, signed: bool, v: Callable[[int], int]) -> SSAValue:
        """v(n) for n the number of leading bits equal to the sign bit
        (unsigned: leading zeros), as staircases over z_k = [n ≥ k]."""
        xs = self.bits(x)
        w = len(xs)
        z: list[Sum] = []
        for k in range(1, w + 1):
            top = fsum(xs[w - k:])
            if signed and k == 1:
                z.append(linear(Form(const=1)))          # the sign bit equals itself
            else:
                z.append(step(-top, 0) + step(top, k) if signed else step(-top, 0))
        rows = []
        for t in range(w):
            bit = [(v(k) >> t) & 1 for k in range(w + 1)]
            row = linear(Form(const=bit[0]))
            for k in range(1, w + 1):
                if bit[k] != bit[k - 1]:
                    row = row + z[k - 1] * (bit[k] - bit[k - 1])
            rows.append(row)
        return self.emit(rows)

    def abs(self, x: SSAValue) -> SSAValue:
        """|x| (two's complement, abs(INT_MIN) = INT_MIN): for x < 0 bit i of −x
        is x_i XOR (x_j for some j < i), so bit i = x_i XOR c_i with
        c_i = [Σ_{j<i} x_j + i·x_{W−1} ≥ i + 1], the XOR as one sum row:
        1 layer, 153 neurons at W = 32."""
        xs = self.bits(x)
        sign = xs[-1]
        return self.emit([_xor_step(a, fsum(xs[:i]) + sign * i, i + 1) for i, a in enumerate(xs)])
