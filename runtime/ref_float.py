"""f32 semantics of the reference engine: arithmetic (exact roundings, `.ftz`,
`.sat`, the `.approx` functions as qgc's float32 algorithms, `ref_approx`) and
conversions (cvt)."""

from __future__ import annotations

from collections.abc import Callable

from qgc.machine.softfloat import from_f16 as f16_to_f32
from qgc.machine.softfloat import to_f16 as f32_to_f16
from qgc.runtime import float32 as F
from qgc.runtime import float64 as D
from qgc.runtime import ref_float64 as R64
from qgc.runtime.float32 import minmax_bits
from qgc.runtime.ref_decode import (
    ALU,
    INT_ROUNDINGS,
    INT_TYPES,
    ROUNDINGS,
    Ctx,
    is_signed,
    mask,
    op,
    signed,
    type_bits,
)

# ================================================================ f32 arithmetic

def float_binary(cx: Ctx, exact: Callable | None, rn: Callable):
    """d = a OP b for f32 with rounding mode, .ftz and .sat."""
    ops = cx.operands(3)
    ftz, sat = "ftz" in cx.mods, "sat" in cx.mods
    mode = cx.rounding()
    a, b = cx.fsrc(ops[1], ftz), cx.fsrc(ops[2], ftz)
    d = cx.fdst(ops[0], ftz, sat)
    from_float = F.from_float
    if mode == "rn":
        return ALU, lambda th: d(th, from_float(rn(a(th), b(th))))
    return ALU, lambda th: d(th, exact(a(th), b(th), mode))


def float_approx_div(cx: Ctx):
    """div.approx (a · rcp.rn(b)) and div.full (div.rn): the algorithms of
    `qgc.machine.approx_programs`."""
    from qgc.machine import approx_programs as ap
    from qgc.runtime.ref_approx import REF_OPS
    ops = cx.operands(3)
    if "sat" in cx.mods:
        raise cx.unsupported()
    program = ap.div_approx if "approx" in cx.mods else ap.div_full
    ftz = "ftz" in cx.mods
    a, b, d = cx.src(ops[1], "f32"), cx.src(ops[2], "f32"), cx.dst(ops[0], "f32")
    return ALU, lambda th: d(th, program(REF_OPS, a(th), b(th), ftz))


def float_bits_unary(cx: Ctx, fn: Callable):
    ops = cx.operands(2)
    ftz = "ftz" in cx.mods
    a = cx.src(ops[1], "f32")
    d = cx.fdst(ops[0], ftz)
    if ftz:
        return ALU, lambda th: d(th, fn(F.flush(a(th))))
    return ALU, lambda th: d(th, fn(a(th)))


def float_minmax(cx: Ctx, pick_max: bool):
    ops = cx.operands(3)
    ftz, keep_nan = "ftz" in cx.mods, "NaN" in cx.mods
    a, b = cx.src(ops[1], "f32"), cx.src(ops[2], "f32")
    d = cx.fdst(ops[0], ftz)

    def pick(x: int, y: int) -> int:
        if ftz:
            x, y = F.flush(x), F.flush(y)
        return minmax_bits(x, y, pick_max, keep_nan)
    return ALU, lambda th: d(th, pick(a(th), b(th)))


def float_fma(cx: Ctx):
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


@op("fma", "fma{.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32", "fma{.rn,.rz,.rm,.rp}.f64",
    desc="fused multiply-add, rounded once (exact)", mods=("ftz", "sat") + ROUNDINGS)
def _fma_op(cx: Ctx):
    if cx.code.types == ("f64",):
        return R64.fma(cx)
    return float_fma(cx)


def _approx_unary(cx: Ctx, base: str, exact: Callable | None = None):
    """A unary f32 function: exact in a rounding mode, or `.approx`: the
    float32 algorithm of `qgc.machine.approx_programs` (`ref_approx`)."""
    cx.one_type(("f32",))
    ops = cx.operands(2)
    ftz, sat = "ftz" in cx.mods, "sat" in cx.mods
    if exact is not None and "approx" not in cx.mods:
        a = cx.fsrc(ops[1], ftz)
        d = cx.fdst(ops[0], ftz, sat)
        mode = cx.rounding()
        return ALU, lambda th: d(th, exact(a(th), mode))
    if "approx" not in cx.mods or sat:
        raise cx.unsupported()
    from qgc.machine.approx_programs import UNARY
    from qgc.runtime.ref_approx import REF_OPS
    program = UNARY[base]
    bits, d = cx.src(ops[1], "f32"), cx.dst(ops[0], "f32")
    return ALU, lambda th: d(th, program(REF_OPS, bits(th), ftz))


@op("rcp", "rcp{.rn,.rz,.rm,.rp}{.ftz}.f32", "rcp.approx{.ftz}.f32", "rcp{.rn,.rz,.rm,.rp}.f64",
    desc="reciprocal (exact, or qgc's approx algorithm: rcp.rn)",
    mods=("approx", "ftz") + ROUNDINGS)
def _rcp_op(cx: Ctx):
    if cx.code.types == ("f64",):
        return R64.unary(cx, lambda x, mode: D.div(1.0, x, mode))
    return _approx_unary(cx, "rcp", lambda x, mode: F.div_exact(1.0, x, mode))


@op("sqrt", "sqrt{.rn,.rz,.rm,.rp}{.ftz}.f32", "sqrt.approx{.ftz}.f32", "sqrt{.rn,.rz,.rm,.rp}.f64",
    desc="square root (exact, or qgc's approx algorithm: sqrt.rn)",
    mods=("approx", "ftz") + ROUNDINGS)
def _sqrt_op(cx: Ctx):
    if cx.code.types == ("f64",):
        return R64.unary(cx, D.sqrt)
    return _approx_unary(cx, "sqrt", F.sqrt_exact)


@op("rsqrt", "rsqrt.approx{.ftz}.f32", desc="approximate 1/sqrt(x) (qgc's float32 algorithm, docs/machine.md)",
    mods=("approx", "ftz"))
def _rsqrt_op(cx: Ctx):
    return _approx_unary(cx, "rsqrt")


@op("ex2", "ex2.approx{.ftz}.f32", desc="approximate 2^x (qgc's float32 algorithm, docs/machine.md)",
    mods=("approx", "ftz"))
def _ex2_op(cx: Ctx):
    return _approx_unary(cx, "ex2")


@op("lg2", "lg2.approx{.ftz}.f32", desc="approximate log2(x) (qgc's float32 algorithm, docs/machine.md)",
    mods=("approx", "ftz"))
def _lg2_op(cx: Ctx):
    return _approx_unary(cx, "lg2")


@op("sin", "sin.approx{.ftz}.f32", desc="approximate sine (qgc's float32 algorithm, docs/machine.md)",
    mods=("approx", "ftz"))
def _sin_op(cx: Ctx):
    return _approx_unary(cx, "sin")


@op("cos", "cos.approx{.ftz}.f32", desc="approximate cosine (qgc's float32 algorithm, docs/machine.md)",
    mods=("approx", "ftz"))
def _cos_op(cx: Ctx):
    return _approx_unary(cx, "cos")


@op("tanh", "tanh.approx.f32", desc="approximate tanh (qgc's float32 algorithm, docs/machine.md)",
    mods=("approx",))
def _tanh_op(cx: Ctx):
    return _approx_unary(cx, "tanh")


@op("copysign", "copysign.{f32,f64}", desc="b with the sign of a")
def _copysign(cx: Ctx):
    t = cx.one_type(("f32", "f64"))
    ops = cx.operands(3)
    d, a, b = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], t)
    sign = F.SIGN if t == "f32" else D.SIGN
    return ALU, lambda th: d(th, (b(th) & ~sign) | (a(th) & sign))


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

CVT_TYPES = INT_TYPES + ("f32", "f16", "f64")


@op("cvt", "cvt{.sat}.{u8,s8,u16,s16,u32,s32,u64,s64}.{u8,s8,u16,s16,u32,s32,u64,s64}",
    "cvt{.rn,.rz,.rm,.rp}{.sat}.f32.{u8,...,s64}",
    "cvt.{rni,rzi,rmi,rpi}{.ftz}{.sat}.{u8,...,s64}.f32",
    "cvt{.rni,.rzi,.rmi,.rpi,.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32.f32",
    "cvt.rn{.ftz}.f16.f32", "cvt{.ftz}.f32.f16", "cvt{.ftz}.f64.f32",
    "cvt{.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32.f64", "cvt{.rn,.rz,.rm,.rp}.f64.{u8,...,s64}",
    "cvt.{rni,rzi,rmi,rpi}.{u8,...,s64}.f64", "cvt.{rni,rzi,rmi,rpi}.f64.f64",
    desc="convert between integer widths (truncate/extend, .sat clamps), int<->f32 and "
         "int<->f64 (rounding; float->int saturates, NaN->0), f32 and f64 rounding to "
         "integral, f16<->f32, f32<->f64",
    mods=("sat", "ftz") + ROUNDINGS + INT_ROUNDINGS)
def _cvt(cx: Ctx):
    types = cx.code.types
    if len(types) != 2 or any(t not in CVT_TYPES for t in types):
        raise cx.unsupported()
    dt, at = types
    cx.operands(2)
    if "f16" in types:
        return _cvt_f16(cx, dt, at)
    if "f64" in types:
        return R64.convert(cx, dt, at)
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
            return ALU, lambda th: d(th, f32_to_f16(F.flush(a(th))))
        return ALU, lambda th: d(th, f32_to_f16(a(th)))
    if dt == "f32" and at == "f16":
        if cx.rounding(ROUNDINGS, "") != "" or "sat" in cx.mods:
            raise cx.unsupported()
        a, d = cx.src(cx.ops[1], "f16"), cx.fdst(cx.ops[0], "ftz" in cx.mods)
        return ALU, lambda th: d(th, f16_to_f32(a(th)))
    raise cx.unsupported()
