"""The tensor level's facts, its bit-vector type and the threshold rows
(`ThresholdRow`, `SumRow` and their attributes)."""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from xdsl.dialects.builtin import ArrayAttr, BytesAttr, DenseArrayBase, IntAttr, IntegerAttr, i64
from xdsl.ir import Attribute, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

# ------------------------------------------------------------------ level facts

#: Bits one memory row holds: 128 value dimensions, two bits per group of four
#: (one-hot of four keeps a known quarter of the row non-zero, see docs/machine.md).
MAX_MEMORY_WIDTH = 64
#: Rows one memory has: 128 key dimensions, one kept empty for the query's
#: normalising partner (docs/machine.md, "The tensor level (core)").
MAX_MEMORY_SLOTS = 127
#: Largest active gate value (in units) a neuron may reach and stay exact in
#: bfloat16 (8 significant bits).
MAX_ACTIVE_GATE = 256
HALVES = ("attn", "mlp")
KEY_KINDS = ("onehot", "binary")

#: Defaults of the scheduler: the Qwen3.5-2B text config.
DEFAULT_HIDDEN = 2048
DEFAULT_INTERMEDIATE = 6144
DEFAULT_HEADS = 16


def is_bf16(value: float | Fraction) -> bool:
    """True when `value` is exactly representable in bfloat16 (8 significant bits)."""
    if value == 0:
        return True
    if type(value) is int:
        num, den = abs(value), 1
    else:
        f = value if type(value) is Fraction else Fraction(value)
        num, den = abs(f.numerator), f.denominator
    if den & (den - 1):
        return False                      # not a dyadic rational
    odd = num >> ((num & -num).bit_length() - 1)   # num without its factors of 2
    return odd < 256 and num < _BF16_LIMIT * den    # |value| < 2**128


_BF16_LIMIT = 1 << 128


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def i64_attr(value: int) -> IntegerAttr:
    if type(value) is int:
        return _cached_i64(value)
    return IntegerAttr(value, i64)


@functools.lru_cache(maxsize=1 << 12)
def _cached_i64(value: int) -> IntegerAttr:
    """Attributes are immutable: one `IntegerAttr` per small integer serves all ops."""
    return IntegerAttr(value, i64)


def i64_array(values: Iterable[int]) -> DenseArrayBase:
    """`DenseArrayBase.from_list(i64, values)`, packed in one go (that one
    normalises value by value, which dominated building big programs)."""
    values = list(values)
    try:
        data = struct.pack(f"<{len(values)}q", *values)
    except struct.error:   # out of the signed range (or not integers): xDSL's own path
        return DenseArrayBase.from_list(i64, values)
    return DenseArrayBase(i64, BytesAttr(data))


# ------------------------------------------------------------------------ types

@irdl_attr_definition
class BitsType(ParametrizedAttribute, TypeAttribute):
    """`!tensor.bits<N>`: N bits, each one residual coordinate holding ±1."""

    name = "tensor.bits"
    width: IntAttr

    def __init__(self, width: int):
        super().__init__(IntAttr(width))

    @property
    def n(self) -> int:
        return self.width.data

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            width = parser.parse_integer(allow_boolean=False, allow_negative=False)
        return [IntAttr(width)]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.width.data}>")

    def verify(self) -> None:
        if self.width.data < 1:
            raise VerifyException("!tensor.bits needs at least one bit")


def bits(width: int) -> BitsType:
    if type(width) is int:
        return _cached_bits(width)
    return BitsType(width)


@functools.lru_cache(maxsize=1 << 12)
def _cached_bits(width: int) -> BitsType:
    return BitsType(width)


def width_of(value: SSAValue) -> int:
    ty = value.type
    assert isinstance(ty, BitsType), ty
    return ty.n


# ------------------------------------------------------------- threshold rows

@dataclass(frozen=True)
class Gadget:
    """How one threshold output becomes SwiGLU neurons (all in bit units).

    With `L = Σ w·b − T` (`ThresholdRow.form`: integer, weights without a
    common factor) the output is `f = [L ≥ 0] =
    base + Σ sign·ReLU(G)` over the neurons' gate forms `G = slope·L + offset`:

    - `const`:     f is constant (`base`), no neuron;
    - `top`:       only L = max reaches the threshold: one neuron `ReLU(2L+1)`;
    - `bottom`:    only L = min misses it: `1 − ReLU(−2L−1)`;
    - `restoring`: `ReLU(2L+3/2) − ReLU(2L+1/2)`, kinks ¼ away from every
      integer, |G| ≥ ½ always (needs max L ≤ 63 for bfloat16);
    - `compact`:   `ReLU(L+1) − ReLU(L)`, kinks on integers, G = 0 exactly at
      the threshold (max L ≤ 255).

    `flip` means the gadget is built on `L' = −L − 1` (so `f = 1 − [L' ≥ 0]`),
    taken when the low side of the range is the short one.
    """

    kind: str
    base: int
    neurons: tuple[tuple[int, Fraction, Fraction], ...]  # (sign, slope, offset)
    lo: int
    hi: int

    @property
    def count(self) -> int:
        return len(self.neurons)


@dataclass(frozen=True)
class ThresholdRow:
    """One output of `tensor.threshold`: `[Σ weights[i]·x_i ≥ threshold]`."""

    terms: tuple[tuple[int, int], ...]  # (input bit index, integer weight)
    threshold: Fraction

    def __hash__(self) -> int:
        # the dataclass hash, without `Fraction.__hash__` (slow, and lowerings
        # hash many fresh rows): equal rows have equal exact thresholds n/d
        t = self.threshold
        if type(t) is not Fraction and type(t) is not int:
            try:
                t = Fraction(t)
            except (ValueError, OverflowError, TypeError):   # nan, inf, ...
                return hash((self.terms, t))
        return hash((self.terms, t.numerator, t.denominator))

    @property
    def int_threshold(self) -> int:
        return math.ceil(self.threshold)

    def value(self, x: Sequence[int]) -> int:
        return int(sum(w * x[i] for i, w in self.terms) >= self.threshold)

    def form(self) -> tuple[tuple[tuple[int, int], ...], int]:
        """The row with its weights divided by their gcd g and the threshold
        ⌈t/g⌉: the same function with the smallest integer L = Σ w·b − T."""
        cached = self.__dict__.get("_form")
        if cached is None:
            terms = self.terms
            g = math.gcd(*[w for _, w in terms]) if terms else 1
            if g == 1 and type(terms) is tuple:
                cached = (terms, math.ceil(self.threshold))
            else:
                cached = (tuple((i, w // g) for i, w in terms), math.ceil(self.threshold / g))
            object.__setattr__(self, "_form", cached)
        return cached

    def range(self) -> tuple[int, int]:
        """(min, max) of L = Σ w·b − T over all inputs (`form`)."""
        terms, t = self.form()
        weights = [w for _, w in terms]
        positive = sum([w for w in weights if w > 0])
        return sum(weights) - positive - t, positive - t

    @property
    def parts(self) -> tuple[tuple[int, ThresholdRow], ...]:
        """The row as a sum of weighted threshold parts (`SumRow` has several)."""
        return ((1, self),)

    def neuron_count(self) -> int:
        return self.gadget().count

    def gadget(self) -> Gadget:
        cached = self.__dict__.get("_gadget")
        if cached is None:   # once per row object, once per distinct row (`_checked_gadget`)
            cached = _checked_gadget(self)
            object.__setattr__(self, "_gadget", cached)
        return cached

    def index_span(self) -> tuple[int, int, bool]:
        """(smallest bit read, largest bit read, whether a bit is read twice);
        (0, -1, False) for no terms."""
        cached = self.__dict__.get("_span")
        if cached is None:
            indices = [i for i, _ in self.terms]
            cached = ((min(indices), max(indices), len(set(indices)) != len(indices))
                      if indices else (0, -1, False))
            object.__setattr__(self, "_span", cached)
        return cached

    def _gadget_checked(self) -> Gadget:
        g = self._gadget()
        terms, t = self.form()
        weights = {w for _, w in terms}
        middle = Fraction(sum(w for _, w in terms), 2) - t if g.neurons else 0
        for _, slope, offset in g.neurons:
            # the gate weights codegen writes: 256·4·slope·w per bit, and the flag's
            # 256·(offset + slope·(Σ w/2 − t)) (a bit is b = 4·x + x_flag/2)
            const = 256 * (offset + slope * middle)
            scale = 1024 * (int(slope) if slope.denominator == 1 else slope)  # ints: fast path
            if not is_bf16(const) or not all(is_bf16(scale * w) for w in weights):
                raise VerifyException(
                    f"threshold row {self.spelled()} needs gate weights bfloat16 cannot hold "
                    f"exactly (constant {float(const)}): keep weights to 8 significant bits "
                    "and the threshold within about 64 of the row's midpoint Σw/2")
        return g

    def _gadget(self) -> Gadget:
        lo, hi = self.range()
        if hi < 0:
            return Gadget("const", 0, (), lo, hi)
        if lo >= 0:
            return Gadget("const", 1, (), lo, hi)
        one, two = Fraction(1), Fraction(2)
        if hi == 0:
            return Gadget("top", 0, ((1, two, one),), lo, hi)
        if lo == -1:
            return Gadget("bottom", 1, ((-1, -two, -one),), lo, hi)
        # active side of the gadget: L in [0, hi] (direct) or L' in [0, -lo-1] (flipped)
        span, flip = (hi, False) if hi <= -lo - 1 else (-lo - 1, True)
        s = -1 if flip else 1           # L' = -L - 1 = s·L + (s-1)/2 when flipped
        k = Fraction(-1 if flip else 0)
        base, sign = (1, -1) if flip else (0, 1)
        if 4 * span + 3 < MAX_ACTIVE_GATE:
            return Gadget("restoring", base,
                          ((sign, 2 * s, 2 * k + Fraction(3, 2)),
                           (-sign, 2 * s, 2 * k + Fraction(1, 2))), lo, hi)
        if span + 1 <= MAX_ACTIVE_GATE:
            return Gadget("compact", base, ((sign, Fraction(s), k + 1),
                                            (-sign, Fraction(s), k)), lo, hi)
        raise VerifyException(
            f"threshold row {self.spelled()} spans {span + 1} units on its active side; "
            f"bfloat16 keeps {MAX_ACTIVE_GATE} (8 significant bits): split the sum")

    def spelled(self) -> str:
        inner = ", ".join(f"{i} = {w}" for i, w in self.terms)
        return "{" + inner + "} >= " + _spell_fraction(self.threshold)


@functools.lru_cache(maxsize=1 << 16)
def _checked_gadget(row: ThresholdRow) -> Gadget:
    """`ThresholdRow.gadget`, computed once per distinct row (lowerings ask often)."""
    return row._gadget_checked()


@dataclass(frozen=True)
class SumRow:
    """An output bit that is a weighted sum of threshold parts,
    `Σ c_k·[L_k ≥ t_k]` with integer c_k, over the op's operand bits. The
    program promises it is 0 or 1 on every input it meets (the `tensor` engine
    checks). Each part keeps its own gadget, so the neurons add up exactly:
    bit t of a counter is a staircase `[D ≥ 1] − [D ≥ 2] + [D ≥ 3] − ...` over
    one form D, a full adder of ANDs a sum over several forms. Printed as
    `{0 = 1, 1 = 2} >= 1 - (>= 2) + 2 * {0 = 1} >= 1`, where `(>= t)` repeats
    the form of the part before it."""

    parts: tuple[tuple[int, ThresholdRow], ...]

    def value(self, x: Sequence[int]) -> int:
        return sum(c * row.value(x) for c, row in self.parts)

    @property
    def terms(self) -> tuple[tuple[int, int], ...]:
        """Every (input bit, weight) the parts read, in order (bits repeat)."""
        cached = self.__dict__.get("_terms")
        if cached is None:
            cached = tuple(t for _, row in self.parts for t in row.terms)
            object.__setattr__(self, "_terms", cached)
        return cached

    def neuron_count(self) -> int:
        return sum(row.gadget().count for _, row in self.parts)

    def spelled(self) -> str:
        out, prev = [], None
        for k, (c, row) in enumerate(self.parts):
            sign = ("- " if c < 0 else "+ ") if k else ("-" if c < 0 else "")
            scale = f"{abs(c)} * " if abs(c) != 1 else ""
            body = (f"(>= {_spell_fraction(row.threshold)})" if row.terms == prev
                    else row.spelled())
            out.append(sign + scale + body)
            prev = row.terms
        return " ".join(out)


Row = ThresholdRow | SumRow


def _spell_fraction(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return str(float(value))


def _parse_int_list(parser: AttrParser) -> list[int]:
    """`[1, -2, 3]`."""
    return parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE,
        lambda: parser.parse_integer(allow_boolean=False, allow_negative=True))


@irdl_attr_definition
class RowAttr(ParametrizedAttribute):
    """One threshold row: `#tensor.row<[i0, w0, i1, w1, ...], 2t>` (terms as
    index/weight pairs, the threshold doubled so that halves stay integers).
    Inside `tensor.threshold` it prints as `{i0 = w0, i1 = w1} >= t`."""

    name = "tensor.row"
    terms: DenseArrayBase
    threshold2: IntAttr

    def __init__(self, terms: Sequence[tuple[int, int]], threshold: Fraction | int | float):
        if type(threshold) is int:
            t2 = 2 * threshold
        else:
            half = Fraction(threshold) * 2
            if half.denominator != 1:
                raise ValueError(f"threshold {threshold} is not a multiple of 1/2")
            t2 = int(half)
        super().__init__(i64_array(v for term in terms for v in term), IntAttr(t2))

    def row(self) -> ThresholdRow:
        cached = self.__dict__.get("_row")
        if cached is None:   # computed once per attribute (it is immutable)
            flat = self.terms.get_values()
            terms = tuple((int(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2))
            cached = ThresholdRow(terms, Fraction(self.threshold2.data, 2))
            object.__setattr__(self, "_row", cached)
        return cached

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            flat = _parse_int_list(parser)
            parser.parse_punctuation(",")
            t2 = parser.parse_integer(allow_boolean=False, allow_negative=True)
        return [i64_array(flat), IntAttr(t2)]

    def print_parameters(self, printer: Printer) -> None:
        flat = ", ".join(str(v) for v in self.terms.get_values())
        printer.print_string(f"<[{flat}], {self.threshold2.data}>")

    def verify(self) -> None:
        if len(self.terms) % 2:
            raise VerifyException("a threshold row holds index/weight pairs")


#: Interned rows and sums (`row_attr`, `sum_attr`): a lowering builds the same
#: rows over and over (lanes, repeated gadgets); attributes are immutable, so
#: equal ones may be one object. Emptied when it grows past `_INTERN_LIMIT`.
_INTERNED: dict[tuple, RowAttr | SumAttr] = {}
_INTERN_LIMIT = 1 << 15


def _intern(key: tuple, make) -> RowAttr | SumAttr:
    attr = _INTERNED.get(key)
    if attr is None:
        attr = make()
        if len(_INTERNED) >= _INTERN_LIMIT:
            _INTERNED.clear()
        _INTERNED[key] = attr
    return attr


def _row_key(terms: dict[int, int] | Sequence[tuple[int, int]],
             threshold: Fraction | int | float) -> tuple:
    items = sorted(terms.items()) if isinstance(terms, dict) else terms
    return ("row", tuple([(i, w) for i, w in items if w != 0]), threshold)


def row_attr(terms: dict[int, int] | Sequence[tuple[int, int]],
             threshold: Fraction | int | float) -> RowAttr:
    key = _row_key(terms, threshold)
    return _intern(key, lambda: RowAttr(key[1], threshold))  # type: ignore[return-value]


@irdl_attr_definition
class SumAttr(ParametrizedAttribute):
    """A sum row: `#tensor.sum<[c0, c1, ...], [#tensor.row<...>, ...]>`, the
    bit `Σ c_k·[row_k]` (`SumRow`). Inside `tensor.threshold` it prints as
    `{...} >= 1 - (>= 2) + 2 * {...} >= 3`."""

    name = "tensor.sum"
    coefs: DenseArrayBase
    parts: ArrayAttr[RowAttr]

    def __init__(self, parts: Sequence[tuple[int, RowAttr]]):
        super().__init__(i64_array(c for c, _ in parts), ArrayAttr([r for _, r in parts]))

    def row(self) -> SumRow:
        cached = self.__dict__.get("_row")
        if cached is None:   # computed once per attribute (it is immutable)
            cached = SumRow(tuple((int(c), r.row())
                                  for c, r in zip(self.coefs.get_values(), self.parts.data,
                                                  strict=True)))
            object.__setattr__(self, "_row", cached)
        return cached

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            coefs = _parse_int_list(parser)
            parser.parse_punctuation(",")
            parts = parser.parse_attribute()
        return [i64_array(coefs), parts]

    def print_parameters(self, printer: Printer) -> None:
        coefs = ", ".join(str(v) for v in self.coefs.get_values())
        printer.print_string(f"<[{coefs}], ")
        printer.print_attribute(self.parts)
        printer.print_string(">")

    def verify(self) -> None:
        if len(self.coefs) != len(self.parts.data) or not self.parts.data:
            raise VerifyException("a sum row has one coefficient per part, and parts")
        if any(c == 0 for c in self.coefs.get_values()):
            raise VerifyException("a sum row's coefficients are non-zero")


def sum_attr(parts: Sequence[tuple[int, dict[int, int], Fraction | int]]) -> RowAttr | SumAttr:
    """A row from (coefficient, {bit: weight}, threshold) parts; one part of
    coefficient 1 is a plain `RowAttr`."""
    if len(parts) == 1 and parts[0][0] == 1:
        return row_attr(parts[0][1], parts[0][2])
    keys = [(c, _row_key(t, th)) for c, t, th in parts]

    def make() -> SumAttr:
        return SumAttr([(c, _intern(k, lambda k=k: RowAttr(k[1], k[2]))) for c, k in keys])
    return _intern(("sum", tuple(keys)), make)


def row_attrs(rows: Sequence) -> list[RowAttr | SumAttr]:
    """Rows as `ProgramBuilder.threshold` takes them, ({bit: weight},
    threshold) or a sum row's list of parts, as attributes."""
    return [sum_attr(r) if isinstance(r, list) else row_attr(*r) for r in rows]
