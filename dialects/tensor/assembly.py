"""The custom directives of the tensor ops' assembly formats: coordinate
ranges, slices, keywords, rows, placements."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, StringAttr
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer

from qgc.dialects.directives import OptionalDirective, end_print
from qgc.dialects.tensor.attributes import HALVES, RowAttr, SumAttr, i64_array, i64_attr

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


def spell_ranges(flat: Sequence[int]) -> str:
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
        self.coords.set(state, i64_array(_parse_ranges(parser)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        coords = self.coords.get(op)
        assert isinstance(coords, DenseArrayBase)
        printer.print_string(spell_ranges(coords.get_values()))
        end_print(state)


@irdl_custom_directive
class Slice(CustomDirective):
    """`[lo, hi)`: a range of bits."""

    lo: AttributeVariable
    hi: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        lo, hi = _parse_range(parser)
        self.lo.set(state, i64_attr(lo))
        self.hi.set(state, i64_attr(hi))

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
        self.layer.set(state, i64_attr(parser.parse_integer(allow_boolean=False,
                                                        allow_negative=False)))
        pos = parser.pos
        half = parser.parse_identifier(context_msg=" layer half (attn, mlp)")
        if half not in HALVES:
            parser.raise_error(f"expected a layer half (attn, mlp), got '{half}'", pos)
        self.half.set(state, StringAttr(half))
        if parser.parse_optional_keyword("head") is not None:
            self.head.set(state, i64_attr(parser.parse_integer(allow_boolean=False,
                                                           allow_negative=False)))
        if parser.parse_optional_keyword("neurons") is not None:
            lo, hi = _parse_range(parser)
            self.neurons.set(state, i64_array([lo, hi]))
        if parser.parse_optional_keyword("coords") is not None:
            self.coords.set(state, i64_array(_parse_ranges(parser)))

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
            text += " coords " + spell_ranges(coords.get_values())
        printer.print_string(text)
        end_print(state)
