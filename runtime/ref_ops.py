"""Instruction semantics of the reference engine: each `ptx.inst` → a closure.

`compile_inst(ctx, inst)` decodes one instruction once, before execution, into
one of the step kinds the scheduler (`ref.py`) runs:

- `(ALU, fn)`: `fn(thread)` for every thread of the group whose guard holds
  (arithmetic, memory, atomics — atomics thus run lane by lane in lane order);
- `(BRANCH, pc)`, `(EXIT, None)`, `(NOP, None)`, `(TRAP, message)`;
- `(BARRIER, BarrierSpec)`: `bar.sync`/`barrier.sync`/`bar.arrive`/`bar.red`;
- `(WARP, fn)`: `fn(threads)` once for the threads of the warp that execute
  the instruction together (shfl, vote, activemask, match, redux).

Values: a register holds its bit pattern as a Python int masked to the
register's declared width (a predicate holds a bool); f32 is its IEEE pattern.
Every op is registered in `TABLE` with the forms it accepts, which
`coverage.supported_opcodes()` reports. Anything else is an `UnsupportedError`
that names the opcode and its `file:line:col`.

Semantics that PTX leaves to the hardware, as defined here:
- integer division by zero: every quotient bit set (`div.u32 x, 0` =
  0xFFFFFFFF, `div.s32 x, 0` = -1); `rem x, 0` = x (the dividend);
  `div.s32 INT_MIN, -1` = INT_MIN and `rem.s32 INT_MIN, -1` = 0;
- float → integer conversions saturate to the destination range, NaN → 0;
- arithmetic NaN results are the canonical NaN 0x7FFFFFFF; `abs`/`neg` are
  sign-bit operations; `min`/`max` return the non-NaN operand and order -0 < +0;
- `shfl` reading a lane that is inactive reads that lane's register as it
  is; a lane past the end of a partial warp reads the caller's own value.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass

from qgc.diagnostics import QgcError
from qgc.dialects import ptx
from qgc.dialects.ptx import Addr, Imm, Pair, Reg, Sym, Vec
from qgc.runtime import float32 as F
from qgc.runtime.memory import Layout, MemoryFault, from_generic, in_window, to_generic

ALU, BRANCH, EXIT, BARRIER, WARP, NOP, TRAP = range(7)

M64 = (1 << 64) - 1
INT_TYPES = ("u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64")
BIT_TYPES = ("b8", "b16", "b32", "b64")
ROUNDINGS = ("rn", "rz", "rm", "rp")
INT_ROUNDINGS = ("rni", "rzi", "rmi", "rpi")
SPACES = ("global", "shared", "local", "const", "param")
ORDERING = {"weak", "volatile", "relaxed", "acquire", "release", "acq_rel", "mmio",
            "cta", "gpu", "sys", "cluster", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc",
            "aligned", "uni", "sync"}


class UnsupportedError(QgcError):
    """An instruction or form the reference engine does not implement (status 2)."""

    def __init__(self, message: str):
        super().__init__(message, status=2)


def mask(bits: int) -> int:
    return (1 << bits) - 1


def signed(value: int, bits: int) -> int:
    """Two's-complement reading of a `bits`-wide pattern."""
    return value - (1 << bits) if value >> (bits - 1) & 1 else value


def type_bits(t: str) -> int:
    return ptx.TYPE_BITS[t]


def is_signed(t: str) -> bool:
    return t[0] == "s"


# ------------------------------------------------------------------ registry

@dataclass(frozen=True)
class OpDef:
    name: str
    compile: Callable
    forms: tuple[str, ...]
    desc: str
    mods: frozenset[str]


TABLE: dict[str, OpDef] = {}


def op(name: str, *forms: str, desc: str, mods: tuple[str, ...] = ()) -> Callable:
    """Register the compiler of opcode family `name` (the part before the first dot)."""
    def register(fn: Callable) -> Callable:
        TABLE[name] = OpDef(name, fn, forms, desc, frozenset(mods))
        return fn
    return register


@dataclass
class BarrierSpec:
    """A CTA barrier: `kind` is sync, arrive or red (`red_op` popc/and/or)."""

    kind: str
    barrier: Callable
    count: Callable | None = None
    pred: Callable | None = None
    dest: Callable | None = None
    red_op: str = ""


def _special_registers(warp_size: int) -> dict[str, Callable]:
    full = mask(warp_size)
    sregs: dict[str, Callable] = {
        "%laneid": lambda th: th.lane,
        "%warpid": lambda th: th.warpid,
        "%nwarpid": lambda th: th.cta.nwarps,
        "%smid": lambda th: 0,
        "%nsmid": lambda th: 1,
        "%gridid": lambda th: 0,
        "%clock": lambda th: th.n & 0xFFFFFFFF,
        "%clock64": lambda th: th.n,
        "%globaltimer": lambda th: th.n,
        "%globaltimer_lo": lambda th: th.n & 0xFFFFFFFF,
        "%globaltimer_hi": lambda th: th.n >> 32,
        "%lanemask_eq": lambda th: 1 << th.lane,
        "%lanemask_lt": lambda th: (1 << th.lane) - 1,
        "%lanemask_le": lambda th: (2 << th.lane) - 1,
        "%lanemask_gt": lambda th: full & ~((2 << th.lane) - 1),
        "%lanemask_ge": lambda th: full & ~((1 << th.lane) - 1),
        "%dynamic_smem_size": lambda th: th.cta.dynamic_bytes,
        "%total_smem_size": lambda th: th.cta.shared_bytes,
    }
    for i, d in enumerate("xyz"):
        sregs[f"%tid.{d}"] = lambda th, i=i: th.tid[i]
        sregs[f"%ntid.{d}"] = lambda th, i=i: th.cta.ntid[i]
        sregs[f"%ctaid.{d}"] = lambda th, i=i: th.cta.ctaid[i]
        sregs[f"%nctaid.{d}"] = lambda th, i=i: th.cta.nctaid[i]
    return sregs


# -------------------------------------------------------------------- context

class Ctx:
    """Operand access for the instruction being compiled."""

    def __init__(self, regs: dict[str, tuple[int, str]], layout: Layout,
                 labels: dict[str, int], warp_size: int):
        self.regs, self.layout, self.labels = regs, layout, labels
        self.warp_size = warp_size
        self.sregs = _special_registers(warp_size)

    def begin(self, inst: ptx.InstOp) -> None:
        self.inst = inst
        self.code = inst.op
        self.mods = set(inst.op.modifiers)
        self.ops = inst.operands_decoded

    # ------------------------------------------------------------ diagnostics
    def where(self) -> str:
        return ptx.location_prefix(self.inst)

    def unsupported(self, what: str = "") -> UnsupportedError:
        text = self.inst.opcode.data
        message = what or f"unsupported instruction '{text}'"
        return UnsupportedError(f"{self.where()}error: {message}")

    def operands(self, *counts: int) -> list:
        if len(self.ops) not in counts:
            raise self.unsupported(f"'{self.inst.opcode.data}' takes "
                                   f"{' or '.join(map(str, counts))} operands, "
                                   f"got {len(self.ops)}")
        return self.ops

    def one_type(self, allowed: tuple[str, ...], count: int = 1) -> str:
        types = self.code.types
        if len(types) != count or any(t not in allowed for t in types):
            raise self.unsupported()
        return types[0]

    def rounding(self, allowed: tuple[str, ...] = ROUNDINGS, default: str = "rn") -> str:
        found = [m for m in self.code.modifiers if m in ROUNDINGS + INT_ROUNDINGS]
        if len(found) > 1 or (found and found[0] not in allowed):
            raise self.unsupported()
        return found[0] if found else default

    def space(self, default: str = "generic") -> str:
        found = [m.split("::")[0] for m in self.code.modifiers
                 if m.split("::")[0] in SPACES]
        if len(found) > 1:
            raise self.unsupported()
        return found[0] if found else default

    # ------------------------------------------------------------- sources
    def src(self, operand, t: str) -> Callable:
        """Getter of an operand's value as a `t`-wide pattern (bool for pred)."""
        if t == "pred":
            return self.psrc(operand)
        bits = type_bits(t)
        if isinstance(operand, Imm):
            value = self.imm(operand, t)
            return lambda th: value
        if isinstance(operand, Sym):
            value = self.symbol(operand) & mask(bits)
            return lambda th: value
        if isinstance(operand, Reg):
            return self.reg_src(operand, t, bits)
        raise self.unsupported(f"unexpected operand {operand!r} of "
                               f"'{self.inst.opcode.data}'")

    def reg_src(self, operand: Reg, t: str, bits: int) -> Callable:
        if operand.negated:
            raise self.unsupported(f"'!{operand.name}' is only allowed for predicates")
        if operand.name in self.sregs:
            getter, m = self.sregs[operand.name], mask(bits)
            return lambda th: getter(th) & m
        index, rtype = self.reg(operand.name)
        if rtype == "pred":
            return lambda th: int(th.r[index])
        rbits = type_bits(rtype)
        if rbits > bits:
            m = mask(bits)
            return lambda th: th.r[index] & m
        if rbits < bits and is_signed(t):
            m = mask(bits)
            return lambda th: signed(th.r[index], rbits) & m
        return lambda th: th.r[index]

    def reg(self, name: str) -> tuple[int, str]:
        if name not in self.regs:
            if name.startswith("%envreg") or name.startswith("%pm"):
                raise self.unsupported(f"special register '{name}' is not supported")
            raise self.unsupported(f"unknown register '{name}'")
        return self.regs[name]

    def psrc(self, operand) -> Callable:
        """Getter of a predicate operand (`%p`, `!%p`, or an immediate)."""
        if isinstance(operand, Imm):
            value = operand.value != 0
            return lambda th: value
        if not isinstance(operand, Reg):
            raise self.unsupported(f"expected a predicate, got {operand!r}")
        index, rtype = self.reg(operand.name)
        if rtype != "pred":
            raise self.unsupported(f"'{operand.name}' is not a predicate register")
        if operand.negated:
            return lambda th: not th.r[index]
        return lambda th: th.r[index]

    def imm(self, operand: Imm, t: str) -> int:
        bits = type_bits(t)
        if t in ("f32", "f64", "f16"):
            return float_imm(operand, t)
        if operand.is_float and operand.bits == 64 and bits == 32 and operand.value >> 32 == 0:
            return operand.value
        return operand.value & mask(bits)

    def symbol(self, operand: Sym) -> int:
        name = operand.name
        if name == "WARP_SZ":
            return self.warp_size
        if name in self.layout.vars:
            return self.layout.vars[name].address
        if name in self.layout.params:
            return self.layout.params[name].address
        raise self.unsupported(f"'{name}' cannot be used as a value here")

    def fsrc(self, operand, ftz: bool = False) -> Callable:
        """Getter of an f32 operand as a Python float (flushed with `.ftz`)."""
        if isinstance(operand, Imm):
            value = F.to_float(self.imm(operand, "f32"))
            value = F.flush_float(value) if ftz else value
            return lambda th: value
        bits_of = self.src(operand, "f32")
        to_float = F.to_float
        if ftz:
            return lambda th: to_float(F.flush(bits_of(th)))
        return lambda th: to_float(bits_of(th))

    # ------------------------------------------------------------ destinations
    def dst(self, operand, t: str) -> Callable:
        """Setter `(thread, value)` writing a `t`-wide value to a register."""
        if isinstance(operand, Sym) and operand.name == "_":
            return lambda th, v: None
        if not isinstance(operand, Reg) or operand.negated or operand.name in self.sregs:
            raise self.unsupported(f"cannot write to {operand!r}")
        index, rtype = self.reg(operand.name)
        if rtype == "pred" or t == "pred":
            if rtype != "pred" or t != "pred":
                raise self.unsupported(f"'{operand.name}' (.{rtype}) cannot receive a "
                                       f".{t} value")
            return _set_pred(index)
        rbits, bits = type_bits(rtype), type_bits(t)
        if rbits == bits:
            return _set_plain(index)
        m = mask(rbits)
        if rbits > bits and is_signed(t):
            return lambda th, v: th.r.__setitem__(index, signed(v, bits) & m)
        return lambda th, v: th.r.__setitem__(index, v & m)

    def fdst(self, operand, ftz: bool = False, sat: bool = False) -> Callable:
        """Setter of an f32 result given as bits, applying `.ftz` and `.sat`."""
        put = self.dst(operand, "f32")
        if ftz and sat:
            return lambda th, b: put(th, F.saturate(F.flush(b)))
        if ftz:
            return lambda th, b: put(th, F.flush(b))
        if sat:
            return lambda th, b: put(th, F.saturate(b))
        return put

    def address(self, operand) -> Callable:
        """Getter of the address of `[base+offset]`."""
        if not isinstance(operand, Addr):
            raise self.unsupported(f"expected an address, got {operand!r}")
        offset = operand.offset
        if operand.base is None:
            value = offset & M64
            return lambda th: value
        if isinstance(operand.base, Sym):
            value = (self.symbol(operand.base) + offset) & M64
            return lambda th: value
        base = self.src(operand.base, "u64")
        if offset == 0:
            return base
        return lambda th: (base(th) + offset) & M64


def _set_plain(index: int) -> Callable:
    def put(th, v):
        th.r[index] = v
    return put


def _set_pred(index: int) -> Callable:
    def put(th, v):
        th.r[index] = bool(v)
    return put


def float_imm(operand: Imm, t: str) -> int:
    """An immediate as the bits of a float of type t."""
    if t == "f64":
        if operand.is_float and operand.bits == 64:
            return operand.value
        x = F.to_float(operand.value) if operand.is_float else float(operand.value)
        return struct.unpack("<Q", struct.pack("<d", x))[0]
    if operand.is_float and operand.bits == 32:
        value = operand.value
    elif operand.is_float:
        value = F.from_float(struct.unpack("<d", struct.pack("<Q", operand.value))[0])
    else:
        value = F.from_float(float(operand.value))
    if t == "f16":
        return _f32_to_f16(value)
    return value


def _f32_to_f16(bits: int) -> int:
    """f32 → f16, round to nearest even (overflow → inf, NaN → canonical)."""
    x = F.to_float(bits)
    if math.isnan(x):
        return 0x7FFF
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:
        return 0x7C00 if x > 0 else 0xFC00


def _f16_to_f32(bits: int) -> int:
    x = struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]
    return F.CANONICAL_NAN if math.isnan(x) else F.from_float(x)


# ---------------------------------------------------------------- compile

def compile_inst(ctx: Ctx, inst: ptx.InstOp) -> tuple[int, object]:
    """Decode one instruction into a step (kind, payload); raises UnsupportedError."""
    ctx.begin(inst)
    base = ctx.code.base
    if base == "call":
        raise ctx.unsupported("calls to device functions are not supported")
    opdef = TABLE.get(base)
    if opdef is None:
        raise ctx.unsupported()
    for m in ctx.code.modifiers:
        if m not in opdef.mods and not m.startswith(("L1::", "L2::")):
            raise ctx.unsupported()
    return opdef.compile(ctx)


# ============================================================ integer arithmetic

INT_ARITH = ("u16", "s16", "u32", "s32", "u64", "s64")
_WIDE = {"u16": "u32", "s16": "s32", "u32": "u64", "s32": "s64"}


def _int_operands(cx: Ctx, t: str, n: int) -> tuple[Callable, list[Callable]]:
    ops = cx.operands(n + 1)
    return cx.dst(ops[0], t), [cx.src(o, t) for o in ops[1:]]


def _binary(cx: Ctx, t: str, fn: Callable) -> tuple[int, Callable]:
    """d = fn(a, b) masked to the type's width."""
    d, (a, b) = _int_operands(cx, t, 2)
    m = mask(type_bits(t))

    def run(th):
        d(th, fn(a(th), b(th)) & m)
    return ALU, run


def _sat32(value: int) -> int:
    return min(max(value, -(1 << 31)), (1 << 31) - 1)


@op("add", "add.{u16,s16,u32,s32,u64,s64}", "add.sat.s32", "add.cc.{u32,s32,u64,s64}",
    "add{.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32",
    desc="integer add (wrapping; .sat clamps s32; .cc sets the carry); f32 add",
    mods=("sat", "cc", "ftz") + ROUNDINGS)
def _add(cx: Ctx):
    t = cx.one_type(INT_ARITH + BIT_TYPES[1:] + ("f32",))
    if t == "f32":
        return _float_binary(cx, F.add_exact, lambda x, y: x + y)
    if "cc" in cx.mods:
        return _carry_op(cx, t, sub=False, use_carry=False)
    if "sat" in cx.mods:
        if t != "s32":
            raise cx.unsupported()
        return _binary(cx, t, lambda x, y: _sat32(signed(x, 32) + signed(y, 32)))
    return _binary(cx, t, lambda x, y: x + y)


@op("sub", "sub.{u16,s16,u32,s32,u64,s64}", "sub.sat.s32", "sub.cc.{u32,s32,u64,s64}",
    "sub{.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32",
    desc="integer subtract (wrapping; .sat clamps s32; .cc sets the borrow); f32 subtract",
    mods=("sat", "cc", "ftz") + ROUNDINGS)
def _sub(cx: Ctx):
    t = cx.one_type(INT_ARITH + BIT_TYPES[1:] + ("f32",))
    if t == "f32":
        return _float_binary(cx, lambda x, y, mode: F.add_exact(x, -y, mode),
                             lambda x, y: x - y)
    if "cc" in cx.mods:
        return _carry_op(cx, t, sub=True, use_carry=False)
    if "sat" in cx.mods:
        if t != "s32":
            raise cx.unsupported()
        return _binary(cx, t, lambda x, y: _sat32(signed(x, 32) - signed(y, 32)))
    return _binary(cx, t, lambda x, y: x - y)


def _carry_op(cx: Ctx, t: str, sub: bool, use_carry: bool):
    """add.cc/addc/sub.cc/subc: the carry flag CC.CF lives in `thread.cc`."""
    if t not in ("u32", "s32", "u64", "s64", "b32", "b64"):
        raise cx.unsupported()
    bits = type_bits(t)
    m = mask(bits)
    set_cc = "cc" in cx.mods
    d, (a, b) = _int_operands(cx, t, 2)

    def run(th):
        cin = th.cc if use_carry else 0
        if sub:
            full = a(th) - b(th) - cin
            cout = 1 if full < 0 else 0
        else:
            full = a(th) + b(th) + cin
            cout = full >> bits
        d(th, full & m)
        if set_cc:
            th.cc = cout
    return ALU, run


@op("addc", "addc{.cc}.{u32,s32,u64,s64}", desc="add with carry-in", mods=("cc",))
def _addc(cx: Ctx):
    return _carry_op(cx, cx.one_type(("u32", "s32", "u64", "s64")), sub=False, use_carry=True)


@op("subc", "subc{.cc}.{u32,s32,u64,s64}", desc="subtract with borrow-in", mods=("cc",))
def _subc(cx: Ctx):
    return _carry_op(cx, cx.one_type(("u32", "s32", "u64", "s64")), sub=True, use_carry=True)


def _product(t: str) -> Callable:
    bits = type_bits(t)
    if is_signed(t):
        return lambda x, y: signed(x, bits) * signed(y, bits)
    return lambda x, y: x * y


@op("mul", "mul.{lo,hi}.{u16,s16,u32,s32,u64,s64}", "mul.wide.{u16,s16,u32,s32}",
    "mul{.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32",
    desc="integer multiply (low half, high half, or double-width); f32 multiply",
    mods=("lo", "hi", "wide", "ftz", "sat") + ROUNDINGS)
def _mul(cx: Ctx):
    t = cx.one_type(INT_ARITH + ("f32",))
    if t == "f32":
        return _float_binary(cx, F.mul_exact, lambda x, y: x * y)
    bits, prod = type_bits(t), _product(t)
    if "wide" in cx.mods:
        if t not in _WIDE:
            raise cx.unsupported()
        wt = _WIDE[t]
        ops = cx.operands(3)
        d, a, b = cx.dst(ops[0], wt), cx.src(ops[1], t), cx.src(ops[2], t)
        m = mask(2 * bits)
        return ALU, lambda th: d(th, prod(a(th), b(th)) & m)
    if "hi" in cx.mods:
        return _binary(cx, t, lambda x, y: prod(x, y) >> bits)
    if "lo" not in cx.mods:
        raise cx.unsupported("integer mul needs .lo, .hi or .wide")
    return _binary(cx, t, prod)


@op("mad", "mad.{lo,hi}.{u16,s16,u32,s32,u64,s64}", "mad.hi.sat.s32",
    "mad.wide.{u16,s16,u32,s32}", "mad{.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32",
    desc="integer multiply-add; f32 mad (a fused multiply-add, like fma)",
    mods=("lo", "hi", "wide", "sat", "ftz") + ROUNDINGS)
def _mad(cx: Ctx):
    t = cx.one_type(INT_ARITH + ("f32",))
    if t == "f32":
        return _fma(cx)
    bits, prod = type_bits(t), _product(t)
    ops = cx.operands(4)
    if "wide" in cx.mods:
        if t not in _WIDE:
            raise cx.unsupported()
        wt = _WIDE[t]
        d, a, b, c = cx.dst(ops[0], wt), cx.src(ops[1], t), cx.src(ops[2], t), cx.src(ops[3], wt)
        m = mask(2 * bits)
        return ALU, lambda th: d(th, (prod(a(th), b(th)) + c(th)) & m)
    d, a, b, c = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], t), cx.src(ops[3], t)
    m = mask(bits)
    if "hi" in cx.mods:
        if "sat" in cx.mods:
            if t != "s32":
                raise cx.unsupported()
            return ALU, lambda th: d(th, _sat32((prod(a(th), b(th)) >> 32)
                                              + signed(c(th), 32)) & m)
        return ALU, lambda th: d(th, ((prod(a(th), b(th)) >> bits) + c(th)) & m)
    if "lo" not in cx.mods or "sat" in cx.mods:
        raise cx.unsupported()
    return ALU, lambda th: d(th, (prod(a(th), b(th)) + c(th)) & m)


def _mul24(cx: Ctx, with_c: bool):
    t = cx.one_type(("u32", "s32"))
    ops = cx.operands(4 if with_c else 3)
    d, a, b = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], t)
    c = cx.src(ops[3], t) if with_c else (lambda th: 0)
    sgn = is_signed(t)
    hi = "hi" in cx.mods
    if not hi and "lo" not in cx.mods:
        raise cx.unsupported()

    def operand24(x: int) -> int:
        x &= 0xFFFFFF
        return signed(x, 24) if sgn else x

    def run(th):
        p = operand24(a(th)) * operand24(b(th))
        p = (p >> 16) if hi else p
        d(th, (p + c(th)) & 0xFFFFFFFF)
    return ALU, run


@op("mul24", "mul24.{lo,hi}.{u32,s32}", desc="24-bit multiply", mods=("lo", "hi"))
def _mul24_op(cx: Ctx):
    return _mul24(cx, with_c=False)


@op("mad24", "mad24.{lo,hi}.{u32,s32}", desc="24-bit multiply-add", mods=("lo", "hi"))
def _mad24_op(cx: Ctx):
    return _mul24(cx, with_c=True)


def _int_div(t: str) -> Callable:
    bits = type_bits(t)
    m = mask(bits)
    if not is_signed(t):
        return lambda x, y: x // y if y else m
    def div(x, y):
        if y == 0:
            return m
        sx, sy = signed(x, bits), signed(y, bits)
        q = abs(sx) // abs(sy)
        return -q if (sx < 0) != (sy < 0) else q
    return div


def _int_rem(t: str) -> Callable:
    bits = type_bits(t)
    if not is_signed(t):
        return lambda x, y: x % y if y else x
    def rem(x, y):
        if y == 0:
            return x
        sx, sy = signed(x, bits), signed(y, bits)
        r = abs(sx) % abs(sy)
        return -r if sx < 0 else r
    return rem


@op("div", "div.{u16,s16,u32,s32,u64,s64}", "div{.rn,.rz,.rm,.rp}{.ftz}.f32",
    "div.approx{.ftz}.f32", "div.full{.ftz}.f32",
    desc="integer divide (toward zero; x/0 = all ones); f32 divide (exact, or approximate "
         "forms computed in double)",
    mods=("approx", "full", "ftz") + ROUNDINGS)
def _div(cx: Ctx):
    t = cx.one_type(INT_ARITH + ("f32",))
    if t == "f32":
        if cx.mods & {"approx", "full"}:
            return _float_binary(cx, None, F.div_float, approx=True)
        return _float_binary(cx, F.div_exact, F.div_float)
    return _binary(cx, t, _int_div(t))


@op("rem", "rem.{u16,s16,u32,s32,u64,s64}",
    desc="integer remainder (sign of the dividend; x rem 0 = x)")
def _rem(cx: Ctx):
    t = cx.one_type(INT_ARITH)
    return _binary(cx, t, _int_rem(t))


@op("abs", "abs.{s16,s32,s64}", "abs{.ftz}.f32", desc="absolute value (f32: clears the sign)",
    mods=("ftz",))
def _abs(cx: Ctx):
    t = cx.one_type(("s16", "s32", "s64", "f32"))
    if t == "f32":
        return _float_bits_unary(cx, lambda b: b & 0x7FFFFFFF)
    bits = type_bits(t)
    return _unary(cx, t, lambda x: abs(signed(x, bits)))


@op("neg", "neg.{s16,s32,s64}", "neg{.ftz}.f32", desc="negate (f32: flips the sign)",
    mods=("ftz",))
def _neg(cx: Ctx):
    t = cx.one_type(("s16", "s32", "s64", "f32"))
    if t == "f32":
        return _float_bits_unary(cx, lambda b: b ^ F.SIGN)
    return _unary(cx, t, lambda x: -x)


def _unary(cx: Ctx, t: str, fn: Callable, dt: str | None = None):
    ops = cx.operands(2)
    d, a = cx.dst(ops[0], dt or t), cx.src(ops[1], t)
    m = mask(type_bits(dt or t))
    return ALU, lambda th: d(th, fn(a(th)) & m)


def _minmax_int(t: str, pick_max: bool) -> Callable:
    bits = type_bits(t)
    if is_signed(t):
        if pick_max:
            return lambda x, y: x if signed(x, bits) >= signed(y, bits) else y
        return lambda x, y: x if signed(x, bits) <= signed(y, bits) else y
    return max if pick_max else min


def _minmax(cx: Ctx, pick_max: bool):
    t = cx.one_type(INT_ARITH + ("f32",))
    if t == "f32":
        return _float_minmax(cx, pick_max)
    fn = _minmax_int(t, pick_max)
    if "relu" in cx.mods:
        if t != "s32":
            raise cx.unsupported()
        inner = fn
        fn = lambda x, y: max(signed(inner(x, y), 32), 0)  # noqa: E731
    return _binary(cx, t, fn)


@op("min", "min{.relu}.{u16,s16,u32,s32,u64,s64}", "min{.ftz}{.NaN}.f32",
    desc="minimum (f32: the non-NaN operand; -0 < +0)", mods=("relu", "ftz", "NaN"))
def _min(cx: Ctx):
    return _minmax(cx, pick_max=False)


@op("max", "max{.relu}.{u16,s16,u32,s32,u64,s64}", "max{.ftz}{.NaN}.f32",
    desc="maximum (f32: the non-NaN operand; -0 < +0)", mods=("relu", "ftz", "NaN"))
def _max(cx: Ctx):
    return _minmax(cx, pick_max=True)


@op("sad", "sad.{u16,s16,u32,s32,u64,s64}", desc="sum of absolute difference: c + |a - b|")
def _sad(cx: Ctx):
    t = cx.one_type(INT_ARITH)
    bits = type_bits(t)
    d, (a, b, c) = _int_operands(cx, t, 3)
    m = mask(bits)
    conv = (lambda x: signed(x, bits)) if is_signed(t) else (lambda x: x)
    return ALU, lambda th: d(th, (c(th) + abs(conv(a(th)) - conv(b(th)))) & m)


# ================================================================ bit operations

LOGIC_TYPES = ("b16", "b32", "b64", "pred")


def _logic(cx: Ctx, fn: Callable, pred_fn: Callable):
    t = cx.one_type(LOGIC_TYPES)
    if t == "pred":
        ops = cx.operands(3)
        d, a, b = cx.dst(ops[0], "pred"), cx.psrc(ops[1]), cx.psrc(ops[2])
        return ALU, lambda th: d(th, pred_fn(a(th), b(th)))
    return _binary(cx, t, fn)


@op("and", "and.{b16,b32,b64,pred}", desc="bitwise and")
def _and(cx: Ctx):
    return _logic(cx, lambda x, y: x & y, lambda x, y: x and y)


@op("or", "or.{b16,b32,b64,pred}", desc="bitwise or")
def _or(cx: Ctx):
    return _logic(cx, lambda x, y: x | y, lambda x, y: x or y)


@op("xor", "xor.{b16,b32,b64,pred}", desc="bitwise exclusive or")
def _xor(cx: Ctx):
    return _logic(cx, lambda x, y: x ^ y, lambda x, y: x != y)


@op("not", "not.{b16,b32,b64,pred}", desc="bitwise not")
def _not(cx: Ctx):
    t = cx.one_type(LOGIC_TYPES)
    if t == "pred":
        ops = cx.operands(2)
        d, a = cx.dst(ops[0], "pred"), cx.psrc(ops[1])
        return ALU, lambda th: d(th, not a(th))
    return _unary(cx, t, lambda x: ~x)


@op("cnot", "cnot.{b16,b32,b64}", desc="C logical not: 1 if a == 0 else 0")
def _cnot(cx: Ctx):
    t = cx.one_type(BIT_TYPES[1:])
    return _unary(cx, t, lambda x: 1 if x == 0 else 0)


@op("shl", "shl.{b16,b32,b64}", desc="shift left (amounts >= width give 0)")
def _shl(cx: Ctx):
    t = cx.one_type(BIT_TYPES[1:])
    bits = type_bits(t)
    ops = cx.operands(3)
    d, a, b = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], "u32")
    m = mask(bits)
    return ALU, lambda th: d(th, (a(th) << min(b(th), bits)) & m)


@op("shr", "shr.{b16,b32,b64,u16,u32,u64,s16,s32,s64}",
    desc="shift right, logical (.b/.u) or arithmetic (.s); amounts >= width clamp")
def _shr(cx: Ctx):
    t = cx.one_type(BIT_TYPES[1:] + INT_ARITH)
    bits = type_bits(t)
    ops = cx.operands(3)
    d, a, b = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], "u32")
    m = mask(bits)
    if is_signed(t):
        return ALU, lambda th: d(th, (signed(a(th), bits) >> min(b(th), bits)) & m)
    return ALU, lambda th: d(th, a(th) >> min(b(th), bits))


@op("shf", "shf.{l,r}.{wrap,clamp}.b32", desc="funnel shift of the 64-bit pair {b, a}",
    mods=("l", "r", "wrap", "clamp"))
def _shf(cx: Ctx):
    cx.one_type(("b32",))
    left, clamp = "l" in cx.mods, "clamp" in cx.mods
    if left == ("r" in cx.mods) or clamp == ("wrap" in cx.mods):
        raise cx.unsupported()
    ops = cx.operands(4)
    d, a, b, c = (cx.dst(ops[0], "b32"), cx.src(ops[1], "b32"), cx.src(ops[2], "b32"),
                  cx.src(ops[3], "u32"))

    def run(th):
        n = min(c(th), 32) if clamp else c(th) & 31
        pair = (b(th) << 32) | a(th)
        d(th, ((pair << n) >> 32) & 0xFFFFFFFF if left else (pair >> n) & 0xFFFFFFFF)
    return ALU, run


@op("popc", "popc.{b32,b64}", desc="population count (.u32 result)")
def _popc(cx: Ctx):
    t = cx.one_type(("b32", "b64"))
    return _unary(cx, t, lambda x: bin(x).count("1"), dt="u32")


@op("clz", "clz.{b32,b64}", desc="count leading zeros (.u32 result)")
def _clz(cx: Ctx):
    t = cx.one_type(("b32", "b64"))
    bits = type_bits(t)
    return _unary(cx, t, lambda x: bits - x.bit_length(), dt="u32")


@op("bfind", "bfind{.shiftamt}.{u32,s32,u64,s64}",
    desc="position of the most significant non-sign bit (0xFFFFFFFF if none)",
    mods=("shiftamt",))
def _bfind(cx: Ctx):
    t = cx.one_type(("u32", "s32", "u64", "s64"))
    bits, sgn, shiftamt = type_bits(t), is_signed(t), "shiftamt" in cx.mods

    def find(x: int) -> int:
        if sgn and x >> (bits - 1):
            x = ~x & mask(bits)
        if x == 0:
            return 0xFFFFFFFF
        pos = x.bit_length() - 1
        return bits - 1 - pos if shiftamt else pos
    return _unary(cx, t, find, dt="u32")


@op("brev", "brev.{b32,b64}", desc="bit reverse")
def _brev(cx: Ctx):
    t = cx.one_type(("b32", "b64"))
    bits = type_bits(t)
    return _unary(cx, t, lambda x: int(format(x, f"0{bits}b")[::-1], 2))


@op("bfe", "bfe.{u32,s32,u64,s64}", desc="bit field extract (sign-extended for .s)")
def _bfe(cx: Ctx):
    t = cx.one_type(("u32", "s32", "u64", "s64"))
    bits, sgn = type_bits(t), is_signed(t)
    msb = bits - 1
    ops = cx.operands(4)
    d, a, b, c = (cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], "u32"),
                  cx.src(ops[3], "u32"))

    def run(th):
        x, pos, length = a(th), b(th) & 0xFF, c(th) & 0xFF
        sbit = (x >> min(pos + length - 1, msb)) & 1 if sgn and length else 0
        field = (x >> pos) & mask(length) if pos <= msb else 0
        taken = max(0, min(length, bits - pos))
        result = field & mask(taken)
        if sbit:
            result |= mask(bits) & ~mask(taken)
        d(th, result)
    return ALU, run


@op("bfi", "bfi.{b32,b64}", desc="bit field insert")
def _bfi(cx: Ctx):
    t = cx.one_type(("b32", "b64"))
    bits = type_bits(t)
    ops = cx.operands(5)
    d, a, b = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], t)
    c, e = cx.src(ops[3], "u32"), cx.src(ops[4], "u32")

    def run(th):
        pos, length = c(th) & 0xFF, e(th) & 0xFF
        if pos >= bits:
            d(th, b(th))
            return
        field = mask(min(length, bits - pos)) << pos
        d(th, (b(th) & ~field | (a(th) << pos) & field) & mask(bits))
    return ALU, run


_PRMT_MODES = {  # selector c[1:0] → source byte of d.b0, d.b1, d.b2, d.b3
    "f4e": ((0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6)),
    "b4e": ((0, 7, 6, 5), (1, 0, 7, 6), (2, 1, 0, 7), (3, 2, 1, 0)),
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),
    "ecl": ((0, 1, 2, 3), (1, 1, 2, 3), (2, 2, 2, 3), (3, 3, 3, 3)),
    "ecr": ((0, 0, 0, 0), (0, 1, 1, 1), (0, 1, 2, 2), (0, 1, 2, 3)),
    "rc16": ((0, 1, 0, 1), (2, 3, 2, 3), (0, 1, 0, 1), (2, 3, 2, 3)),
}


def prmt(a: int, b: int, c: int, mode: str | None) -> int:
    """The byte permute of `prmt.b32{.mode}`."""
    source = (b << 32) | a
    out = 0
    for i in range(4):
        if mode is None:
            sel = (c >> (4 * i)) & 0xF
            byte = (source >> (8 * (sel & 7))) & 0xFF
            if sel & 8:
                byte = 0xFF if byte & 0x80 else 0
        else:
            byte = (source >> (8 * _PRMT_MODES[mode][c & 3][i])) & 0xFF
        out |= byte << (8 * i)
    return out


@op("prmt", "prmt.b32{.f4e,.b4e,.rc8,.ecl,.ecr,.rc16}", desc="byte permute",
    mods=tuple(_PRMT_MODES))
def _prmt(cx: Ctx):
    cx.one_type(("b32",))
    modes = [m for m in cx.code.modifiers if m in _PRMT_MODES]
    mode = modes[0] if modes else None
    ops = cx.operands(4)
    d, a, b, c = (cx.dst(ops[0], "b32"), cx.src(ops[1], "b32"), cx.src(ops[2], "b32"),
                  cx.src(ops[3], "b32"))
    return ALU, lambda th: d(th, prmt(a(th), b(th), c(th), mode))


@op("lop3", "lop3.b32", desc="arbitrary three-input logic function (immLut)")
def _lop3(cx: Ctx):
    cx.one_type(("b32",))
    ops = cx.operands(5)
    if not isinstance(ops[4], Imm):
        raise cx.unsupported("lop3's lookup table must be an immediate")
    lut = ops[4].value & 0xFF
    d, a, b, c = (cx.dst(ops[0], "b32"), cx.src(ops[1], "b32"), cx.src(ops[2], "b32"),
                  cx.src(ops[3], "b32"))
    m = 0xFFFFFFFF

    def run(th):
        x, y, z = a(th), b(th), c(th)
        out = 0
        for k in range(8):
            if lut >> k & 1:
                out |= ((x if k & 4 else ~x) & (y if k & 2 else ~y) & (z if k & 1 else ~z))
        d(th, out & m)
    return ALU, run


@op("dp4a", "dp4a.{u32,s32}.{u32,s32}", desc="four-way byte dot product plus accumulator")
def _dp4a(cx: Ctx):
    return _dot_product(cx, 4)


@op("dp2a", "dp2a.{lo,hi}.{u32,s32}.{u32,s32}",
    desc="two-way 16x8-bit dot product plus accumulator", mods=("lo", "hi"))
def _dp2a(cx: Ctx):
    return _dot_product(cx, 2)


def _dot_product(cx: Ctx, ways: int):
    types = cx.code.types
    if len(types) != 2 or any(t not in ("u32", "s32") for t in types):
        raise cx.unsupported()
    ta, tb = types
    ops = cx.operands(4)
    sgn_c = "s32" in types
    d, a, b = cx.dst(ops[0], "s32" if sgn_c else "u32"), cx.src(ops[1], ta), cx.src(ops[2], tb)
    c = cx.src(ops[3], "s32" if sgn_c else "u32")
    hi = "hi" in cx.mods

    def parts(x: int, width: int, sgn: bool, count: int, start: int) -> list[int]:
        vals = [(x >> (width * (start + i))) & mask(width) for i in range(count)]
        return [signed(v, width) if sgn else v for v in vals]

    def run(th):
        if ways == 4:
            xs, ys = parts(a(th), 8, ta[0] == "s", 4, 0), parts(b(th), 8, tb[0] == "s", 4, 0)
        else:
            xs = parts(a(th), 16, ta[0] == "s", 2, 0)
            ys = parts(b(th), 8, tb[0] == "s", 2, 2 if hi else 0)
        d(th, (sum(x * y for x, y in zip(xs, ys, strict=True)) + c(th)) & 0xFFFFFFFF)
    return ALU, run


# ============================================================ compare and select

_INT_CMP = {
    "eq": lambda x, y: x == y, "ne": lambda x, y: x != y,
    "lt": lambda x, y: x < y, "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
}
_UNSIGNED_CMP = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
_FLOAT_CMP = {
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y and x == x and y == y,
    "lt": lambda x, y: x < y, "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
    "equ": lambda x, y: not (x < y or x > y),
    "neu": lambda x, y: x != y,
    "ltu": lambda x, y: not x >= y, "leu": lambda x, y: not x > y,
    "gtu": lambda x, y: not x <= y, "geu": lambda x, y: not x < y,
    "num": lambda x, y: x == x and y == y,
    "nan": lambda x, y: x != x or y != y,
}
_BOOL_OPS = {"and": lambda x, y: x and y, "or": lambda x, y: x or y,
             "xor": lambda x, y: x != y}
CMP_MODS = tuple(_FLOAT_CMP) + tuple(_UNSIGNED_CMP) + tuple(_BOOL_OPS) + ("ftz",)


def _comparison(cx: Ctx, t: str) -> Callable:
    """A getter of `a CmpOp b` for the current setp/set instruction."""
    cmps = [m for m in cx.code.modifiers if m in _FLOAT_CMP or m in _UNSIGNED_CMP]
    if len(cmps) != 1:
        raise cx.unsupported()
    cmp = cmps[0]
    a_op, b_op = cx.ops[1], cx.ops[2]
    if t == "f32":
        if cmp not in _FLOAT_CMP:
            raise cx.unsupported()
        ftz = "ftz" in cx.mods
        fn, a, b = _FLOAT_CMP[cmp], cx.fsrc(a_op, ftz), cx.fsrc(b_op, ftz)
        return lambda th: fn(a(th), b(th))
    if cmp in _UNSIGNED_CMP:
        fn, sgn = _INT_CMP[_UNSIGNED_CMP[cmp]], False
    elif cmp in _INT_CMP:
        fn, sgn = _INT_CMP[cmp], is_signed(t)
    else:
        raise cx.unsupported()
    a, b = cx.src(a_op, t), cx.src(b_op, t)
    if sgn:
        bits = type_bits(t)
        return lambda th: fn(signed(a(th), bits), signed(b(th), bits))
    return lambda th: fn(a(th), b(th))


def _combine(cx: Ctx, base_operands: int) -> tuple[Callable | None, Callable | None]:
    """The `.BoolOp` and its third predicate operand, if any."""
    bops = [m for m in cx.code.modifiers if m in _BOOL_OPS]
    if len(bops) > 1 or (bops and len(cx.ops) != base_operands + 1) or \
            (not bops and len(cx.ops) != base_operands):
        raise cx.unsupported()
    if not bops:
        return None, None
    return _BOOL_OPS[bops[0]], cx.psrc(cx.ops[base_operands])


CMP_TYPES = ("b16", "b32", "b64") + INT_ARITH + ("f32",)


@op("setp", "setp.{eq,ne,lt,le,gt,ge}.{b16,b32,b64,u16,u32,u64,s16,s32,s64}",
    "setp.{lo,ls,hi,hs}.{b16,b32,b64,u16,u32,u64}",
    "setp.{eq,ne,lt,le,gt,ge,equ,neu,ltu,leu,gtu,geu,num,nan}{.ftz}.f32",
    "setp.CmpOp.{and,or,xor}.type p[|q], a, b, {!}c",
    desc="compare to a predicate (and its complement with p|q), optionally combined "
         "with a third predicate", mods=CMP_MODS)
def _setp(cx: Ctx):
    t = cx.one_type(CMP_TYPES)
    bop, c = _combine(cx, 3)
    cmp = _comparison(cx, t)
    target = cx.ops[0]
    if isinstance(target, Pair):
        p, q = cx.dst(target.first, "pred"), cx.dst(target.second, "pred")
    else:
        p, q = cx.dst(target, "pred"), None
    if bop is None:
        if q is None:
            return ALU, lambda th: p(th, cmp(th))
        def run2(th):
            r = cmp(th)
            p(th, r)
            q(th, not r)
        return ALU, run2

    def run(th):
        r, cv = cmp(th), c(th)
        p(th, bop(r, cv))
        if q is not None:
            q(th, bop(not r, cv))
    return ALU, run


@op("set", "set.CmpOp{.BoolOp}{.ftz}.{u32,s32,f32}.stype",
    desc="compare to an integer mask (0xFFFFFFFF/0) or to 1.0f/0.0f", mods=CMP_MODS)
def _set(cx: Ctx):
    types = cx.code.types
    if len(types) != 2 or types[0] not in ("u32", "s32", "b32", "f32") or \
            types[1] not in CMP_TYPES:
        raise cx.unsupported()
    dt, st = types
    bop, c = _combine(cx, 3)
    cmp = _comparison(cx, st)
    d = cx.dst(cx.ops[0], dt)
    true = 0x3F800000 if dt == "f32" else 0xFFFFFFFF
    if bop is None:
        return ALU, lambda th: d(th, true if cmp(th) else 0)
    return ALU, lambda th: d(th, true if bop(cmp(th), c(th)) else 0)


@op("selp", "selp.{b16,b32,b64,u16,u32,u64,s16,s32,s64,f32}",
    desc="select: d = c ? a : b")
def _selp(cx: Ctx):
    t = cx.one_type(BIT_TYPES[1:] + INT_ARITH + ("f32",))
    ops = cx.operands(4)
    d, a, b, c = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], t), cx.psrc(ops[3])
    return ALU, lambda th: d(th, a(th) if c(th) else b(th))


@op("slct", "slct.{b16,b32,b64,u16,u32,u64,s16,s32,s64,f32}.s32",
    "slct{.ftz}.{b16,b32,b64,u16,u32,u64,s16,s32,s64,f32}.f32",
    desc="select on sign: d = c >= 0 ? a : b", mods=("ftz",))
def _slct(cx: Ctx):
    types = cx.code.types
    if len(types) != 2 or types[1] not in ("s32", "f32") or \
            types[0] not in BIT_TYPES[1:] + INT_ARITH + ("f32",):
        raise cx.unsupported()
    dt, ct = types
    ops = cx.operands(4)
    d, a, b = cx.dst(ops[0], dt), cx.src(ops[1], dt), cx.src(ops[2], dt)
    if ct == "f32":
        c = cx.fsrc(ops[3], "ftz" in cx.mods)
        return ALU, lambda th: d(th, a(th) if c(th) >= 0.0 else b(th))
    c = cx.src(ops[3], "s32")
    return ALU, lambda th: d(th, b(th) if c(th) >> 31 else a(th))


# ================================================================ f32 arithmetic

def _float_binary(cx: Ctx, exact: Callable | None, rn: Callable, approx: bool = False):
    """d = a OP b for f32 with rounding mode, .ftz and .sat."""
    ops = cx.operands(3)
    ftz, sat = "ftz" in cx.mods, "sat" in cx.mods
    mode = "rn" if approx else cx.rounding()
    a, b = cx.fsrc(ops[1], ftz), cx.fsrc(ops[2], ftz)
    d = cx.fdst(ops[0], ftz, sat)
    from_float = F.from_float
    if mode == "rn":
        return ALU, lambda th: d(th, from_float(rn(a(th), b(th))))
    return ALU, lambda th: d(th, exact(a(th), b(th), mode))


def _float_bits_unary(cx: Ctx, fn: Callable):
    ops = cx.operands(2)
    ftz = "ftz" in cx.mods
    a = cx.src(ops[1], "f32")
    d = cx.fdst(ops[0], ftz)
    if ftz:
        return ALU, lambda th: d(th, fn(F.flush(a(th))))
    return ALU, lambda th: d(th, fn(a(th)))


def _float_minmax(cx: Ctx, pick_max: bool):
    ops = cx.operands(3)
    ftz, keep_nan = "ftz" in cx.mods, "NaN" in cx.mods
    a, b = cx.src(ops[1], "f32"), cx.src(ops[2], "f32")
    d = cx.fdst(ops[0], ftz)
    to_float = F.to_float

    def pick(x: int, y: int) -> int:
        if ftz:
            x, y = F.flush(x), F.flush(y)
        xn, yn = F.is_nan(x), F.is_nan(y)
        if xn or yn:
            if keep_nan or (xn and yn):
                return F.CANONICAL_NAN
            return y if xn else x
        fx, fy = to_float(x), to_float(y)
        if fx == fy:  # only ±0 differ: -0 < +0
            neg_x = x >> 31
            return (y if neg_x else x) if pick_max else (x if neg_x else y)
        return (x if fx > fy else y) if pick_max else (x if fx < fy else y)
    return ALU, lambda th: d(th, pick(a(th), b(th)))


def _fma(cx: Ctx):
    cx.one_type(("f32",))
    ops = cx.operands(4)
    ftz, sat = "ftz" in cx.mods, "sat" in cx.mods
    mode = cx.rounding()
    a, b, c = cx.fsrc(ops[1], ftz), cx.fsrc(ops[2], ftz), cx.fsrc(ops[3], ftz)
    d = cx.fdst(ops[0], ftz, sat)
    if mode == "rn":
        fma_rn = F.fma_rn
        return ALU, lambda th: d(th, fma_rn(a(th), b(th), c(th)))
    return ALU, lambda th: d(th, F.fma_exact(a(th), b(th), c(th), mode))


@op("fma", "fma{.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32",
    desc="fused multiply-add, rounded once (exact)", mods=("ftz", "sat") + ROUNDINGS)
def _fma_op(cx: Ctx):
    return _fma(cx)


def _approx_unary(cx: Ctx, fn: Callable, exact: Callable | None = None):
    """A unary f32 function computed in double and rounded to f32."""
    cx.one_type(("f32",))
    ops = cx.operands(2)
    ftz, sat = "ftz" in cx.mods, "sat" in cx.mods
    a = cx.fsrc(ops[1], ftz)
    d = cx.fdst(ops[0], ftz, sat)
    if exact is not None and "approx" not in cx.mods:
        mode = cx.rounding()
        return ALU, lambda th: d(th, exact(a(th), mode))
    if exact is None and "approx" not in cx.mods:
        raise cx.unsupported()
    from_float = F.from_float
    return ALU, lambda th: d(th, from_float(fn(a(th))))


def _safe(fn: Callable) -> Callable:
    def run(x: float) -> float:
        if math.isnan(x):
            return math.nan
        try:
            return fn(x)
        except OverflowError:
            return math.inf
        except ValueError:
            return math.nan
    return run


def _rcp(x: float) -> float:
    return F.div_float(1.0, x)


def _rsqrt(x: float) -> float:
    if x == 0.0:
        return math.copysign(math.inf, x)
    if x < 0:
        return math.nan
    return 1.0 / math.sqrt(x) if not math.isinf(x) else 0.0


def _sqrt(x: float) -> float:
    return math.nan if x < 0 else math.sqrt(x)


def _lg2(x: float) -> float:
    if x == 0.0:
        return -math.inf
    if x < 0:
        return math.nan
    return math.log2(x)


def _trig(fn: Callable) -> Callable:
    return lambda x: math.nan if math.isinf(x) else fn(x)


@op("rcp", "rcp{.rn,.rz,.rm,.rp}{.ftz}.f32", "rcp.approx{.ftz}.f32",
    desc="reciprocal (exact, or approximate computed in double)",
    mods=("approx", "ftz") + ROUNDINGS)
def _rcp_op(cx: Ctx):
    return _approx_unary(cx, _safe(_rcp), lambda x, mode: F.div_exact(1.0, x, mode))


@op("sqrt", "sqrt{.rn,.rz,.rm,.rp}{.ftz}.f32", "sqrt.approx{.ftz}.f32",
    desc="square root (exact, or approximate computed in double)",
    mods=("approx", "ftz") + ROUNDINGS)
def _sqrt_op(cx: Ctx):
    return _approx_unary(cx, _safe(_sqrt), F.sqrt_exact)


@op("rsqrt", "rsqrt.approx{.ftz}.f32", desc="approximate 1/sqrt(x), computed in double",
    mods=("approx", "ftz"))
def _rsqrt_op(cx: Ctx):
    return _approx_unary(cx, _safe(_rsqrt))


@op("ex2", "ex2.approx{.ftz}.f32", desc="approximate 2^x, computed in double",
    mods=("approx", "ftz"))
def _ex2_op(cx: Ctx):
    return _approx_unary(cx, _safe(lambda x: 2.0 ** x))


@op("lg2", "lg2.approx{.ftz}.f32", desc="approximate log2(x), computed in double",
    mods=("approx", "ftz"))
def _lg2_op(cx: Ctx):
    return _approx_unary(cx, _safe(_lg2))


@op("sin", "sin.approx{.ftz}.f32", desc="approximate sine, computed in double",
    mods=("approx", "ftz"))
def _sin_op(cx: Ctx):
    return _approx_unary(cx, _safe(_trig(math.sin)))


@op("cos", "cos.approx{.ftz}.f32", desc="approximate cosine, computed in double",
    mods=("approx", "ftz"))
def _cos_op(cx: Ctx):
    return _approx_unary(cx, _safe(_trig(math.cos)))


@op("tanh", "tanh.approx.f32", desc="approximate tanh, computed in double",
    mods=("approx",))
def _tanh_op(cx: Ctx):
    return _approx_unary(cx, _safe(math.tanh))


@op("copysign", "copysign.f32", desc="b with the sign of a")
def _copysign(cx: Ctx):
    cx.one_type(("f32",))
    ops = cx.operands(3)
    d, a, b = cx.dst(ops[0], "f32"), cx.src(ops[1], "f32"), cx.src(ops[2], "f32")
    return ALU, lambda th: d(th, (b(th) & 0x7FFFFFFF) | (a(th) & F.SIGN))


_TESTP = {
    "finite": lambda b: (b & 0x7F800000) != 0x7F800000,
    "infinite": lambda b: (b & 0x7FFFFFFF) == 0x7F800000,
    "number": lambda b: not F.is_nan(b),
    "notanumber": F.is_nan,
    "normal": lambda b: 0 < (b & 0x7F800000) < 0x7F800000,
    "subnormal": F.is_subnormal,
}


@op("testp", "testp.{finite,infinite,number,notanumber,normal,subnormal}.f32",
    desc="classify a float", mods=tuple(_TESTP))
def _testp(cx: Ctx):
    cx.one_type(("f32",))
    kinds = [m for m in cx.code.modifiers if m in _TESTP]
    if len(kinds) != 1:
        raise cx.unsupported()
    fn = _TESTP[kinds[0]]
    ops = cx.operands(2)
    d, a = cx.dst(ops[0], "pred"), cx.src(ops[1], "f32")
    return ALU, lambda th: d(th, fn(a(th)))


# ================================================================== conversions

CVT_TYPES = INT_TYPES + ("f32", "f16")


@op("cvt", "cvt{.sat}.{u8,s8,u16,s16,u32,s32,u64,s64}.{u8,s8,u16,s16,u32,s32,u64,s64}",
    "cvt{.rn,.rz,.rm,.rp}{.sat}.f32.{u8,...,s64}",
    "cvt.{rni,rzi,rmi,rpi}{.ftz}{.sat}.{u8,...,s64}.f32",
    "cvt{.rni,.rzi,.rmi,.rpi,.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32.f32",
    "cvt.rn{.ftz}.f16.f32", "cvt{.ftz}.f32.f16",
    desc="convert between integer widths (truncate/extend, .sat clamps), int<->f32 "
         "(rounding; float->int saturates, NaN->0), f32 rounding to integral, f16<->f32",
    mods=("sat", "ftz") + ROUNDINGS + INT_ROUNDINGS)
def _cvt(cx: Ctx):
    types = cx.code.types
    if len(types) != 2 or any(t not in CVT_TYPES for t in types):
        raise cx.unsupported()
    dt, at = types
    cx.operands(2)
    if "f16" in types:
        return _cvt_f16(cx, dt, at)
    if dt == "f32" and at == "f32":
        return _cvt_f32_f32(cx)
    if dt == "f32":
        return _cvt_int_to_f32(cx, at)
    if at == "f32":
        return _cvt_f32_to_int(cx, dt)
    return _cvt_int(cx, dt, at)


def _cvt_int(cx: Ctx, dt: str, at: str):
    if cx.mods & ({"ftz"} | set(ROUNDINGS) | set(INT_ROUNDINGS)):
        raise cx.unsupported()
    abits, dbits = type_bits(at), type_bits(dt)
    d, a = cx.dst(cx.ops[0], dt), cx.src(cx.ops[1], at)
    lo, hi = ((-(1 << (dbits - 1)), (1 << (dbits - 1)) - 1) if is_signed(dt)
              else (0, mask(dbits)))
    m = mask(dbits)
    read = (lambda th: signed(a(th), abits)) if is_signed(at) else a
    if "sat" in cx.mods:
        return ALU, lambda th: d(th, min(max(read(th), lo), hi) & m)
    return ALU, lambda th: d(th, read(th) & m)


def _cvt_int_to_f32(cx: Ctx, at: str):
    mode = cx.rounding(ROUNDINGS)
    abits = type_bits(at)
    a = cx.src(cx.ops[1], at)
    d = cx.fdst(cx.ops[0], False, "sat" in cx.mods)
    if is_signed(at):
        return ALU, lambda th: d(th, F.int_to_f32(signed(a(th), abits), mode))
    return ALU, lambda th: d(th, F.int_to_f32(a(th), mode))


def _cvt_f32_to_int(cx: Ctx, dt: str):
    mode = cx.rounding(INT_ROUNDINGS, "rzi")
    bits, sgn = type_bits(dt), is_signed(dt)
    a = cx.fsrc(cx.ops[1], "ftz" in cx.mods)
    d = cx.dst(cx.ops[0], dt)
    m = mask(bits)
    return ALU, lambda th: d(th, F.f32_to_int(a(th), mode, bits, sgn) & m)


def _cvt_f32_f32(cx: Ctx):
    mode = cx.rounding(ROUNDINGS + INT_ROUNDINGS, "")
    ftz, sat = "ftz" in cx.mods, "sat" in cx.mods
    a = cx.src(cx.ops[1], "f32")
    d = cx.fdst(cx.ops[0], ftz, sat)
    if mode in INT_ROUNDINGS:
        def run(th):
            b = F.flush(a(th)) if ftz else a(th)
            if F.is_nan(b):
                d(th, F.CANONICAL_NAN)
                return
            d(th, F.from_float(F.round_integral(F.to_float(b), mode)))
        return ALU, run
    if ftz:
        return ALU, lambda th: d(th, F.flush(a(th)))
    return ALU, lambda th: d(th, a(th))


def _cvt_f16(cx: Ctx, dt: str, at: str):
    if dt == "f16" and at == "f32":
        if cx.rounding(ROUNDINGS, "") != "rn" or "sat" in cx.mods:
            raise cx.unsupported()
        ftz = "ftz" in cx.mods
        a, d = cx.src(cx.ops[1], "f32"), cx.dst(cx.ops[0], "f16")
        if ftz:
            return ALU, lambda th: d(th, _f32_to_f16(F.flush(a(th))))
        return ALU, lambda th: d(th, _f32_to_f16(a(th)))
    if dt == "f32" and at == "f16":
        if cx.rounding(ROUNDINGS, "") != "" or "sat" in cx.mods:
            raise cx.unsupported()
        a, d = cx.src(cx.ops[1], "f16"), cx.fdst(cx.ops[0], "ftz" in cx.mods)
        return ALU, lambda th: d(th, _f16_to_f32(a(th)))
    raise cx.unsupported()


# ============================================================ moves and memory

MOV_TYPES = ("pred",) + BIT_TYPES[1:] + INT_ARITH + ("f32", "f16")


@op("mov", "mov.{pred,b16,b32,b64,u16,u32,u64,s16,s32,s64,f32}",
    "mov.{u32,u64} d, variable (its address in its state space)",
    "mov.{b32,b64} d, {a, b, ...} (pack) / {a, b, ...}, a (unpack)",
    desc="move a register, immediate, special register, variable address, or "
         "pack/unpack a vector")
def _mov(cx: Ctx):
    t = cx.one_type(MOV_TYPES)
    ops = cx.operands(2)
    dst, src = ops
    if isinstance(src, Vec):
        return _pack(cx, t, dst, src)
    if isinstance(dst, Vec):
        return _unpack(cx, t, dst, src)
    d, a = cx.dst(dst, t), cx.src(src, t)
    return ALU, lambda th: d(th, a(th))


def _pack(cx: Ctx, t: str, dst, src: Vec):
    width = type_bits(t) // len(src.items)
    et = f"b{width}"
    if width not in (8, 16, 32):
        raise cx.unsupported()
    parts = [cx.src(item, et) for item in src.items]
    d = cx.dst(dst, t)

    def run(th):
        v = 0
        for k, g in enumerate(parts):
            v |= g(th) << (width * k)
        d(th, v)
    return ALU, run


def _unpack(cx: Ctx, t: str, dst: Vec, src):
    width = type_bits(t) // len(dst.items)
    et = f"b{width}"
    if width not in (8, 16, 32):
        raise cx.unsupported()
    outs = [cx.dst(item, et) for item in dst.items]
    a = cx.src(src, t)
    m = mask(width)

    def run(th):
        v = a(th)
        for k, put in enumerate(outs):
            put(th, (v >> (width * k)) & m)
    return ALU, run


LD_TYPES = BIT_TYPES + INT_TYPES + ("f32", "f16")
LD_MODS = tuple(SPACES) + tuple(ORDERING) + ("v2", "v4", "shared::cta", "shared::cluster",
                                              "param::entry", "param::func", "unified")


def _vector_count(cx: Ctx) -> int:
    if "v4" in cx.mods:
        return 4
    return 2 if "v2" in cx.mods else 1


def _space_access(cx: Ctx, space: str) -> Callable:
    """(thread, address) → (AddressSpace, address in it) for `space`."""
    if space == "generic":
        def generic(th, addr):
            return th.sp.generic(addr)
        return generic
    attr = "glob" if space == "global" else space
    return lambda th, addr: (getattr(th.sp, attr), addr)


def _memory_fault(space: str, addr: int, local: int, err: MemoryFault) -> MemoryFault:
    if space != "generic" or addr == local:
        return err
    return MemoryFault(err.kind, f"generic address 0x{addr:x} maps to {err.detail}")


def _checked(space: str, access: Callable, do: Callable) -> Callable:
    """Run `do(space_obj, local_addr)`, rewording faults of generic accesses."""
    def run(th, addr):
        sp, local = access(th, addr)
        try:
            return do(sp, local)
        except MemoryFault as err:
            raise _memory_fault(space, addr, local, err) from None
    return run


@op("ld", "ld{.weak,.volatile,.relaxed,.acquire}{.scope}{.global,.shared,.local,.const,"
    ".param}{.nc}{.cache}{.v2,.v4}.{b8..b64,u8..u64,s8..s64,f32}",
    desc="load (zero/sign-extended into wider registers); generic without a space",
    mods=LD_MODS)
def _ld(cx: Ctx):
    return _load(cx)


@op("ldu", "ldu{.global}{.v2,.v4}.type", desc="load read-only data (as ld)", mods=LD_MODS)
def _ldu(cx: Ctx):
    return _load(cx)


def _load(cx: Ctx):
    t = cx.one_type(LD_TYPES)
    space = cx.space()
    size, n = max(1, type_bits(t) // 8), _vector_count(cx)
    ops = cx.operands(2, 3)
    targets = ops[0].items if isinstance(ops[0], Vec) else [ops[0]]
    if len(targets) != n:
        raise cx.unsupported(f"'{cx.inst.opcode.data}' needs {n} destination registers")
    puts = [cx.dst(x, t) for x in targets]
    addr = cx.address(ops[1])
    load = _checked(space, _space_access(cx, space), lambda sp, a: sp.load(a, size * n))
    if n == 1:
        put = puts[0]
        return ALU, lambda th: put(th, load(th, addr(th)))
    m, width = mask(8 * size), 8 * size

    def run(th):
        v = load(th, addr(th))
        for k, p in enumerate(puts):
            p(th, (v >> (width * k)) & m)
    return ALU, run


@op("st", "st{.weak,.volatile,.relaxed,.release}{.scope}{.global,.shared,.local}{.cache}"
    "{.v2,.v4}.{b8..b64,u8..u64,s8..s64,f32}", desc="store (truncated to the type); "
    "generic without a space", mods=LD_MODS)
def _st(cx: Ctx):
    t = cx.one_type(LD_TYPES)
    space = cx.space()
    if space in ("const", "param"):
        raise cx.unsupported(f"stores to .{space} are not supported")
    size, n = max(1, type_bits(t) // 8), _vector_count(cx)
    ops = cx.operands(2, 3)
    sources = ops[1].items if isinstance(ops[1], Vec) else [ops[1]]
    if len(sources) != n:
        raise cx.unsupported(f"'{cx.inst.opcode.data}' needs {n} source values")
    gets = [cx.src(x, t) for x in sources]
    addr = cx.address(ops[0])
    access = _space_access(cx, space)
    width = 8 * size

    def run(th):
        a = addr(th)
        v = 0
        for k, g in enumerate(gets):
            v |= g(th) << (width * k)
        sp, local = access(th, a)
        try:
            sp.store(local, size * n, v)
        except MemoryFault as err:
            raise _memory_fault(space, a, local, err) from None
    return ALU, run


@op("cvta", "cvta{.to}.{global,shared,local,const}.{u32,u64}",
    desc="convert between a state-space address and a generic address",
    mods=("to", "global", "shared", "local", "const", "shared::cta"))
def _cvta(cx: Ctx):
    t = cx.one_type(("u32", "u64"))
    space = cx.space("")
    if space not in ("global", "shared", "local", "const"):
        raise cx.unsupported()
    ops = cx.operands(2)
    d, a = cx.dst(ops[0], t), cx.src(ops[1], "u64")
    m = mask(type_bits(t))
    if "to" in cx.mods:
        return ALU, lambda th: d(th, from_generic(space, a(th)) & m)
    return ALU, lambda th: d(th, to_generic(space, a(th)) & m)


@op("isspacep", "isspacep.{global,shared,local,const}",
    desc="whether a generic address lies in a state space",
    mods=("global", "shared", "local", "const", "shared::cta"))
def _isspacep(cx: Ctx):
    space = cx.space("")
    if not space or space == "param":
        raise cx.unsupported()
    ops = cx.operands(2)
    d, a = cx.dst(ops[0], "pred"), cx.src(ops[1], "u64")
    return ALU, lambda th: d(th, in_window(space, a(th)))


# ==================================================================== atomics

_ATOM_OPS = ("add", "min", "max", "inc", "dec", "cas", "exch", "and", "or", "xor")
ATOM_TYPES = ("b32", "b64", "u32", "s32", "u64", "s64", "f32")
ATOM_MODS = _ATOM_OPS + tuple(SPACES) + tuple(ORDERING) + ("shared::cta",)


def _atom_update(cx: Ctx, name: str, t: str) -> Callable:
    """new = f(old, b, c) for atom/red op `name` on type `t`."""
    bits = type_bits(t)
    m = mask(bits)
    if t == "f32":
        if name != "add":
            raise cx.unsupported()
        return lambda old, b, c: F.flush(F.from_float(
            F.to_float(F.flush(old)) + F.to_float(F.flush(b))))
    if name in ("min", "max"):
        fn = _minmax_int(t if t[0] != "b" else "u" + t[1:], name == "max")
        return lambda old, b, c: fn(old, b)
    table = {
        "add": lambda old, b, c: (old + b) & m,
        "inc": lambda old, b, c: 0 if old >= b else old + 1,
        "dec": lambda old, b, c: b if old == 0 or old > b else old - 1,
        "cas": lambda old, b, c: c if old == b else old,
        "exch": lambda old, b, c: b,
        "and": lambda old, b, c: old & b,
        "or": lambda old, b, c: old | b,
        "xor": lambda old, b, c: old ^ b,
    }
    return table[name]


def _atomic(cx: Ctx, returns: bool):
    t = cx.one_type(ATOM_TYPES)
    names = [m for m in cx.code.modifiers if m in _ATOM_OPS]
    if len(names) != 1:
        raise cx.unsupported()
    name = names[0]
    space = cx.space()
    if space in ("const", "param", "local"):
        raise cx.unsupported()
    update = _atom_update(cx, name, t)
    size = type_bits(t) // 8
    ops = cx.ops
    first = 1 if returns else 0
    want = first + (3 if name == "cas" else 2)
    cx.operands(want)
    d = cx.dst(ops[0], t) if returns else None
    addr = cx.address(ops[first])
    b = cx.src(ops[first + 1], t)
    c = cx.src(ops[first + 2], t) if name == "cas" else (lambda th: 0)
    access = _space_access(cx, space)

    def run(th):
        a = addr(th)
        sp, local = access(th, a)
        try:
            old = sp.load(local, size)
            sp.store(local, size, update(old, b(th), c(th)))
        except MemoryFault as err:
            raise _memory_fault(space, a, local, err) from None
        if d is not None:
            d(th, old)
    return ALU, run


@op("atom", "atom{.sem}{.scope}{.global,.shared}.{and,or,xor,exch,cas}.{b32,b64}",
    "atom{.global,.shared}.{add,inc,dec,min,max}.{u32,s32,u64,s64}",
    "atom{.global,.shared}.add.f32",
    desc="atomic read-modify-write returning the old value (threads in lane order; "
         "f32 add flushes subnormals)", mods=ATOM_MODS)
def _atom(cx: Ctx):
    return _atomic(cx, returns=True)


@op("red", "red{.sem}{.scope}{.global,.shared}.{add,inc,dec,min,max,and,or,xor}.type",
    desc="atomic reduction (no result)", mods=ATOM_MODS)
def _red(cx: Ctx):
    return _atomic(cx, returns=False)


# ============================================================== control flow

@op("bra", "bra{.uni} label", desc="branch (predicated with @p / @!p)", mods=("uni",))
def _bra(cx: Ctx):
    ops = cx.operands(1)
    if not isinstance(ops[0], Sym) or ops[0].name not in cx.labels:
        raise cx.unsupported("branch targets must be labels of the kernel")
    return BRANCH, cx.labels[ops[0].name]


@op("ret", "ret{.uni}", desc="return from the kernel (the thread exits)", mods=("uni",))
def _ret(cx: Ctx):
    cx.operands(0)
    return EXIT, None


@op("exit", "exit", desc="the thread exits")
def _exit(cx: Ctx):
    cx.operands(0)
    return EXIT, None


@op("trap", "trap", desc="abort the kernel (a Trap)")
def _trap(cx: Ctx):
    return TRAP, "trap instruction executed"


def _nop(cx: Ctx):
    return NOP, None


for _name, _forms, _desc, _mods in (
    ("membar", ("membar.{cta,gl,sys}",), "memory barrier (no effect: memory is "
     "sequentially consistent)", ("cta", "gl", "sys")),
    ("fence", ("fence{.sc,.acq_rel}.{cta,gpu,sys}",), "memory fence (no effect)",
     ("sc", "acq_rel", "cta", "gpu", "sys", "cluster", "proxy", "async")),
    ("nanosleep", ("nanosleep.u32 t",), "sleep (no effect)", ()),
    ("pmevent", ("pmevent a",), "performance-monitor event (no effect)", ("mask",)),
    ("prefetch", ("prefetch{.global,.local}.{L1,L2} [a]",), "prefetch (no effect)",
     ("global", "local", "L1", "L2")),
    ("prefetchu", ("prefetchu.L1 [a]",), "prefetch (no effect)", ("L1",)),
):
    op(_name, *_forms, desc=_desc, mods=_mods)(_nop)


def _barrier_operands(cx: Ctx, first: int) -> tuple[Callable, Callable | None]:
    ops = cx.ops
    bid = cx.src(ops[first], "u32")
    count = cx.src(ops[first + 1], "u32") if len(ops) > first + 1 else None
    return bid, count


@op("bar", "bar{.cta}.sync a{, b}", "bar{.cta}.arrive a, b",
    "bar{.cta}.red.popc.u32 d, a{, b}, {!}c", "bar{.cta}.red.{and,or}.pred p, a{, b}, {!}c",
    "bar.warp.sync mask",
    desc="CTA barrier: waits until all non-exited threads of the CTA (or b threads) arrive",
    mods=("cta", "sync", "arrive", "red", "popc", "and", "or", "warp", "aligned"))
def _bar(cx: Ctx):
    if "warp" in cx.mods:
        cx.operands(1)
        return NOP, None
    if "red" in cx.mods:
        return _bar_red(cx)
    if "arrive" in cx.mods:
        cx.operands(2)
        bid, count = _barrier_operands(cx, 0)
        return BARRIER, BarrierSpec("arrive", bid, count)
    cx.operands(1, 2)
    bid, count = _barrier_operands(cx, 0)
    return BARRIER, BarrierSpec("sync", bid, count)


@op("barrier", "barrier{.cta}.sync{.aligned} a{, b}", "barrier{.cta}.arrive{.aligned} a, b",
    "barrier{.cta}.red.{popc,and,or}{.aligned}.type d, a{, b}, {!}c",
    desc="CTA barrier (as bar)",
    mods=("cta", "sync", "arrive", "red", "popc", "and", "or", "aligned"))
def _barrier(cx: Ctx):
    return _bar(cx)


def _bar_red(cx: Ctx):
    reds = [m for m in cx.code.modifiers if m in ("popc", "and", "or")]
    if len(reds) != 1:
        raise cx.unsupported()
    ops = cx.operands(3, 4)
    t = "u32" if reds[0] == "popc" else "pred"
    bid = cx.src(ops[1], "u32")
    count = cx.src(ops[2], "u32") if len(ops) == 4 else None
    pred = cx.psrc(ops[-1])
    return BARRIER, BarrierSpec("red", bid, count, pred, cx.dst(ops[0], t), reds[0])


# ========================================================== warp collectives

def _member_mask_ok(cx: Ctx, first_extra: int) -> None:
    """The member-mask operand is read (for checking) but otherwise ignored."""
    if len(cx.ops) > first_extra:
        cx.src(cx.ops[first_extra], "b32")


@op("shfl", "shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask",
    "shfl.{up,down,bfly,idx}.b32 d[|p], a, b, c",
    desc="warp shuffle among the threads executing it together (lane fields masked to "
         "the warp size)", mods=("sync", "up", "down", "bfly", "idx"))
def _shfl(cx: Ctx):
    cx.one_type(("b32",))
    modes = [m for m in cx.code.modifiers if m in ("up", "down", "bfly", "idx")]
    if len(modes) != 1:
        raise cx.unsupported()
    mode = modes[0]
    ops = cx.operands(5 if "sync" in cx.mods else 4)
    target = ops[0]
    if isinstance(target, Pair):
        d, p = cx.dst(target.first, "b32"), cx.dst(target.second, "pred")
    else:
        d, p = cx.dst(target, "b32"), None
    a, b, c = cx.src(ops[1], "b32"), cx.src(ops[2], "b32"), cx.src(ops[3], "b32")
    source_lane = _shfl_lane(mode, cx.warp_size - 1)

    def run(group):
        results = []
        for th in group:
            j, pval = source_lane(th.lane, b(th), c(th))
            lanes = th.warp
            src = lanes[j] if j < len(lanes) else th
            results.append((th, a(src), pval))
        for th, value, pval in results:
            d(th, value)
            if p is not None:
                p(th, pval)
    return WARP, run


def _shfl_lane(mode: str, lane_mask: int) -> Callable:
    """(lane, b, c) → (source lane, in range) per the PTX ISA's shfl pseudo-code,
    with every 5-bit lane field masked to the warp size (warp_size - 1)."""
    def lane_of(lane: int, b: int, c: int) -> tuple[int, bool]:
        bval, cval, seg = b & lane_mask, c & lane_mask, (c >> 8) & lane_mask
        max_lane = (lane & seg) | (cval & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j = lane - bval
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bval
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            ok = j <= max_lane
        else:
            j = min_lane | (bval & ~seg)
            ok = j <= max_lane
        return (j, True) if ok else (lane, False)
    return lane_of


@op("vote", "vote.sync.{any,all,uni}.pred d, {!}a, membermask",
    "vote.sync.ballot.b32 d, {!}a, membermask", "vote.{any,all,uni}.pred d, {!}a",
    "vote.ballot.b32 d, {!}a",
    desc="warp vote over the threads executing it together",
    mods=("sync", "any", "all", "uni", "ballot"))
def _vote(cx: Ctx):
    modes = [m for m in cx.code.modifiers if m in ("any", "all", "uni", "ballot")]
    if len(modes) != 1:
        raise cx.unsupported()
    mode = modes[0]
    cx.one_type(("b32",) if mode == "ballot" else ("pred",))
    ops = cx.operands(3 if "sync" in cx.mods else 2)
    _member_mask_ok(cx, 2)
    a = cx.psrc(ops[1])
    if mode == "ballot":
        d = cx.dst(ops[0], "b32")

        def ballot(group):
            bits = 0
            for th in group:
                if a(th):
                    bits |= 1 << th.lane
            for th in group:
                d(th, bits)
        return WARP, ballot
    d = cx.dst(ops[0], "pred")
    reduce = {"any": any, "all": all, "uni": lambda vs: all(vs) or not any(vs)}[mode]

    def vote(group):
        result = reduce([bool(a(th)) for th in group])
        for th in group:
            d(th, result)
    return WARP, vote


@op("activemask", "activemask.b32 d",
    desc="mask of the lanes executing this instruction together")
def _activemask(cx: Ctx):
    cx.one_type(("b32",))
    d = cx.dst(cx.operands(1)[0], "b32")

    def run(group):
        bits = 0
        for th in group:
            bits |= 1 << th.lane
        for th in group:
            d(th, bits)
    return WARP, run


@op("match", "match.any.sync.{b32,b64} d, a, membermask",
    "match.all.sync.{b32,b64} d[|p], a, membermask",
    desc="lanes holding the same value (among the threads executing it together)",
    mods=("any", "all", "sync"))
def _match(cx: Ctx):
    t = cx.one_type(("b32", "b64"))
    ops = cx.operands(3)
    _member_mask_ok(cx, 2)
    a = cx.src(ops[1], t)
    target = ops[0]
    p = None
    if isinstance(target, Pair):
        d, p = cx.dst(target.first, "b32"), cx.dst(target.second, "pred")
    else:
        d = cx.dst(target, "b32")
    every = "all" in cx.mods
    if every == ("any" in cx.mods) or (p is not None and not every):
        raise cx.unsupported()

    def run(group):
        values = [(th, a(th)) for th in group]
        for th, v in values:
            same = 0
            for other, w in values:
                if w == v:
                    same |= 1 << other.lane
            if every:
                uniform = all(w == v for _, w in values)
                d(th, same if uniform else 0)
                if p is not None:
                    p(th, uniform)
            else:
                d(th, same)
    return WARP, run


@op("redux", "redux.sync.{add,min,max}.{u32,s32} d, a, membermask",
    "redux.sync.{and,or,xor}.b32 d, a, membermask",
    desc="warp reduction over the threads executing it together",
    mods=("sync", "add", "min", "max", "and", "or", "xor"))
def _redux(cx: Ctx):
    t = cx.one_type(("u32", "s32", "b32"))
    kinds = [m for m in cx.code.modifiers if m in ("add", "min", "max", "and", "or", "xor")]
    if len(kinds) != 1:
        raise cx.unsupported()
    kind = kinds[0]
    ops = cx.operands(3)
    d, a = cx.dst(ops[0], t), cx.src(ops[1], t)
    conv = (lambda x: signed(x, 32)) if t == "s32" else (lambda x: x)
    fold = {"add": sum, "min": min, "max": max,
            "and": lambda vs: _fold(vs, lambda x, y: x & y),
            "or": lambda vs: _fold(vs, lambda x, y: x | y),
            "xor": lambda vs: _fold(vs, lambda x, y: x ^ y)}[kind]

    def run(group):
        result = fold([conv(a(th)) for th in group]) & 0xFFFFFFFF
        for th in group:
            d(th, result)
    return WARP, run


def _fold(values: list[int], fn: Callable) -> int:
    out = values[0]
    for v in values[1:]:
        out = fn(out, v)
    return out
