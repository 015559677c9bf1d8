"""Data movement in the reference engine: mov (with pack/unpack), ld/ldu/st,
cvta/isspacep and the atomics (atom, red), which run lane by lane in lane order."""

from __future__ import annotations

from collections.abc import Callable

from qgc.dialects.ptx import Vec
from qgc.runtime import float32 as F
from qgc.runtime import float64 as D
from qgc.runtime.memory import MemoryFault, from_generic, in_window, to_generic
from qgc.runtime.ref_decode import (
    ALU,
    BIT_TYPES,
    INT_TYPES,
    ORDERING,
    SPACES,
    Ctx,
    mask,
    op,
    type_bits,
)
from qgc.runtime.ref_int import INT_ARITH, int_minmax

# ============================================================ moves and memory

MOV_TYPES = ("pred",) + BIT_TYPES[1:] + INT_ARITH + ("f32", "f16", "f64")


@op("mov", "mov.{pred,b16,b32,b64,u16,u32,u64,s16,s32,s64,f32,f64}",
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


LD_TYPES = BIT_TYPES + INT_TYPES + ("f32", "f16", "f64")
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
ATOM_TYPES = ("b32", "b64", "u32", "s32", "u64", "s64", "f32", "f64")
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
    if t == "f64":         # round to nearest even, subnormals kept
        if name != "add":
            raise cx.unsupported()
        return lambda old, b, c: D.add(D.to_float(old), D.to_float(b), "rn")
    if name in ("min", "max"):
        fn = int_minmax(t if t[0] != "b" else "u" + t[1:], name == "max")
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
    "atom{.global,.shared}.add.{f32,f64}",
    desc="atomic read-modify-write returning the old value (threads in lane order; "
         "f32 add flushes subnormals, f64 add keeps them)", mods=ATOM_MODS)
def _atom(cx: Ctx):
    return _atomic(cx, returns=True)


@op("red", "red{.sem}{.scope}{.global,.shared}.{add,inc,dec,min,max,and,or,xor}.type",
    desc="atomic reduction (no result)", mods=ATOM_MODS)
def _red(cx: Ctx):
    return _atomic(cx, returns=False)
