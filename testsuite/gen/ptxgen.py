"""Random PTX kernels with an independent oracle, as hypothesis strategies.

A strategy builds a kernel as a small list of instruction records (`Inst`,
`Label`), prints it as PTX in nvcc's style, and computes the expected output
buffers by interpreting *the same records* thread by thread (`run_oracle`).
The oracle never parses PTX and never runs a qgc engine: 32/64-bit integers wrap
as Python ints, f32 arithmetic is numpy float32 (IEEE round to nearest even),
`fma.rn` is rounded once from the exact value (fractions.Fraction).

    from testsuite.gen import programs
    @given(programs("int32"))            # or programs() for any family;
    def test(p):                         # programs(f, max_threads=4, max_ops=6) for
        p.ptx, p.launch, p.expected      # smaller kernels (slow engines, small machines)

`p.launch` is DESIGN §3's launch JSON as a dict; `p.expected` holds, per launch
argument, the final contents of a pointer's buffer (ints as the element type's
signed/unsigned value, f32 as Python floats: compare them by bit pattern) and None
for a scalar.

Families (FAMILIES):
  int32   straight-line 32-bit integer DAGs: add sub mul.lo/hi mad.lo and or xor not
          neg shl shr(.b32/.u32/.s32, immediate and register amounts, >= 32 too)
          min max abs popc clz brev setp(every comparison)+selp div rem mov, and
          earlier ops again (commuted, or through a copy of a source)
  f32     straight-line f32: add sub mul (with and without .rn) fma.rn div.rn sqrt.rn
          abs neg min max setp(ordered, unordered, num, nan)+selp mov mov.b32(f32 bits)
          cvt.rn.f32.s32 cvt.rzi.s32.f32, hex immediates 0fXXXXXXXX; x/x, x*inf, x+inf
          and sqrt(-x) make NaNs on purpose
  branch  divergent if/else (`@%p bra`, `@!%p bra`, `bra.uni`), bounded loops with
          data-dependent trip counts (<= 8), registers reassigned in branches and
          loops, stores in branches, early `ret`
  shared  a `.shared` array: every thread writes its slot, `bar.sync 0`, reads a
          neighbour's ((tid + k) % ntid) or a fixed slot; one or two rounds;
          32-bit (`mov.u32 %r, smem`) and 64-bit shared addresses
  atomic  atom.global.{add,min,max,and,or,xor} with lane conflicts (word tid % k or
          a data-dependent word; one operation per word so the order never matters),
          and atom.global.cas on one word per thread (its old value is stored)
  int64   add sub mul.lo/hi and or xor not neg shl shr min max setp+selp on
          .s64/.u64/.b64, popc/clz/brev.b64, mul.wide.s32/.u32, cvt between widths,
          ld/st.global.u64

Every launch has 1-16 threads in 1-2 CTAs; the results never depend on the warp
size (no shuffles or votes, barriers only in uniform code). No computed value is
dead (but the old values order-independent atomics return): before the final stores, every value nothing reads is folded (xor/add, bijective in
each operand) into a stored one, and a branch or loop body folds its own dead values
into a live register, so a wrong bit anywhere reaches memory. Conventions that keep
every answer defined:
  - a register divisor is made non-zero, and INT_MIN / -1 is steered away, by
    setp/selp/xor/not/or instructions that are part of the program;
  - no NaN is ever stored or fed to arithmetic: an f32 register that may hold a NaN
    (a result of add/sub/mul/div/fma/sqrt) is read only by setp, min/max and selp
    until a sanitizer (setp.nan/num/neu/eq + selp, or max with -inf / min with
    +inf) makes a NaN-free copy, so NaN payloads never matter (the oracle checks it);
  - min/max.f32 return the other operand for one NaN, and order -0.0 below +0.0
    (PTX ISA: "If values of both inputs are 0.0, then +0.0 > -0.0");
  - cvt.rzi.s32.f32 saturates (PTX: float-to-integer conversions clamp by default);
  - no add/sub.f32 without a rounding modifier reads the result of a mul.f32 without
    one (ptxas may fuse such a pair into an fma); maybe-NaN products are always
    sanitized into a new register first, and `_finish` checks it.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

KERNEL_NAME = "gen"
MAX_THREADS = 16
STEP_LIMIT = 20_000  # instructions per thread: a generator bug, never a real program

# ===================================================================== records


@dataclass(frozen=True)
class Reg:
    name: str
    kind: str  # "pred" | "b32" | "b64" | "f32"


@dataclass(frozen=True)
class Imm:
    """An integer immediate; `value` is already wrapped to the width it is used at."""
    value: int
    text: str


@dataclass(frozen=True)
class FImm:
    """An f32 immediate, printed in PTX hex form 0fXXXXXXXX."""
    bits: int


@dataclass(frozen=True)
class Special:
    name: str  # %tid.x, %ntid.x, %ctaid.x


@dataclass(frozen=True)
class Sym:
    name: str  # a kernel parameter or a .shared variable


@dataclass(frozen=True)
class Mem:
    base: Reg | Sym
    offset: int = 0


@dataclass(frozen=True)
class Label:
    name: str


Operand = Reg | Imm | FImm | Special | Sym | Mem | Label


@dataclass(frozen=True)
class Inst:
    """`op.mods.types args` with an optional guard (`@%p` / `@!%p`, branches only).

    args are in PTX order; every op except st/bar/bra/ret has its destination first.
    """
    op: str
    mods: tuple[str, ...]
    types: tuple[str, ...]
    args: tuple[Operand, ...]
    guard: Reg | None = None
    negate: bool = False

    @property
    def opcode(self) -> str:
        return ".".join((self.op, *self.mods, *self.types))


def _operand_text(x: Operand) -> str:
    if isinstance(x, Reg | Special | Sym | Label):
        return x.name
    if isinstance(x, Imm):
        return x.text
    if isinstance(x, FImm):
        return f"0f{x.bits:08X}"
    assert isinstance(x, Mem)
    return f"[{x.base.name}{f'+{x.offset}' if x.offset else ''}]"


def _inst_text(x: Inst) -> str:
    guard = f"@{'!' if x.negate else ''}{x.guard.name} " if x.guard else ""
    args = ", ".join(_operand_text(a) for a in x.args)
    return f"\t{guard}{x.opcode}" + (f" \t{args};" if args else ";")


# ================================================================ the kernel

_REG_PREFIX = {"pred": "%p", "f32": "%f", "b32": "%r", "b64": "%rd"}
_ELEM_BYTES = {"u32": 4, "s32": 4, "b32": 4, "f32": 4, "u64": 8, "s64": 8, "b64": 8}


class Kernel:
    """One `.entry`, its launch, and a tiny register and label allocator."""

    def __init__(self, grid: int, block: int):
        self.grid, self.block = grid, block
        self.params: list[tuple[str, str]] = []  # (name, PTX type)
        self.args: list[dict] = []  # launch arguments, in parameter order
        self.code: list[Inst | Label] = []
        self.shared: list[tuple[str, str, int, bool]] = []  # name, type, count, module scope
        self._regs = dict.fromkeys(_REG_PREFIX, 0)
        self._labels = 0

    @property
    def threads(self) -> int:
        return self.grid * self.block

    def reg(self, kind: str) -> Reg:
        self._regs[kind] += 1
        return Reg(f"{_REG_PREFIX[kind]}{self._regs[kind]}", kind)

    def label(self) -> Label:
        self._labels += 1
        return Label(f"$L__BB0_{self._labels}")

    def emit(self, op: str, mods: str | tuple = (), types: str | tuple = (), *args: Operand,
             guard: Reg | None = None, negate: bool = False) -> None:
        mods = (mods,) if isinstance(mods, str) else tuple(mods)
        types = (types,) if isinstance(types, str) else tuple(types)
        self.code.append(Inst(op, mods, types, args, guard, negate))

    def place(self, label: Label) -> None:
        self.code.append(label)

    def _param(self, ptx_type: str, arg: dict) -> Sym:
        name = f"{KERNEL_NAME}_param_{len(self.params)}"
        self.params.append((name, ptx_type))
        self.args.append(arg)
        return Sym(name)

    def pointer(self, ty: str, raw: list[int]) -> Reg:
        """A `ty*` parameter holding `raw` (bit patterns): its global address, nvcc-style."""
        sym = self._param("u64", {"type": f"{ty}*", "data": [from_raw(ty, v) for v in raw]})
        generic, glob = self.reg("b64"), self.reg("b64")
        self.emit("ld", "param", "u64", generic, Mem(sym))
        self.emit("cvta", ("to", "global"), "u64", glob, generic)
        return glob

    def scalar(self, ty: str, raw: int) -> Reg:
        sym = self._param("u32", {"type": ty, "value": from_raw(ty, raw)})
        r = self.reg("b32")
        self.emit("ld", "param", "u32", r, Mem(sym))
        return r

    def shared_array(self, words: int, module_scope: bool, typed: bool) -> Sym:
        name = f"{KERNEL_NAME}_smem{len(self.shared)}"
        if typed:
            self.shared.append((name, "u32", words, module_scope))
        else:
            self.shared.append((name, "b8", 4 * words, module_scope))
        return Sym(name)

    def launch(self) -> dict:
        return {"kernel": KERNEL_NAME, "grid": [self.grid, 1, 1], "block": [self.block, 1, 1],
                "args": [dict(a, data=list(a["data"])) if "data" in a else dict(a)
                         for a in self.args]}

    def ptx(self) -> str:
        def shared_decl(name: str, ty: str, count: int) -> str:
            return f".shared .align 4 .{ty} {name}[{count}];"

        lines = ["//", "// Generated by testsuite/gen/ptxgen.py (hypothesis)", "//", "",
                 ".version 8.5", ".target sm_75", ".address_size 64", ""]
        for name, ty, count, module_scope in self.shared:
            if module_scope:
                lines.append(shared_decl(name, ty, count))
        lines += [f"\t// .globl\t{KERNEL_NAME}", "", f".visible .entry {KERNEL_NAME}("]
        lines.append(",\n".join(f"\t.param .{ty} {name}" for name, ty in self.params))
        lines += [")", "{"]
        for kind, prefix in _REG_PREFIX.items():
            if self._regs[kind]:
                lines.append(f"\t.reg .{kind} \t{prefix}<{self._regs[kind] + 1}>;")
        for name, ty, count, module_scope in self.shared:
            if not module_scope:
                lines.append("\t" + shared_decl(name, ty, count))
        lines.append("")
        for x in self.code:
            lines.append(f"{x.name}:" if isinstance(x, Label) else _inst_text(x))
        lines += ["", "}", ""]
        return "\n".join(lines)


# ============================================================ value helpers


def _mask(bits: int) -> int:
    return (1 << bits) - 1


def _signed(v: int, bits: int) -> int:
    v &= _mask(bits)
    return v - (1 << bits) if v >> (bits - 1) else v


def _type_bits(ty: str) -> int:
    return int(ty[1:])


def _value(v: int, ty: str) -> int:
    """The raw bits v as an integer of PTX type ty (signed for .sNN)."""
    bits = _type_bits(ty)
    return _signed(v, bits) if ty[0] == "s" else v & _mask(bits)


def f32_from_bits(bits: int) -> np.float32:
    return np.uint32(bits & 0xFFFFFFFF).view(np.float32)


def f32_bits(x) -> int:
    return int(np.float32(x).view(np.uint32))


def from_raw(ty: str, raw: int):
    """Launch-JSON value of raw bits: signed/unsigned int, or a Python float."""
    if ty == "f32":
        return float(f32_from_bits(raw))
    return _value(raw, ty)


def to_raw(ty: str, value) -> int:
    if ty == "f32":
        return struct.unpack("<I", struct.pack("<f", value))[0]
    return int(value) & _mask(_type_bits(ty))


def round_to_f32(q: Fraction) -> int:
    """Bits of the float32 nearest to the non-zero rational q (ties to even)."""
    assert q != 0
    sign = 0x80000000 if q < 0 else 0
    num, den = abs(q.numerator), q.denominator
    e = num.bit_length() - den.bit_length()  # floor(log2 |q|) is e or e - 1
    if (num << max(0, -e)) < (den << max(0, e)):
        e -= 1
    shift = max(e, -126) - 23  # the quantum is 2**shift (subnormals below 2**-126)
    if shift >= 0:
        n, r = divmod(num, den << shift)
        half = den << shift
    else:
        n, r = divmod(num << -shift, den)
        half = den
    if 2 * r > half or (2 * r == half and n & 1):
        n += 1
    if n == 0:
        return sign
    if n == 1 << 24:
        n, shift = n >> 1, shift + 1
    if n < 1 << 23:  # subnormal
        return sign | n
    exponent = shift + 23 + 127
    if exponent >= 255:
        return sign | 0x7F800000
    return sign | exponent << 23 | (n - (1 << 23))


def fma_f32(a: int, b: int, c: int) -> int:
    """fma.rn.f32 on bit patterns: a*b+c rounded once."""
    fa, fb, fc = (float(f32_from_bits(v)) for v in (a, b, c))
    if not all(math.isfinite(v) for v in (fa, fb, fc)):
        return f32_bits(np.float32(fa * fb + fc))  # the double product is exact
    exact = Fraction(fa) * Fraction(fb) + Fraction(fc)
    if exact != 0:
        return round_to_f32(exact)
    product_negative = (math.copysign(1.0, fa) * math.copysign(1.0, fb)) < 0
    if (fa == 0 or fb == 0) and fc == 0 and product_negative and math.copysign(1.0, fc) < 0:
        return 0x80000000  # (-0) + (-0)
    return 0


# ================================================================ the oracle

class OracleError(AssertionError):
    """The generator built a program whose answer is not defined (a generator bug)."""


_INT_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
            "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
            "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
            "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b,
            "hi": lambda a, b: a > b, "hs": lambda a, b: a >= b}


def _ints(x: Inst, vals: list[int]) -> tuple[int, list[int]]:
    """Width and source values of an integer op (signed for .sNN types)."""
    ty = x.types[-1]
    return _type_bits(ty), [_value(v, ty) for v in vals]


def _is_float(x: Inst) -> bool:
    return x.types[-1] == "f32"


def _f(v: int) -> np.float32:
    return f32_from_bits(v)


def _alu_add(x, v):
    if _is_float(x):
        return f32_bits(_f(v[0]) + _f(v[1]))
    n, (a, b) = _ints(x, v)
    return (a + b) & _mask(n)


def _alu_sub(x, v):
    if _is_float(x):
        return f32_bits(_f(v[0]) - _f(v[1]))
    n, (a, b) = _ints(x, v)
    return (a - b) & _mask(n)


def _alu_mul(x, v):
    if _is_float(x):
        return f32_bits(_f(v[0]) * _f(v[1]))
    n, (a, b) = _ints(x, v)
    if "hi" in x.mods:
        return (a * b) >> n & _mask(n)
    return (a * b) & _mask(2 * n if "wide" in x.mods else n)


def _alu_mad(x, v):
    assert "lo" in x.mods
    n, (a, b, c) = _ints(x, v)
    return (a * b + c) & _mask(n)


def _alu_fma(x, v):
    assert x.mods == ("rn",)
    return fma_f32(*v)


def _alu_div(x, v):
    if _is_float(x):
        return f32_bits(_f(v[0]) / _f(v[1]))
    n, (a, b) = _ints(x, v)
    if b == 0 or (x.types[-1][0] == "s" and a == -(1 << (n - 1)) and b == -1):
        raise OracleError(f"undefined {x.opcode} {a} / {b}")
    q = abs(a) // abs(b)
    return (q if (a < 0) == (b < 0) else -q) & _mask(n)


def _alu_rem(x, v):
    n, (a, b) = _ints(x, v)
    if b == 0 or (x.types[-1][0] == "s" and a == -(1 << (n - 1)) and b == -1):
        raise OracleError(f"undefined {x.opcode} {a} % {b}")
    r = abs(a) % abs(b)
    return (-r if a < 0 else r) & _mask(n)


def _alu_bitwise(fn):
    def alu(x, v):
        n = _type_bits(x.types[-1])
        return fn(*(a & _mask(n) for a in v)) & _mask(n)
    return alu


def _alu_neg(x, v):
    if _is_float(x):
        return v[0] ^ 0x80000000
    n, (a,) = _ints(x, v)
    return -a & _mask(n)


def _alu_abs(x, v):
    if _is_float(x):
        return v[0] & 0x7FFFFFFF
    n, (a,) = _ints(x, v)
    return abs(a) & _mask(n)


def _alu_popc(x, v):
    return bin(v[0] & _mask(_type_bits(x.types[-1]))).count("1")


def _alu_clz(x, v):
    n = _type_bits(x.types[-1])
    return n - (v[0] & _mask(n)).bit_length()


def _alu_brev(x, v):
    n = _type_bits(x.types[-1])
    return int(format(v[0] & _mask(n), f"0{n}b")[::-1], 2)


def _alu_shift(left: bool):
    def alu(x, v):
        ty = x.types[-1]
        n = _type_bits(ty)
        amount = min(v[1] & 0xFFFFFFFF, n)  # PTX clamps shift amounts to the width
        if left:
            return (v[0] << amount) & _mask(n)
        return (_value(v[0], ty) >> amount) & _mask(n)  # .sNN fills with the sign
    return alu


def _fminmax(x, v, is_min: bool) -> int:
    a, b = v
    fa, fb = _f(a), _f(b)
    if np.isnan(fa) and np.isnan(fb):
        return 0x7FFFFFFF
    if np.isnan(fa):
        return b
    if np.isnan(fb):
        return a
    if fa == fb == 0:  # +0.0 > -0.0
        negative = a if a & 0x80000000 else b
        positive = b if a & 0x80000000 else a
        return negative if is_min else positive
    return a if (fa < fb) == is_min else b


def _alu_minmax(is_min: bool):
    def alu(x, v):
        if _is_float(x):
            return _fminmax(x, v, is_min)
        n, (a, b) = _ints(x, v)
        return (min(a, b) if is_min else max(a, b)) & _mask(n)
    return alu


def _alu_sqrt(x, v):
    assert x.mods == ("rn",)
    return f32_bits(np.sqrt(_f(v[0])))


def _alu_setp(x, v):
    cmp, ty = x.mods[0], x.types[-1]
    if ty == "f32":
        fa, fb = float(_f(v[0])), float(_f(v[1]))
        nan = math.isnan(fa) or math.isnan(fb)
        if cmp in ("num", "nan"):
            return nan == (cmp == "nan")
        if nan:
            return cmp.endswith("u")
        return _INT_CMP[cmp[:2]](fa, fb)
    unsigned = ty[0] != "s" or cmp in ("lo", "ls", "hi", "hs")
    n = _type_bits(ty)
    a, b = ((w & _mask(n)) if unsigned else _signed(w, n) for w in v)
    return _INT_CMP[cmp](a, b)


def _alu_selp(x, v):
    return v[0] if v[2] else v[1]


def _alu_mov(x, v):
    return v[0] & _mask(_type_bits(x.types[-1]))


def _alu_cvt(x, v):
    dst, src = x.types
    if dst == "f32":
        assert x.mods == ("rn",) and src != "f32"
        value = _value(v[0], src)
        return round_to_f32(Fraction(value)) if value else 0
    if src == "f32":
        assert x.mods == ("rzi",)
        f = float(_f(v[0]))
        if math.isnan(f):
            return 0
        n = _type_bits(dst)
        lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if dst[0] == "s" else (0, _mask(n))
        t = lo if f == -math.inf else hi if f == math.inf else math.trunc(f)
        return min(max(t, lo), hi) & _mask(n)
    return _value(v[0], src) & _mask(_type_bits(dst))  # integer widths: extend or truncate


_ALU = {
    "add": _alu_add, "sub": _alu_sub, "mul": _alu_mul, "mad": _alu_mad, "fma": _alu_fma,
    "div": _alu_div, "rem": _alu_rem,
    "and": _alu_bitwise(lambda a, b: a & b), "or": _alu_bitwise(lambda a, b: a | b),
    "xor": _alu_bitwise(lambda a, b: a ^ b), "not": _alu_bitwise(lambda a: ~a),
    "neg": _alu_neg, "abs": _alu_abs, "popc": _alu_popc, "clz": _alu_clz, "brev": _alu_brev,
    "shl": _alu_shift(True), "shr": _alu_shift(False),
    "min": _alu_minmax(True), "max": _alu_minmax(False), "sqrt": _alu_sqrt,
    "setp": _alu_setp, "selp": _alu_selp, "mov": _alu_mov, "cvt": _alu_cvt,
    "cvta": _alu_mov,  # generic and global addresses coincide in the oracle
}

_ATOMIC = {
    "add": lambda n, s, old, b: old + b,
    "and": lambda n, s, old, b: old & b,
    "or": lambda n, s, old, b: old | b,
    "xor": lambda n, s, old, b: old ^ b,
    "min": lambda n, s, old, b: min(_value(old, s), _value(b, s)),
    "max": lambda n, s, old, b: max(_value(old, s), _value(b, s)),
}

#: f32 ops whose answer for a NaN operand is fully specified (setp, min/max, selp).
_NAN_TOLERANT = ("setp", "min", "max", "selp")

_SHARED_BASE = 0x100  # oracle-private addresses; programs never look at them


class _Memory:
    """Global memory (one region per pointer argument) and kernel parameters."""

    def __init__(self, kernel: Kernel, launch: dict):
        self.params: dict[str, int] = {}
        self.regions: list[tuple[bytearray, str] | None] = []
        for index, ((name, _), arg) in enumerate(zip(kernel.params, launch["args"], strict=True)):
            ty = arg["type"]
            if ty.endswith("*"):
                ty = ty[:-1]
                width = _ELEM_BYTES[ty]
                data = b"".join(to_raw(ty, v).to_bytes(width, "little") for v in arg["data"])
                self.params[name] = (index + 1) << 32
                self.regions.append((bytearray(data), ty))
            else:
                self.params[name] = to_raw(ty, arg["value"])
                self.regions.append(None)

    def region(self, addr: int, width: int) -> tuple[bytearray, int]:
        index, offset = (addr >> 32) - 1, addr & 0xFFFFFFFF
        region = self.regions[index] if 0 <= index < len(self.regions) else None
        if region is None or offset + width > len(region[0]) or offset % width:
            raise OracleError(f"bad global access at {addr:#x}")
        return region[0], offset

    def buffers(self) -> list:
        out = []
        for region in self.regions:
            if region is None:
                out.append(None)
                continue
            data, ty = region
            width = _ELEM_BYTES[ty]
            out.append([from_raw(ty, int.from_bytes(data[i:i + width], "little"))
                        for i in range(0, len(data), width)])
        return out


class _Shared:
    """One CTA's shared memory."""

    def __init__(self, kernel: Kernel):
        self.symbols: dict[str, int] = {}
        size = 0
        for name, ty, count, _ in kernel.shared:
            self.symbols[name] = _SHARED_BASE + size
            size += (count * (1 if ty == "b8" else 4) + 15) // 16 * 16
        self.data = bytearray(size)

    def region(self, addr: int, width: int) -> tuple[bytearray, int]:
        offset = (addr & 0xFFFFFFFF) - _SHARED_BASE
        if addr >> 32 or offset < 0 or offset + width > len(self.data) or offset % width:
            raise OracleError(f"bad shared access at {addr:#x}")
        return self.data, offset


class _Thread:
    def __init__(self, tid: int, ctaid: int, block: int, grid: int,
                 memory: _Memory, shared: _Shared):
        self.regs: dict[str, int | bool] = {}
        self.pc = 0
        self.state = "run"  # run | bar | exit
        self.steps = 0
        self.special = {"%tid.x": tid, "%ntid.x": block, "%ctaid.x": ctaid, "%nctaid.x": grid,
                        "%tid.y": 0, "%tid.z": 0, "%ntid.y": 1, "%ntid.z": 1}
        self.memory, self.shared = memory, shared

    def read(self, x: Operand) -> int | bool:
        if isinstance(x, Reg):
            if x.name not in self.regs:
                raise OracleError(f"read of undefined register {x.name}")
            return self.regs[x.name]
        if isinstance(x, Imm):
            return x.value
        if isinstance(x, FImm):
            return x.bits
        if isinstance(x, Special):
            return self.special[x.name]
        if isinstance(x, Sym):
            return self.shared.symbols[x.name]
        raise OracleError(f"cannot read {x}")

    def location(self, space: str, mem: Mem, width: int) -> tuple[bytearray, int]:
        addr = (self.read(mem.base) + mem.offset) & ((1 << 64) - 1)
        return (self.shared if space == "shared" else self.memory).region(addr, width)

    def load(self, space: str, mem: Mem, ty: str) -> int:
        if space == "param":
            return self.memory.params[mem.base.name]
        width = _ELEM_BYTES[ty]
        data, offset = self.location(space, mem, width)
        return int.from_bytes(data[offset:offset + width], "little")

    def store(self, space: str, mem: Mem, ty: str, value: int) -> None:
        width = _ELEM_BYTES[ty]
        data, offset = self.location(space, mem, width)
        data[offset:offset + width] = (value & _mask(8 * width)).to_bytes(width, "little")

    def atom(self, x: Inst) -> int:
        space, op = x.mods
        ty = x.types[0]
        n = _type_bits(ty)
        mem = x.args[1]
        old = self.load(space, mem, ty)
        b = self.read(x.args[2]) & _mask(n)
        if op == "cas":
            new = self.read(x.args[3]) & _mask(n) if old == b else old
        else:
            new = _ATOMIC[op](n, "s" + ty[1:] if ty[0] == "s" else "u" + ty[1:], old, b)
        self.store(space, mem, ty, new)
        return old

    def execute(self, x: Inst, labels: dict[str, int]) -> None:
        op = x.op
        if "f32" in x.types and op not in _NAN_TOLERANT:
            self.check_no_nan(x)
        if op == "bra":
            self.pc = labels[x.args[0].name]
        elif op == "ret":
            self.state = "exit"
        elif op == "bar":
            self.state = "bar"
        elif op == "st":
            self.store(x.mods[0], x.args[0], x.types[0], self.read(x.args[1]))
        elif op == "ld":
            self.regs[x.args[0].name] = self.load(x.mods[0], x.args[1], x.types[0])
        elif op == "atom":
            self.regs[x.args[0].name] = self.atom(x)
        else:
            self.regs[x.args[0].name] = _ALU[op](x, [self.read(a) for a in x.args[1:]])

    def check_no_nan(self, x: Inst) -> None:
        """NaN payloads are not portable: only NaN-tolerant ops may see a NaN."""
        for arg in x.args[0 if x.op == "st" else 1:]:
            is_f32 = isinstance(arg, FImm) or (isinstance(arg, Reg) and arg.kind == "f32")
            if is_f32 and np.isnan(_f(self.read(arg))):
                raise OracleError(f"NaN operand of {x.opcode} {arg}")

    def run(self, code: list[Inst | Label], labels: dict[str, int]) -> None:
        """Run until a barrier or the end of the thread."""
        while self.state == "run":
            if self.pc >= len(code):
                self.state = "exit"
                break
            x = code[self.pc]
            self.pc += 1
            if isinstance(x, Label):
                continue
            self.steps += 1
            if self.steps > STEP_LIMIT:
                raise OracleError("step limit exceeded")
            if x.guard is not None and bool(self.read(x.guard)) == x.negate:
                continue
            self.execute(x, labels)


def run_oracle(kernel: Kernel, launch: dict) -> list:
    """The final buffers of `launch` of `kernel`: each thread interpreted on its own,
    a CTA's threads phase by phase between barriers, CTAs one after another."""
    labels = {x.name: i for i, x in enumerate(kernel.code) if isinstance(x, Label)}
    memory = _Memory(kernel, launch)
    grid, block = launch["grid"][0], launch["block"][0]
    with np.errstate(all="ignore"):
        for ctaid in range(grid):
            shared = _Shared(kernel)
            threads = [_Thread(tid, ctaid, block, grid, memory, shared) for tid in range(block)]
            while True:
                for t in threads:
                    t.run(kernel.code, labels)
                waiting = [t for t in threads if t.state == "bar"]
                if not waiting:
                    break
                if len(waiting) != len(threads):
                    raise OracleError("bar.sync reached by only some threads")
                for t in waiting:
                    t.state = "run"
    return memory.buffers()


# ============================================================= value strategies

MASK32, MASK64 = _mask(32), _mask(64)
EDGE32 = (0, 1, 2, 31, 32, 33, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFF, 0xFFFFFFFE,
          0xFFFF, 0x10000, 0x55555555, 0xAAAAAAAA)
EDGE64 = (0, 1, 2, 63, 64, 65, MASK64, MASK64 - 1, 1 << 63, (1 << 63) - 1, (1 << 63) + 1,
          MASK32, 1 << 32, 0x80000000, 0xFFFFFFFF80000000, 0x5555555555555555)
EDGE_F32 = (0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x3F000000, 0x40000000,
            0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x80800000, 0x00000001, 0x807FFFFF,
            0x4B800000, 0x4B000000, 0x3DCCCCCD, 0x4F000000, 0xCF000000, 0x4EFFFFFF,
            0x3EAAAAAB, 0x5F800000)
INF_F32 = (0x7F800000, 0xFF800000)


def raw32() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(EDGE32), st.integers(-40, 40).map(lambda v: v & MASK32),
                     st.integers(0, MASK32))


def raw64() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(EDGE64), st.integers(-40, 40).map(lambda v: v & MASK64),
                     raw32().map(lambda v: _signed(v, 32) & MASK64), st.integers(0, MASK64))


def _finite(bits: int) -> bool:
    return bits & 0x7F800000 != 0x7F800000


def _full_mantissa() -> st.SearchStrategy[int]:
    """Floats of magnitude 2^-24..2^24 with all 24 significant bits random: their
    products and sums are rarely exact, so every rounding shows."""
    return st.tuples(st.integers(0, 1), st.integers(103, 150), st.integers(0, (1 << 23) - 1)) \
        .map(lambda t: t[0] << 31 | t[1] << 23 | t[2])


def f32_finite() -> st.SearchStrategy[int]:
    """Bit patterns of finite floats: edge values, small halves, full mantissas, anything."""
    return st.one_of(st.sampled_from(EDGE_F32),
                     st.integers(-48, 48).map(lambda v: f32_bits(np.float32(v / 2))),
                     _full_mantissa(),
                     st.floats(width=32, allow_nan=False, allow_infinity=False).map(f32_bits),
                     st.integers(0, MASK32).filter(_finite))


def f32_imm_bits() -> st.SearchStrategy[int]:
    return st.one_of(f32_finite(), st.sampled_from(INF_F32))


def data(draw, values: st.SearchStrategy[int], count: int) -> list[int]:
    """count raw values, half of them from a small per-buffer palette (repeated values
    make equal operands, x - x, edge collisions), half drawn afresh."""
    palette = draw(st.lists(values, min_size=1, max_size=3))
    return [draw(st.sampled_from(palette)) if draw(st.booleans()) else draw(values)
            for _ in range(count)]


@st.composite
def int_imm(draw, ty: str, values: st.SearchStrategy[int] | None = None) -> Imm:
    """An immediate for an op of type ty, spelled the ways PTX allows: decimal,
    hex, negative decimal (signed and untyped-bits types only)."""
    bits = _type_bits(ty)
    raw = draw(values if values is not None else raw32() if bits == 32 else raw64()) & _mask(bits)
    signed = _signed(raw, bits)
    hex_text = draw(st.booleans())
    if ty[0] == "s":
        text = f"0x{raw:X}" if hex_text and signed >= 0 else str(signed)
    elif ty[0] == "u":
        text = f"0x{raw:X}" if hex_text else str(raw)
    else:
        text = f"0x{raw:X}" if hex_text else str(signed)
    return Imm(raw, text)


def _small(value: int, bits: int = 32) -> Imm:
    return Imm(value & _mask(bits), str(value))


# ======================================================== register pools


@dataclass
class Pool:
    """Registers a generator may read, by kind; `dirty` f32 registers may hold a NaN;
    `fixed` registers are never overwritten (loop counters, indices)."""
    b32: list[Reg] = field(default_factory=list)
    b64: list[Reg] = field(default_factory=list)
    f32: list[Reg] = field(default_factory=list)
    pred: list[Reg] = field(default_factory=list)
    dirty: set[str] = field(default_factory=set)
    fixed: set[str] = field(default_factory=set)

    def copy(self) -> Pool:
        return Pool(list(self.b32), list(self.b64), list(self.f32), list(self.pred),
                    set(self.dirty), set(self.fixed))


def _pick(draw, regs: list[Reg]) -> Reg:
    """A register, biased toward the most recent ones (deeper DAGs)."""
    n = len(regs)
    if n > 1 and draw(st.booleans()):
        return regs[n - 1 - draw(st.integers(0, min(2, n - 1)))]
    return regs[draw(st.integers(0, n - 1))]


def _one_in(draw, n: int) -> bool:
    return draw(st.integers(0, n - 1)) == 0


# ================================================== common kernel pieces


@dataclass(frozen=True)
class Limits:
    """Size of the generated programs: threads per launch (1-2 CTAs), and the
    instructions (DAG ops, or statements for `branch`) drawn besides the fixed parts."""
    threads: int = MAX_THREADS
    ops: int = 16


@st.composite
def _kernel(draw, limits: Limits) -> Kernel:
    grid = draw(st.integers(1, min(2, limits.threads)))
    return Kernel(grid, draw(st.integers(1, limits.threads // grid)))


@dataclass
class _Ids:
    tid: Reg
    ntid: Reg
    gtid: Reg


def _thread_ids(draw, k: Kernel) -> _Ids:
    """`%ctaid.x * %ntid.x + %tid.x`, as nvcc writes it."""
    ctaid, ntid, tid, gtid = (k.reg("b32") for _ in range(4))
    k.emit("mov", (), "u32", ctaid, Special("%ctaid.x"))
    k.emit("mov", (), "u32", ntid, Special("%ntid.x"))
    k.emit("mov", (), "u32", tid, Special("%tid.x"))
    if draw(st.booleans()):
        k.emit("mad", "lo", "s32", gtid, ctaid, ntid, tid)
    else:
        t = k.reg("b32")
        k.emit("mul", "lo", "s32", t, ctaid, ntid)
        k.emit("add", (), "s32", gtid, t, tid)
    return _Ids(tid, ntid, gtid)


def _element_address(draw, k: Kernel, base: Reg, index: Reg, size: int, stride: int) -> Reg:
    """base + index * stride * size bytes, by one of nvcc's idioms."""
    scale = size * stride
    offset = k.reg("b64")
    style = draw(st.integers(0, 2))
    if style == 0:
        k.emit("mul", "wide", draw(st.sampled_from(["u32", "s32"])), offset, index,
               _small(scale))
    elif style == 1 and scale & (scale - 1) == 0:
        wide = k.reg("b64")
        k.emit("cvt", (), ("u64", "u32"), wide, index)
        k.emit("shl", (), "b64", offset, wide, _small(scale.bit_length() - 1))
    else:
        scaled = index
        if stride != 1:
            scaled = k.reg("b32")
            k.emit("mul", "lo", "s32", scaled, index, _small(stride))
        k.emit("mul", "wide", "u32", offset, scaled, _small(size))
    addr = k.reg("b64")
    k.emit("add", (), "s64", addr, base, offset)
    return addr


def _unread(k: Kernel, regs: list[Reg]) -> list[Reg]:
    """The registers of regs that no instruction reads (yet)."""
    reads = set()
    for x in k.code:
        if not isinstance(x, Inst):
            continue
        if x.guard is not None:
            reads.add(x.guard.name)
        for a in x.args if x.op in ("st", "bra", "bar") else x.args[1:]:
            base = a.base if isinstance(a, Mem) else a
            if isinstance(base, Reg):
                reads.add(base.name)
    return [r for r in regs if r.name not in reads]


def _fold(draw, k: Kernel, regs: list[Reg]) -> Reg:
    """xor/add of regs (all .b32 or all .b64), each step a bijection in each operand:
    a wrong bit in any of them reaches memory. Folding the unread registers before
    the stores leaves no dead instruction."""
    acc = regs[0]
    signed = "s32" if acc.kind == "b32" else "s64"
    for r in regs[1:]:
        t = k.reg(acc.kind)
        if draw(st.booleans()):
            k.emit("xor", (), acc.kind, t, acc, r)
        else:
            k.emit("add", (), signed, t, acc, r)
        acc = t
    return acc


def _load_row(k: Kernel, addr: Reg, ty: str, count: int, kind: str) -> list[Reg]:
    regs = []
    for j in range(count):
        r = k.reg(kind)
        k.emit("ld", "global", ty, r, Mem(addr, j * _ELEM_BYTES[ty]))
        regs.append(r)
    return regs


def _check_no_contraction(k: Kernel) -> None:
    """ptxas may fuse `mul.f32` and `add/sub.f32` without rounding modifiers into an fma
    (PTX ISA), so such a pair would have no unique answer: never generate one."""
    defs: dict[str, Inst] = {}
    for x in k.code:
        if not isinstance(x, Inst):
            continue
        if x.op in ("add", "sub") and x.types == ("f32",) and not x.mods:
            for a in x.args[1:]:
                d = defs.get(a.name) if isinstance(a, Reg) else None
                if d is not None and d.op == "mul" and not d.mods and d.types == ("f32",):
                    raise OracleError(f"contractible pair: {d.opcode} then {x.opcode}")
        if x.args and isinstance(x.args[0], Reg) and x.op not in ("st", "bra"):
            defs[x.args[0].name] = x


def _finish(k: Kernel, family: str) -> GeneratedProgram:
    _check_no_contraction(k)
    k.emit("ret")
    launch = k.launch()
    return GeneratedProgram(k.ptx(), launch, run_oracle(k, k.launch()), family)


# ================================================== 32-bit integer instructions

_INT_CMPS = {"s32": ("eq", "ne", "lt", "le", "gt", "ge"),
             "u32": ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"),
             "b32": ("eq", "ne")}


def _src32(draw, pool: Pool, ty: str, imm: bool = True) -> Reg | Imm:
    if imm and _one_in(draw, 3):
        return draw(int_imm(ty))
    return _pick(draw, pool.b32)


def _binary32(draw, pool: Pool, ty: str, imm_first: bool = False) -> tuple:
    """Two sources, at most one an immediate (the second, or the first if allowed)."""
    if imm_first and _one_in(draw, 4):
        return draw(int_imm(ty)), _pick(draw, pool.b32)
    return _pick(draw, pool.b32), _src32(draw, pool, ty)


def _setp32(draw, k: Kernel, pool: Pool) -> Reg:
    ty = draw(st.sampled_from(sorted(_INT_CMPS)))
    p = k.reg("pred")
    k.emit("setp", draw(st.sampled_from(_INT_CMPS[ty])), ty, p, *_binary32(draw, pool, ty))
    pool.pred.append(p)
    return p


def i_arith(draw, k, pool, dst):
    op, ty = draw(st.sampled_from(["add", "sub"])), draw(st.sampled_from(["s32", "u32"]))
    k.emit(op, (), ty, dst, *_binary32(draw, pool, ty, imm_first=op == "sub"))


def i_mul(draw, k, pool, dst):
    mode, ty = draw(st.sampled_from(["lo", "hi"])), draw(st.sampled_from(["s32", "u32"]))
    k.emit("mul", mode, ty, dst, *_binary32(draw, pool, ty))


def i_mad(draw, k, pool, dst):
    ty = draw(st.sampled_from(["s32", "u32"]))
    k.emit("mad", "lo", ty, dst, _pick(draw, pool.b32), _src32(draw, pool, ty),
           _src32(draw, pool, ty))


def i_logic(draw, k, pool, dst):
    k.emit(draw(st.sampled_from(["and", "or", "xor"])), (), "b32", dst,
           *_binary32(draw, pool, "b32"))


def i_unary(draw, k, pool, dst):
    op, ty = draw(st.sampled_from([("not", "b32"), ("neg", "s32"), ("abs", "s32"),
                                   ("popc", "b32"), ("clz", "b32"), ("brev", "b32")]))
    k.emit(op, (), ty, dst, _pick(draw, pool.b32))


def i_shift(draw, k, pool, dst):
    op, ty = draw(st.sampled_from([("shl", "b32"), ("shr", "b32"), ("shr", "u32"),
                                   ("shr", "s32")]))
    if _one_in(draw, 2):
        amount = _small(draw(st.integers(0, 40)))
    else:
        amount = _pick(draw, pool.b32)  # any 32-bit value; >= 32 clamps
    value = _pick(draw, pool.b32)
    if op == "shl" and isinstance(amount, Reg) and _one_in(draw, 4):
        value = draw(int_imm("b32"))  # `shl.b32 %r, 1, %r` (1 << n)
    k.emit(op, (), ty, dst, value, amount)


def i_minmax(draw, k, pool, dst):
    op, ty = draw(st.sampled_from(["min", "max"])), draw(st.sampled_from(["s32", "u32"]))
    k.emit(op, (), ty, dst, *_binary32(draw, pool, ty))


def i_select(draw, k, pool, dst):
    p = _pick(draw, pool.pred) if pool.pred and _one_in(draw, 3) else _setp32(draw, k, pool)
    ty = draw(st.sampled_from(["b32", "s32", "u32"]))
    k.emit("selp", (), ty, dst, _src32(draw, pool, ty), _src32(draw, pool, ty), p)


def i_mov(draw, k, pool, dst):
    ty = draw(st.sampled_from(["b32", "u32", "s32"]))
    k.emit("mov", (), ty, dst, draw(int_imm(ty)) if _one_in(draw, 2) else _pick(draw, pool.b32))


def _safe_divisor(draw, k: Kernel, pool: Pool, ty: str, dividend: Reg) -> Reg | Imm:
    """A divisor that is never 0, and never -1 when the dividend is INT_MIN (.s32)."""
    if _one_in(draw, 3):
        imm = draw(int_imm(ty, raw32().filter(lambda v: v != 0 and v != MASK32)))
        return imm
    b = _pick(draw, pool.b32)
    if _one_in(draw, 3):  # a small divisor, -8..7: 0 and -1 are common
        small = k.reg("b32")
        k.emit("shr", (), "s32", small, b, _small(28))
        b = small
    p, nonzero = k.reg("pred"), k.reg("b32")
    k.emit("setp", "eq", "s32", p, b, _small(0))
    k.emit("selp", (), "b32", nonzero, draw(int_imm("b32", raw32().filter(bool))), b, p)
    if ty == "u32":
        return nonzero
    # (dividend ^ INT_MIN) | ~divisor is 0 exactly for INT_MIN / -1: divide by 1 then
    t, u, w, q, safe = k.reg("b32"), k.reg("b32"), k.reg("b32"), k.reg("pred"), k.reg("b32")
    k.emit("xor", (), "b32", t, dividend, Imm(0x80000000, "-2147483648"))
    k.emit("not", (), "b32", u, nonzero)
    k.emit("or", (), "b32", w, t, u)
    k.emit("setp", "eq", "s32", q, w, _small(0))
    k.emit("selp", (), "b32", safe, _small(1), nonzero, q)
    return safe


def i_divrem(draw, k, pool, dst):
    op, ty = draw(st.sampled_from(["div", "rem"])), draw(st.sampled_from(["s32", "u32"]))
    a = _pick(draw, pool.b32)
    k.emit(op, (), ty, dst, a, _safe_divisor(draw, k, pool, ty, a))


#: 32-bit ops that `i_repeat` may issue again, and those whose two sources commute
_REPEATABLE = {"add", "sub", "mul", "mad", "and", "or", "xor", "not", "neg", "abs", "popc",
               "clz", "brev", "shl", "shr", "min", "max", "mov"}
_COMMUTING = {"add", "mul", "and", "or", "xor", "min", "max"}


def i_repeat(draw, k, pool, dst):
    """An earlier op of the pool's registers again (sources commuted where they
    commute), directly or through a copy of a source: common subexpressions."""
    earlier = [x for x in k.code if isinstance(x, Inst) and x.op in _REPEATABLE and
               x.guard is None and "wide" not in x.mods and x.args[0] in pool.b32 and
               all(t.endswith("32") for t in x.types) and
               all(isinstance(a, Imm) or a in pool.b32 for a in x.args[1:])]
    if not earlier:
        i_mov(draw, k, pool, dst)
        return
    x = draw(st.sampled_from(earlier))
    srcs = list(x.args[1:])
    if x.op in _COMMUTING and len(srcs) == 2 and _one_in(draw, 2):
        srcs.reverse()
    regs = [i for i, a in enumerate(srcs) if isinstance(a, Reg)]
    if regs and _one_in(draw, 2):
        i = draw(st.sampled_from(regs))
        copy = k.reg("b32")
        k.emit("mov", (), "b32", copy, srcs[i])
        srcs[i] = copy
    k.emit(x.op, x.mods, x.types, dst, *srcs)


INT32_OPS = (i_arith, i_arith, i_mul, i_mad, i_logic, i_unary, i_shift, i_shift, i_minmax,
             i_select, i_select, i_select, i_divrem, i_mov, i_repeat, i_repeat)


def _int_op(draw, k: Kernel, pool: Pool, dst: Reg | None = None,
            ops: tuple = INT32_OPS) -> Reg:
    """One random 32-bit op into dst (a fresh register, added to the pool, if None)."""
    fresh = dst is None
    dst = dst or k.reg("b32")
    draw(st.sampled_from(ops))(draw, k, pool, dst)
    if fresh:
        pool.b32.append(dst)
    return dst


# ======================================================== family: int32


def _int_buffers(draw, k: Kernel, ids: _Ids, loads: int, outputs: int, pool: Pool):
    """An input buffer of `loads` words per thread (loaded into the pool) and an
    output buffer of `outputs` words per thread: returns (output address, type)."""
    in_ty, out_ty = draw(st.sampled_from(["u32", "s32"])), draw(st.sampled_from(["u32", "s32"]))
    in_data = data(draw, raw32(), k.threads * loads)
    out_data = data(draw, raw32(), k.threads * outputs)
    in_base = k.pointer(in_ty, in_data)
    out_base = k.pointer(out_ty, out_data)
    if _one_in(draw, 3):
        pool.b32.append(k.scalar(draw(st.sampled_from(["u32", "s32"])), draw(raw32())))
    in_addr = _element_address(draw, k, in_base, ids.gtid, 4, loads)
    pool.b32.extend(_load_row(k, in_addr, in_ty, loads, "b32"))
    return _element_address(draw, k, out_base, ids.gtid, 4, outputs), out_ty


@st.composite
def int32_programs(draw, limits: Limits = Limits()) -> GeneratedProgram:
    k = draw(_kernel(limits))
    ids = _thread_ids(draw, k)
    pool = Pool(b32=[ids.gtid] if _one_in(draw, 3) else [])
    outputs = draw(st.integers(1, 4))
    out_addr, out_ty = _int_buffers(draw, k, ids, draw(st.integers(1, 4)), outputs, pool)
    for _ in range(draw(st.integers(1, limits.ops))):
        _int_op(draw, k, pool)
    fold = _fold(draw, k, _unread(k, pool.b32) or pool.b32[-1:])
    for j in range(outputs):
        r = fold if j == 0 else _pick(draw, pool.b32)
        k.emit("st", "global", out_ty, Mem(out_addr, 4 * j), r)
    return _finish(k, "int32")


# ========================================================== f32 instructions

_F32_CMPS = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu",
             "num", "nan")


def _fimm(draw) -> FImm:
    return FImm(draw(f32_imm_bits()))


def _sanitize(draw, k: Kernel, pool: Pool, x: Reg) -> Reg:
    """A NaN-free copy of x: NaN becomes a constant (or an infinity)."""
    y = k.reg("f32")
    c = FImm(draw(f32_finite()))
    style = draw(st.integers(0, 5))
    if style < 4:
        p = k.reg("pred")
        cmp, nan_true = (("nan", True), ("num", False), ("neu", True), ("eq", False))[style]
        k.emit("setp", cmp, "f32", p, x, x)
        k.emit("selp", (), "f32", y, *((c, x) if nan_true else (x, c)), p)
    else:
        op, inf = ("max", FImm(0xFF800000)) if style == 4 else ("min", FImm(0x7F800000))
        k.emit(op, (), "f32", y, x, inf)
    pool.f32.append(y)
    return y


def _clean(draw, k: Kernel, pool: Pool) -> Reg:
    r = _pick(draw, pool.f32)
    return _sanitize(draw, k, pool, r) if r.name in pool.dirty else r


def _fsrc(draw, k: Kernel, pool: Pool, imm: bool = True) -> Reg | FImm:
    return _fimm(draw) if imm and _one_in(draw, 3) else _clean(draw, k, pool)


def _fany(draw, pool: Pool, imm: bool = True) -> Reg | FImm:
    """A source for NaN-tolerant ops (setp, min/max, selp): maybe-NaN registers
    preferred, signed zeros among the immediates."""
    if imm and _one_in(draw, 3):
        return FImm(draw(st.sampled_from([0, 0x80000000]))) if _one_in(draw, 3) else _fimm(draw)
    dirty = [r for r in pool.f32 if r.name in pool.dirty]
    return _pick(draw, dirty) if dirty and draw(st.booleans()) else _pick(draw, pool.f32)


def _fresult(pool: Pool, dst: Reg, dirty: bool) -> Reg:
    pool.f32.append(dst)
    if dirty:
        pool.dirty.add(dst.name)
    return dst


def _is_dirty(pool: Pool, x: Reg | FImm) -> bool:
    return isinstance(x, Reg) and x.name in pool.dirty


def f_arith(draw, k, pool):
    op = draw(st.sampled_from(["add", "sub", "mul", "div"]))
    mods = ("rn",) if op == "div" or draw(st.booleans()) else ()
    if op in ("sub", "div") and _one_in(draw, 4):
        a, b = _fimm(draw), _clean(draw, k, pool)  # `div.rn.f32 %f, 0f3F800000, %f`
    else:
        a, b = _clean(draw, k, pool), _fsrc(draw, k, pool)
    dst = k.reg("f32")
    k.emit(op, mods, "f32", dst, a, b)
    return _fresult(pool, dst, True)


def f_fma(draw, k, pool):
    dst = k.reg("f32")
    if _one_in(draw, 3):  # the rounding error of a*b: non-zero only when fused
        a, b = _clean(draw, k, pool), _clean(draw, k, pool)
        product, minus = k.reg("f32"), k.reg("f32")
        k.emit("mul", "rn", "f32", product, a, b)
        k.emit("neg", (), "f32", minus, _sanitize(draw, k, pool, _fresult(pool, product, True)))
        k.emit("fma", "rn", "f32", dst, a, b, _fresult(pool, minus, False))
    else:
        k.emit("fma", "rn", "f32", dst, _clean(draw, k, pool), _fsrc(draw, k, pool),
               _fsrc(draw, k, pool))
    return _fresult(pool, dst, True)


def f_sqrt(draw, k, pool):
    a = _clean(draw, k, pool)
    if draw(st.booleans()):
        t = k.reg("f32")
        k.emit("abs", (), "f32", t, a)
        a = _fresult(pool, t, False)
    dst = k.reg("f32")
    k.emit("sqrt", "rn", "f32", dst, a)
    return _fresult(pool, dst, True)


def f_invalid(draw, k, pool):
    """An op that often has no numeric answer: x/x, x*inf, x+(-inf), sqrt of a negative."""
    x = _clean(draw, k, pool)
    dst = k.reg("f32")
    form = draw(st.integers(0, 3))
    if form == 0:
        k.emit("div", "rn", "f32", dst, x, x)
    elif form == 1:
        k.emit("mul", "rn", "f32", dst, x, FImm(draw(st.sampled_from(INF_F32))))
    elif form == 2:
        k.emit("add", (), "f32", dst, x, FImm(draw(st.sampled_from(INF_F32))))
    else:
        t = k.reg("f32")
        k.emit("neg", (), "f32", t, x)
        _fresult(pool, t, False)
        k.emit("sqrt", "rn", "f32", dst, t)
    return _fresult(pool, dst, True)


def f_absneg(draw, k, pool):
    dst = k.reg("f32")
    k.emit(draw(st.sampled_from(["abs", "neg"])), (), "f32", dst, _clean(draw, k, pool))
    return _fresult(pool, dst, False)


def f_minmax(draw, k, pool):
    a = _fany(draw, pool, imm=False)
    b = _fany(draw, pool)
    if _one_in(draw, 4):  # a data-dependent signed zero against a signed-zero constant
        a = k.reg("f32")
        k.emit("mul", "rn", "f32", a, _clean(draw, k, pool), FImm(0))
        _fresult(pool, a, True)  # inf * 0 is a NaN
        b = FImm(draw(st.sampled_from([0, 0x80000000])))
    if isinstance(b, Reg) and draw(st.booleans()):
        a, b = b, a
    dst = k.reg("f32")
    k.emit(draw(st.sampled_from(["min", "max"])), (), "f32", dst, a, b)
    return _fresult(pool, dst, _is_dirty(pool, a) and _is_dirty(pool, b))


def f_select(draw, k, pool):
    p = k.reg("pred")
    k.emit("setp", draw(st.sampled_from(_F32_CMPS)), "f32", p, _fany(draw, pool, imm=False),
           _fany(draw, pool))
    x, y = _fany(draw, pool), _fany(draw, pool)
    dst = k.reg("f32")
    k.emit("selp", (), "f32", dst, x, y, p)
    return _fresult(pool, dst, _is_dirty(pool, x) or _is_dirty(pool, y))


def f_mov(draw, k, pool):
    dst = k.reg("f32")
    k.emit("mov", (), "f32", dst, FImm(draw(f32_finite())))
    return _fresult(pool, dst, False)


def f_from_int(draw, k, pool):
    if not pool.b32:
        return f_absneg(draw, k, pool)
    dst = k.reg("f32")
    k.emit("cvt", "rn", ("f32", "s32"), dst, _pick(draw, pool.b32))
    return _fresult(pool, dst, False)


def f_to_int(draw, k, pool):
    dst = k.reg("b32")
    k.emit("cvt", "rzi", ("s32", "f32"), dst, _clean(draw, k, pool))
    pool.b32.append(dst)
    return dst


F32_OPS = (f_arith, f_arith, f_arith, f_fma, f_sqrt, f_invalid, f_absneg, f_minmax, f_minmax,
           f_select, f_select, f_mov, f_from_int, f_to_int)


@st.composite
def f32_programs(draw, limits: Limits = Limits()) -> GeneratedProgram:
    k = draw(_kernel(limits))
    ids = _thread_ids(draw, k)
    pool = Pool()
    loads, int_loads = draw(st.integers(1, 4)), draw(st.integers(0, 2))
    outputs, int_outputs = draw(st.integers(1, 4)), draw(st.integers(1, 2))
    n = k.threads
    in_f = k.pointer("f32", data(draw, f32_finite(), n * loads))
    in_i = k.pointer("s32", data(draw, raw32(), n * int_loads)) if int_loads else None
    out_f = k.pointer("f32", [draw(f32_finite()) for _ in range(n * outputs)])
    out_i = k.pointer("s32", [draw(raw32()) for _ in range(n * int_outputs)])
    pool.f32.extend(_load_row(k, _element_address(draw, k, in_f, ids.gtid, 4, loads),
                              "f32", loads, "f32"))
    if in_i is not None:
        pool.b32.extend(_load_row(k, _element_address(draw, k, in_i, ids.gtid, 4, int_loads),
                                  "s32", int_loads, "b32"))
    last = None
    for _ in range(draw(st.integers(1, limits.ops))):
        last = draw(st.sampled_from(F32_OPS))(draw, k, pool)
    # the bits of every unread value (NaN-free copies) go to the integer output
    bits = []
    for r in _unread(k, pool.f32):
        if r.name in pool.dirty:
            r = _sanitize(draw, k, pool, r)
        b = k.reg("b32")
        k.emit("mov", (), "b32", b, r)
        bits.append(b)
    fold = _fold(draw, k, bits + _unread(k, pool.b32) or [f_to_int(draw, k, pool)])
    addr = _element_address(draw, k, out_f, ids.gtid, 4, outputs)
    for j in range(outputs):
        r = last if j == 0 and last is not None and last.kind == "f32" else _pick(draw, pool.f32)
        if r.name in pool.dirty:
            r = _sanitize(draw, k, pool, r)
        k.emit("st", "global", "f32", Mem(addr, 4 * j), r)
    addr = _element_address(draw, k, out_i, ids.gtid, 4, int_outputs)
    for j in range(int_outputs):
        r = fold if j == 0 else _pick(draw, pool.b32) if pool.b32 else f_to_int(draw, k, pool)
        k.emit("st", "global", "s32", Mem(addr, 4 * j), r)
    return _finish(k, "f32")


# ========================================================= family: branch


@dataclass
class _Flow:
    budget: int  # statements left to generate
    out_addr: Reg
    out_ty: str
    outputs: int


def _assign(draw, k: Kernel, pool: Pool) -> None:
    """One op into a fresh register, or into a live one (a reassignment)."""
    writable = [r for r in pool.b32 if r.name not in pool.fixed]
    dst = _pick(draw, writable) if writable and _one_in(draw, 3) else None
    _int_op(draw, k, pool, dst)


def _store_stmt(draw, k: Kernel, pool: Pool, flow: _Flow) -> None:
    j = draw(st.integers(0, flow.outputs - 1))
    k.emit("st", "global", flow.out_ty, Mem(flow.out_addr, 4 * j), _pick(draw, pool.b32))


def _if_stmt(draw, k: Kernel, pool: Pool, flow: _Flow, depth: int) -> None:
    p = _setp32(draw, k, pool)
    has_else = draw(st.booleans())
    else_label, end_label = k.label(), k.label()
    k.emit("bra", (), (), else_label if has_else else end_label, guard=p,
           negate=draw(st.booleans()))
    then_returns = _branch_body(draw, k, pool, flow, depth)
    if has_else:
        if not then_returns:
            k.emit("bra", "uni", (), end_label)
        k.place(else_label)
        _branch_body(draw, k, pool, flow, depth)
    k.place(end_label)


def _scoped_block(draw, k: Kernel, outer: Pool, inner: Pool, flow: _Flow, depth: int) -> None:
    """A block whose new registers die at its end: first their unread values are
    folded into a live outer register, so what the block computed stays visible."""
    _block(draw, k, inner, flow, depth + 1)
    known = {r.name for r in outer.b32}
    local = _unread(k, [r for r in inner.b32 if r.name not in known])
    writable = [r for r in outer.b32 if r.name not in inner.fixed]
    if local and writable:
        target = _pick(draw, writable)
        k.emit("xor", (), "b32", target, target, _fold(draw, k, local))


def _branch_body(draw, k: Kernel, pool: Pool, flow: _Flow, depth: int) -> bool:
    """A block in its own scope, maybe ending in `ret`; True if it does."""
    _scoped_block(draw, k, pool, pool.copy(), flow, depth)
    if _one_in(draw, 5):
        k.emit("ret")
        return True
    return False


def _loop_stmt(draw, k: Kernel, pool: Pool, flow: _Flow, depth: int) -> None:
    """A loop running 0-8 times, the count taken from a live value."""
    inner = pool.copy()
    head, end = k.label(), k.label()
    src = _pick(draw, pool.b32)
    counter = k.reg("b32")
    inner.fixed.add(counter.name)
    if draw(st.booleans()):  # count down to zero
        if draw(st.booleans()):
            k.emit("and", (), "b32", counter, src, _small(7))
        else:
            k.emit("rem", (), "u32", counter, src, _small(9))
        p = k.reg("pred")
        k.emit("setp", "eq", "s32", p, counter, _small(0))
        k.emit("bra", (), (), end, guard=p)
        k.place(head)
        inner.b32.append(counter)
        _scoped_block(draw, k, pool, inner, flow, depth)
        k.emit("add", (), "s32", counter, counter, _small(-1))
        q = k.reg("pred")
        k.emit("setp", "ne", "s32", q, counter, _small(0))
        k.emit("bra", (), (), head, guard=q)
    else:  # count up from 0 to a limit of 1-8
        limit = k.reg("b32")
        k.emit("and", (), "b32", limit, src, _small(7))
        k.emit("add", (), "s32", limit, limit, _small(1))
        k.emit("mov", (), "u32", counter, _small(0))
        k.place(head)
        inner.fixed.add(limit.name)
        inner.b32 += [counter, limit]
        _scoped_block(draw, k, pool, inner, flow, depth)
        k.emit("add", (), "s32", counter, counter, _small(1))
        q = k.reg("pred")
        k.emit("setp", draw(st.sampled_from(["lt", "lo"])), "u32", q, counter, limit)
        k.emit("bra", (), (), head, guard=q)
    k.place(end)


def _block(draw, k: Kernel, pool: Pool, flow: _Flow, depth: int) -> None:
    kinds = ["op", "op", "op", "store"] + (["if", "if", "loop"] if depth < 2 else [])
    for _ in range(draw(st.integers(1, 3))):
        if flow.budget <= 0:
            return
        flow.budget -= 1
        kind = draw(st.sampled_from(kinds))
        if kind == "op":
            _assign(draw, k, pool)
        elif kind == "store":
            _store_stmt(draw, k, pool, flow)
        elif kind == "if":
            _if_stmt(draw, k, pool, flow, depth)
        else:
            _loop_stmt(draw, k, pool, flow, depth)


@st.composite
def branch_programs(draw, limits: Limits = Limits()) -> GeneratedProgram:
    k = draw(_kernel(limits))
    ids = _thread_ids(draw, k)
    pool = Pool(b32=[ids.gtid], fixed={ids.gtid.name})
    outputs = draw(st.integers(1, 4))
    out_addr, out_ty = _int_buffers(draw, k, ids, draw(st.integers(1, 3)), outputs, pool)
    budget = min(limits.ops, 10)  # loops repeat their bodies
    flow = _Flow(draw(st.integers(min(2, budget), budget)), out_addr, out_ty, outputs)
    while flow.budget > 0:
        _block(draw, k, pool, flow, 0)
    fold = _fold(draw, k, _unread(k, pool.b32) or pool.b32[-1:])
    for i, j in enumerate(sorted(draw(st.sets(st.integers(0, outputs - 1), min_size=1)))):
        r = fold if i == 0 else _pick(draw, pool.b32)
        k.emit("st", "global", out_ty, Mem(out_addr, 4 * j), r)
    return _finish(k, "branch")


# ========================================================= family: shared


def _shared_slot(k: Kernel, smem: Sym, index: Reg, wide: bool) -> Reg:
    """The shared address of word `index` of smem (32-bit or 64-bit addressing)."""
    if wide:
        base, offset, addr = k.reg("b64"), k.reg("b64"), k.reg("b64")
        k.emit("mov", (), "u64", base, smem)
        k.emit("mul", "wide", "u32", offset, index, _small(4))
        k.emit("add", (), "s64", addr, base, offset)
    else:
        base, offset, addr = k.reg("b32"), k.reg("b32"), k.reg("b32")
        k.emit("mov", (), "u32", base, smem)
        k.emit("shl", (), "b32", offset, index, _small(2))
        k.emit("add", (), "s32", addr, base, offset)
    return addr


def _shared_read(draw, k: Kernel, pool: Pool, ids: _Ids, smem: Sym, wide: bool) -> None:
    value = k.reg("b32")
    if _one_in(draw, 4):  # a fixed slot, addressed by symbol
        slot = draw(st.integers(0, k.block - 1))
        k.emit("ld", "shared", "u32", value, Mem(smem, 4 * slot))
    else:  # the neighbour (tid + d) % ntid
        d = draw(st.integers(0, 2 * MAX_THREADS))
        t, neighbour = k.reg("b32"), k.reg("b32")
        k.emit("add", (), "s32", t, ids.tid, _small(d))
        k.emit("rem", (), "u32", neighbour, t, ids.ntid)
        k.emit("ld", "shared", "u32", value, Mem(_shared_slot(k, smem, neighbour, wide)))
    pool.b32.append(value)


@st.composite
def shared_programs(draw, limits: Limits = Limits()) -> GeneratedProgram:
    k = draw(_kernel(limits))
    ids = _thread_ids(draw, k)
    pool = Pool(b32=[ids.tid])
    outputs = draw(st.integers(1, 4))
    out_addr, out_ty = _int_buffers(draw, k, ids, draw(st.integers(1, 2)), outputs, pool)
    smem = k.shared_array(k.block, module_scope=draw(st.booleans()), typed=draw(st.booleans()))
    wide = draw(st.booleans())
    own = _shared_slot(k, smem, ids.tid, wide)
    for round_ in range(draw(st.integers(1, 2))):
        for _ in range(draw(st.integers(0, 2))):
            _int_op(draw, k, pool)
        if round_:
            k.emit("bar", "sync", (), _small(0))  # everyone has read the last round
        k.emit("st", "shared", "u32", Mem(own), _pick(draw, pool.b32))
        k.emit("bar", "sync", (), _small(0))
        for _ in range(draw(st.integers(1, 2))):
            _shared_read(draw, k, pool, ids, smem, wide)
        for _ in range(draw(st.integers(0, 2))):
            _int_op(draw, k, pool)
        j = draw(st.integers(0, outputs - 1))
        k.emit("st", "global", out_ty, Mem(out_addr, 4 * j),
               _fold(draw, k, _unread(k, pool.b32) or pool.b32[-1:]))
    return _finish(k, "shared")


# ========================================================= family: atomic

_ATOMIC_OPS = (("add", "u32"), ("add", "s32"), ("min", "s32"), ("max", "s32"),
               ("min", "u32"), ("max", "u32"), ("and", "b32"), ("or", "b32"), ("xor", "b32"))


@st.composite
def atomic_programs(draw, limits: Limits = Limits()) -> GeneratedProgram:
    k = draw(_kernel(limits))
    ids = _thread_ids(draw, k)
    n = k.threads
    rounds = draw(st.integers(1, 3))
    words = draw(st.integers(1, 4))  # words per round's region
    in_ty = draw(st.sampled_from(["u32", "s32"]))
    in_base = k.pointer(in_ty, data(draw, raw32(), n))
    acc_base = k.pointer(draw(st.sampled_from(["u32", "s32"])),
                         [draw(raw32()) for _ in range(rounds * words)])
    pool = Pool(b32=[ids.gtid])
    value = k.reg("b32")
    k.emit("ld", "global", in_ty, value, Mem(_element_address(draw, k, in_base, ids.gtid, 4, 1)))
    pool.b32.append(value)
    for r in range(rounds):
        op, ty = draw(st.sampled_from(_ATOMIC_OPS))
        conflict = draw(st.integers(1, words))  # words of the region in use
        index = k.reg("b32")
        key = _pick(draw, pool.b32)  # tid-based or data-dependent word
        if conflict & (conflict - 1) == 0 and draw(st.booleans()):
            k.emit("and", (), "b32", index, key, _small(conflict - 1))
        else:
            k.emit("rem", (), "u32", index, key, _small(conflict))
        if _one_in(draw, 2):  # a value derived for this atomic
            operand = _int_op(draw, k, pool,
                              ops=(i_arith, i_logic, i_mul, i_shift, i_minmax, i_select))
        else:
            operand = draw(int_imm(ty)) if _one_in(draw, 4) else _pick(draw, pool.b32)
        addr = _element_address(draw, k, acc_base, index, 4, 1)
        k.emit("atom", ("global", op), ty, k.reg("b32"), Mem(addr, 4 * words * r), operand)
    if draw(st.booleans()):  # compare-and-swap, one word per thread: order-independent
        expect_raw = [draw(raw32()) for _ in range(n)]
        cas_raw = [e if draw(st.booleans()) else draw(raw32()) for e in expect_raw]
        expect_base = k.pointer("u32", expect_raw)
        cas_base = k.pointer("u32", cas_raw)
        out_base = k.pointer("u32", [draw(raw32()) for _ in range(n)])
        expected = k.reg("b32")
        k.emit("ld", "global", "u32", expected,
               Mem(_element_address(draw, k, expect_base, ids.gtid, 4, 1)))
        old = k.reg("b32")
        k.emit("atom", ("global", "cas"), "b32", old,
               Mem(_element_address(draw, k, cas_base, ids.gtid, 4, 1)), expected,
               _src32(draw, pool, "b32"))
        k.emit("st", "global", "u32", Mem(_element_address(draw, k, out_base, ids.gtid, 4, 1)),
               old)
    return _finish(k, "atomic")


# ========================================================= family: int64

_INT64_CMPS = {"s64": _INT_CMPS["s32"], "u64": _INT_CMPS["u32"], "b64": _INT_CMPS["b32"]}


def _src64(draw, pool: Pool, ty: str, imm: bool = True) -> Reg | Imm:
    if imm and _one_in(draw, 3):
        return draw(int_imm(ty))
    return _pick(draw, pool.b64)


def l_arith(draw, k, pool, dst):
    op, ty = draw(st.sampled_from(["add", "sub"])), draw(st.sampled_from(["s64", "u64"]))
    if op == "sub" and _one_in(draw, 4):
        k.emit(op, (), ty, dst, draw(int_imm(ty)), _pick(draw, pool.b64))
    else:
        k.emit(op, (), ty, dst, _pick(draw, pool.b64), _src64(draw, pool, ty))


def l_mul(draw, k, pool, dst):
    mode, ty = draw(st.sampled_from(["lo", "hi"])), draw(st.sampled_from(["s64", "u64"]))
    k.emit("mul", mode, ty, dst, _pick(draw, pool.b64), _src64(draw, pool, ty))


def l_logic(draw, k, pool, dst):
    k.emit(draw(st.sampled_from(["and", "or", "xor"])), (), "b64", dst, _pick(draw, pool.b64),
           _src64(draw, pool, "b64"))


def l_unary(draw, k, pool, dst):
    op, ty = draw(st.sampled_from([("not", "b64"), ("neg", "s64"), ("abs", "s64"),
                                   ("brev", "b64")]))
    k.emit(op, (), ty, dst, _pick(draw, pool.b64))


def l_shift(draw, k, pool, dst):
    op, ty = draw(st.sampled_from([("shl", "b64"), ("shr", "b64"), ("shr", "u64"),
                                   ("shr", "s64")]))
    amount = _small(draw(st.integers(0, 70))) if _one_in(draw, 2) else _pick(draw, pool.b32)
    k.emit(op, (), ty, dst, _pick(draw, pool.b64), amount)


def l_minmax(draw, k, pool, dst):
    ty = draw(st.sampled_from(["s64", "u64"]))
    k.emit(draw(st.sampled_from(["min", "max"])), (), ty, dst, _pick(draw, pool.b64),
           _src64(draw, pool, ty))


def l_select(draw, k, pool, dst):
    ty = draw(st.sampled_from(sorted(_INT64_CMPS)))
    p = k.reg("pred")
    k.emit("setp", draw(st.sampled_from(_INT64_CMPS[ty])), ty, p, _pick(draw, pool.b64),
           _src64(draw, pool, ty))
    sty = draw(st.sampled_from(["b64", "s64", "u64"]))
    k.emit("selp", (), sty, dst, _src64(draw, pool, sty), _src64(draw, pool, sty), p)


def l_widen(draw, k, pool, dst):
    src = draw(st.sampled_from(["u32", "s32"]))
    k.emit("cvt", (), ("u64" if src == "u32" else "s64", src), dst, _pick(draw, pool.b32))


def l_wide_mul(draw, k, pool, dst):
    ty = draw(st.sampled_from(["u32", "s32"]))
    k.emit("mul", "wide", ty, dst, _pick(draw, pool.b32), _src32(draw, pool, ty))


INT64_OPS = (l_arith, l_arith, l_mul, l_logic, l_unary, l_shift, l_shift, l_minmax, l_select,
             l_widen, l_wide_mul)


def n_narrow(draw, k, pool, dst):
    """64 → 32 bits: cvt truncation, popc, clz."""
    op, types = draw(st.sampled_from([("cvt", ("u32", "u64")), ("cvt", ("s32", "s64")),
                                      ("popc", ("b64",)), ("clz", ("b64",))]))
    k.emit(op, (), types, dst, _pick(draw, pool.b64))


@st.composite
def int64_programs(draw, limits: Limits = Limits()) -> GeneratedProgram:
    k = draw(_kernel(limits))
    ids = _thread_ids(draw, k)
    n = k.threads
    loads, loads32 = draw(st.integers(1, 3)), draw(st.integers(0, 2))
    outputs, outputs32 = draw(st.integers(1, 3)), draw(st.integers(0, 2))
    ty64, ty32 = draw(st.sampled_from(["u64", "s64"])), draw(st.sampled_from(["u32", "s32"]))
    out64 = draw(st.sampled_from(["u64", "s64"]))
    in64 = k.pointer(ty64, data(draw, raw64(), n * loads))
    in32 = k.pointer(ty32, data(draw, raw32(), n * loads32)) if loads32 else None
    o64 = k.pointer(out64, [draw(raw64()) for _ in range(n * outputs)])
    o32 = k.pointer("u32", [draw(raw32()) for _ in range(n * outputs32)]) if outputs32 else None
    pool = Pool(b32=[ids.gtid])
    pool.b64.extend(_load_row(k, _element_address(draw, k, in64, ids.gtid, 8, loads), ty64,
                              loads, "b64"))
    if in32 is not None:
        pool.b32.extend(_load_row(k, _element_address(draw, k, in32, ids.gtid, 4, loads32),
                                  ty32, loads32, "b32"))
    last = None
    for _ in range(draw(st.integers(1, limits.ops))):
        if _one_in(draw, 5):
            dst = k.reg("b32")
            draw(st.sampled_from((n_narrow, n_narrow, i_arith, i_mul, i_logic)))(draw, k, pool,
                                                                                dst)
            pool.b32.append(dst)
        else:
            last = k.reg("b64")
            draw(st.sampled_from(INT64_OPS))(draw, k, pool, last)
            pool.b64.append(last)
    dead = _unread(k, pool.b64)
    for r in _unread(k, pool.b32):
        wide = k.reg("b64")
        k.emit("cvt", (), ("u64", "u32"), wide, r)
        dead.append(wide)
    fold = _fold(draw, k, dead or [last or pool.b64[-1]])
    addr = _element_address(draw, k, o64, ids.gtid, 8, outputs)
    for j in range(outputs):
        r = fold if j == 0 else _pick(draw, pool.b64)
        k.emit("st", "global", out64, Mem(addr, 8 * j), r)
    if o32 is not None:
        addr = _element_address(draw, k, o32, ids.gtid, 4, outputs32)
        for j in range(outputs32):
            k.emit("st", "global", "u32", Mem(addr, 4 * j), _pick(draw, pool.b32))
    return _finish(k, "int64")


# ================================================================ the API


@dataclass(frozen=True)
class GeneratedProgram:
    ptx: str
    launch: dict
    expected: list  # per argument: the final buffer, or None for a scalar
    family: str


_FAMILY_STRATEGIES = {
    "int32": int32_programs,
    "f32": f32_programs,
    "branch": branch_programs,
    "shared": shared_programs,
    "atomic": atomic_programs,
    "int64": int64_programs,
}
FAMILIES: list[str] = list(_FAMILY_STRATEGIES)


def programs(family: str | None = None, *, max_threads: int = MAX_THREADS,
             max_ops: int = 16) -> st.SearchStrategy[GeneratedProgram]:
    """Random whole kernels of one family (all families if None), with their launch
    and the oracle's expected buffers. max_threads (1-16) bounds the launch, max_ops
    the random instructions (smaller programs for the slower engines)."""
    if not 1 <= max_threads <= MAX_THREADS or max_ops < 1:
        raise ValueError(f"need 1 <= max_threads <= {MAX_THREADS} and max_ops >= 1")
    limits = Limits(max_threads, max_ops)
    if family is None:
        return st.one_of([s(limits) for s in _FAMILY_STRATEGIES.values()])
    if family not in _FAMILY_STRATEGIES:
        raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")
    return _FAMILY_STRATEGIES[family](limits)
