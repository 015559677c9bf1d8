"""The `.approx` f32 operations on the reference engine: the float32
algorithms of `qgc.machine.approx_programs` (their definition) run on this
engine's own arithmetic, so `ref` and the machine agree on them bit for bit
while each brings its own integer and float operations."""

from __future__ import annotations

from collections.abc import Callable

from qgc.machine.float_programs import IntOps
from qgc.runtime import float32 as F
from qgc.runtime.float32 import minmax_bits

M32 = 0xFFFF_FFFF


def _s32(x: int) -> int:
    return x - (1 << 32) if x >> 31 else x


_INT: dict[str, Callable[..., int]] = {
    "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
    "not": lambda a: ~a, "neg": lambda a: -a, "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "shl": lambda a, n: a << n if n < 32 else 0, "shr.u": lambda a, n: a >> n if n < 32 else 0,
    "shr.s": lambda a, n: _s32(a) >> min(n, 31),
    "min.u": min, "max.u": max,
    "min.s": lambda a, b: a if _s32(a) <= _s32(b) else b,
    "max.s": lambda a, b: a if _s32(a) >= _s32(b) else b,
}

_CMP: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _binary(fn: Callable[[float, float], int]) -> Callable[..., int]:
    return lambda a, b: fn(F.to_float(a), F.to_float(b))


#: the f32 operations the programs use, rounded to nearest
_FLOAT: dict[str, Callable[..., int]] = {
    "fma": lambda a, b, c: F.fma_rn(F.to_float(a), F.to_float(b), F.to_float(c)),
    "mul": _binary(lambda x, y: F.from_float(x * y)),
    "add": _binary(lambda x, y: F.from_float(x + y)),
    "sub": _binary(lambda x, y: F.from_float(x - y)),
    "div": _binary(lambda x, y: F.div_exact(x, y, "rn")),
    "rcp": lambda a: F.div_exact(1.0, F.to_float(a), "rn"),
    "sqrt": lambda a: F.sqrt_exact(F.to_float(a), "rn"),
    "min": lambda a, b: minmax_bits(a, b, False, False),
    "max": lambda a, b: minmax_bits(a, b, True, False),
}


class RefOps(IntOps[int, bool]):
    """IntOps on Python ints with the reference engine's semantics."""

    def alu(self, opcode: str, *srcs: int) -> int:
        x = [s & M32 for s in srcs]
        if opcode == "cvt.rni.s32.f32":
            return F.f32_to_int(F.to_float(x[0]), "rni", 32, True) & M32
        if opcode == "cvt.rn.f32.s32":
            return F.int_to_f32(_s32(x[0]), "rn")
        if opcode.endswith(".f32"):
            parts = opcode.split(".")
            if "ftz" in parts:
                return F.flush(_FLOAT[parts[0]](*(F.flush(v) for v in x)))
            return _FLOAT[parts[0]](*x)
        return _INT[opcode](*x) & M32

    def setp(self, cond: str, a: int, b: int) -> bool:
        base, _, kind = cond.partition(".")
        a, b = a & M32, b & M32
        if kind == "s":
            a, b = _s32(a), _s32(b)
        return _CMP[base](a, b)

    def pred(self, opcode: str, *srcs: bool) -> bool:
        return {"and": all, "or": any}[opcode](srcs) if opcode in ("and", "or") else \
            not srcs[0] if opcode == "not" else srcs[0] != srcs[1]

    def select(self, a: int, b: int, p: bool) -> int:
        return (a if p else b) & M32


REF_OPS = RefOps()
