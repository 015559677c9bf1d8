"""The f32 family: straight-line f32 arithmetic that never stores a NaN."""

from __future__ import annotations

import struct

from hypothesis import strategies as st

from ptxgen.common import (
    DEFAULT_LIMITS,
    Limits,
    Pool,
    element_address,
    finish,
    fold_values,
    load_row,
    new_kernel,
    one_in,
    pick,
    thread_ids,
    unread,
)
from ptxgen.records import DImm, FImm, GeneratedProgram, Imm, Kernel, Mem, Reg
from ptxgen.values import INF_F32, data, f32_finite, f32_imm_bits, raw32

# ========================================================== f32 instructions

_TESTP = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")
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
    r = pick(draw, pool.f32)
    return _sanitize(draw, k, pool, r) if r.name in pool.dirty else r


def _fsrc(draw, k: Kernel, pool: Pool, imm: bool = True) -> Reg | FImm:
    return _fimm(draw) if imm and one_in(draw, 3) else _clean(draw, k, pool)


def _fany(draw, pool: Pool, imm: bool = True) -> Reg | FImm:
    """A source for NaN-tolerant ops (setp, min/max, selp): maybe-NaN registers
    preferred, signed zeros among the immediates."""
    if imm and one_in(draw, 3):
        return FImm(draw(st.sampled_from([0, 0x80000000]))) if one_in(draw, 3) else _fimm(draw)
    dirty = [r for r in pool.f32 if r.name in pool.dirty]
    return pick(draw, dirty) if dirty and draw(st.booleans()) else pick(draw, pool.f32)


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
    if op in ("sub", "div") and one_in(draw, 4):
        a, b = _fimm(draw), _clean(draw, k, pool)  # `div.rn.f32 %f, 0f3F800000, %f`
    else:
        a, b = _clean(draw, k, pool), _fsrc(draw, k, pool)
    dst = k.reg("f32")
    k.emit(op, mods, "f32", dst, a, b)
    return _fresult(pool, dst, True)


def f_fma(draw, k, pool):
    dst = k.reg("f32")
    if one_in(draw, 3):  # the rounding error of a*b: non-zero only when fused
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
    if one_in(draw, 4):  # a data-dependent signed zero against a signed-zero constant
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


def f_classify(draw, k, pool):
    """testp of any value (NaNs too), selecting between two values."""
    p = k.reg("pred")
    k.emit("testp", draw(st.sampled_from(_TESTP)), "f32", p, _fany(draw, pool, imm=False))
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
    k.emit("cvt", "rn", ("f32", "s32"), dst, pick(draw, pool.b32))
    return _fresult(pool, dst, False)


def f_to_int(draw, k, pool):
    dst = k.reg("b32")
    k.emit("cvt", "rzi", ("s32", "f32"), dst, _clean(draw, k, pool))
    pool.b32.append(dst)
    return dst


def f_from_wide(draw, k, pool):
    """cvt.rn.f32.{s,u}64 of a 64-bit integer made from two words."""
    if not pool.b32:
        return f_absneg(draw, k, pool)
    lo, hi, high, wide = k.reg("b64"), k.reg("b64"), k.reg("b64"), k.reg("b64")
    k.emit("cvt", (), ("u64", "u32"), lo, pick(draw, pool.b32))
    k.emit("cvt", (), ("u64", "u32"), hi, pick(draw, pool.b32))
    shift = draw(st.sampled_from([0, 7, 31, 32]))
    k.emit("shl", (), "b64", high, hi, Imm(shift, str(shift)))
    k.emit("or", (), "b64", wide, high, lo)
    dst = k.reg("f32")
    k.emit("cvt", "rn", ("f32", draw(st.sampled_from(["s64", "u64"]))), dst, wide)
    return _fresult(pool, dst, False)


def f_to_wide(draw, k, pool):
    """cvt.rzi.{s,u}64.f32, both words of the result kept."""
    wide = k.reg("b64")
    k.emit("cvt", "rzi", (draw(st.sampled_from(["s64", "u64"])), "f32"), wide,
           _clean(draw, k, pool))
    top, lo, hi = k.reg("b64"), k.reg("b32"), k.reg("b32")
    k.emit("shr", (), "u64", top, wide, Imm(32, "32"))
    k.emit("cvt", (), ("u32", "u64"), lo, wide)
    k.emit("cvt", (), ("u32", "u64"), hi, top)
    pool.b32 += [lo, hi]
    return lo


#: double literals as compilers write them (0.5, 0.1, 1e-3, 100.0, ...), and any
#: double of moderate size (the f32 values widened may be infinite: f64 NaNs
#: come from them, and leave only as a dirty f32 or an s32 0)
DOUBLE_LITERALS = st.one_of(
    st.sampled_from([0.5, 0.25, 0.1, 1e-3, 1.1, 100.0, -7.25, 0.3, 2.5, 1.0]),
    st.floats(min_value=1e-3, max_value=1e3).flatmap(
        lambda x: st.sampled_from([x, -x]))).map(
    lambda x: int.from_bytes(struct.pack("<d", x), "little"))


def _widened(draw, k: Kernel, pool: Pool) -> Reg:
    x = k.reg("f64")
    k.emit("cvt", (), ("f64", "f32"), x, _clean(draw, k, pool))
    return x


def f_promoted(draw, k, pool):
    """Float code with a double literal: an f32 widened (cvt.f64.f32), one to
    three f64 ops with literals and other widened values, then back to f32
    (cvt.rn.f32.f64: may overflow, so dirty) or to s32 (cvt.rzi.s32.f64)."""
    x = _widened(draw, k, pool)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["add", "sub", "mul", "fma", "div", "sqrt", "min", "max",
                                   "select"]))
        literal = DImm(draw(DOUBLE_LITERALS))
        other = _widened(draw, k, pool) if draw(st.booleans()) else literal
        y = k.reg("f64")
        if op == "fma":
            k.emit("fma", "rn", "f64", y, x, literal, other)
        elif op == "div":
            k.emit("div", "rn", "f64", y, x, literal)
        elif op == "sqrt":
            t = k.reg("f64")
            k.emit("abs", (), "f64", t, x)
            k.emit("sqrt", "rn", "f64", y, t)
        elif op == "select":
            p = k.reg("pred")
            k.emit("setp", draw(st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"])), "f64",
                   p, x, other)
            k.emit("selp", (), "f64", y, x, literal, p)
        else:
            k.emit(op, ("rn",) if op in ("add", "sub", "mul") and draw(st.booleans()) else (),
                   "f64", y, x, other)
        x = y
    if draw(st.booleans()):
        dst = k.reg("b32")
        k.emit("cvt", "rzi", ("s32", "f64"), dst, x)
        pool.b32.append(dst)
        return dst
    dst = k.reg("f32")
    k.emit("cvt", "rn", ("f32", "f64"), dst, x)
    return _fresult(pool, dst, True)


F32_OPS = (f_promoted, f_arith, f_arith, f_arith, f_fma, f_sqrt, f_invalid, f_absneg, f_minmax, f_minmax,
           f_select, f_select, f_classify, f_mov, f_from_int, f_to_int, f_from_wide, f_to_wide)


@st.composite
def f32_programs(draw, limits: Limits = DEFAULT_LIMITS) -> GeneratedProgram:
    k = draw(new_kernel(limits))
    ids = thread_ids(draw, k)
    pool = Pool()
    loads, int_loads = draw(st.integers(1, 4)), draw(st.integers(0, 2))
    outputs, int_outputs = draw(st.integers(1, 4)), draw(st.integers(1, 2))
    n = k.threads
    in_f = k.pointer("f32", data(draw, f32_finite(), n * loads))
    in_i = k.pointer("s32", data(draw, raw32(), n * int_loads)) if int_loads else None
    out_f = k.pointer("f32", [draw(f32_finite()) for _ in range(n * outputs)])
    out_i = k.pointer("s32", [draw(raw32()) for _ in range(n * int_outputs)])
    pool.f32.extend(load_row(k, element_address(draw, k, in_f, ids.gtid, 4, loads),
                              "f32", loads, "f32"))
    if in_i is not None:
        pool.b32.extend(load_row(k, element_address(draw, k, in_i, ids.gtid, 4, int_loads),
                                  "s32", int_loads, "b32"))
    last = None
    for _ in range(draw(st.integers(1, limits.ops))):
        last = draw(st.sampled_from(F32_OPS))(draw, k, pool)
    # the bits of every unread value (NaN-free copies) go to the integer output
    bits = []
    for r in unread(k, pool.f32):
        if r.name in pool.dirty:
            r = _sanitize(draw, k, pool, r)
        b = k.reg("b32")
        k.emit("mov", (), "b32", b, r)
        bits.append(b)
    fold = fold_values(draw, k, bits + unread(k, pool.b32) or [f_to_int(draw, k, pool)])
    addr = element_address(draw, k, out_f, ids.gtid, 4, outputs)
    for j in range(outputs):
        r = last if j == 0 and last is not None and last.kind == "f32" else pick(draw, pool.f32)
        if r.name in pool.dirty:
            r = _sanitize(draw, k, pool, r)
        k.emit("st", "global", "f32", Mem(addr, 4 * j), r)
    addr = element_address(draw, k, out_i, ids.gtid, 4, int_outputs)
    for j in range(int_outputs):
        r = fold if j == 0 else pick(draw, pool.b32) if pool.b32 else f_to_int(draw, k, pool)
        k.emit("st", "global", "s32", Mem(addr, 4 * j), r)
    return finish(k, "f32")
