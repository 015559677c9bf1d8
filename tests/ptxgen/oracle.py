"""The oracle: interprets a kernel's own records thread by thread (never its PTX)
and returns the expected buffers."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np

from ptxgen.records import (
    ELEM_BYTES,
    LOCAL_DEPOT,
    STEP_LIMIT,
    DImm,
    FImm,
    Imm,
    Inst,
    Kernel,
    Label,
    Mem,
    Operand,
    Reg,
    Special,
    Sym,
)
from ptxgen.values import (
    bit_mask,
    f32_bits,
    f32_from_bits,
    fma_f32,
    from_raw,
    round_to_f32,
    to_raw,
    to_signed,
    type_bits,
    typed_value,
)

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
    return type_bits(ty), [typed_value(v, ty) for v in vals]


def _is_float(x: Inst) -> bool:
    return x.types[-1] == "f32"


def _f(v: int) -> np.float32:
    return f32_from_bits(v)


def _d(v: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", v))[0]


def _d_bits(x: float) -> int:
    """A NaN is never stored (f32 NaNs are sanitized, s32 conversions give 0):
    its payload, which PTX leaves open, is the canonical one."""
    if math.isnan(x):
        return 0x7FFF_FFFF_FFFF_FFFF
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def _fma64(a: float, b: float, c: float) -> float:
    if not all(math.isfinite(v) for v in (a, b, c)):
        return a * b + c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    return float(exact) if exact != 0 else a * b + c


def _minmax64(a: float, b: float, pick) -> float:
    """The other operand for one NaN; −0 below +0."""
    if math.isnan(a) or math.isnan(b):
        return b if math.isnan(a) else a
    return pick(a, b, key=_ordered)


def _ordered(x: float) -> tuple[float, float]:
    """−0 below +0."""
    return x, math.copysign(1.0, x)


#: f64 (the promotions of float code): Python's doubles,
#: fma rounded once through exact rationals
_F64 = {
    "add": lambda v: _d(v[0]) + _d(v[1]), "sub": lambda v: _d(v[0]) - _d(v[1]),
    "mul": lambda v: _d(v[0]) * _d(v[1]), "div": lambda v: _d(v[0]) / _d(v[1]),
    "fma": lambda v: _fma64(_d(v[0]), _d(v[1]), _d(v[2])),
    "sqrt": lambda v: math.sqrt(_d(v[0])),
    "abs": lambda v: abs(_d(v[0])), "neg": lambda v: -_d(v[0]),
    "min": lambda v: _minmax64(_d(v[0]), _d(v[1]), min),
    "max": lambda v: _minmax64(_d(v[0]), _d(v[1]), max),
}


def _alu_f64(x, v):
    return _d_bits(_F64[x.op](v))


def _cvt_f64(x, v) -> int:
    dst, src = x.types
    if dst == "f64":                          # cvt.f64.f32: exact
        return _d_bits(float(_f(v[0])))
    d = _d(v[0])
    if dst == "f32":                          # cvt.rn.f32.f64
        if math.isnan(d):
            return 0x7FFF_FFFF
        if math.isinf(d) or d == 0:
            return f32_bits(np.float32(d))
        return round_to_f32(Fraction(d))
    n = type_bits(dst)                        # cvt.rzi.s32.f64: toward zero, saturated
    lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if dst[0] == "s" else (0, bit_mask(n))
    if math.isnan(d):
        return 0
    t = lo if d == -math.inf else hi if d == math.inf else math.trunc(d)
    return min(max(t, lo), hi) & bit_mask(n)


def _alu_add(x, v):
    if _is_float(x):
        return f32_bits(_f(v[0]) + _f(v[1]))
    n, (a, b) = _ints(x, v)
    return (a + b) & bit_mask(n)


def _alu_sub(x, v):
    if _is_float(x):
        return f32_bits(_f(v[0]) - _f(v[1]))
    n, (a, b) = _ints(x, v)
    return (a - b) & bit_mask(n)


def _alu_mul(x, v):
    if _is_float(x):
        return f32_bits(_f(v[0]) * _f(v[1]))
    n, (a, b) = _ints(x, v)
    if "hi" in x.mods:
        return (a * b) >> n & bit_mask(n)
    return (a * b) & bit_mask(2 * n if "wide" in x.mods else n)


def _alu_mad(x, v):
    assert "lo" in x.mods
    n, (a, b, c) = _ints(x, v)
    return (a * b + c) & bit_mask(n)


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
    return (q if (a < 0) == (b < 0) else -q) & bit_mask(n)


def _alu_rem(x, v):
    n, (a, b) = _ints(x, v)
    if b == 0 or (x.types[-1][0] == "s" and a == -(1 << (n - 1)) and b == -1):
        raise OracleError(f"undefined {x.opcode} {a} % {b}")
    r = abs(a) % abs(b)
    return (-r if a < 0 else r) & bit_mask(n)


def _alu_bitwise(fn):
    def alu(x, v):
        n = type_bits(x.types[-1])
        return fn(*(a & bit_mask(n) for a in v)) & bit_mask(n)
    return alu


def _alu_neg(x, v):
    if _is_float(x):
        return v[0] ^ 0x80000000
    n, (a,) = _ints(x, v)
    return -a & bit_mask(n)


def _alu_abs(x, v):
    if _is_float(x):
        return v[0] & 0x7FFFFFFF
    n, (a,) = _ints(x, v)
    return abs(a) & bit_mask(n)


def _alu_popc(x, v):
    return bin(v[0] & bit_mask(type_bits(x.types[-1]))).count("1")


def _alu_clz(x, v):
    n = type_bits(x.types[-1])
    return n - (v[0] & bit_mask(n)).bit_length()


def _alu_brev(x, v):
    n = type_bits(x.types[-1])
    return int(format(v[0] & bit_mask(n), f"0{n}b")[::-1], 2)


def _alu_shift(left: bool):
    def alu(x, v):
        ty = x.types[-1]
        n = type_bits(ty)
        amount = min(v[1] & 0xFFFFFFFF, n)  # PTX clamps shift amounts to the width
        if left:
            return (v[0] << amount) & bit_mask(n)
        return (typed_value(v[0], ty) >> amount) & bit_mask(n)  # .sNN fills with the sign
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
        return (min(a, b) if is_min else max(a, b)) & bit_mask(n)
    return alu


def _alu_sqrt(x, v):
    assert x.mods == ("rn",)
    return f32_bits(np.sqrt(_f(v[0])))


def _alu_setp(x, v):
    cmp, ty = x.mods[0], x.types[-1]
    if ty == "f64":                           # ordered compares: false with a NaN
        a, b = _d(v[0]), _d(v[1])
        return not (math.isnan(a) or math.isnan(b)) and _INT_CMP[cmp](a, b)
    if ty == "f32":
        fa, fb = float(_f(v[0])), float(_f(v[1]))
        nan = math.isnan(fa) or math.isnan(fb)
        if cmp in ("num", "nan"):
            return nan == (cmp == "nan")
        if nan:
            return cmp.endswith("u")
        return _INT_CMP[cmp[:2]](fa, fb)
    unsigned = ty[0] != "s" or cmp in ("lo", "ls", "hi", "hs")
    n = type_bits(ty)
    a, b = ((w & bit_mask(n)) if unsigned else to_signed(w, n) for w in v)
    return _INT_CMP[cmp](a, b)


def _alu_testp(x, v):
    f = float(_f(v[0]))
    finite = math.isfinite(f)
    return {"finite": finite, "infinite": math.isinf(f), "number": not math.isnan(f),
            "notanumber": math.isnan(f), "normal": finite and abs(f) >= 2.0 ** -126,
            "subnormal": f != 0 and abs(f) < 2.0 ** -126}[x.mods[0]]


def _alu_selp(x, v):
    return v[0] if v[2] else v[1]


def _alu_mov(x, v):
    return v[0] & bit_mask(type_bits(x.types[-1]))


def _alu_cvt(x, v):
    dst, src = x.types
    if dst == "f32":
        assert x.mods == ("rn",) and src != "f32"
        value = typed_value(v[0], src)
        return round_to_f32(Fraction(value)) if value else 0
    if src == "f32":
        assert x.mods == ("rzi",)
        f = float(_f(v[0]))
        if math.isnan(f):
            return 0
        n = type_bits(dst)
        lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if dst[0] == "s" else (0, bit_mask(n))
        t = lo if f == -math.inf else hi if f == math.inf else math.trunc(f)
        return min(max(t, lo), hi) & bit_mask(n)
    return typed_value(v[0], src) & bit_mask(type_bits(dst))  # integer widths: extend or truncate


_ALU = {
    "add": _alu_add, "sub": _alu_sub, "mul": _alu_mul, "mad": _alu_mad, "fma": _alu_fma,
    "div": _alu_div, "rem": _alu_rem,
    "and": _alu_bitwise(lambda a, b: a & b), "or": _alu_bitwise(lambda a, b: a | b),
    "xor": _alu_bitwise(lambda a, b: a ^ b), "not": _alu_bitwise(lambda a: ~a),
    "neg": _alu_neg, "abs": _alu_abs, "popc": _alu_popc, "clz": _alu_clz, "brev": _alu_brev,
    "shl": _alu_shift(True), "shr": _alu_shift(False),
    "min": _alu_minmax(True), "max": _alu_minmax(False), "sqrt": _alu_sqrt,
    "setp": _alu_setp, "testp": _alu_testp, "selp": _alu_selp, "mov": _alu_mov, "cvt": _alu_cvt,
    "cvta": _alu_mov,  # generic and global addresses coincide in the oracle
}

_ATOMIC = {
    "add": lambda n, s, old, b: old + b,
    "and": lambda n, s, old, b: old & b,
    "or": lambda n, s, old, b: old | b,
    "xor": lambda n, s, old, b: old ^ b,
    "min": lambda n, s, old, b: min(typed_value(old, s), typed_value(b, s)),
    "max": lambda n, s, old, b: max(typed_value(old, s), typed_value(b, s)),
}

#: f32 ops whose answer for a NaN operand is fully specified (setp, testp, min/max, selp).
_NAN_TOLERANT = ("setp", "testp", "min", "max", "selp")

_SHARED_BASE = 0x100  # oracle-private addresses; programs never look at them
_LOCAL_BASE = 0x1000


class _Memory:
    """Global memory (one region per pointer argument) and kernel parameters."""

    def __init__(self, kernel: Kernel, launch: dict):
        self.local_bytes = kernel.local_bytes
        self.params: dict[str, int] = {}
        self.regions: list[tuple[bytearray, str] | None] = []
        for index, ((name, _), arg) in enumerate(zip(kernel.params, launch["args"], strict=True)):
            ty = arg["type"]
            if ty.endswith("*"):
                ty = ty[:-1]
                width = ELEM_BYTES[ty]
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
            width = ELEM_BYTES[ty]
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
        self.local = bytearray(memory.local_bytes)

    def read(self, x: Operand) -> int | bool:
        if isinstance(x, Reg):
            if x.name not in self.regs:
                raise OracleError(f"read of undefined register {x.name}")
            return self.regs[x.name]
        if isinstance(x, Imm):
            return x.value
        if isinstance(x, FImm | DImm):
            return x.bits
        if isinstance(x, Special):
            return self.special[x.name]
        if isinstance(x, Sym):
            return _LOCAL_BASE if x.name == LOCAL_DEPOT else self.shared.symbols[x.name]
        raise OracleError(f"cannot read {x}")

    def location(self, space: str, mem: Mem, width: int) -> tuple[bytearray, int]:
        addr = (self.read(mem.base) + mem.offset) & ((1 << 64) - 1)
        if space == "local":
            offset = addr - _LOCAL_BASE
            if not 0 <= offset <= len(self.local) - width or offset % width:
                raise OracleError(f"bad local access at {addr:#x}")
            return self.local, offset
        return (self.shared if space == "shared" else self.memory).region(addr, width)

    def load(self, space: str, mem: Mem, ty: str) -> int:
        if space == "param":
            return self.memory.params[mem.base.name]
        width = ELEM_BYTES[ty]
        data, offset = self.location(space, mem, width)
        return int.from_bytes(data[offset:offset + width], "little")

    def store(self, space: str, mem: Mem, ty: str, value: int) -> None:
        width = ELEM_BYTES[ty]
        data, offset = self.location(space, mem, width)
        data[offset:offset + width] = (value & bit_mask(8 * width)).to_bytes(width, "little")

    def atom(self, x: Inst) -> int:
        space, op = x.mods
        ty = x.types[0]
        n = type_bits(ty)
        mem = x.args[1]
        old = self.load(space, mem, ty)
        b = self.read(x.args[2]) & bit_mask(n)
        if op == "cas":
            new = self.read(x.args[3]) & bit_mask(n) if old == b else old
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
        elif op == "cvt" and "f64" in x.types:
            self.regs[x.args[0].name] = _cvt_f64(x, [self.read(a) for a in x.args[1:]])
        elif x.types == ("f64",) and op in _F64:
            self.regs[x.args[0].name] = _alu_f64(x, [self.read(a) for a in x.args[1:]])
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
