"""Decoding for the reference engine: the registry of opcode families and `Ctx`,
which turns one `ptx.inst`'s operands into getters and setters on a thread.

The families register themselves with `@op` (ref_int, ref_float, ref_memory,
ref_control, ref_warp); `ref_ops` assembles the table and decodes instructions.
Values: a register holds its bit pattern as a Python int masked to the
register's declared width (a predicate holds a bool); f32 is its IEEE pattern.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from qgc.diagnostics import QgcError, with_snippet
from qgc.dialects import ptx
from qgc.dialects.ptx import Addr, Imm, Reg, Sym
from qgc.machine.softfloat import to_f16 as f32_to_f16
from qgc.runtime import float32 as F
from qgc.runtime.memory import Layout

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
    """An instruction or form the reference engine does not implement (status 2),
    shown with its source line and a caret."""

    def __init__(self, message: str):
        super().__init__(with_snippet(message), status=2)


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
        return f32_to_f16(value)
    return value


