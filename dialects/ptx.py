"""The `ptx` dialect: a faithful, executable form of an NVIDIA PTX module.

PTX registers are mutable named locations, not SSA values, so this dialect keeps
them as PTX spells them: instructions carry their opcode (`ld.global.u32`) and
their operands in PTX syntax (`%r1`, `[%rd2+8]`, `{%r1, %r2}`, `0f3F800000`,
`$L__BB0_2`). `decode_operand` and `decode_opcode` give the structured view that
verifiers, the reference engine and the lowering passes work on. Source locations
of the PTX file are the ops' locations.

    ptx.module "9.0" "sm_75" 64 {
      ptx.entry "visible" @dot {
        ptx.param "dot_param_0" "u64"
        ptx.reg "%r" "b32"<7>
        ptx.inst "ld.param.u64" ["%rd1", "[dot_param_0]"]
        ptx.label "$L__BB0_2"
        ptx.inst guard "%p1" "bra" ["$L__BB0_2"]
      }
    }
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    i64,
)
from xdsl.ir import Dialect, Operation, Region
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import IsolatedFromAbove, NoTerminator, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from qgc.diagnostics import location_prefix

# --------------------------------------------------------------------------- types

#: Bit width of every PTX fundamental type (`pred` counts as 1).
TYPE_BITS: dict[str, int] = {
    **{f"{k}{w}": w for k in "bsu" for w in (8, 16, 32, 64)},
    "f16": 16, "f16x2": 32, "bf16": 16, "bf16x2": 32, "f32": 32, "f64": 64, "pred": 1,
}

STATE_SPACES = ("reg", "param", "global", "shared", "const", "local", "generic")

#: Special registers the machine provides, with their width.
SPECIAL_REGISTERS: dict[str, int] = {
    **{f"%{r}.{d}": 32 for r in ("tid", "ntid", "ctaid", "nctaid") for d in "xyz"},
    "%laneid": 32, "%warpid": 32, "%nwarpid": 32, "%smid": 32, "%nsmid": 32,
    "%gridid": 64, "%clock": 32, "%clock64": 64, "%globaltimer": 64,
    **{f"%lanemask_{c}": 32 for c in ("eq", "le", "lt", "ge", "gt")},
    "%dynamic_smem_size": 32, "%total_smem_size": 32,
}


def type_bits(ptx_type: str) -> int:
    return TYPE_BITS[ptx_type]


#: The base names (the opcode before its first `.`) of every PTX instruction in
#: the PTX ISA 9.0 (section 9.7), the ones no engine runs included: an opcode
#: outside it is not PTX at all, which the verifier says up front.
PTX_INSTRUCTIONS: frozenset[str] = frozenset("""
    add sub mul mad mul24 mad24 sad div rem abs neg min max popc clz bfind fns brev
    bfe bfi szext bmsk dp4a dp2a addc subc madc
    testp copysign fma rcp sqrt rsqrt sin cos lg2 ex2 tanh
    set setp selp slct and or xor not cnot lop3 shf shl shr
    mov shfl prmt ld ldu st multimem prefetch prefetchu applypriority discard
    createpolicy isspacep cvta cvt mapa getctarank cp tensormap
    tex tld4 txq istypep suld sust sured suq
    bra brx call ret exit
    bar barrier membar fence atom red vote match activemask redux griddepcontrol
    elect mbarrier nanosleep setmaxnreg clusterlaunchcontrol
    wmma mma ldmatrix stmatrix movmatrix wgmma tcgen05
    stacksave stackrestore alloca
    vadd vsub vabsdiff vmin vmax vshl vshr vmad vset
    vadd2 vsub2 vavrg2 vabsdiff2 vmin2 vmax2 vset2
    vadd4 vsub4 vavrg4 vabsdiff4 vmin4 vmax4 vset4
    trap brkpt pmevent
""".split())


# ------------------------------------------------------------------ operand decoding

@dataclass(frozen=True)
class Reg:
    """A register or special register, `%r1`, `%tid.x`; `negated` for `!%p1`."""
    name: str
    negated: bool = False


@dataclass(frozen=True)
class Imm:
    """An immediate; `value` is an int, or for floats the IEEE bit pattern."""
    value: int
    is_float: bool = False
    bits: int = 32  # width of the float encoding (32 for 0f, 64 for 0d)


@dataclass(frozen=True)
class Sym:
    """A symbol: a variable, parameter, label, or the constant `WARP_SZ`."""
    name: str


@dataclass(frozen=True)
class Addr:
    """An address expression `[base+offset]`; base is a Reg, a Sym or None."""
    base: Reg | Sym | None
    offset: int


@dataclass(frozen=True)
class Vec:
    """A vector operand `{a, b, ...}`; `_` elements are Sym('_')."""
    items: tuple[Reg | Imm | Sym, ...]


@dataclass(frozen=True)
class Pair:
    """A dual destination `%r1|%p1` (shfl, setp)."""
    first: Reg
    second: Reg


Operand = Reg | Imm | Sym | Addr | Vec | Pair

_INT_RE = re.compile(r"^[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*|0[bB][01]+)U?$")


def parse_int(text: str) -> int:
    text = text.rstrip("U")
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    if text[:2] in ("0x", "0X"):
        return sign * int(text[2:], 16)
    if text[:2] in ("0b", "0B"):
        return sign * int(text[2:], 2)
    if len(text) > 1 and text.startswith("0"):
        return sign * int(text, 8)
    return sign * int(text)


def _decode_scalar(text: str) -> Reg | Imm | Sym:
    if text.startswith("!"):
        return Reg(text[1:], negated=True)
    if text.startswith("%"):
        return Reg(text)
    if text[:2] in ("0f", "0F") and len(text) == 10:
        return Imm(int(text[2:], 16), is_float=True, bits=32)
    if text[:2] in ("0d", "0D") and len(text) == 18:
        return Imm(int(text[2:], 16), is_float=True, bits=64)
    if _INT_RE.match(text):
        return Imm(parse_int(text))
    if re.match(r"^[+-]?[0-9]*\.[0-9]*([eE][+-]?[0-9]+)?$", text):
        import struct
        return Imm(struct.unpack("<Q", struct.pack("<d", float(text)))[0], True, 64)
    return Sym(text)


@cache
def decode_operand(text: str) -> Operand:
    """Structured view of an operand as the frontend spells it."""
    if text.startswith("["):
        body = text[1:-1]
        m = re.match(r"^([^+-]+)?(?:([+-])(.+))?$", body)
        assert m, text
        base_text, sign, off = m.groups()
        base = _decode_scalar(base_text) if base_text else None
        offset = 0 if off is None else parse_int(off) * (-1 if sign == "-" else 1)
        if isinstance(base, Imm):  # absolute address [64]
            base, offset = None, base.value + offset
        assert base is None or isinstance(base, Reg | Sym), text
        return Addr(base, offset)
    if text.startswith("{"):
        return Vec(tuple(_decode_scalar(t.strip()) for t in text[1:-1].split(",")))
    if "|" in text:
        a, b = text.split("|")
        return Pair(Reg(a), Reg(b))
    return _decode_scalar(text)


@dataclass(frozen=True)
class Opcode:
    """`setp.lt.s32` → base `setp`, modifiers `(lt,)`, types `(s32,)`."""
    base: str
    modifiers: tuple[str, ...]
    types: tuple[str, ...]

    @property
    def type(self) -> str | None:
        return self.types[-1] if self.types else None

    def has(self, *mods: str) -> bool:
        return any(m in self.modifiers for m in mods)


@cache
def decode_opcode(text: str) -> Opcode:
    base, *parts = text.split(".")
    types = tuple(p for p in parts if p in TYPE_BITS)
    mods = tuple(p for p in parts if p not in TYPE_BITS)
    return Opcode(base, mods, types)


# ------------------------------------------------------------------------------ ops

def _str(value: str) -> StringAttr:
    return StringAttr(value)


def _i64(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


@irdl_op_definition
class ModuleOp(IRDLOperation):
    """A PTX module: `ptx.module "VERSION" "TARGET" ADDRESS_SIZE { ... }`.

    Holds `.file` directives, module-scope variables and the entries/functions.
    """

    name = "ptx.module"
    version = prop_def(StringAttr)
    target = prop_def(StringAttr)
    address_size = prop_def(IntegerAttr[I64])
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), IsolatedFromAbove(), SymbolTable())
    assembly_format = "$version $target $address_size attr-dict-with-keyword $body"

    def __init__(self, version: str, target: str, address_size: int, ops: list[Operation]):
        super().__init__(
            properties={"version": _str(version), "target": _str(target),
                        "address_size": _i64(address_size)},
            regions=[Region(_block(ops))],
        )

    def kernels(self) -> list[EntryOp]:
        return [op for op in self.body.ops if isinstance(op, EntryOp)]


def _block(ops: list[Operation]):
    from xdsl.ir import Block
    return Block(ops)


class _FunctionBase(IRDLOperation):
    sym_name = prop_def(SymbolNameConstraint())
    linkage = prop_def(StringAttr)
    directives = prop_def(ArrayAttr[StringAttr], default_value=ArrayAttr([]))
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), SymbolOpInterface())
    assembly_format = "$linkage $sym_name (`directives` $directives^)? attr-dict-with-keyword $body"

    def __init__(self, name: str, linkage: str, directives: list[str], ops: list[Operation]):
        super().__init__(
            properties={"sym_name": _str(name), "linkage": _str(linkage),
                        "directives": ArrayAttr([_str(d) for d in directives])},
            regions=[Region(_block(ops))],
        )

    @property
    def kernel_name(self) -> str:
        return self.sym_name.data

    def params(self) -> list[ParamOp]:
        return [op for op in self.body.ops if isinstance(op, ParamOp)]

    def verify_(self) -> None:
        _verify_function(self)


@irdl_op_definition
class EntryOp(_FunctionBase):
    """A kernel, `.entry`: `ptx.entry "visible" @name { params, decls, body }`."""

    name = "ptx.entry"


@irdl_op_definition
class FuncOp(_FunctionBase):
    """A device function, `.func`; return parameters are `ptx.param ... ret`."""

    name = "ptx.func"


@irdl_op_definition
class ParamOp(IRDLOperation):
    """A kernel parameter: `ptx.param "NAME" "TYPE" [align N] [count N] [ret]`.

    `count` is the element count of an array parameter (`.param .b8 p[16]`).
    """

    name = "ptx.param"
    param_name = prop_def(StringAttr)
    type = prop_def(StringAttr)
    align = opt_prop_def(IntegerAttr[I64])
    count = opt_prop_def(IntegerAttr[I64])
    ret = opt_prop_def(IntegerAttr[I64])
    assembly_format = (
        "$param_name $type (`align` $align^)? (`count` $count^)? (`ret` $ret^)? attr-dict"
    )

    def __init__(self, name: str, type: str, align: int | None = None,
                 count: int | None = None, ret: bool = False):
        props: dict = {"param_name": _str(name), "type": _str(type)}
        if align is not None:
            props["align"] = _i64(align)
        if count is not None:
            props["count"] = _i64(count)
        if ret:
            props["ret"] = _i64(1)
        super().__init__(properties=props)

    @property
    def size_bytes(self) -> int:
        return type_bits(self.type.data) // 8 * (self.count.value.data if self.count else 1)


@irdl_op_definition
class RegOp(IRDLOperation):
    """A register declaration: `.reg .b32 %r<7>` is `ptx.reg "%r" "b32"<7>`
    (registers %r0 … %r6); without a count it declares the one name."""

    name = "ptx.reg"
    reg_name = prop_def(StringAttr)
    type = prop_def(StringAttr)
    count = opt_prop_def(IntegerAttr[I64])
    assembly_format = "$reg_name $type (`<` $count^ `>`)? attr-dict"

    def __init__(self, name: str, type: str, count: int | None = None):
        props: dict = {"reg_name": _str(name), "type": _str(type)}
        if count is not None:
            props["count"] = _i64(count)
        super().__init__(properties=props)

    def names(self) -> Iterator[str]:
        if self.count is None:
            yield self.reg_name.data
        else:
            yield from (f"{self.reg_name.data}{i}" for i in range(self.count.value.data))


@irdl_op_definition
class VarOp(IRDLOperation):
    """A variable in a state space: `ptx.var "shared" "b8" @s [32] align 4`.

    A dimension of 0 is an unsized array (`.extern .shared .b8 s[]`); `init`
    holds the initializer's literals; `linkage` is `extern`, `weak`, `visible`
    or empty.
    """

    name = "ptx.var"
    space = prop_def(StringAttr)
    type = prop_def(StringAttr)
    sym_name = prop_def(SymbolNameConstraint())
    dims = prop_def(DenseArrayBase.constr(I64))
    align = opt_prop_def(IntegerAttr[I64])
    linkage = opt_prop_def(StringAttr)
    init = opt_prop_def(ArrayAttr[StringAttr])
    traits = traits_def(SymbolOpInterface())
    assembly_format = (
        "(`linkage` $linkage^)? $space $type $sym_name $dims (`align` $align^)? "
        "(`init` $init^)? attr-dict"
    )

    def __init__(self, space: str, type: str, name: str, dims: list[int], align: int | None,
                 linkage: str = "", init: list[str] | None = None):
        props: dict = {"space": _str(space), "type": _str(type), "sym_name": _str(name),
                       "dims": DenseArrayBase.from_list(i64, dims)}
        if linkage:
            props["linkage"] = _str(linkage)
        if align is not None:
            props["align"] = _i64(align)
        if init is not None:
            props["init"] = ArrayAttr([_str(v) for v in init])
        super().__init__(properties=props)

    @property
    def elements(self) -> int:
        n = 1
        for d in self.dims.get_values():
            n *= d
        return n

    @property
    def size_bytes(self) -> int:
        return self.elements * max(1, type_bits(self.type.data) // 8)

    @property
    def alignment(self) -> int:
        return self.align.value.data if self.align else max(1, type_bits(self.type.data) // 8)


@irdl_op_definition
class LabelOp(IRDLOperation):
    """A branch target: `ptx.label "$L__BB0_2"`."""

    name = "ptx.label"
    label = prop_def(StringAttr)
    assembly_format = "$label attr-dict"

    def __init__(self, label: str):
        super().__init__(properties={"label": _str(label)})


@irdl_op_definition
class InstOp(IRDLOperation):
    """One PTX instruction: `ptx.inst [guard "%p1"] "OPCODE" ["OPERAND", ...]`.

    The guard is `%p` or `!%p` (PTX's `@%p` / `@!%p`). Operands are in PTX
    syntax; `decode_operand` reads them.
    """

    name = "ptx.inst"
    guard = opt_prop_def(StringAttr)
    opcode = prop_def(StringAttr)
    args = prop_def(ArrayAttr[StringAttr])
    assembly_format = "(`guard` $guard^)? $opcode $args attr-dict"

    def __init__(self, opcode: str, args: list[str], guard: str | None = None):
        props: dict = {"opcode": _str(opcode), "args": ArrayAttr([_str(a) for a in args])}
        if guard is not None:
            props["guard"] = _str(guard)
        super().__init__(properties=props)

    @property
    def op(self) -> Opcode:
        return decode_opcode(self.opcode.data)

    @property
    def operands_decoded(self) -> list[Operand]:
        return [decode_operand(a.data) for a in self.args.data]

    @property
    def guard_reg(self) -> Reg | None:
        return None if self.guard is None else _decode_scalar(self.guard.data)


@irdl_op_definition
class PragmaOp(IRDLOperation):
    """`.pragma "nounroll";` → `ptx.pragma "nounroll"`."""

    name = "ptx.pragma"
    text = prop_def(StringAttr)
    assembly_format = "$text attr-dict"

    def __init__(self, text: str):
        super().__init__(properties={"text": _str(text)})


@irdl_op_definition
class LocOp(IRDLOperation):
    """A `.loc FILE LINE COL` debug directive: the CUDA source position of the
    instructions that follow it."""

    name = "ptx.loc"
    file = prop_def(IntegerAttr[I64])
    line = prop_def(IntegerAttr[I64])
    column = prop_def(IntegerAttr[I64])
    assembly_format = "$file $line $column attr-dict"

    def __init__(self, file: int, line: int, column: int):
        super().__init__(properties={"file": _i64(file), "line": _i64(line),
                                     "column": _i64(column)})


@irdl_op_definition
class FileOp(IRDLOperation):
    """A `.file INDEX "PATH"` debug directive."""

    name = "ptx.file"
    index = prop_def(IntegerAttr[I64])
    path = prop_def(StringAttr)
    assembly_format = "$index $path attr-dict"

    def __init__(self, index: int, path: str):
        super().__init__(properties={"index": _i64(index), "path": _str(path)})


# ------------------------------------------------------------------------ verifier

def op_error(op: Operation, message: str) -> VerifyException:
    return VerifyException(f"{location_prefix(op)}error: {message}")


def _module_symbols(fn: Operation) -> dict[str, VarOp]:
    parent = fn.parent_op()
    if not isinstance(parent, ModuleOp):
        return {}
    return {op.sym_name.data: op for op in parent.body.ops if isinstance(op, VarOp)}


def _function_symbols(fn: _FunctionBase) -> tuple[dict[str, str], set[str], set[str]]:
    regs: dict[str, str] = {}
    labels: set[str] = set()
    symbols: set[str] = set(_module_symbols(fn)) | {"WARP_SZ"}
    for op in fn.body.ops:
        if isinstance(op, RegOp):
            for name in op.names():
                regs[name] = op.type.data
        elif isinstance(op, LabelOp):
            labels.add(op.label.data)
        elif isinstance(op, ParamOp):
            symbols.add(op.param_name.data)
        elif isinstance(op, VarOp):
            symbols.add(op.sym_name.data)
    parent = fn.parent_op()
    if isinstance(parent, ModuleOp):
        symbols |= {f.sym_name.data for f in parent.body.ops if isinstance(f, _FunctionBase)}
    return regs, labels, symbols


def _verify_function(fn: _FunctionBase) -> None:
    regs, labels, symbols = _function_symbols(fn)
    for op in fn.body.ops:
        if isinstance(op, InstOp):
            _verify_inst(op, regs, labels, symbols)


def _reg_type(op: InstOp, reg: Reg, regs: dict[str, str]) -> str:
    if reg.name in regs:
        return regs[reg.name]
    if reg.name in SPECIAL_REGISTERS:
        return f"u{SPECIAL_REGISTERS[reg.name]}"
    if reg.name.split(".")[0] in ("%envreg0",):
        return "b32"
    raise op_error(op, f"use of undeclared register '{reg.name}'")


def _leaf_operands(operand: Operand) -> Iterator[Reg | Imm | Sym]:
    if isinstance(operand, Addr):
        if operand.base is not None:
            yield operand.base
    elif isinstance(operand, Vec):
        yield from operand.items
    elif isinstance(operand, Pair):
        yield from (operand.first, operand.second)
    else:
        yield operand


def _verify_inst(op: InstOp, regs: dict[str, str], labels: set[str], symbols: set[str]) -> None:
    opcode = op.op
    if opcode.base not in PTX_INSTRUCTIONS:
        raise op_error(op, f"unknown PTX instruction '{opcode.base}'")
    guard = op.guard_reg
    if guard is not None and _reg_type(op, guard, regs) != "pred":
        raise op_error(op, f"guard '{guard.name}' is not a predicate register")
    for index, operand in enumerate(op.operands_decoded):
        for leaf in _leaf_operands(operand):
            if isinstance(leaf, Reg):
                _reg_type(op, leaf, regs)
            elif isinstance(leaf, Sym) and leaf.name != "_":
                known = labels if opcode.base in ("bra", "brx") else symbols | labels
                if leaf.name not in known:
                    what = "label" if opcode.base == "bra" else "symbol"
                    raise op_error(op, f"use of undefined {what} '{leaf.name}'")
        _verify_width(op, opcode, index, operand, regs)


def _expected_bits(opcode: Opcode, index: int, operand_count: int) -> int | None:
    """Width an operand register must have, where PTX's rules fix it exactly."""
    t = opcode.type
    if t is None:
        return None
    bits = TYPE_BITS[t]
    base = opcode.base
    if base in ("add", "sub", "min", "max", "and", "or", "xor", "not", "neg", "abs",
                "popc", "clz", "brev", "rem", "div"):
        if base in ("popc", "clz") and index == 0:
            return 32
        return bits
    if base in ("mul", "mad") and not opcode.has("wide"):
        return bits
    if base in ("mul", "mad") and opcode.has("wide"):
        return 2 * bits if index == 0 or (base == "mad" and index == 3) else bits
    if base in ("shl", "shr"):
        return 32 if index == 2 else bits
    if base == "setp":
        return 1 if index == 0 else (bits if index < 3 else 1)
    if base == "selp":
        return 1 if index == 3 else bits
    return None


def _verify_width(op: InstOp, opcode: Opcode, index: int, operand: Operand,
                  regs: dict[str, str]) -> None:
    if not isinstance(operand, Reg) or operand.name not in regs:
        return
    expected = _expected_bits(opcode, index, len(op.args.data))
    if expected is None:
        return
    declared = regs[operand.name]
    actual = TYPE_BITS.get(declared)
    if actual is None or actual == expected:
        return
    raise op_error(op, f"operand '{operand.name}' of '{op.opcode.data}' is declared "
                       f".{declared} ({actual} bits) but the instruction needs {expected} bits")


def instruction(opcode: str, *args: str, guard: str | None = None) -> InstOp:
    """An instruction of an expansion: `opcode` on `args`, under `guard`."""
    return InstOp(opcode, list(args), guard)


def registers(table: Sequence[tuple[str, str, int]]) -> list[Operation]:
    """`.reg` declarations of (prefix, type, count) rows: an expansion's registers."""
    return [RegOp(name, t, n) for name, t, n in table]


def expand_instructions(root: Operation, matches: Callable[[Operation], bool],
                        declarations: Callable[[], list[Operation]],
                        expand: Callable[[InstOp, int], list[Operation]]) -> None:
    """In every function under `root`, each instruction `matches` accepts is
    replaced by `expand(inst, k)` (its number k in the function, for unique
    labels), every op of it at the instruction's location; a function with
    any gets `declarations()` (the registers and variables the expansions
    use) at its top. The PTX-level rewrites (`ptx-lower-barrier-reductions`,
    `ptx-expand-wide-divrem`, `ptx-expand-f64-atomics`) are this."""
    for fn in list(root.walk()):
        if not isinstance(fn, EntryOp | FuncOp):
            continue
        found = [op for op in fn.body.ops if matches(op)]
        if not found:
            continue
        block = fn.body.block
        block.insert_ops_before(declarations(), block.first_op)
        for index, inst in enumerate(found):
            ops = expand(inst, index)
            for new in ops:
                new.location = inst.location
            block.insert_ops_before(ops, inst)
            inst.detach()
            inst.erase()


PTX = Dialect(
    "ptx",
    [ModuleOp, EntryOp, FuncOp, ParamOp, RegOp, VarOp, LabelOp, InstOp, PragmaOp, LocOp,
     FileOp],
    [],
)
