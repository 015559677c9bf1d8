"""The `tensor` dialect: one step of the machine as exact bit-level tensor ops.

qgc's own dialect (xDSL's upstream `tensor` dialect is never loaded beside it).
A `tensor.program` is what one GPU token computes while it passes through the
compiled decoder layers. Values are bit vectors, `!tensor.bits<N>`: N residual
coordinates, each holding ±1 (bit b is stored as 2b−1). The ops have ideal
semantics — exact arithmetic on bits, `runtime/tensor_engine.py` runs them —
and each maps onto one half of a stock Qwen3.5 linear-attention decoder layer:

    tensor.program @step {
      %a = tensor.input "a" : !tensor.bits<4>
      %c = tensor.input "cin" : !tensor.bits<1>
      %k = tensor.threshold %a, %c [{0 = 1, 4 = 1} >= 1, {0 = 1, 1 = 1} >= 2]
          : !tensor.bits<4>, !tensor.bits<1> -> !tensor.bits<2>
      tensor.memory @m slots 16 width 2
      tensor.kv_write @m[binary %a], %k if %c : !tensor.bits<4>, !tensor.bits<2>, !tensor.bits<1>
      %r = tensor.kv_read @m[binary %a] : !tensor.bits<4> -> !tensor.bits<2>
      tensor.output "r" %r : !tensor.bits<2>
    }

- `tensor.threshold` (MLP half): each output bit is `[Σ w·x ≥ t]` over the
  operands' bits (concatenated), integer weights, integer or half-integer t;
  one or two SwiGLU neurons per output (`ThresholdRow.gadget`); or a sum of
  such parts that is 0 or 1 (`SumRow`).
- `tensor.memory` + `tensor.kv_write` / `tensor.kv_read` (attention half): a
  Gated DeltaNet head used as an exact key–value memory of `slots` rows of
  `width` ≤ 64 bits. Within one token a memory takes at most one write and one
  read, and the read sees the write (the write comes first in the program).
  A never-written slot, a disabled access and an out-of-range address read as
  all-zero bits; a disabled or out-of-range write writes nothing.

`tensor-schedule-layers` places every op: layer, half (`attn` | `mlp`), head,
neuron range, residual coordinates, and adds constant `tensor.pad` ops that
keep every token's energy `sum(h²) = 64·hidden` — the printed program is the
layer budget:

    %k = tensor.threshold ... at layer 0 mlp neurons [1, 3) coords [8, 10) : ...
    tensor.memory @m slots 16 width 2 at layer 1 attn head 0
    tensor.pad 10 = 63
"""

from __future__ import annotations

import contextlib
import functools
import math
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BytesAttr,
    DenseArrayBase,
    IntAttr,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, NoTerminator, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from qgc.dialects.directives import OptionalDirective, end_print

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


def _i64(value: int) -> IntegerAttr:
    if type(value) is int:
        return _cached_i64(value)
    return IntegerAttr(value, i64)


@functools.lru_cache(maxsize=1 << 12)
def _cached_i64(value: int) -> IntegerAttr:
    """Attributes are immutable: one `IntegerAttr` per small integer serves all ops."""
    return IntegerAttr(value, i64)


def _dense(values: Iterable[int]) -> DenseArrayBase:
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
        super().__init__(_dense(v for term in terms for v in term), IntAttr(t2))

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
        return [_dense(flat), IntAttr(t2)]

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
        super().__init__(_dense(c for c, _ in parts), ArrayAttr([r for _, r in parts]))

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
        return [_dense(coefs), parts]

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


# ------------------------------------------------------------ custom directives

def _parse_range(parser: Parser, opened: bool = False) -> tuple[int, int]:
    """`[lo, hi)` (`opened`: the `[` is already consumed)."""
    if not opened:
        parser.parse_punctuation("[")
    lo = parser.parse_integer(allow_boolean=False, allow_negative=False)
    parser.parse_punctuation(",")
    hi = parser.parse_integer(allow_boolean=False, allow_negative=False)
    parser.parse_punctuation(")")
    return lo, hi


def _spell_ranges(flat: Sequence[int]) -> str:
    return " ".join(f"[{flat[i]}, {flat[i + 1]})" for i in range(0, len(flat), 2))


def _parse_ranges(parser: Parser) -> list[int]:
    flat = list(_parse_range(parser))
    while parser.parse_optional_punctuation("[") is not None:
        flat += _parse_range(parser, opened=True)
    return flat


def ranges_of(coords: Sequence[int]) -> list[int]:
    """Coordinates → flat `[lo, hi, lo, hi, ...]` of maximal runs."""
    flat: list[int] = []
    for c in coords:
        if flat and flat[-1] == c:
            flat[-1] = c + 1
        else:
            flat += [c, c + 1]
    return flat


def coords_of(flat: Sequence[int]) -> list[int]:
    return [c for i in range(0, len(flat), 2) for c in range(flat[i], flat[i + 1])]


@irdl_custom_directive
class Ranges(OptionalDirective):
    """Residual coordinates as half-open ranges: `[4, 8) [12, 14)`."""

    coords: AttributeVariable

    def anchor(self) -> AttributeVariable:
        return self.coords

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.coords.set(state, _dense(_parse_ranges(parser)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        coords = self.coords.get(op)
        assert isinstance(coords, DenseArrayBase)
        printer.print_string(_spell_ranges(coords.get_values()))
        end_print(state)


@irdl_custom_directive
class Slice(CustomDirective):
    """`[lo, hi)`: a range of bits."""

    lo: AttributeVariable
    hi: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        lo, hi = _parse_range(parser)
        self.lo.set(state, _i64(lo))
        self.hi.set(state, _i64(hi))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        lo, hi = self.lo.get(op), self.hi.get(op)
        assert isinstance(lo, IntegerAttr) and isinstance(hi, IntegerAttr)
        printer.print_string(f"[{lo.value.data}, {hi.value.data})")
        end_print(state)


@irdl_custom_directive
class Keyword(CustomDirective):
    """A string property printed as a bare word: `binary`, `onehot`, `mlp`."""

    word: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.word.set(state, StringAttr(parser.parse_identifier(context_msg=" keyword")))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        word = self.word.get(op)
        assert isinstance(word, StringAttr)
        printer.print_string(word.data)
        end_print(state)


@irdl_custom_directive
class Rows(CustomDirective):
    """Threshold rows: `[{0 = 1, 4 = -2} >= 3, {} >= 0.5]`."""

    rows: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        def term() -> tuple[int, int]:
            index = parser.parse_integer(allow_boolean=False, allow_negative=False)
            parser.parse_punctuation("=")
            weight = parser.parse_integer(allow_boolean=False, allow_negative=True)
            return index, weight

        def threshold() -> Fraction:
            parser.parse_punctuation(">")
            parser.parse_punctuation("=")
            pos = parser.pos
            value = parser.parse_number(allow_boolean=False)
            t = Fraction(value)
            if (t * 2).denominator != 1:
                parser.raise_error(f"threshold {value} is not a multiple of 1/2", pos)
            return t

        def part(prev: list[tuple[int, int]] | None) -> tuple[list[tuple[int, int]], Fraction]:
            if parser.parse_optional_punctuation("(") is not None:
                if prev is None:
                    parser.raise_error("`(>= t)` repeats the form of the part before it; "
                                       "there is none")
                t = threshold()
                parser.parse_punctuation(")")
                return prev, t
            terms = parser.parse_comma_separated_list(parser.Delimiter.BRACES, term)
            return terms, threshold()

        def one() -> RowAttr | SumAttr:
            parts: list[tuple[int, RowAttr]] = []
            sign, prev = 1, None
            if parser.parse_optional_punctuation("-") is not None:
                sign = -1
            while True:
                coef = parser.parse_optional_integer(allow_boolean=False)
                if coef is not None:
                    parser.parse_punctuation("*")
                prev, t = part(prev)
                parts.append((sign * (1 if coef is None else coef), RowAttr(prev, t)))
                if parser.parse_optional_punctuation("+") is not None:
                    sign = 1
                elif parser.parse_optional_punctuation("-") is not None:
                    sign = -1
                else:
                    break
            if len(parts) == 1 and parts[0][0] == 1:
                return parts[0][1]
            return SumAttr(parts)

        rows = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, one)
        self.rows.set(state, ArrayAttr(rows))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        rows = self.rows.get(op)
        assert isinstance(rows, ArrayAttr)
        printer.print_string("[" + ", ".join(r.row().spelled() for r in rows.data) + "]")
        end_print(state)


@irdl_custom_directive
class Placement(OptionalDirective):
    """Where the scheduler put an op:
    `at layer 2 mlp neurons [1, 9) coords [40, 44)` or `at layer 1 attn head 3 coords [8, 16)`."""

    layer: AttributeVariable
    half: AttributeVariable
    head: AttributeVariable
    neurons: AttributeVariable
    coords: AttributeVariable

    def anchor(self) -> AttributeVariable:
        return self.layer

    def parse(self, parser: Parser, state: ParsingState) -> None:
        parser.parse_keyword("layer")
        self.layer.set(state, _i64(parser.parse_integer(allow_boolean=False,
                                                        allow_negative=False)))
        pos = parser.pos
        half = parser.parse_identifier(context_msg=" layer half (attn, mlp)")
        if half not in HALVES:
            parser.raise_error(f"expected a layer half (attn, mlp), got '{half}'", pos)
        self.half.set(state, StringAttr(half))
        if parser.parse_optional_keyword("head") is not None:
            self.head.set(state, _i64(parser.parse_integer(allow_boolean=False,
                                                           allow_negative=False)))
        if parser.parse_optional_keyword("neurons") is not None:
            lo, hi = _parse_range(parser)
            self.neurons.set(state, _dense([lo, hi]))
        if parser.parse_optional_keyword("coords") is not None:
            self.coords.set(state, _dense(_parse_ranges(parser)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        layer, half = self.layer.get(op), self.half.get(op)
        assert isinstance(layer, IntegerAttr) and isinstance(half, StringAttr)
        text = f"layer {layer.value.data} {half.data}"
        head = self.head.get(op)
        if isinstance(head, IntegerAttr):
            text += f" head {head.value.data}"
        neurons = self.neurons.get(op)
        if isinstance(neurons, DenseArrayBase):
            lo, hi = neurons.get_values()
            text += f" neurons [{lo}, {hi})"
        coords = self.coords.get(op)
        if isinstance(coords, DenseArrayBase):
            text += " coords " + _spell_ranges(coords.get_values())
        printer.print_string(text)
        end_print(state)


# -------------------------------------------------------------------------- ops

class TensorOp(IRDLOperation):
    """Common base of the ops inside a `tensor.program`."""


class PlacedOp(TensorOp):
    """An op the scheduler places in a layer half (`layer`, `half`)."""

    layer = opt_prop_def(IntegerAttr[I64])
    half = opt_prop_def(StringAttr)

    @property
    def placed_layer(self) -> int | None:
        return None if self.layer is None else self.layer.value.data

    @property
    def placed_half(self) -> str | None:
        return None if self.half is None else self.half.data

    def place(self, layer: int, half: str) -> None:
        self.properties["layer"] = _i64(layer)
        self.properties["half"] = StringAttr(half)

    def unplace(self) -> None:
        for name in ("layer", "half", "head", "neurons", "coords", "overwrites"):
            self.properties.pop(name, None)

    def _verify_half(self, want: str) -> None:
        if (self.layer is None) != (self.half is None):
            raise VerifyException(f"{self.name}: a placement needs both a layer and a half")
        if self.half is not None and self.half.data != want:
            raise VerifyException(f"{self.name} runs in the {want} half of a layer, "
                                  f"not the {self.half.data} half")


def _coords_prop(op: Operation, name: str = "coords") -> list[int] | None:
    coords = op.properties.get(name)
    return None if coords is None else coords_of(coords.get_values())  # type: ignore[union-attr]


def _check_coords(op: Operation, width: int) -> None:
    coords = _coords_prop(op)
    if coords is not None and len(coords) != width:
        raise VerifyException(f"{op.name}: {plural(len(coords), 'coordinate')} placed for "
                              f"{plural(width, 'bit')}")


@irdl_op_definition
class InputOp(TensorOp):
    """Bits the token embedding provides: `%a = tensor.input "a" : !tensor.bits<32>`
    (after scheduling: `tensor.input "a" coords [1, 33) : !tensor.bits<32>`)."""

    name = "tensor.input"
    input_name = prop_def(StringAttr)
    coords = opt_prop_def(DenseArrayBase.constr(i64))
    result = result_def(BitsType)
    custom_directives = (Ranges,)
    assembly_format = "$input_name (`coords` custom<Ranges>($coords)^)? attr-dict `:` type($result)"

    def __init__(self, name: str, width: int):
        super().__init__(properties={"input_name": StringAttr(name)}, result_types=[bits(width)])

    def verify_(self) -> None:
        _check_coords(self, width_of(self.result))


@irdl_op_definition
class OutputOp(TensorOp):
    """Bits the step produces: `tensor.output "sum" %s : !tensor.bits<32>`."""

    name = "tensor.output"
    output_name = prop_def(StringAttr)
    value = operand_def(BitsType)
    assembly_format = "$output_name $value attr-dict `:` type($value)"

    def __init__(self, name: str, value: SSAValue):
        super().__init__(properties={"output_name": StringAttr(name)}, operands=[value])


@irdl_op_definition
class SliceOp(TensorOp):
    """A range of bits, free (a view of coordinates):
    `%lo = tensor.slice %a [0, 4) : !tensor.bits<32> -> !tensor.bits<4>`."""

    name = "tensor.slice"
    input = operand_def(BitsType)
    lo = prop_def(IntegerAttr[I64])
    hi = prop_def(IntegerAttr[I64])
    result = result_def(BitsType)
    custom_directives = (Slice,)
    assembly_format = "$input custom<Slice>($lo, $hi) attr-dict `:` type($input) `->` type($result)"

    def __init__(self, value: SSAValue, lo: int, hi: int):
        super().__init__(operands=[value], properties={"lo": _i64(lo), "hi": _i64(hi)},
                         result_types=[bits(hi - lo)])

    def verify_(self) -> None:
        lo, hi = self.lo.value.data, self.hi.value.data
        if not 0 <= lo < hi <= width_of(self.input):
            raise VerifyException(f"tensor.slice [{lo}, {hi}) is outside "
                                  f"!tensor.bits<{width_of(self.input)}>")
        if width_of(self.result) != hi - lo:
            raise VerifyException(f"tensor.slice [{lo}, {hi}) gives {hi - lo} bits, not "
                                  f"{width_of(self.result)}")


@irdl_op_definition
class ConcatOp(TensorOp):
    """Bits side by side, free (a view of coordinates):
    `%ab = tensor.concat %a, %b : !tensor.bits<4>, !tensor.bits<4> -> !tensor.bits<8>`."""

    name = "tensor.concat"
    inputs = var_operand_def(BitsType)
    result = result_def(BitsType)
    assembly_format = "$inputs attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[list(values)],
                         result_types=[bits(sum(width_of(v) for v in values))])

    def verify_(self) -> None:
        total = sum(width_of(v) for v in self.inputs)
        if total != width_of(self.result):
            raise VerifyException(f"tensor.concat of {total} bits gives "
                                  f"!tensor.bits<{width_of(self.result)}>")


@irdl_op_definition
class MergeOp(TensorOp):
    """Reads of which at most one gives set bits, on shared coordinates (a
    gather across memories, free):
    `%r = tensor.merge %r0, %r1 : !tensor.bits<8>, !tensor.bits<8> -> !tensor.bits<8>`.
    Each operand is a `tensor.kv_read` used by this merge alone; scheduled,
    they all write onto the same coordinates (−1 on entry), each adding its
    row's set bits, so the result is the one read that gave any (zero if
    none). Two reads giving set bits in one token are an error of the
    program."""

    name = "tensor.merge"
    inputs = var_operand_def(BitsType)
    result = result_def(BitsType)
    assembly_format = "$inputs attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[list(values)], result_types=[bits(width_of(values[0]))])

    def reads(self) -> list[KvReadOp]:
        return [v.owner for v in self.inputs]  # type: ignore[misc]

    def first_read(self) -> KvReadOp:
        """The read placed first (the earliest half, then operand order): the
        merge's bits live on its coordinates from its half on."""
        reads = self.reads()
        if any(r.placed_layer is None for r in reads):
            return reads[0]
        return min(reads, key=lambda r: half_index(r))

    def verify_(self) -> None:
        if not self.inputs:
            raise VerifyException("tensor.merge takes at least one read")
        for v in self.inputs:
            if not isinstance(v.owner, KvReadOp):
                raise VerifyException("tensor.merge merges the results of tensor.kv_read ops")
            if width_of(v) != width_of(self.result):
                raise VerifyException(f"tensor.merge of !tensor.bits<{width_of(v)}> gives "
                                      f"!tensor.bits<{width_of(self.result)}>")
            if len(list(v.uses)) != 1:
                raise VerifyException("a read that tensor.merge takes has no other use (it "
                                      "shares the merge's coordinates)")
        if len({r.group_index for r in self.reads()}) > 1:
            raise VerifyException("the reads of a tensor.merge belong to one group (or none): "
                                  "they share coordinates")
        placed = [_coords_prop(r) for r in self.reads()]
        if any(c != placed[0] for c in placed):
            raise VerifyException("the reads of a tensor.merge are placed on the same "
                                  "coordinates")


@irdl_op_definition
class ThresholdOp(PlacedOp):
    """A group of SwiGLU neurons in an MLP half; output bit j is
    `[Σ_i w_ji·x_i ≥ t_j]` over the operands' bits x (concatenated, 0/1):

        %c = tensor.threshold %a, %b [{0 = 1, 4 = 1} >= 2, {0 = 1, 4 = 1} >= 1]
            : !tensor.bits<4>, !tensor.bits<4> -> !tensor.bits<2>

    Weights are integers, thresholds integers or halves. Each row costs 0, 1 or
    2 neurons (`ThresholdRow.gadget`). A row may also be a sum of such parts
    (`SumRow`), `{0 = 1, 4 = 1} >= 1 - (>= 2)` (here the XOR of bits 0 and 4),
    as long as it stays 0 or 1; its neurons are its parts', and equal parts of
    one op share them (`distinct_parts`). After scheduling:
    `... at layer 0 mlp neurons [1, 4) coords [9, 11) : ...`. An output
    coordinate may reuse one whose previous bit is dead by this half
    (`... coords [3, 5) [9, 10) overwrites [3, 5) : ...`): each such bit costs
    one more neuron, a copy of the old bit with down weight −2 (so the
    coordinate moves from 2·old−1 to 2f−1). A grouped op (`... group 2 ...`)
    gives zero bits unless its group runs (bit 2 of the program's `groups`
    input): its neurons take their up projection from that bit.
    """

    name = "tensor.threshold"
    inputs = var_operand_def(BitsType)
    rows = prop_def(ArrayAttr[RowAttr | SumAttr])
    neurons = opt_prop_def(DenseArrayBase.constr(i64))
    coords = opt_prop_def(DenseArrayBase.constr(i64))
    overwrites = opt_prop_def(DenseArrayBase.constr(i64))
    head = opt_prop_def(IntegerAttr[I64])
    group = opt_prop_def(IntegerAttr[I64])
    result = result_def(BitsType)
    custom_directives = (Rows, Placement, Ranges)
    assembly_format = (
        "$inputs custom<Rows>($rows) (`group` $group^)? "
        "(`at` custom<Placement>($layer, $half, $head, $neurons, $coords)^)? "
        "(`overwrites` custom<Ranges>($overwrites)^)? "
        "attr-dict `:` type($inputs) `->` type($result)")

    def __init__(self, values: Sequence[SSAValue], rows: Sequence[RowAttr | SumAttr]):
        super().__init__(operands=[list(values)],
                         properties={"rows": ArrayAttr(list(rows))},
                         result_types=[bits(len(rows))])

    @staticmethod
    def _verify_rows(rows: Sequence[Row], n_in: int) -> None:
        """Every part reads bits of the operands, each once, and has a gadget."""
        for j, row in enumerate(rows):
            for _, part in row.parts:
                lo, hi, twice = part.index_span()
                if lo < 0 or hi >= n_in or twice:
                    seen = set()
                    for i, _ in part.terms:
                        if not 0 <= i < n_in:
                            raise VerifyException(f"row {j} reads bit {i}; the operands have "
                                                  f"{plural(n_in, 'bit')}")
                        if i in seen:
                            raise VerifyException(f"row {j} reads bit {i} twice")
                        seen.add(i)
                part.gadget()  # range check

    def row_list(self) -> list[Row]:
        cached = getattr(self, "_rows_cache", None)
        rows_attr = self.rows
        if cached is None or cached[0] is not rows_attr:
            cached = (rows_attr, [r.row() for r in rows_attr.data])
            object.__setattr__(self, "_rows_cache", cached)
        return cached[1]

    def distinct_parts(self) -> list[ThresholdRow]:
        """The threshold parts of all rows, each once (first use first): equal
        parts share their neurons, so a counter's output bits pay for each
        `[D ≥ k]` once and a full adder's sum and carry share their ANDs."""
        return list(dict.fromkeys(part for row in self.row_list() for _, part in row.parts))

    def read_bits(self) -> list[int]:
        """The bits of the concatenated operands some row reads (a view of a
        wide value may pass bits no row looks at: they are not read here)."""
        return sorted({i for row in self.row_list() for i, _ in row.terms})

    @property
    def group_index(self) -> int | None:
        """The op's group (`group 3`): its bits are zero unless bit 3 of the
        program's `groups` input is set (groups are mutually exclusive, so
        their bits may share coordinates)."""
        return None if self.group is None else self.group.value.data

    def needs_group_constant(self) -> bool:
        """A grouped op whose rows have a constant term takes it from a neuron
        of its own (gated like the others) instead of the constant neuron."""
        return self.group is not None and any(
            part.gadget().base for row in self.row_list() for _, part in row.parts)

    def gadget_neuron_count(self) -> int:
        """Neurons of the rows' gadgets alone (shared parts counted once), and
        a grouped op's constant neuron."""
        return sum(part.gadget().count for part in self.distinct_parts()) + \
            int(self.needs_group_constant())

    def overwritten_coords(self) -> list[int]:
        """Output coordinates that hold a dead bit when this op writes them."""
        return _coords_prop(self, "overwrites") or []

    def neuron_count(self) -> int:
        """Gadget neurons plus one copy neuron per overwritten coordinate."""
        return self.gadget_neuron_count() + len(self.overwritten_coords())

    def verify_(self) -> None:
        n_in = sum(width_of(v) for v in self.inputs)
        rows = self.row_list()
        if len(rows) != width_of(self.result):
            raise VerifyException(f"tensor.threshold has {plural(len(rows), 'row')} for "
                                  f"{plural(width_of(self.result), 'output bit')}")
        checked = (self.rows, n_in)
        if getattr(self, "_rows_checked", None) != checked:   # rows unchanged: checked before
            self._verify_rows(rows, n_in)
            object.__setattr__(self, "_rows_checked", checked)
        self._verify_half("mlp")
        if self.head is not None:
            raise VerifyException("tensor.threshold runs in an MLP half: no head")
        if self.neurons is not None:
            lo, hi = self.neurons.get_values()
            if hi - lo != self.neuron_count():
                raise VerifyException(f"tensor.threshold needs {self.neuron_count()} neurons, "
                                      f"placed on [{lo}, {hi})")
        _check_coords(self, width_of(self.result))
        over = self.overwritten_coords()
        if over and not set(over) <= set(_coords_prop(self) or []):
            raise VerifyException("tensor.threshold overwrites coordinates that are not among "
                                  "its output coordinates")


@irdl_op_definition
class MemoryOp(PlacedOp):
    """A key–value memory: one Gated DeltaNet head of one layer, `slots` rows of
    `width` bits (≤ 64), every row empty (all-zero bits) at the start:

        tensor.memory @regs slots 16 width 64
        tensor.memory @regs slots 16 width 64 at layer 1 attn head 0     (scheduled)
    """

    name = "tensor.memory"
    sym_name = prop_def(SymbolNameConstraint())
    slots = prop_def(IntegerAttr[I64])
    width = prop_def(IntegerAttr[I64])
    head = opt_prop_def(IntegerAttr[I64])
    neurons = opt_prop_def(DenseArrayBase.constr(i64))
    coords = opt_prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(SymbolOpInterface())
    custom_directives = (Placement,)
    assembly_format = (
        "$sym_name `slots` $slots `width` $width "
        "(`at` custom<Placement>($layer, $half, $head, $neurons, $coords)^)? attr-dict")

    def __init__(self, name: str, slots: int, width: int):
        super().__init__(properties={"sym_name": StringAttr(name), "slots": _i64(slots),
                                     "width": _i64(width)})

    @property
    def memory_name(self) -> str:
        return self.sym_name.data

    @property
    def n_slots(self) -> int:
        return self.slots.value.data

    @property
    def n_width(self) -> int:
        return self.width.value.data

    def key_width(self, kind: str) -> int:
        return self.n_slots if kind == "onehot" else max(1, (self.n_slots - 1).bit_length())

    def verify_(self) -> None:
        if not 1 <= self.n_slots <= MAX_MEMORY_SLOTS:
            raise VerifyException(f"memory @{self.memory_name} has {self.n_slots} slots; a head "
                                  f"holds 1 to {MAX_MEMORY_SLOTS}")
        if not 1 <= self.n_width <= MAX_MEMORY_WIDTH:
            raise VerifyException(f"memory @{self.memory_name} rows of {self.n_width} bits; a "
                                  f"head row holds 1 to {MAX_MEMORY_WIDTH}")
        self._verify_half("attn")
        if (self.layer is None) != (self.head is None):
            raise VerifyException(f"memory @{self.memory_name}: a placement names the head")
        if self.neurons is not None or self.coords is not None:
            raise VerifyException(f"memory @{self.memory_name} owns no neurons or coordinates")


class _KvOp(PlacedOp):
    memory = prop_def(SymbolRefAttr)
    key_kind = prop_def(StringAttr)
    head = opt_prop_def(IntegerAttr[I64])
    neurons = opt_prop_def(DenseArrayBase.constr(i64))
    coords = opt_prop_def(DenseArrayBase.constr(i64))

    @property
    def memory_name(self) -> str:
        return self.memory.root_reference.data

    def memory_op(self) -> MemoryOp:
        program = self.parent_op()
        assert isinstance(program, ProgramOp)
        mem = program.memories().get(self.memory_name)
        if mem is None:
            raise VerifyException(f"{self.name}: no tensor.memory @{self.memory_name} in "
                                  "the program")
        return mem

    def _verify_access(self, key: SSAValue, enable: SSAValue | None) -> MemoryOp:
        kind = self.key_kind.data
        if kind not in KEY_KINDS:
            raise VerifyException(f"{self.name}: key kind '{kind}' (expected onehot or binary)")
        mem = self.memory_op()
        want = mem.key_width(kind)
        if width_of(key) != want:
            raise VerifyException(f"{self.name}: a {kind} key of memory @{mem.memory_name} "
                                  f"({mem.n_slots} slots) has {plural(want, 'bit')}, got "
                                  f"{width_of(key)}")
        if enable is not None and width_of(enable) != 1:
            raise VerifyException(f"{self.name}: the enable is one bit")
        self._verify_half("attn")
        if self.neurons is not None:
            raise VerifyException(f"{self.name} owns no neurons")
        return mem


@irdl_op_definition
class KvWriteOp(_KvOp):
    """Write a memory row: `tensor.kv_write @m[binary %addr], %v if %en : !tensor.bits<4>,
    !tensor.bits<8>, !tensor.bits<1>`.

    The key is `binary` (an address) or `onehot` (one bit per slot; all zero
    writes nothing, two or more ones are undefined). An address ≥ slots, or a
    cleared enable bit, writes nothing."""

    name = "tensor.kv_write"
    key = operand_def(BitsType)
    value = operand_def(BitsType)
    enable = opt_operand_def(BitsType)
    custom_directives = (Keyword, Placement)
    assembly_format = (
        "$memory `[` custom<Keyword>($key_kind) $key `]` `,` $value (`if` $enable^)? "
        "(`at` custom<Placement>($layer, $half, $head, $neurons, $coords)^)? "
        "attr-dict `:` type($key) `,` type($value) (`,` type($enable)^)?")

    def __init__(self, memory: str, kind: str, key: SSAValue, value: SSAValue,
                 enable: SSAValue | None = None):
        super().__init__(operands=[key, value, [enable] if enable is not None else []],
                         properties={"memory": SymbolRefAttr(memory),
                                     "key_kind": StringAttr(kind)})

    def verify_(self) -> None:
        mem = self._verify_access(self.key, self.enable)
        if width_of(self.value) != mem.n_width:
            raise VerifyException(f"tensor.kv_write of {plural(width_of(self.value), 'bit')} "
                                  f"into rows of {mem.n_width} (memory @{mem.memory_name})")
        if self.coords is not None:
            raise VerifyException("tensor.kv_write produces no coordinates")


@irdl_op_definition
class KvReadOp(_KvOp):
    """Read a memory row: `%v = tensor.kv_read @m[onehot %q] : !tensor.bits<16> ->
    !tensor.bits<8>`. Sees the write of the same token. An empty slot, an
    address ≥ slots, an all-zero one-hot query or a cleared enable bit read as
    zero bits, and so does a grouped read while its group does not run.
    Scheduled, `coords` are the result's coordinates; they hold −1 (bit 0)
    when the token enters the layer."""

    name = "tensor.kv_read"
    key = operand_def(BitsType)
    enable = opt_operand_def(BitsType)
    group = opt_prop_def(IntegerAttr[I64])
    result = result_def(BitsType)
    custom_directives = (Keyword, Placement)
    assembly_format = (
        "$memory `[` custom<Keyword>($key_kind) $key `]` (`if` $enable^)? (`group` $group^)? "
        "(`at` custom<Placement>($layer, $half, $head, $neurons, $coords)^)? "
        "attr-dict `:` type($key) (`,` type($enable)^)? `->` type($result)")

    @property
    def group_index(self) -> int | None:
        """The read's group (`group 3`): it reads only while bit 3 of the
        program's `groups` input is set, zero bits otherwise."""
        return None if self.group is None else self.group.value.data

    def __init__(self, memory: str, kind: str, key: SSAValue, width: int,
                 enable: SSAValue | None = None):
        super().__init__(operands=[key, [enable] if enable is not None else []],
                         properties={"memory": SymbolRefAttr(memory),
                                     "key_kind": StringAttr(kind)},
                         result_types=[bits(width)])

    def verify_(self) -> None:
        mem = self._verify_access(self.key, self.enable)
        if width_of(self.result) != mem.n_width:
            raise VerifyException(f"tensor.kv_read gives rows of {mem.n_width} bits "
                                  f"(memory @{mem.memory_name}), not "
                                  f"{width_of(self.result)}")
        _check_coords(self, width_of(self.result))


@irdl_op_definition
class PadOp(TensorOp):
    """A constant pad coordinate: never read or written, it keeps every token's
    `sum(h²)` at `64·hidden` so that each RMSNorm scales by exactly 1/8.
    `tensor.pad 700 = 255` holds 255 throughout. Added by the scheduler."""

    name = "tensor.pad"
    coord = prop_def(IntegerAttr[I64])
    value = prop_def(IntegerAttr[I64])
    assembly_format = "$coord `=` $value attr-dict"

    def __init__(self, coord: int, value: int):
        super().__init__(properties={"coord": _i64(coord), "value": _i64(value)})

    def verify_(self) -> None:
        if not 0 <= self.value.value.data <= MAX_ACTIVE_GATE:
            raise VerifyException(f"tensor.pad value {self.value.value.data} is outside "
                                  f"[0, {MAX_ACTIVE_GATE}] (exact in bfloat16)")


@irdl_op_definition
class ClearOp(PlacedOp):
    """Reset coordinates whose bits are dead to −1 (bit 0), so that a later
    bit (a threshold output or a kv_read, which writes onto −1) may take them:
    `tensor.clear at layer 3 mlp neurons [40, 42) coords [7, 9)`. One neuron
    per coordinate, G = b_old (0 or 1, exact) and down −2. A grouped clear
    (`tensor.clear group 2 at ...`) fires only while its group runs; an
    ungrouped one clears whatever dead bit any group left there. Added by the
    scheduler; the ideal semantics are unchanged (the engines hold values, not
    coordinates)."""

    name = "tensor.clear"
    neurons = opt_prop_def(DenseArrayBase.constr(i64))
    coords = prop_def(DenseArrayBase.constr(i64))
    head = opt_prop_def(IntegerAttr[I64])
    group = opt_prop_def(IntegerAttr[I64])
    custom_directives = (Placement,)
    assembly_format = ("(`group` $group^)? `at` custom<Placement>($layer, $half, $head, "
                       "$neurons, $coords) attr-dict")

    def __init__(self, layer: int, coords: Sequence[int], group: int | None = None):
        props: dict[str, Attribute] = {"coords": _dense(ranges_of(sorted(coords)))}
        if group is not None:
            props["group"] = _i64(group)
        super().__init__(properties=props)
        self.place(layer, "mlp")

    @property
    def group_index(self) -> int | None:
        return None if self.group is None else self.group.value.data

    def cleared_coords(self) -> list[int]:
        return _coords_prop(self) or []

    def neuron_count(self) -> int:
        return len(self.cleared_coords())

    def unplace(self) -> None:  # made by the scheduler: it is erased, not unplaced
        raise VerifyException("tensor.clear belongs to its schedule")

    def verify_(self) -> None:
        self._verify_half("mlp")
        if self.layer is None:
            raise VerifyException("tensor.clear is placed in an MLP half (`at layer L mlp`)")
        if self.head is not None:
            raise VerifyException("tensor.clear runs in an MLP half: no head")
        if self.neurons is not None:
            lo, hi = self.neurons.get_values()
            if hi - lo != self.neuron_count():
                raise VerifyException(f"tensor.clear needs {self.neuron_count()} neurons, "
                                      f"placed on [{lo}, {hi})")


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """One step of the machine, as bit-level ops in dataflow order:

        tensor.program @step { ... }
        tensor.program @step layers 3 hidden 1024 intermediate 3584 heads 16 { ... }

    `groups "g"` names an input of which at most one bit is set per token:
    ops marked `group k` give zero bits unless bit k is set (the blocks of a
    machine step, only one of which runs), so the scheduler lets different
    groups' bits share coordinates.

    The second form is scheduled (`tensor-schedule-layers`): `layers` stock
    decoder layers for a config of that hidden size, at most `intermediate`
    MLP neurons and `heads` linear-attention heads per layer. Coordinate 0 is
    the flag (8 on every GPU token, exactly 1 after each RMSNorm); neuron 0 of
    every MLP half that computes is the constant neuron (output exactly 1).
    """

    name = "tensor.program"
    sym_name = prop_def(SymbolNameConstraint())
    layers = opt_prop_def(IntegerAttr[I64])
    hidden = opt_prop_def(IntegerAttr[I64])
    intermediate = opt_prop_def(IntegerAttr[I64])
    heads = opt_prop_def(IntegerAttr[I64])
    groups = opt_prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), IsolatedFromAbove(), SymbolOpInterface(), SymbolTable())
    assembly_format = (
        "$sym_name (`groups` $groups^)? (`layers` $layers^ `hidden` $hidden `intermediate` "
        "$intermediate `heads` $heads)? attr-dict-with-keyword $body")

    FLAG: ClassVar[int] = 0
    LIMITS: ClassVar[tuple[str, ...]] = ("layers", "hidden", "intermediate", "heads")

    def __init__(self, name: str, ops: Sequence[Operation] = ()):
        super().__init__(properties={"sym_name": StringAttr(name)},
                         regions=[Region(Block(list(ops)))])

    @property
    def program_name(self) -> str:
        return self.sym_name.data

    @property
    def scheduled(self) -> bool:
        return self.layers is not None

    @property
    def groups_input(self) -> str | None:
        return None if self.groups is None else self.groups.data

    def group_bits(self) -> int:
        """Width of the `groups` input (0 without one)."""
        name = self.groups_input
        widths = [width_of(op.result) for op in self.inputs() if op.input_name.data == name]
        return widths[0] if widths else 0

    def limit(self, name: str) -> int | None:
        attr = getattr(self, name)
        return None if attr is None else attr.value.data

    def set_limit(self, name: str, value: int) -> None:
        self.properties[name] = _i64(value)

    def ops(self) -> list[Operation]:
        return list(self.body.block.ops)

    def memories(self) -> dict[str, MemoryOp]:
        return {op.memory_name: op for op in self.body.block.ops if isinstance(op, MemoryOp)}

    def inputs(self) -> list[InputOp]:
        return [op for op in self.body.block.ops if isinstance(op, InputOp)]

    def outputs(self) -> list[OutputOp]:
        return [op for op in self.body.block.ops if isinstance(op, OutputOp)]

    def pads(self) -> list[PadOp]:
        return [op for op in self.body.block.ops if isinstance(op, PadOp)]

    def verify_(self) -> None:
        name = self.program_name
        names: dict[str, set[str]] = {"input": set(), "output": set()}
        access: dict[tuple[str, str], Operation] = {}
        n_groups = self.group_bits()
        if self.groups_input is not None and not n_groups:
            raise VerifyException(f"tensor.program @{name}: groups input "
                                  f"'{self.groups_input}' is not an input of the program")
        for op in self.body.block.ops:
            g = getattr(op, "group_index", None)
            if g is not None and not 0 <= g < n_groups:
                raise VerifyException(f"{op.name} of group {g}: tensor.program @{name} has "
                                      f"{n_groups} groups (its `groups` input)")
            if not isinstance(op, TensorOp):
                raise VerifyException(f"'{op.name}' cannot appear in tensor.program @{name}")
            if isinstance(op, InputOp | OutputOp):
                kind = "input" if isinstance(op, InputOp) else "output"
                label = (op.input_name if isinstance(op, InputOp) else op.output_name).data
                if label in names[kind]:
                    raise VerifyException(f"tensor.program @{name} has two {kind}s named "
                                          f"'{label}'")
                names[kind].add(label)
            if isinstance(op, KvWriteOp | KvReadOp):
                kind = "write" if isinstance(op, KvWriteOp) else "read"
                key = (op.memory_name, kind)
                if key in access:
                    raise VerifyException(
                        f"memory @{op.memory_name} is {kind}-accessed twice in one step; a head "
                        f"takes one write and one read per token")
                if kind == "write" and (op.memory_name, "read") in access:
                    raise VerifyException(
                        f"memory @{op.memory_name}: the kv_write must come before the kv_read "
                        "(the read sees the write of the same token)")
                access[key] = op
        if self.scheduled:
            for limit in self.LIMITS:
                if getattr(self, limit) is None:
                    raise VerifyException(f"tensor.program @{name}: a schedule records "
                                          f"layers, hidden, intermediate and heads")
            self._verify_schedule()

    def _verify_schedule(self) -> None:
        """Every op placed, within the limits, without collisions; coordinates
        shared only along lifetimes (`_verify_lifetimes`)."""
        name = self.program_name
        n_layers, hidden = self.limit("layers"), self.limit("hidden")
        inter, heads = self.limit("intermediate"), self.limit("heads")
        assert n_layers is not None and hidden is not None and inter is not None \
            and heads is not None
        owner: dict[int, str] = {self.FLAG: "the flag"}
        bit_coords: dict[int, list[tuple[Operation, str]]] = {}
        heads_used: dict[tuple[int, int], str] = {}
        neurons_used: dict[int, list[tuple[int, int, str]]] = {}
        clears: dict[int, list[ClearOp]] = {}

        def claim(coords: Iterable[int], who: str, op: Operation | None = None) -> None:
            """A pad (op None) owns its coordinate; bits may share theirs along
            lifetimes, checked after all placements."""
            for c in coords:
                if not 0 <= c < hidden:
                    raise VerifyException(f"{who} is placed on coordinate {c}, outside "
                                          f"hidden {hidden}")
                other = owner.get(c)
                if other is None and op is None and c in bit_coords:
                    other = bit_coords[c][0][1]
                if other is not None:
                    raise VerifyException(f"{who} and {other} share coordinate {c}")
                if op is None:
                    owner[c] = who
                else:
                    bit_coords.setdefault(c, []).append((op, who))

        for op in self.body.block.ops:
            if isinstance(op, SliceOp | ConcatOp | OutputOp | MergeOp):
                continue
            who = op.name
            if isinstance(op, PadOp):
                claim([op.coord.value.data], f"tensor.pad {op.coord.value.data}")
                continue
            if isinstance(op, InputOp):
                if op.coords is None:
                    raise VerifyException(f"input '{op.input_name.data}' of scheduled program "
                                          f"@{name} has no coordinates")
                claim(_coords_prop(op) or [], f"input '{op.input_name.data}'", op)
                continue
            if isinstance(op, KvWriteOp):
                continue  # placed through its memory
            assert isinstance(op, PlacedOp)
            layer = op.placed_layer
            if layer is None:
                raise VerifyException(f"{who} of scheduled program @{name} is not placed")
            if not 0 <= layer < n_layers:
                raise VerifyException(f"{who} is placed in layer {layer} of {n_layers}")
            if isinstance(op, MemoryOp):
                assert op.head is not None
                head = op.head.value.data
                if not 0 <= head < heads:
                    raise VerifyException(f"memory @{op.memory_name} is placed on head {head} "
                                          f"of {heads}")
                if (layer, head) in heads_used:
                    raise VerifyException(f"memory @{op.memory_name} and "
                                          f"{heads_used[(layer, head)]} share head {head} of "
                                          f"layer {layer}")
                heads_used[(layer, head)] = f"memory @{op.memory_name}"
            if isinstance(op, KvReadOp):
                mem = op.memory_op()
                if op.placed_layer != mem.placed_layer or op.head is None or \
                        mem.head is None or op.head.value.data != mem.head.value.data:
                    raise VerifyException(f"tensor.kv_read of @{mem.memory_name} is not placed "
                                          "on its memory's layer and head")
                if op.coords is None:
                    raise VerifyException(f"tensor.kv_read of @{mem.memory_name} has no "
                                          "coordinates")
                merge = merge_of(op)
                if merge is None or merge.first_read() is op:   # a merge's reads share
                    claim(_coords_prop(op) or [], f"the kv_read of @{mem.memory_name}", op)
            if isinstance(op, ThresholdOp | ClearOp):
                if op.neurons is None or op.coords is None:
                    raise VerifyException(f"a scheduled {op.name} names its neurons and "
                                          "coordinates")
                lo, hi = op.neurons.get_values()
                if lo < 1 or hi > inter:
                    raise VerifyException(f"{op.name} neurons [{lo}, {hi}) are outside "
                                          f"[1, {inter}) (neuron 0 is the constant)")
                for a, b, other in neurons_used.get(layer, []):
                    if lo < b and a < hi:
                        raise VerifyException(f"{op.name} neurons [{lo}, {hi}) overlap "
                                              f"{other} in layer {layer}")
                neurons_used.setdefault(layer, []).append((lo, hi, f"neurons [{lo}, {hi})"))
                who = f"{op.name} neurons [{lo}, {hi}) of layer {layer}"
                if isinstance(op, ClearOp):
                    for c in op.cleared_coords():
                        if not 0 <= c < hidden or c in owner:
                            raise VerifyException(f"{who} clears coordinate {c}, which holds "
                                                  "no bits")
                        clears.setdefault(c, []).append(op)
                else:
                    claim(_coords_prop(op) or [], who, op)
        for op in self.body.block.ops:
            if isinstance(op, KvWriteOp):
                mem = op.memory_op()
                if mem.layer is None:
                    raise VerifyException(f"memory @{mem.memory_name} of scheduled program "
                                          f"@{name} is not placed")
                if op.placed_layer != mem.placed_layer or op.head is None or \
                        mem.head is None or op.head.value.data != mem.head.value.data:
                    raise VerifyException(f"tensor.kv_write of @{mem.memory_name} is not "
                                          "placed on its memory's layer and head")
        self._verify_dataflow()
        self._verify_lifetimes(bit_coords, clears)

    def _verify_dataflow(self) -> None:
        """Every bit an op reads is ready before its half: after the half of
        its producer (views look through; a merge's bits after its last
        read). A threshold reads only the bits its rows name."""
        ready: dict[SSAValue, list[int]] = {}
        for op in self.body.block.ops:
            if isinstance(op, ThresholdOp | KvReadOp | KvWriteOp):
                h = half_index(op)
                flat = [r for v in op.operands for r in ready.get(v, [])]
                used = op.read_bits() if isinstance(op, ThresholdOp) else range(len(flat))
                late = max((flat[i] for i in used if i < len(flat)), default=-1)
                if late >= h:
                    raise VerifyException(f"{op.name} in half {h} reads a bit ready only "
                                          f"after half {late}")
            if isinstance(op, InputOp):
                ready[op.result] = [-1] * width_of(op.result)
            elif isinstance(op, ThresholdOp | KvReadOp):
                ready[op.result] = [half_index(op)] * width_of(op.result)
            elif isinstance(op, SliceOp):
                ready[op.result] = ready[op.input][op.lo.value.data:op.hi.value.data]
            elif isinstance(op, ConcatOp):
                ready[op.result] = [r for v in op.inputs for r in ready[v]]
            elif isinstance(op, MergeOp):
                last = max(half_index(r) for r in op.reads())
                ready[op.result] = [last] * width_of(op.result)

    def _verify_lifetimes(self, bit_coords: dict[int, list[tuple[Operation, str]]],
                          clears: dict[int, list[ClearOp]]) -> None:
        """Bits share a coordinate only one after another, in every *view*:
        the tokens on which group g runs see the ungrouped bits and g's (the
        other groups' are zero there), the tokens on which none runs the
        ungrouped ones. In a view, a later bit is written onto −1: after a
        clear of the coordinate (`tensor.clear`, ungrouped or of the group) in
        an MLP half from the earlier bit's last read on (a read in half h sees
        h's input), or by a threshold that `overwrites` it, in an MLP half no
        earlier than that last read. An output is never overwritten, an input
        is the first holder, and a clear clears dead bits only."""
        reads = bit_reads(self)
        keys = lambda op: [(op, c) for c in _coords_prop(op) or []]  # noqa: E731
        exposed = exposed_bits(self, keys)
        for c in bit_coords.keys() | clears.keys():
            holders, cs = bit_coords.get(c, []), clears.get(c, [])
            # (half, kind, op, who, view): a bit read outside its group as it is
            # holds the coordinate in every view
            timed = sorted([(birth_half(op), 1, op, who,
                             None if (op, c) in exposed else getattr(op, "group_index", None))
                            for op, who in holders]
                           + [(half_index(op), 0, op, f"tensor.clear of layer "
                               f"{op.placed_layer}", op.group_index) for op in cs],
                           key=lambda t: t[:2])
            if isinstance(timed[0][2], ThresholdOp) and c in timed[0][2].overwritten_coords():
                raise VerifyException(f"{timed[0][3]} overwrites coordinate {c}, which holds "
                                      "no earlier bit")
            for view in {t[4] for t in timed} | {None}:
                self._verify_view(c, [t[:4] for t in timed if t[4] in (None, view)], reads,
                                  view)

    @staticmethod
    def _verify_view(c: int, timed: list, reads: dict[tuple[Operation, int], int],
                     view: int | None) -> None:
        """One view's holders and clears of coordinate c, in time order (a
        grouped threshold's copy neurons act in its group's view only)."""
        held = None                   # (birth, op, who) of the bit there, cleared: None
        last_bit = None
        cleared_at = None             # the half of the last clear
        for when, is_bit, op, who in timed:
            if not is_bit:
                if cleared_at == when:
                    raise VerifyException(f"{who} clears coordinate {c} twice in half {when}")
                cleared_at = when
                if held is None and last_bit is None:
                    continue          # nothing there in this view: a no-op
                if held is not None:
                    last = reads.get((held[1], c), held[0])
                    if last > when or held[0] >= when:
                        until = "the end (an output)" if last == LIVE_TO_END else \
                            f"half {last}"
                        raise VerifyException(f"{who} clears coordinate {c} in half {when}, "
                                              f"but {held[2]} is read there until {until}")
                held = None
                continue
            if held is not None:
                b0, op0, who0 = held
                if b0 == when or not isinstance(op, ThresholdOp) or \
                        c not in op.overwritten_coords() or \
                        op.group_index not in (None, view):
                    raise VerifyException(f"{who} and {who0} share coordinate {c}")
                last = reads.get((op0, c), b0)
                if last > when:
                    until = "the end (an output)" if last == LIVE_TO_END else f"half {last}"
                    raise VerifyException(f"{who} overwrites coordinate {c} in half {when}, "
                                          f"but {who0} is read there until {until}")
            elif isinstance(op, InputOp) and last_bit is not None:
                raise VerifyException(f"{who} and {last_bit} share coordinate {c}")
            elif cleared_at == when and isinstance(op, ThresholdOp) and \
                    c in op.overwritten_coords():
                raise VerifyException(f"{who} overwrites coordinate {c}, which a clear resets "
                                      f"in the same half {when}")
            held = (when, op, who)
            last_bit = who


#: The last-read half of an output bit: it lives to the end.
LIVE_TO_END = 1 << 30


def half_index(op: Operation) -> int:
    """Halves in order: attn 0 → 0, mlp 0 → 1, attn 1 → 2, ..."""
    assert isinstance(op, PlacedOp) and op.placed_layer is not None
    return 2 * op.placed_layer + (op.placed_half == "mlp")


def birth_half(op: Operation) -> int:
    """The half after which a value exists (inputs: −1, before the first)."""
    return -1 if isinstance(op, InputOp) else half_index(op)


def bit_reads(program: ProgramOp) -> dict[tuple[Operation, int], int]:
    """The last half that reads each (producing op, coordinate) of a scheduled
    program (`last_reads`)."""
    return last_reads(program, lambda op: [(op, c) for c in _coords_prop(op) or []])


def bit_sources(program: ProgramOp, keys):
    """Walk the program's ops, yielding (op, src) with `src` mapping every
    value defined so far (op's results included) to its bits, named by
    `keys(op)` for the inputs, thresholds and reads; slices and concats are
    views, a merge's bits are its first read's (the coordinates they share)."""
    src: dict[SSAValue, list] = {}
    for op in program.body.block.ops:
        if isinstance(op, InputOp | ThresholdOp | KvReadOp):
            src[op.result] = keys(op)
        elif isinstance(op, SliceOp):
            src[op.result] = src[op.input][op.lo.value.data:op.hi.value.data]
        elif isinstance(op, ConcatOp):
            src[op.results[0]] = [b for v in op.operands for b in src[v]]
        elif isinstance(op, MergeOp):
            src[op.result] = src[op.first_read().result]
        yield op, src


def last_reads(program: ProgramOp, keys) -> dict:
    """The last half that reads each bit, bits named by `keys(op)`
    (`bit_sources`): a threshold and a memory access read at their half's
    input, an output at the end; the `groups` input lives to the end (grouped
    ops, clears too, are gated on it); a merge's bits live on its first read's
    coordinates until its last read has written them (one half after it)."""
    last: dict = {}
    for op, src in bit_sources(program, keys):
        if isinstance(op, InputOp) and op.input_name.data == program.groups_input:
            last.update((b, LIVE_TO_END) for b in src[op.result])
        elif isinstance(op, MergeOp) and all(r.placed_layer is not None for r in op.reads()):
            written = max(half_index(r) for r in op.reads()) + 1
            for b in src[op.result]:
                last[b] = max(last.get(b, written), written)
        for b, half in read_points(op, src):
            last[b] = max(last.get(b, half), half)
    return last


def exposed_bits(program: ProgramOp, keys) -> set:
    """Grouped bits something outside their group reads as they are (an
    output, a memory access, a threshold part not gated by the group's bit):
    it must see them zero while the group does not run, so they take
    coordinates that hold −1 in every view. A part is gated when it cannot
    reach its threshold without the group's bit."""
    group_of: dict = {}
    gate: list = []
    exposed: set = set()
    for op, src in bit_sources(program, keys):
        if isinstance(op, InputOp | ThresholdOp | KvReadOp):
            g = getattr(op, "group_index", None)
            group_of.update((b, g) for b in src[op.result])
            if isinstance(op, InputOp) and op.input_name.data == program.groups_input:
                gate = src[op.result]
        if isinstance(op, OutputOp | KvWriteOp | KvReadOp):
            mine = getattr(op, "group_index", None)
            exposed.update(b for v in op.operands for b in src[v]
                           if group_of.get(b) is not None and group_of[b] != mine)
        elif isinstance(op, ThresholdOp):
            mine = op.group_index
            flat = [b for v in op.inputs for b in src[v]]
            for row in op.row_list():
                for _, part in row.parts:
                    for i, _w in part.terms:
                        g = group_of.get(flat[i])
                        if g is not None and g != mine and not _gated(part, flat, gate, g):
                            exposed.add(flat[i])
    return exposed


def _gated(part: ThresholdRow, flat: list, gate: list, g: int) -> bool:
    """Whether the part needs group bit g set to reach its threshold."""
    if g >= len(gate):
        return False
    w = sum(w for i, w in part.terms if flat[i] == gate[g])
    rest = sum(w for i, w in part.terms if flat[i] != gate[g] and w > 0)
    return w > 0 and rest < part.threshold


def merge_of(op: Operation) -> MergeOp | None:
    """The tensor.merge that takes this read's bits, if one does."""
    uses = op.results[0].uses if op.results else ()
    for use in uses:
        if isinstance(use.operation, MergeOp):
            return use.operation
    return None


def read_points(op: Operation, src: dict[SSAValue, list]):
    """(bit, half) for every bit `op` reads, bits named through `src` (each
    value's bits): a threshold and a memory access read at their half's input,
    only the bits their rows and keys use; an output at the end."""
    if isinstance(op, OutputOp):
        return [(b, LIVE_TO_END) for b in src.get(op.value, [])]
    if isinstance(op, ThresholdOp):
        flat = [b for v in op.inputs for b in src.get(v, [])]
        half = half_index(op)
        return [(flat[i], half) for i in op.read_bits() if i < len(flat)]
    if isinstance(op, KvWriteOp | KvReadOp):
        half = half_index(op)
        return [(b, half) for v in op.operands for b in src.get(v, [])]
    return []


class ProgramBuilder:
    """Builds a `tensor.program` op by op (what lowerings and tests use):

        b = ProgramBuilder("add4")
        a, c = b.input("a", 4), b.input("cin", 1)
        s = b.threshold([a, c], [({0: 1, 4: 1}, 1)])
        b.output("s", s)
        program = b.program

    Inside `with b.grouped(k):` thresholds and reads get `group k` (see
    `ProgramOp`); `with b.ungrouped():` builds what every group shares.
    """

    def __init__(self, name: str):
        self.program = ProgramOp(name)
        self.block = self.program.body.block
        self._memories: dict[str, MemoryOp] = {}
        self._group: int | None = None

    def _add(self, op: Operation) -> Operation:
        if self._group is not None and isinstance(op, ThresholdOp | KvReadOp):
            op.properties["group"] = _i64(self._group)
        self.block.add_op(op)
        return op

    @contextlib.contextmanager
    def grouped(self, group: int | None):
        outer, self._group = self._group, group
        try:
            yield
        finally:
            self._group = outer

    def ungrouped(self):
        return self.grouped(None)

    def input(self, name: str, width: int) -> SSAValue:
        return self._add(InputOp(name, width)).results[0]

    def output(self, name: str, value: SSAValue) -> None:
        self._add(OutputOp(name, value))

    def threshold(self, inputs: Sequence[SSAValue],
                  rows: Sequence[tuple[dict[int, int], Fraction | int | float]
                                 | Sequence[tuple[int, dict[int, int], Fraction | int]]]
                  ) -> SSAValue:
        """Rows over the concatenated inputs: ({input bit index: weight},
        threshold), or a sum row as a list of (coefficient, {index: weight},
        threshold) parts."""
        attrs = [sum_attr(r) if isinstance(r, list) else row_attr(*r) for r in rows]
        return self._add(ThresholdOp(list(inputs), attrs)).results[0]

    def slice(self, value: SSAValue, lo: int, hi: int) -> SSAValue:
        return self._add(SliceOp(value, lo, hi)).results[0]

    def concat(self, values: Sequence[SSAValue]) -> SSAValue:
        return self._add(ConcatOp(list(values))).results[0]

    def merge(self, reads: Sequence[SSAValue]) -> SSAValue:
        return self._add(MergeOp(list(reads))).results[0]

    def memory(self, name: str, slots: int, width: int) -> str:
        self._memories[name] = self._add(MemoryOp(name, slots, width))  # type: ignore[assignment]
        return name

    def kv_write(self, memory: str, kind: str, key: SSAValue, value: SSAValue,
                 enable: SSAValue | None = None) -> None:
        self._add(KvWriteOp(memory, kind, key, value, enable))

    def kv_read(self, memory: str, kind: str, key: SSAValue,
                enable: SSAValue | None = None) -> SSAValue:
        mem = self._memories.get(memory)
        if mem is None or mem.parent is not self.block:   # added or moved behind our back
            mem = self.program.memories()[memory]
        return self._add(KvReadOp(memory, kind, key, mem.n_width, enable)).results[0]


def programs_of(root: Operation) -> list[ProgramOp]:
    return [op for op in root.walk() if isinstance(op, ProgramOp)]


TENSOR = Dialect(
    "tensor",
    [ProgramOp, InputOp, OutputOp, SliceOp, ConcatOp, ThresholdOp, MemoryOp, KvWriteOp,
     KvReadOp, PadOp, ClearOp, MergeOp],
    [BitsType, RowAttr, SumAttr],
)
