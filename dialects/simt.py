"""The `simt` dialect: the machine that lives inside the model (v0).

A kernel is a control-flow region of *machine blocks*. Each block is a
straight-line list of machine ops that one warp of 4 lanes executes in one step
(one EXEC token), ended by a terminator. Registers are per-lane 32-bit values
(`r0`..`r14` after allocation, `v0`, `v1`, ... before) and per-lane predicates
(`p0`..`p7`, virtual `vp0`, ...). Memory is one word-addressed map of 32-bit
words: the parameter area at word 0 (one word per kernel parameter, then a
bounds pair per pointer parameter), then the buffers. Every op keeps the PTX
location of the instruction it comes from as its location.

    simt.kernel @dot(ptr dot_param_0, ptr dot_param_1, ptr dot_param_2, u32 dot_param_3)
        lanes 4 mem_words 128 max_blocks 32 max_ops 8 regs 15 preds 8 {
      simt.ld r0, param[3]
      simt.special r1, "ctaid.x"
      simt.alu "mad.lo" r1, r1, r2, r3
      simt.setp "ge.s" p0, r1, r0
      simt.ld r5, global[r4 + 0] buffer 1 guard !p0
      simt.atom "add" r6, global[r7 + 0], r5 buffer 2 guard !p0
      simt.next ^bb1
    ^bb1:
      simt.exit
    }

The kernel's machine parameters are properties, set by the pass that decides
them: `lanes`/`mem_words`/`shared_vars` by `convert-ptx-to-simt`,
`shared_words`/`dynamic_shared` by `simt-layout-memory` (which replaces
`shared_vars`), `max_blocks`/`max_ops` by
`simt-form-blocks`, `regs`/`preds` by `simt-allocate-registers` (and
`spill_words`/`spilled` when it spills registers to the lane's own spill slots,
`spill[K]`); the verifier checks every limit that is set.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, ParametrizedAttribute, Region
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    successor_def,
    traits_def,
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
from xdsl.traits import IsolatedFromAbove, IsTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind

from qgc.diagnostics import location_prefix
from qgc.dialects.directives import OptionalDirective, end_print

# ------------------------------------------------------------------ machine facts

LANES = 4
DEFAULT_REGS = 15
DEFAULT_PREDS = 8
#: Words of machine memory by default (the tensor level holds 127 per memory
#: head and asks for `mem-words=127`).
DEFAULT_MEM_WORDS = 1024
#: Blocks per kernel: the published design had 32; the largest kernel of the
#: suites takes 23, and the token vocabulary grows with the blocks a kernel uses.
DEFAULT_MAX_BLOCKS = 64
DEFAULT_MAX_OPS = 16

#: ALU opcodes of the machine and their number of sources. Sources are
#: registers or immediates; `selp`'s third source is a predicate.
ALU_ARITY: dict[str, int] = {
    "mov": 1, "not": 1, "neg": 1, "abs": 1, "popc": 1, "clz": 1, "brev": 1,
    "bfind.u": 1, "bfind.s": 1, "bfind.shiftamt.u": 1, "bfind.shiftamt.s": 1,
    "add": 2, "sub": 2, "mul.lo": 2, "mul.hi.s": 2, "mul.hi.u": 2, "and": 2, "or": 2,
    "xor": 2, "shl": 2, "shr.u": 2, "shr.s": 2, "min.s": 2, "min.u": 2, "max.s": 2,
    "max.u": 2, "div.s": 2, "div.u": 2, "rem.s": 2, "rem.u": 2,
    "mad.lo": 3, "selp": 3, "bfe.u": 3, "bfe.s": 3, "bfi": 4,
    "shf.l.wrap": 3, "shf.l.clamp": 3, "shf.r.wrap": 3, "shf.r.clamp": 3,
}

#: Comparisons of `simt.setp` (`.s` signed, `.u` unsigned).
SETP_CONDS = ("eq", "ne", "lt.s", "le.s", "gt.s", "ge.s", "lt.u", "le.u", "gt.u", "ge.u")

#: Atomic operations of `simt.atom` (`.s`/`.u`: signed/unsigned compare;
#: `cas` takes the compare value as its second source).
ATOM_OPS = ("add", "min.s", "min.u", "max.s", "max.u", "and", "or", "xor", "exch", "inc",
            "dec", "cas")

#: Special registers the machine provides per lane.
SPECIALS = tuple(f"{r}.{d}" for r in ("tid", "ntid", "ctaid", "nctaid") for d in "xyz")

#: Pointer parameters by the buffer elements one machine word holds: `ptr`
#: 4 bytes (32- and 64-bit data, 64-bit elements take two words), `ptr16` one
#: halfword, `ptr8` one byte (sub-word buffers keep one element per word).
POINTER_TYPES = {"ptr": 4, "ptr16": 2, "ptr8": 1}
#: 64-bit scalar parameters: the low word in the parameter's slot, the high
#: word after the bounds pairs.
WIDE_SCALARS = ("u64", "s64", "b64")
PARAM_TYPES = (*POINTER_TYPES, *WIDE_SCALARS, "u32", "s32", "b32", "f32", "u16", "s16",
               "b16", "u8", "s8", "b8")

#: Memory spaces: the parameter area (constant addresses), the buffers, the
#: CTA's shared window and the lane's own spill slots (`spill[2]`, written by
#: `simt-allocate-registers`).
SPACES = ("param", "global", "shared", "spill")

_REG_RE = re.compile(r"^(vp|v|r|p)(\d+)$")


# -------------------------------------------------------------------- attributes

@irdl_attr_definition
class RegAttr(ParametrizedAttribute):
    """A register: `r3` (physical), `v3` (virtual), `p0` (predicate), `vp0`
    (virtual predicate). In an op's custom syntax it prints bare."""

    name = "simt.reg"
    kind: StringAttr
    index: IntAttr

    def __init__(self, kind: str, index: int):
        super().__init__(StringAttr(kind), IntAttr(index))

    @property
    def is_pred(self) -> bool:
        return self.kind.data in ("p", "vp")

    @property
    def is_virtual(self) -> bool:
        return self.kind.data in ("v", "vp")

    @property
    def spelled(self) -> str:
        return f"{self.kind.data}{self.index.data}"

    @classmethod
    def parse_bare(cls, parser: AttrParser) -> RegAttr:
        """`r0`, `v3`, `p1`, `vp2` (the form inside ops)."""
        pos = parser.pos
        ident = parser.parse_identifier(context_msg=" register (r0, v3, p1, vp2)")
        m = _REG_RE.match(ident)
        if not m:
            parser.raise_error(f"expected a register (r0, v3, p1, vp2), got '{ident}'", pos)
        return RegAttr(m[1], int(m[2]))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            r = cls.parse_bare(parser)
        return [r.kind, r.index]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.spelled}>")

    def verify(self) -> None:
        if self.kind.data not in ("r", "v", "p", "vp"):
            raise VerifyException(f"unknown register kind '{self.kind.data}'")
        if self.index.data < 0:
            raise VerifyException("register index must be non-negative")


def reg(kind: str, index: int) -> RegAttr:
    return RegAttr(kind, index)


@irdl_attr_definition
class GuardAttr(ParametrizedAttribute):
    """A per-lane condition: a predicate register, or its negation `!p0`."""

    name = "simt.guard"
    pred: RegAttr
    negated: IntAttr

    def __init__(self, pred: RegAttr, negated: bool = False):
        super().__init__(pred, IntAttr(int(negated)))

    @property
    def is_negated(self) -> bool:
        return bool(self.negated.data)

    def inverted(self) -> GuardAttr:
        return GuardAttr(self.pred, not self.is_negated)

    @property
    def spelled(self) -> str:
        return ("!" if self.is_negated else "") + self.pred.spelled

    @classmethod
    def parse_bare(cls, parser: AttrParser) -> GuardAttr:
        """`p0`, `!p0`, `vp1`, `!vp1` (the form inside ops)."""
        pos = parser.pos
        token = parser._parse_optional_token(MLIRTokenKind.EXCLAMATION_IDENT)
        text = token.text[1:] if token is not None else \
            parser.parse_identifier(context_msg=" predicate")
        m = _REG_RE.match(text)
        if not m or m[1] not in ("p", "vp"):
            parser.raise_error(f"expected a predicate (p0, !p0, vp1), got '{text}'", pos)
        return GuardAttr(RegAttr(m[1], int(m[2])), token is not None)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            g = cls.parse_bare(parser)
        return [g.pred, g.negated]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.spelled}>")

    def verify(self) -> None:
        if not self.pred.is_pred:
            raise VerifyException(f"guard '{self.pred.spelled}' is not a predicate register")


Src = RegAttr | IntAttr


# ------------------------------------------------------------ custom directives

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


@irdl_custom_directive
class Reg(CustomDirective):
    """A register, bare: `r1`, `v3`, `p0`, `vp2`."""

    reg: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.reg.set(state, RegAttr.parse_bare(parser))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        r = self.reg.get(op)
        assert isinstance(r, RegAttr)
        printer.print_string(r.spelled)
        end_print(state)


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
        state.print_whitespace(printer)
        g = self.guard.get(op)
        assert isinstance(g, GuardAttr)
        printer.print_string(g.spelled)
        end_print(state)


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
    `spill[2]`: a space and an address (`[K]` alone: a constant one)."""

    space: AttributeVariable
    base: AttributeVariable
    offset: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        space = parser.parse_identifier(context_msg=" memory space (param, global, shared, "
                                                    "spill)")
        self.space.set(state, StringAttr(space))
        parser.parse_punctuation("[")
        offset = parser.parse_optional_integer(allow_boolean=False, allow_negative=True)
        if offset is None:
            self.base.set(state, RegAttr.parse_bare(parser))
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
            sign = "-" if off < 0 else "+"
            printer.print_string(f"{space.data}[{base.spelled} {sign} {abs(off)}]")
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


# ------------------------------------------------------------------------- ops

def _i64(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


def _src(value: RegAttr | int) -> Src:
    return IntAttr(value) if isinstance(value, int) else value


GUARD_FORMAT = "(`guard` custom<Guard>($guard)^)? attr-dict"


class MachineOp(IRDLOperation):
    """Common base of the ops inside machine blocks (guarded, per lane)."""

    guard = opt_prop_def(GuardAttr)

    def defs(self) -> list[RegAttr]:
        """Registers this op writes."""
        return []

    def uses(self) -> list[RegAttr]:
        """Registers this op reads (the guard included)."""
        return [self.guard.pred] if self.guard is not None else []

    def replace_regs(self, mapping: dict[RegAttr, RegAttr]) -> None:
        """Rename registers (register allocation)."""
        for name, value in list(self.properties.items()):
            self.properties[name] = _rename(value, mapping)

    def replace_sources(self, mapping: dict[RegAttr, RegAttr]) -> None:
        """Rename the registers the op reads, not its destination or guard."""
        for name, value in list(self.properties.items()):
            if name not in ("dst", "guard"):
                self.properties[name] = _rename(value, mapping)

    def verify_(self) -> None:
        pass


def _rename(value: Attribute, mapping: dict[RegAttr, RegAttr]) -> Attribute:
    if isinstance(value, RegAttr):
        return mapping.get(value, value)
    if isinstance(value, GuardAttr):
        return GuardAttr(mapping.get(value.pred, value.pred), value.is_negated)
    if isinstance(value, ArrayAttr):
        return ArrayAttr([_rename(v, mapping) for v in value.data])
    return value


def _regs_in(srcs: ArrayAttr) -> list[RegAttr]:
    return [s for s in srcs.data if isinstance(s, RegAttr)]


def _want(op: Operation, r: RegAttr, pred: bool, what: str) -> None:
    if r.is_pred != pred:
        kind = "a predicate" if pred else "a 32-bit register"
        raise VerifyException(f"{op.name}: {what} '{r.spelled}' must be {kind}")


@irdl_op_definition
class AluOp(MachineOp):
    """An ALU op on 32-bit lanes: `simt.alu "mad.lo" r1, r2, r3, r4 [guard p0]`.

    Opcodes (`ALU_ARITY`): mov not neg add sub mul.lo mad.lo and or xor shl
    shr.u shr.s min.s min.u max.s max.u selp; sources are registers or
    immediates, `selp d, a, b, p` picks `a` where `p`.
    """

    name = "simt.alu"
    opcode = prop_def(StringAttr)
    dst = prop_def(RegAttr)
    srcs = prop_def(ArrayAttr[RegAttr | IntAttr])
    custom_directives = (Reg, Guard, Sources)
    assembly_format = ("$opcode custom<Reg>($dst) `,` custom<Sources>($srcs) " + GUARD_FORMAT)

    def __init__(self, opcode: str, dst: RegAttr, srcs: Sequence[RegAttr | int],
                 guard: GuardAttr | None = None):
        super().__init__(properties={"opcode": StringAttr(opcode), "dst": dst,
                                     "srcs": ArrayAttr([_src(s) for s in srcs]),
                                     "guard": guard})

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def uses(self) -> list[RegAttr]:
        return _regs_in(self.srcs) + super().uses()

    def verify_(self) -> None:
        opc = self.opcode.data
        if opc not in ALU_ARITY:
            raise VerifyException(f"unknown ALU opcode '{opc}' (expected one of "
                                  f"{', '.join(ALU_ARITY)})")
        if len(self.srcs.data) != ALU_ARITY[opc]:
            raise VerifyException(f"'{opc}' takes {ALU_ARITY[opc]} sources, got "
                                  f"{len(self.srcs.data)}")
        _want(self, self.dst, False, "destination")
        for i, s in enumerate(self.srcs.data):
            if isinstance(s, RegAttr):
                _want(self, s, opc == "selp" and i == 2, "source")
            elif opc == "selp" and i == 2:
                raise VerifyException("selp's third source must be a predicate register")


@irdl_op_definition
class SetpOp(MachineOp):
    """A comparison into a predicate: `simt.setp "lt.s" p0, r1, r2`."""

    name = "simt.setp"
    cond = prop_def(StringAttr)
    dst = prop_def(RegAttr)
    srcs = prop_def(ArrayAttr[RegAttr | IntAttr])
    custom_directives = (Reg, Guard, Sources)
    assembly_format = ("$cond custom<Reg>($dst) `,` custom<Sources>($srcs) " + GUARD_FORMAT)

    def __init__(self, cond: str, dst: RegAttr, a: RegAttr | int, b: RegAttr | int,
                 guard: GuardAttr | None = None):
        super().__init__(properties={"cond": StringAttr(cond), "dst": dst,
                                     "srcs": ArrayAttr([_src(a), _src(b)]), "guard": guard})

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def uses(self) -> list[RegAttr]:
        return _regs_in(self.srcs) + super().uses()

    def verify_(self) -> None:
        if self.cond.data not in SETP_CONDS:
            raise VerifyException(f"unknown comparison '{self.cond.data}' (expected one of "
                                  f"{', '.join(SETP_CONDS)})")
        if len(self.srcs.data) != 2:
            raise VerifyException("simt.setp takes two sources")
        _want(self, self.dst, True, "destination")
        for s in _regs_in(self.srcs):
            _want(self, s, False, "source")


#: Predicate logic of `simt.pred` and its number of sources.
PRED_ARITY: dict[str, int] = {"mov": 1, "not": 1, "and": 2, "or": 2, "xor": 2}


@irdl_op_definition
class PredOp(MachineOp):
    """Logic on predicates: `simt.pred "and" p0, p1, !p2` (mov not and or xor;
    a source is a predicate, maybe negated, or 0/1)."""

    name = "simt.pred"
    opcode = prop_def(StringAttr)
    dst = prop_def(RegAttr)
    srcs = prop_def(ArrayAttr[RegAttr | GuardAttr | IntAttr])
    custom_directives = (Reg, Guard, Sources)
    assembly_format = ("$opcode custom<Reg>($dst) `,` custom<Sources>($srcs) " + GUARD_FORMAT)

    def __init__(self, opcode: str, dst: RegAttr, srcs: Sequence[GuardAttr | int],
                 guard: GuardAttr | None = None):
        # a plain predicate is kept as its register, a negated one as a guard
        items = [s.pred if isinstance(s, GuardAttr) and not s.is_negated else _src(s)
                 for s in srcs]
        super().__init__(properties={"opcode": StringAttr(opcode), "dst": dst,
                                     "srcs": ArrayAttr(items), "guard": guard})

    def sources(self) -> list[GuardAttr | int]:
        """Each source as a condition (`GuardAttr`) or a constant 0/1."""
        return [GuardAttr(s) if isinstance(s, RegAttr) else s if isinstance(s, GuardAttr)
                else s.data for s in self.srcs.data]

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def uses(self) -> list[RegAttr]:
        return [s.pred for s in self.sources() if isinstance(s, GuardAttr)] + super().uses()

    def verify_(self) -> None:
        opc = self.opcode.data
        if opc not in PRED_ARITY:
            raise VerifyException(f"unknown predicate opcode '{opc}' (expected one of "
                                  f"{', '.join(PRED_ARITY)})")
        if len(self.srcs.data) != PRED_ARITY[opc]:
            raise VerifyException(f"'{opc}' takes {PRED_ARITY[opc]} sources, got "
                                  f"{len(self.srcs.data)}")
        _want(self, self.dst, True, "destination")
        for s in self.sources():
            if isinstance(s, GuardAttr):
                _want(self, s.pred, True, "source")
            elif s not in (0, 1):
                raise VerifyException(f"a predicate constant is 0 or 1, not {s}")


#: Cross-lane ops of `simt.warp`: (number of sources, result is a predicate,
#: sources are predicates).
WARP_OPS: dict[str, tuple[int, bool, bool]] = {
    "shfl.up": (3, False, False), "shfl.down": (3, False, False),
    "shfl.bfly": (3, False, False), "shfl.idx": (3, False, False),
    "shfl.up.p": (2, True, False), "shfl.down.p": (2, True, False),
    "shfl.bfly.p": (2, True, False), "shfl.idx.p": (2, True, False),
    "ballot": (1, False, True), "activemask": (0, False, False),
    "any": (1, True, True), "all": (1, True, True), "uni": (1, True, True),
}


@irdl_op_definition
class WarpOp(MachineOp):
    """A cross-lane op over the lanes that execute it (active, guard true):
    `simt.warp "shfl.down" r1, r2, 1, 3` (value, lane delta or index, the
    PTX clamp/segment word; lane fields masked to the 4 lanes),
    `simt.warp "shfl.down.p" p1, 1, 3` (whether the source lane is in range),
    `simt.warp "ballot" r1, !p0`, `simt.warp "activemask" r1`,
    `simt.warp "any" p1, p0` (also all, uni)."""

    name = "simt.warp"
    opcode = prop_def(StringAttr)
    dst = prop_def(RegAttr)
    srcs = prop_def(ArrayAttr[RegAttr | GuardAttr | IntAttr])
    custom_directives = (Reg, Guard, TrailingSources)
    assembly_format = "$opcode custom<Reg>($dst) custom<TrailingSources>($srcs) " + GUARD_FORMAT

    def __init__(self, opcode: str, dst: RegAttr, srcs: Sequence[RegAttr | GuardAttr | int],
                 guard: GuardAttr | None = None):
        items = [s.pred if isinstance(s, GuardAttr) and not s.is_negated else _src(s)
                 if not isinstance(s, GuardAttr) else s for s in srcs]
        super().__init__(properties={"opcode": StringAttr(opcode), "dst": dst,
                                     "srcs": ArrayAttr(items), "guard": guard})

    def conditions(self) -> list[GuardAttr]:
        """The predicate sources (of a vote or ballot) as conditions."""
        if not WARP_OPS[self.opcode.data][2]:
            return []
        return [GuardAttr(s) if isinstance(s, RegAttr) else s for s in self.srcs.data
                if isinstance(s, RegAttr | GuardAttr)]

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def uses(self) -> list[RegAttr]:
        regs = [s.pred if isinstance(s, GuardAttr) else s for s in self.srcs.data
                if isinstance(s, RegAttr | GuardAttr)]
        return regs + super().uses()

    def verify_(self) -> None:
        opc = self.opcode.data
        if opc not in WARP_OPS:
            raise VerifyException(f"unknown warp op '{opc}' (expected one of "
                                  f"{', '.join(WARP_OPS)})")
        n, pred_dst, pred_srcs = WARP_OPS[opc]
        if len(self.srcs.data) != n:
            raise VerifyException(f"'{opc}' takes {n} sources, got {len(self.srcs.data)}")
        _want(self, self.dst, pred_dst, "destination")
        for s in self.srcs.data:
            if isinstance(s, GuardAttr):
                _want(self, s.pred, True, "source")
                if not pred_srcs:
                    raise VerifyException(f"'{opc}' takes no predicate source")
            elif isinstance(s, RegAttr):
                _want(self, s, pred_srcs, "source")
            elif pred_srcs:
                raise VerifyException(f"'{opc}' takes a predicate source")


@irdl_op_definition
class SpecialOp(MachineOp):
    """A machine-provided value per lane: `simt.special r1, "tid.x"`
    (tid, ntid, ctaid, nctaid; x, y, z)."""

    name = "simt.special"
    dst = prop_def(RegAttr)
    which = prop_def(StringAttr)
    custom_directives = (Reg, Guard)
    assembly_format = "custom<Reg>($dst) `,` $which " + GUARD_FORMAT

    def __init__(self, dst: RegAttr, which: str, guard: GuardAttr | None = None):
        super().__init__(properties={"dst": dst, "which": StringAttr(which), "guard": guard})

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def verify_(self) -> None:
        if self.which.data not in SPECIALS:
            raise VerifyException(f"unknown special register '{self.which.data}'")
        _want(self, self.dst, False, "destination")


@irdl_op_definition
class SharedAddrOp(MachineOp):
    """The byte address of a `.shared` variable in the CTA's window:
    `simt.shared_addr v3, "tile"`. `simt-layout-memory` replaces it by the
    variable's offset (folded into the accesses it addresses, or a `mov`)."""

    name = "simt.shared_addr"
    dst = prop_def(RegAttr)
    var = prop_def(StringAttr)
    custom_directives = (Reg, Guard)
    assembly_format = "custom<Reg>($dst) `,` $var " + GUARD_FORMAT

    def __init__(self, dst: RegAttr, var: str, guard: GuardAttr | None = None):
        super().__init__(properties={"dst": dst, "var": StringAttr(var), "guard": guard})

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def verify_(self) -> None:
        _want(self, self.dst, False, "destination")


class MemoryOp(MachineOp):
    """Shared parts of ld/st/atom: a space and an address. `global[r1 + 2]
    buffer 1` is a word address with the buffer it derives from; `param[3]` a
    word of the parameter area; `shared[r1 + 8]` a *byte* address in the
    CTA's shared window (PTX computes shared addresses in bytes; the machine
    checks alignment and bounds and maps it onto the CTA's words); `spill[2]`
    slot 2 of the executing lane's own spill area (register allocation's
    spill code: a constant slot, no base, no buffer, never out of bounds)."""

    space = prop_def(StringAttr)
    base = opt_prop_def(RegAttr)
    offset = prop_def(IntegerAttr[I64])
    buffer = opt_prop_def(IntegerAttr[I64])

    @property
    def buffer_index(self) -> int | None:
        return None if self.buffer is None else self.buffer.value.data

    def _address_uses(self) -> list[RegAttr]:
        return [self.base] if self.base is not None else []

    def _verify_address(self) -> None:
        space = self.space.data
        if space not in SPACES:
            raise VerifyException(f"unknown memory space '{space}'")
        if space == "param":
            if self.base is not None or self.buffer is not None:
                raise VerifyException("a param-area access has a constant address and no "
                                      "buffer")
        elif space == "spill":
            if self.base is not None or self.buffer is not None:
                raise VerifyException("a spill access names a constant slot of the lane's "
                                      "spill area: no base register, no buffer")
        elif space == "shared":
            if self.buffer is not None:
                raise VerifyException("a shared access names no buffer: its address is a "
                                      "byte address in the CTA's shared window")
            if self.base is not None:
                _want(self, self.base, False, "address base")
        else:
            if self.base is None or self.buffer is None:
                raise VerifyException("a global access needs a base register and the buffer "
                                      "it derives from (`buffer N`)")
            _want(self, self.base, False, "address base")


@irdl_op_definition
class LdOp(MemoryOp):
    """Load a word: `simt.ld r5, global[r1 + 0] buffer 1`, `simt.ld r0, param[3]`,
    `simt.ld r3, spill[2]` (a reload).

    A global access is checked against the bounds of buffer N (the pointer
    parameter N it derives from); out of bounds traps."""

    name = "simt.ld"
    dst = prop_def(RegAttr)
    custom_directives = (Reg, Guard, Address)
    assembly_format = ("custom<Reg>($dst) `,` custom<Address>($space, $base, $offset) "
                       "(`buffer` $buffer^)? " + GUARD_FORMAT)

    def __init__(self, dst: RegAttr, space: str, base: RegAttr | None, offset: int,
                 buffer: int | None = None, guard: GuardAttr | None = None):
        super().__init__(properties={
            "dst": dst, "space": StringAttr(space), "base": base, "offset": _i64(offset),
            "buffer": None if buffer is None else _i64(buffer), "guard": guard})

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def uses(self) -> list[RegAttr]:
        return self._address_uses() + super().uses()

    def verify_(self) -> None:
        self._verify_address()
        _want(self, self.dst, False, "destination")


@irdl_op_definition
class StOp(MemoryOp):
    """Store a word: `simt.st global[r1 + 0], r5 buffer 2`, `simt.st spill[2], r3`
    (a spill)."""

    name = "simt.st"
    value = prop_def(RegAttr | IntAttr)
    custom_directives = (Reg, Guard, Address, Source)
    assembly_format = ("custom<Address>($space, $base, $offset) `,` custom<Source>($value) "
                       "(`buffer` $buffer^)? " + GUARD_FORMAT)

    def __init__(self, space: str, base: RegAttr | None, offset: int, value: RegAttr | int,
                 buffer: int | None, guard: GuardAttr | None = None):
        super().__init__(properties={
            "space": StringAttr(space), "base": base, "offset": _i64(offset),
            "value": _src(value), "buffer": None if buffer is None else _i64(buffer),
            "guard": guard})

    def uses(self) -> list[RegAttr]:
        v = [self.value] if isinstance(self.value, RegAttr) else []
        return self._address_uses() + v + super().uses()

    def verify_(self) -> None:
        self._verify_address()
        if self.space.data == "param":
            raise VerifyException("the parameter area is read-only")
        if isinstance(self.value, RegAttr):
            _want(self, self.value, False, "value")


@irdl_op_definition
class AtomOp(MemoryOp):
    """Atomic read-modify-write: `simt.atom "add" r9, global[r1 + 0], r8 buffer 2`
    (`ATOM_OPS`; `simt.atom "cas" r9, global[r1 + 0], r8, r7`: compare with r8,
    swap in r7).

    `dst` receives the old value. When several lanes hit the same word, they
    apply in lane order."""

    name = "simt.atom"
    op = prop_def(StringAttr)
    dst = prop_def(RegAttr)
    value = prop_def(RegAttr | IntAttr)
    swap = opt_prop_def(RegAttr | IntAttr)
    custom_directives = (Reg, Guard, Address, Source, OptSource)
    assembly_format = ("$op custom<Reg>($dst) `,` custom<Address>($space, $base, $offset) `,` "
                       "custom<Source>($value) (`,` custom<OptSource>($swap)^)? "
                       "(`buffer` $buffer^)? " + GUARD_FORMAT)

    def __init__(self, op: str, dst: RegAttr, space: str, base: RegAttr | None, offset: int,
                 value: RegAttr | int, buffer: int | None, guard: GuardAttr | None = None,
                 swap: RegAttr | int | None = None):
        super().__init__(properties={
            "op": StringAttr(op), "dst": dst, "space": StringAttr(space), "base": base,
            "offset": _i64(offset), "value": _src(value),
            "buffer": None if buffer is None else _i64(buffer),
            "guard": guard, "swap": None if swap is None else _src(swap)})

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def uses(self) -> list[RegAttr]:
        v = [s for s in (self.value, self.swap) if isinstance(s, RegAttr)]
        return self._address_uses() + v + super().uses()

    def verify_(self) -> None:
        self._verify_address()
        if self.op.data not in ATOM_OPS:
            raise VerifyException(f"unknown atomic operation '{self.op.data}'")
        if (self.swap is not None) != (self.op.data == "cas"):
            raise VerifyException("simt.atom takes a swap value exactly when it is a cas")
        if self.space.data == "param":
            raise VerifyException("the parameter area is read-only")
        if self.space.data == "spill":
            raise VerifyException("a lane's spill slots take only simt.ld and simt.st")
        _want(self, self.dst, False, "destination")
        if isinstance(self.value, RegAttr):
            _want(self, self.value, False, "value")


# ----------------------------------------------------------------- terminators

@irdl_op_definition
class NextOp(IRDLOperation):
    """End of a machine block: the warp continues at `^bbN` (a uniform jump)."""

    name = "simt.next"
    dest = successor_def()
    traits = traits_def(IsTerminator())
    assembly_format = "$dest attr-dict"

    def __init__(self, dest: Block):
        super().__init__(successors=[dest])


@irdl_op_definition
class ExitOp(IRDLOperation):
    """End of a machine block: the warp has finished the kernel."""

    name = "simt.exit"
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class BranchOp(IRDLOperation):
    """A per-lane conditional branch: `simt.branch !p0, ^bb2, ^bb1`.

    Lanes where the condition holds continue at the first block, the others at
    the second. Diverged lanes reconverge by min-PC scheduling: a step runs
    the lowest-numbered block any live lane waits at (docs/machine.md,
    "Divergence"), so no reconvergence block needs naming.
    """

    name = "simt.branch"
    cond = prop_def(GuardAttr)
    then_dest = successor_def()
    else_dest = successor_def()
    traits = traits_def(IsTerminator())
    custom_directives = (Guard,)
    assembly_format = "custom<Guard>($cond) `,` $then_dest `,` $else_dest attr-dict"

    def __init__(self, cond: GuardAttr, then_dest: Block, else_dest: Block):
        super().__init__(properties={"cond": cond}, successors=[then_dest, else_dest])

    def uses(self) -> list[RegAttr]:
        return [self.cond.pred]


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """`bar.sync`: `simt.barrier ^bb3` — the lanes wait until every live thread
    of the CTA has arrived, then continue at `^bb3` (the host releases it)."""

    name = "simt.barrier"
    dest = successor_def()
    traits = traits_def(IsTerminator())
    assembly_format = "$dest attr-dict"

    def __init__(self, dest: Block):
        super().__init__(successors=[dest])


TERMINATORS = (NextOp, ExitOp, BranchOp, BarrierOp)


# ---------------------------------------------------------------------- kernel

def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def limit_error(op: Operation, message: str) -> VerifyException:
    return VerifyException(f"{location_prefix(op)}error: {message}")


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A kernel for the machine; its region's blocks are the machine blocks,
    in order (block 0 is the entry).

        simt.kernel @k(ptr a, u32 n) lanes 4 mem_words 128 [shared_words 4]
            [dynamic_shared 4] [shared_vars (tile: 16 align 4, s: extern align 4)]
            [spill_words 2] [max_blocks 32 max_ops 8] [regs 15 [spilled 3] preds 8] { ... }

    `shared_vars` declares the `.shared` variables until `simt-layout-memory`
    places them (`shared_words` static words, extern arrays from word
    `dynamic_shared`).

    `spill_words` is the number of spill slots each thread has (`spill[0]` ..),
    `spilled` the number of virtual registers that live in them; both are set
    by `simt-allocate-registers` when a kernel needs more than `regs`.
    """

    name = "simt.kernel"
    sym_name = prop_def(SymbolNameConstraint())
    param_names = prop_def(ArrayAttr[StringAttr])
    param_types = prop_def(ArrayAttr[StringAttr])
    lanes = prop_def(IntegerAttr[I64])
    mem_words = prop_def(IntegerAttr[I64])
    max_blocks = opt_prop_def(IntegerAttr[I64])
    max_ops = opt_prop_def(IntegerAttr[I64])
    regs = opt_prop_def(IntegerAttr[I64])
    preds = opt_prop_def(IntegerAttr[I64])
    shared_words = opt_prop_def(IntegerAttr[I64])
    dynamic_shared = opt_prop_def(IntegerAttr[I64])
    shared_vars = opt_prop_def(ArrayAttr)
    spill_words = opt_prop_def(IntegerAttr[I64])
    spilled = opt_prop_def(IntegerAttr[I64])
    body = region_def()
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())
    custom_directives = (Signature, SharedVars)
    assembly_format = (
        "$sym_name custom<Signature>($param_names, $param_types) `lanes` $lanes "
        "`mem_words` $mem_words (`shared_words` $shared_words^)? "
        "(`dynamic_shared` $dynamic_shared^)? "
        "(`shared_vars` custom<SharedVars>($shared_vars)^)? "
        "(`spill_words` $spill_words^)? "
        "(`max_blocks` $max_blocks^)? (`max_ops` $max_ops^)? "
        "(`regs` $regs^)? (`spilled` $spilled^)? (`preds` $preds^)? "
        "attr-dict-with-keyword $body")

    LIMIT_PROPS: ClassVar[tuple[str, ...]] = ("max_blocks", "max_ops", "regs", "preds")

    def __init__(self, name: str, params: Sequence[tuple[str, str]], blocks: list[Block],
                 mem_words: int = DEFAULT_MEM_WORDS, lanes: int = LANES):
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "param_names": ArrayAttr([StringAttr(n) for n, _ in params]),
                "param_types": ArrayAttr([StringAttr(t) for _, t in params]),
                "lanes": _i64(lanes), "mem_words": _i64(mem_words)},
            regions=[Region(blocks)])

    # ------------------------------------------------------------ accessors
    @property
    def kernel_name(self) -> str:
        return self.sym_name.data

    @property
    def params(self) -> list[tuple[str, str]]:
        return [(n.data, t.data) for n, t in zip(self.param_names.data,
                                                  self.param_types.data, strict=True)]

    def pointer_params(self) -> list[int]:
        return [i for i, (_, t) in enumerate(self.params) if t in POINTER_TYPES]

    def wide_params(self) -> list[int]:
        """The 64-bit scalar parameters (their high words follow the bounds pairs)."""
        return [i for i, (_, t) in enumerate(self.params) if t in WIDE_SCALARS]

    def bounds_word(self, param: int) -> int:
        """Word address of the bounds pair (base, size) of pointer parameter `param`."""
        return len(self.params) + 2 * self.pointer_params().index(param)

    def high_word(self, param: int) -> int:
        """Word address of the high word of 64-bit scalar parameter `param`."""
        return len(self.params) + 2 * len(self.pointer_params()) + \
            self.wide_params().index(param)

    @property
    def param_area_words(self) -> int:
        return len(self.params) + 2 * len(self.pointer_params()) + len(self.wide_params())

    def limit(self, name: str) -> int | None:
        attr = getattr(self, name)
        return None if attr is None else attr.value.data

    def set_limit(self, name: str, value: int) -> None:
        self.properties[name] = _i64(value)

    @property
    def shared_size(self) -> int:
        """Words of static `.shared` memory each CTA has."""
        return 0 if self.shared_words is None else self.shared_words.value.data

    def shared_window(self, dynamic_bytes: int) -> int:
        """Words of `.shared` memory per CTA for a launch with `dynamic_bytes`
        of dynamic shared memory (the extern arrays start at word
        `dynamic_shared`, after the static ones)."""
        if self.dynamic_shared is None:
            return self.shared_size
        return max(self.shared_size, self.dynamic_shared.value.data + (dynamic_bytes + 3) // 4)

    @property
    def spill_size(self) -> int:
        """Spill slots (words) each thread has."""
        return 0 if self.spill_words is None else self.spill_words.value.data

    def machine_blocks(self) -> list[Block]:
        return list(self.body.blocks)

    def memory_sites(self) -> list[MemoryOp]:
        """The global and shared accesses, in program order: the ops whose
        address the machine checks (a spill slot is in bounds by construction);
        the tensor level's `TRAP(s, l)` names site s."""
        return [op for block in self.body.blocks for op in block.ops
                if isinstance(op, MemoryOp) and op.space.data in ("global", "shared")]

    # ------------------------------------------------------------ verifier
    def verify_(self) -> None:
        name = self.kernel_name
        if len(self.param_names.data) != len(self.param_types.data):
            raise VerifyException("param_names and param_types differ in length")
        for _, t in self.params:
            if t not in PARAM_TYPES:
                raise VerifyException(f"unknown parameter type '{t}'")
        if self.lanes.value.data != LANES:
            raise limit_error(self, f"kernel '{name}' asks for {self.lanes.value.data} lanes; "
                              f"the machine has {LANES}")
        blocks = self.machine_blocks()
        if not blocks:
            raise VerifyException(f"kernel '{name}' has no blocks")
        mem = self.mem_words.value.data
        if self.param_area_words > mem:
            raise limit_error(self, f"kernel '{name}' needs {self.param_area_words} memory words "
                              f"for its parameter area, the machine has {mem} "
                              "(option mem-words)")
        max_blocks = self.limit("max_blocks")
        if max_blocks is not None and len(blocks) > max_blocks:
            raise limit_error(self, f"kernel '{name}' needs {len(blocks)} blocks, the machine has "
                              f"{max_blocks} (option max-blocks)")
        max_ops = self.limit("max_ops")
        pointers = set(self.pointer_params())
        declared = set() if self.shared_vars is None else \
            {var for var, _, _ in shared_vars_of(self.shared_vars)}
        for index, block in enumerate(blocks):
            ops = list(block.ops)
            if not ops or not isinstance(ops[-1], TERMINATORS):
                raise VerifyException(f"block ^bb{index} of kernel '{name}' does not end "
                                      "with simt.next, simt.branch or simt.exit")
            body = ops[:-1]
            if max_ops is not None and len(body) > max_ops:
                raise limit_error(self, f"block ^bb{index} of kernel '{name}' needs "
                                  f"{len(body)} ops, the machine runs at most {max_ops} per block "
                                  "(option max-ops)")
            for op in body:
                if not isinstance(op, MachineOp):
                    raise VerifyException(f"'{op.name}' cannot appear inside a machine block")
                if isinstance(op, SharedAddrOp) and op.var.data not in declared:
                    raise VerifyException(f"simt.shared_addr: '{op.var.data}' is not a .shared "
                                          f"variable of kernel '{name}' (shared_vars)")
                if isinstance(op, MemoryOp):
                    buf = op.buffer_index
                    if buf is not None and buf not in pointers:
                        raise VerifyException(f"{op.name}: buffer {buf} is not a pointer "
                                              f"parameter of kernel '{name}'")
                    if op.space.data == "param" and not \
                            0 <= op.offset.value.data < self.param_area_words:
                        raise VerifyException(f"{op.name}: param[{op.offset.value.data}] is "
                                              f"outside the parameter area "
                                              f"({self.param_area_words} words)")
                    if op.space.data == "spill" and not \
                            0 <= op.offset.value.data < self.spill_size:
                        raise VerifyException(f"{op.name}: spill[{op.offset.value.data}] is "
                                              f"outside the kernel's {self.spill_size} spill "
                                              "slots (spill_words)")
        self._verify_registers(blocks)

    def _verify_registers(self, blocks: list[Block]) -> None:
        name = self.kernel_name
        for prop, kinds, what, option in (("regs", ("r", "v"), "register", "regs"),
                                          ("preds", ("p", "vp"), "predicate register",
                                           "preds")):
            limit = self.limit(prop)
            if limit is None:
                continue
            top = -1
            for r in all_registers(blocks):
                if r.kind.data == kinds[1]:
                    raise VerifyException(f"kernel '{name}' is allocated ({prop} {limit}) but "
                                          f"uses virtual register {r.spelled}")
                if r.kind.data == kinds[0]:
                    top = max(top, r.index.data)
            if top + 1 > limit:
                raise limit_error(self, f"kernel '{name}' needs {plural(top + 1, what)} per "
                                  f"lane, the machine has {limit} (option {option})")


def all_registers(blocks: Sequence[Block]) -> set[RegAttr]:
    regs: set[RegAttr] = set()
    for block in blocks:
        for op in block.ops:
            if isinstance(op, MachineOp):
                regs.update(op.defs())
                regs.update(op.uses())
            elif isinstance(op, BranchOp):
                regs.update(op.uses())
    return regs


# ------------------------------------------------------------------- CFG helpers

def successors(block: Block) -> list[Block]:
    """The machine blocks a block may continue at (its terminator's successors)."""
    term = block.last_op
    return list(term.successors) if term is not None else []


def predecessors(kernel: KernelOp) -> dict[Block, list[Block]]:
    """Each block's predecessors, one entry per edge, in layout order."""
    preds: dict[Block, list[Block]] = {b: [] for b in kernel.body.blocks}
    for block in kernel.body.blocks:
        for succ in successors(block):
            preds[succ].append(block)
    return preds


def remove_unreachable(kernel: KernelOp) -> None:
    """Erase the blocks that the entry block does not reach."""
    entry = kernel.body.blocks.first
    if entry is None:
        return
    seen, work = {entry}, [entry]
    while work:
        for succ in successors(work.pop()):
            if succ not in seen:
                seen.add(succ)
                work.append(succ)
    dead = [b for b in kernel.body.blocks if b not in seen]
    for block in dead:  # first drop their edges: dead blocks may jump to each other
        term = block.last_op
        if term is not None and term.successors:
            term.detach()
            term.erase()
    for block in dead:
        for op in list(block.ops):
            op.detach()
            op.erase()
        kernel.body.detach_block(block)
        block.erase()


def kernels_of(root: Operation) -> list[KernelOp]:
    return [op for op in root.walk() if isinstance(op, KernelOp)]


SIMT = Dialect(
    "simt",
    [KernelOp, AluOp, SetpOp, PredOp, WarpOp, SpecialOp, SharedAddrOp, LdOp, StOp, AtomOp,
     NextOp, ExitOp, BranchOp, BarrierOp],
    [RegAttr, GuardAttr],
)
