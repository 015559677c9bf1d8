"""The int32 and int64 families: straight-line integer DAGs."""

from __future__ import annotations

from hypothesis import strategies as st

from ptxgen.common import (
    DEFAULT_LIMITS,
    Limits,
    Pool,
    ThreadIds,
    element_address,
    finish,
    fold_values,
    int_imm,
    load_row,
    new_kernel,
    one_in,
    pick,
    small_imm,
    thread_ids,
    unread,
)
from ptxgen.records import GeneratedProgram, Imm, Inst, Kernel, Mem, Reg
from ptxgen.values import MASK32, data, raw32, raw64

# ================================================== 32-bit integer instructions

_INT_CMPS = {"s32": ("eq", "ne", "lt", "le", "gt", "ge"),
             "u32": ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"),
             "b32": ("eq", "ne")}


def src32(draw, pool: Pool, ty: str, imm: bool = True) -> Reg | Imm:
    if imm and one_in(draw, 3):
        return draw(int_imm(ty))
    return pick(draw, pool.b32)


def _binary32(draw, pool: Pool, ty: str, imm_first: bool = False) -> tuple:
    """Two sources, at most one an immediate (the second, or the first if allowed)."""
    if imm_first and one_in(draw, 4):
        return draw(int_imm(ty)), pick(draw, pool.b32)
    return pick(draw, pool.b32), src32(draw, pool, ty)


def setp32(draw, k: Kernel, pool: Pool) -> Reg:
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
    k.emit("mad", "lo", ty, dst, pick(draw, pool.b32), src32(draw, pool, ty),
           src32(draw, pool, ty))


def i_logic(draw, k, pool, dst):
    k.emit(draw(st.sampled_from(["and", "or", "xor"])), (), "b32", dst,
           *_binary32(draw, pool, "b32"))


def i_unary(draw, k, pool, dst):
    op, ty = draw(st.sampled_from([("not", "b32"), ("neg", "s32"), ("abs", "s32"),
                                   ("popc", "b32"), ("clz", "b32"), ("brev", "b32")]))
    k.emit(op, (), ty, dst, pick(draw, pool.b32))


def i_shift(draw, k, pool, dst):
    op, ty = draw(st.sampled_from([("shl", "b32"), ("shr", "b32"), ("shr", "u32"),
                                   ("shr", "s32")]))
    if one_in(draw, 2):
        amount = small_imm(draw(st.integers(0, 40)))
    else:
        amount = pick(draw, pool.b32)  # any 32-bit value; >= 32 clamps
    value = pick(draw, pool.b32)
    if op == "shl" and isinstance(amount, Reg) and one_in(draw, 4):
        value = draw(int_imm("b32"))  # `shl.b32 %r, 1, %r` (1 << n)
    k.emit(op, (), ty, dst, value, amount)


def i_minmax(draw, k, pool, dst):
    op, ty = draw(st.sampled_from(["min", "max"])), draw(st.sampled_from(["s32", "u32"]))
    k.emit(op, (), ty, dst, *_binary32(draw, pool, ty))


def i_select(draw, k, pool, dst):
    p = pick(draw, pool.pred) if pool.pred and one_in(draw, 3) else setp32(draw, k, pool)
    ty = draw(st.sampled_from(["b32", "s32", "u32"]))
    k.emit("selp", (), ty, dst, src32(draw, pool, ty), src32(draw, pool, ty), p)


def i_mov(draw, k, pool, dst):
    ty = draw(st.sampled_from(["b32", "u32", "s32"]))
    k.emit("mov", (), ty, dst, draw(int_imm(ty)) if one_in(draw, 2) else pick(draw, pool.b32))


def _safe_divisor(draw, k: Kernel, pool: Pool, ty: str, dividend: Reg) -> Reg | Imm:
    """A divisor that is never 0, and never -1 when the dividend is INT_MIN (.s32)."""
    if one_in(draw, 3):
        imm = draw(int_imm(ty, raw32().filter(lambda v: v != 0 and v != MASK32)))
        return imm
    b = pick(draw, pool.b32)
    if one_in(draw, 3):  # a small divisor, -8..7: 0 and -1 are common
        small = k.reg("b32")
        k.emit("shr", (), "s32", small, b, small_imm(28))
        b = small
    p, nonzero = k.reg("pred"), k.reg("b32")
    k.emit("setp", "eq", "s32", p, b, small_imm(0))
    k.emit("selp", (), "b32", nonzero, draw(int_imm("b32", raw32().filter(bool))), b, p)
    if ty == "u32":
        return nonzero
    # (dividend ^ INT_MIN) | ~divisor is 0 exactly for INT_MIN / -1: divide by 1 then
    t, u, w, q, safe = k.reg("b32"), k.reg("b32"), k.reg("b32"), k.reg("pred"), k.reg("b32")
    k.emit("xor", (), "b32", t, dividend, Imm(0x80000000, "-2147483648"))
    k.emit("not", (), "b32", u, nonzero)
    k.emit("or", (), "b32", w, t, u)
    k.emit("setp", "eq", "s32", q, w, small_imm(0))
    k.emit("selp", (), "b32", safe, small_imm(1), nonzero, q)
    return safe


def i_divrem(draw, k, pool, dst):
    op, ty = draw(st.sampled_from(["div", "rem"])), draw(st.sampled_from(["s32", "u32"]))
    a = pick(draw, pool.b32)
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
    if x.op in _COMMUTING and len(srcs) == 2 and one_in(draw, 2):
        srcs.reverse()
    regs = [i for i, a in enumerate(srcs) if isinstance(a, Reg)]
    if regs and one_in(draw, 2):
        i = draw(st.sampled_from(regs))
        copy = k.reg("b32")
        k.emit("mov", (), "b32", copy, srcs[i])
        srcs[i] = copy
    k.emit(x.op, x.mods, x.types, dst, *srcs)


INT32_OPS = (i_arith, i_arith, i_mul, i_mad, i_logic, i_unary, i_shift, i_shift, i_minmax,
             i_select, i_select, i_select, i_divrem, i_mov, i_repeat, i_repeat)


def int_op(draw, k: Kernel, pool: Pool, dst: Reg | None = None,
            ops: tuple = INT32_OPS) -> Reg:
    """One random 32-bit op into dst (a fresh register, added to the pool, if None)."""
    fresh = dst is None
    dst = dst or k.reg("b32")
    draw(st.sampled_from(ops))(draw, k, pool, dst)
    if fresh:
        pool.b32.append(dst)
    return dst


# ======================================================== family: int32


def int_buffers(draw, k: Kernel, ids: ThreadIds, loads: int, outputs: int, pool: Pool):
    """An input buffer of `loads` words per thread (loaded into the pool) and an
    output buffer of `outputs` words per thread: returns (output address, type)."""
    in_ty, out_ty = draw(st.sampled_from(["u32", "s32"])), draw(st.sampled_from(["u32", "s32"]))
    in_data = data(draw, raw32(), k.threads * loads)
    out_data = data(draw, raw32(), k.threads * outputs)
    in_base = k.pointer(in_ty, in_data)
    out_base = k.pointer(out_ty, out_data)
    if one_in(draw, 3):
        pool.b32.append(k.scalar(draw(st.sampled_from(["u32", "s32"])), draw(raw32())))
    in_addr = element_address(draw, k, in_base, ids.gtid, 4, loads)
    pool.b32.extend(load_row(k, in_addr, in_ty, loads, "b32"))
    return element_address(draw, k, out_base, ids.gtid, 4, outputs), out_ty


@st.composite
def int32_programs(draw, limits: Limits = DEFAULT_LIMITS) -> GeneratedProgram:
    k = draw(new_kernel(limits))
    ids = thread_ids(draw, k)
    pool = Pool(b32=[ids.gtid] if one_in(draw, 3) else [])
    outputs = draw(st.integers(1, 4))
    out_addr, out_ty = int_buffers(draw, k, ids, draw(st.integers(1, 4)), outputs, pool)
    for _ in range(draw(st.integers(1, limits.ops))):
        int_op(draw, k, pool)
    fold = fold_values(draw, k, unread(k, pool.b32) or pool.b32[-1:])
    for j in range(outputs):
        r = fold if j == 0 else pick(draw, pool.b32)
        k.emit("st", "global", out_ty, Mem(out_addr, 4 * j), r)
    return finish(k, "int32")


# ========================================================= family: int64

_INT64_CMPS = {"s64": _INT_CMPS["s32"], "u64": _INT_CMPS["u32"], "b64": _INT_CMPS["b32"]}


def _src64(draw, pool: Pool, ty: str, imm: bool = True) -> Reg | Imm:
    if imm and one_in(draw, 3):
        return draw(int_imm(ty))
    return pick(draw, pool.b64)


def l_arith(draw, k, pool, dst):
    op, ty = draw(st.sampled_from(["add", "sub"])), draw(st.sampled_from(["s64", "u64"]))
    if op == "sub" and one_in(draw, 4):
        k.emit(op, (), ty, dst, draw(int_imm(ty)), pick(draw, pool.b64))
    else:
        k.emit(op, (), ty, dst, pick(draw, pool.b64), _src64(draw, pool, ty))


def l_mul(draw, k, pool, dst):
    mode, ty = draw(st.sampled_from(["lo", "hi"])), draw(st.sampled_from(["s64", "u64"]))
    k.emit("mul", mode, ty, dst, pick(draw, pool.b64), _src64(draw, pool, ty))


def l_logic(draw, k, pool, dst):
    k.emit(draw(st.sampled_from(["and", "or", "xor"])), (), "b64", dst, pick(draw, pool.b64),
           _src64(draw, pool, "b64"))


def l_unary(draw, k, pool, dst):
    op, ty = draw(st.sampled_from([("not", "b64"), ("neg", "s64"), ("abs", "s64"),
                                   ("brev", "b64")]))
    k.emit(op, (), ty, dst, pick(draw, pool.b64))


def l_shift(draw, k, pool, dst):
    op, ty = draw(st.sampled_from([("shl", "b64"), ("shr", "b64"), ("shr", "u64"),
                                   ("shr", "s64")]))
    amount = small_imm(draw(st.integers(0, 70))) if one_in(draw, 2) else pick(draw, pool.b32)
    k.emit(op, (), ty, dst, pick(draw, pool.b64), amount)


def l_minmax(draw, k, pool, dst):
    ty = draw(st.sampled_from(["s64", "u64"]))
    k.emit(draw(st.sampled_from(["min", "max"])), (), ty, dst, pick(draw, pool.b64),
           _src64(draw, pool, ty))


def l_select(draw, k, pool, dst):
    ty = draw(st.sampled_from(sorted(_INT64_CMPS)))
    p = k.reg("pred")
    k.emit("setp", draw(st.sampled_from(_INT64_CMPS[ty])), ty, p, pick(draw, pool.b64),
           _src64(draw, pool, ty))
    sty = draw(st.sampled_from(["b64", "s64", "u64"]))
    k.emit("selp", (), sty, dst, _src64(draw, pool, sty), _src64(draw, pool, sty), p)


def l_widen(draw, k, pool, dst):
    src = draw(st.sampled_from(["u32", "s32"]))
    k.emit("cvt", (), ("u64" if src == "u32" else "s64", src), dst, pick(draw, pool.b32))


def l_wide_mul(draw, k, pool, dst):
    ty = draw(st.sampled_from(["u32", "s32"]))
    k.emit("mul", "wide", ty, dst, pick(draw, pool.b32), src32(draw, pool, ty))


INT64_OPS = (l_arith, l_arith, l_mul, l_logic, l_unary, l_shift, l_shift, l_minmax, l_select,
             l_widen, l_wide_mul)


def n_narrow(draw, k, pool, dst):
    """64 → 32 bits: cvt truncation, popc, clz."""
    op, types = draw(st.sampled_from([("cvt", ("u32", "u64")), ("cvt", ("s32", "s64")),
                                      ("popc", ("b64",)), ("clz", ("b64",))]))
    k.emit(op, (), types, dst, pick(draw, pool.b64))


@st.composite
def int64_programs(draw, limits: Limits = DEFAULT_LIMITS) -> GeneratedProgram:
    k = draw(new_kernel(limits))
    ids = thread_ids(draw, k)
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
    pool.b64.extend(load_row(k, element_address(draw, k, in64, ids.gtid, 8, loads), ty64,
                              loads, "b64"))
    if in32 is not None:
        pool.b32.extend(load_row(k, element_address(draw, k, in32, ids.gtid, 4, loads32),
                                  ty32, loads32, "b32"))
    last = None
    for _ in range(draw(st.integers(1, limits.ops))):
        if one_in(draw, 5):
            dst = k.reg("b32")
            draw(st.sampled_from((n_narrow, n_narrow, i_arith, i_mul, i_logic)))(draw, k, pool,
                                                                                dst)
            pool.b32.append(dst)
        else:
            last = k.reg("b64")
            draw(st.sampled_from(INT64_OPS))(draw, k, pool, last)
            pool.b64.append(last)
    dead = unread(k, pool.b64)
    for r in unread(k, pool.b32):
        wide = k.reg("b64")
        k.emit("cvt", (), ("u64", "u32"), wide, r)
        dead.append(wide)
    fold = fold_values(draw, k, dead or [last or pool.b64[-1]])
    addr = element_address(draw, k, o64, ids.gtid, 8, outputs)
    for j in range(outputs):
        r = fold if j == 0 else pick(draw, pool.b64)
        k.emit("st", "global", out64, Mem(addr, 8 * j), r)
    if o32 is not None:
        addr = element_address(draw, k, o32, ids.gtid, 4, outputs32)
        for j in range(outputs32):
            k.emit("st", "global", "u32", Mem(addr, 4 * j), pick(draw, pool.b32))
    return finish(k, "int64")
