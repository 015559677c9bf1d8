"""The `simt` custom directives: how sources, registers, guards, addresses,
kernel signatures and `.shared` variables are spelled inside ops."""

from __future__ import annotations

import re

from xdsl.dialects.builtin import ArrayAttr, IntAttr, IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute
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
from xdsl.utils.mlir_lexer import MLIRTokenKind

from qgc.dialects.directives import OptionalDirective, end_print
from qgc.dialects.simt.attributes import GuardAttr, RegAttr, Src


def _parse_src(parser: Parser) -> Src | GuardAttr:
    """An immediate, a register, or a negated predicate (`!p1`, predicate logic)."""
    value = parser.parse_optional_integer(allow_boolean=False, allow_negative=True)
    if value is not None:
        return IntAttr(value)
    if parser._current_token.kind == MLIRTokenKind.EXCLAMATION_IDENT:
        return GuardAttr.parse_bare(parser)
    return RegAttr.parse_bare(parser)


def _print_src(printer: Printer, src: Attribute) -> None:
    if isinstance(src, IntAttr):
        printer.print_int(src.data)
    else:
        assert isinstance(src, RegAttr | GuardAttr)
        printer.print_string(src.spelled)


@irdl_custom_directive
class Sources(CustomDirective):
    """`r1, 4, r2`: registers and immediates, comma-separated."""

    srcs: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        items = parser.parse_comma_separated_list(parser.Delimiter.NONE,
                                                  lambda: _parse_src(parser))
        self.srcs.set(state, ArrayAttr(items))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        srcs = self.srcs.get(op)
        assert isinstance(srcs, ArrayAttr)
        printer.print_list(srcs.data, lambda s: _print_src(printer, s))
        end_print(state)


def _print_bare(printer: Printer, state: PrintingState, attr: RegAttr | GuardAttr) -> None:
    """A register or condition as the machine listing spells it."""
    state.print_whitespace(printer)
    printer.print_string(attr.spelled)
    end_print(state)


@irdl_custom_directive
class Reg(CustomDirective):
    """A register, bare: `r1`, `v3`, `p0`, `vp2`."""

    reg: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.reg.set(state, RegAttr.parse_bare(parser))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        r = self.reg.get(op)
        assert isinstance(r, RegAttr)
        _print_bare(printer, state, r)


@irdl_custom_directive
class OptReg(OptionalDirective):
    """An optional register (the high word of `simt.atom`'s pair destination)."""

    reg: AttributeVariable

    def anchor(self) -> AttributeVariable:
        return self.reg

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.reg.set(state, RegAttr.parse_bare(parser))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        r = self.reg.get(op)
        assert isinstance(r, RegAttr)
        _print_bare(printer, state, r)


@irdl_custom_directive
class TrailingSources(CustomDirective):
    """`, r1, 4, !p2` after a destination, or nothing (`simt.warp "activemask" r1`)."""

    srcs: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        items = []
        while parser.parse_optional_punctuation(",") is not None:
            items.append(_parse_src(parser))
        self.srcs.set(state, ArrayAttr(items))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        srcs = self.srcs.get(op)
        assert isinstance(srcs, ArrayAttr)
        for src in srcs.data:
            printer.print_string(", ")
            _print_src(printer, src)
        if srcs.data:
            end_print(state)


@irdl_custom_directive
class OptSource(OptionalDirective):
    """An optional second source (`simt.atom "cas"`'s swap value)."""

    src: AttributeVariable

    def anchor(self) -> AttributeVariable:
        return self.src

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.src.set(state, _parse_src(parser))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        src = self.src.get(op)
        assert src is not None
        _print_src(printer, src)
        end_print(state)


@irdl_custom_directive
class Guard(OptionalDirective):
    """A condition, bare: `p0`, `!p0`; optional where the op is unguarded."""

    guard: AttributeVariable

    def anchor(self) -> AttributeVariable:
        return self.guard

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.guard.set(state, GuardAttr.parse_bare(parser))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        g = self.guard.get(op)
        assert isinstance(g, GuardAttr)
        _print_bare(printer, state, g)


@irdl_custom_directive
class Source(CustomDirective):
    """One source: a register `r5` or an immediate `-1`."""

    src: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.src.set(state, _parse_src(parser))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        src = self.src.get(op)
        assert src is not None
        _print_src(printer, src)
        end_print(state)


@irdl_custom_directive
class Address(CustomDirective):
    """`global[r1 + 4]`, `global[r1 - 1]`, `param[3]`, `shared[r2 + 8]`,
    `spill[2]`: a space and an address (`[K]` alone: a constant one);
    `global[r3:r4 + 8]`: a 64-bit byte address, low word first."""

    space: AttributeVariable
    base: AttributeVariable
    base_hi: AttributeVariable
    offset: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        space = parser.parse_identifier(context_msg=" memory space (param, global, shared, "
                                                    "spill)")
        self.space.set(state, StringAttr(space))
        parser.parse_punctuation("[")
        offset = parser.parse_optional_integer(allow_boolean=False, allow_negative=True)
        if offset is None:
            self.base.set(state, RegAttr.parse_bare(parser))
            if parser.parse_optional_punctuation(":") is not None:
                self.base_hi.set(state, RegAttr.parse_bare(parser))
            offset = 0
            if parser.parse_optional_punctuation("+") is not None:
                offset = parser.parse_integer(allow_boolean=False, allow_negative=False)
            elif parser.parse_optional_punctuation("-") is not None:
                offset = -parser.parse_integer(allow_boolean=False, allow_negative=False)
        parser.parse_punctuation("]")
        self.offset.set(state, IntegerAttr(offset, i64))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        space = self.space.get(op)
        base = self.base.get(op)
        offset = self.offset.get(op)
        assert isinstance(space, StringAttr) and isinstance(offset, IntegerAttr)
        off = offset.value.data
        if base is None:
            printer.print_string(f"{space.data}[{off}]")
        else:
            assert isinstance(base, RegAttr)
            hi = self.base_hi.get(op)
            spelled = base.spelled if hi is None else f"{base.spelled}:{hi.spelled}"
            sign = "-" if off < 0 else "+"
            printer.print_string(f"{space.data}[{spelled} {sign} {abs(off)}]")
        end_print(state)


_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$.]*$")


@irdl_custom_directive
class Signature(CustomDirective):
    """`(ptr a, ptr b, u32 n)`: the kernel's parameters, in order, with their
    machine types (`ptr` for a pointer, else the PTX type of a ≤32-bit scalar)."""

    names: AttributeVariable
    types: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        def one() -> tuple[str, str]:
            ty = parser.parse_identifier(context_msg=" parameter type")
            name = parser.parse_identifier_or_str_literal(context_msg=" parameter name")
            return ty, name
        items = parser.parse_comma_separated_list(parser.Delimiter.PAREN, one)
        self.types.set(state, ArrayAttr([StringAttr(t) for t, _ in items]))
        self.names.set(state, ArrayAttr([StringAttr(n) for _, n in items]))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        names, types = self.names.get(op), self.types.get(op)
        assert isinstance(names, ArrayAttr) and isinstance(types, ArrayAttr)

        def one(pair: tuple[Attribute, Attribute]) -> None:
            ty, name = pair
            assert isinstance(ty, StringAttr) and isinstance(name, StringAttr)
            printer.print_string(ty.data + " ")
            if _IDENT_RE.match(name.data):
                printer.print_string(name.data)
            else:
                printer.print_string_literal(name.data)
        printer.print_string("(")
        printer.print_list(list(zip(types.data, names.data, strict=True)), one)
        printer.print_string(")")
        end_print(state)


@irdl_custom_directive
class SharedVars(OptionalDirective):
    """`(tile: 64 align 4, s: extern align 16)`: the kernel's `.shared`
    variables in declaration order, with their bytes (or `extern`: sized by
    the launch) and alignment, before `simt-layout-memory` places them."""

    vars: AttributeVariable

    def anchor(self) -> AttributeVariable:
        return self.vars

    def parse(self, parser: Parser, state: ParsingState) -> None:
        def one() -> ArrayAttr:
            name = parser.parse_identifier_or_str_literal(context_msg=" shared variable name")
            parser.parse_punctuation(":")
            size = 0 if parser.parse_optional_keyword("extern") else \
                parser.parse_integer(allow_boolean=False, allow_negative=False)
            parser.parse_keyword("align")
            align = parser.parse_integer(allow_boolean=False, allow_negative=False)
            return ArrayAttr([StringAttr(name), IntAttr(size), IntAttr(align)])
        self.vars.set(state, ArrayAttr(parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, one)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        value = self.vars.get(op)
        assert isinstance(value, ArrayAttr)

        def one(var: SharedVar) -> None:
            name, size, align = var
            printer.print_string(name if _IDENT_RE.match(name) else f'"{name}"')
            printer.print_string(f": {size or 'extern'} align {align}")
        state.print_whitespace(printer)
        printer.print_string("(")
        printer.print_list(shared_vars_of(value), one)
        printer.print_string(")")
        end_print(state)


#: A `.shared` variable: name, bytes (0: extern, sized by the launch), alignment.
SharedVar = tuple[str, int, int]


def shared_vars_of(value: ArrayAttr) -> list[SharedVar]:
    out = []
    for item in value.data:
        assert isinstance(item, ArrayAttr)
        name, size, align = item.data
        assert isinstance(name, StringAttr) and isinstance(size, IntAttr) and \
            isinstance(align, IntAttr)
        out.append((name.data, size.data, align.data))
    return out


@irdl_custom_directive
class ModuleVars(OptionalDirective):
    """`(table at 0x8000000 = "4190433c", count at 0x8000100 = zeros 4)`: the
    module-scope `.global` and `.const` variables the kernel addresses through
    registers, each the buffer of one of its trailing (hidden) pointer
    parameters of the same name, with the address the reference engine gives
    it and its contents before the launch (hex bytes, or `zeros N`)."""

    vars: AttributeVariable

    def anchor(self) -> AttributeVariable:
        return self.vars

    def parse(self, parser: Parser, state: ParsingState) -> None:
        def one() -> ArrayAttr:
            name = parser.parse_identifier_or_str_literal(context_msg=" module variable name")
            parser.parse_keyword("at")
            address = parser.parse_integer(allow_boolean=False, allow_negative=False)
            parser.parse_punctuation("=")
            if parser.parse_optional_keyword("zeros"):
                size = parser.parse_integer(allow_boolean=False, allow_negative=False)
                data = bytes(size)
            else:
                text = parser.parse_str_literal(" hex bytes")
                try:
                    data = bytes.fromhex(text)
                except ValueError:
                    parser.raise_error(f"'{text}' is not hex bytes")
            return module_var(name, address, data)
        self.vars.set(state, ArrayAttr(parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, one)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        value = self.vars.get(op)
        assert isinstance(value, ArrayAttr)

        def one(var: ModuleVar) -> None:
            name, address, data = var
            printer.print_string(name if _IDENT_RE.match(name) else f'"{name}"')
            printer.print_string(f" at {address:#x} = ")
            printer.print_string(f"zeros {len(data)}" if not any(data) else f'"{data.hex()}"')
        state.print_whitespace(printer)
        printer.print_string("(")
        printer.print_list(module_vars_of(value), one)
        printer.print_string(")")
        end_print(state)


#: A module variable: name, the reference engine's address of it, its bytes.
ModuleVar = tuple[str, int, bytes]


def module_var(name: str, address: int, data: bytes) -> ArrayAttr:
    return ArrayAttr([StringAttr(name), IntAttr(address), StringAttr(data.hex())])


def module_vars_of(value: ArrayAttr) -> list[ModuleVar]:
    out = []
    for item in value.data:
        assert isinstance(item, ArrayAttr)
        name, address, data = item.data
        assert isinstance(name, StringAttr) and isinstance(address, IntAttr) and \
            isinstance(data, StringAttr)
        out.append((name.data, address.data, bytes.fromhex(data.data)))
    return out
