"""f64 semantics of the reference engine (`float64`): arithmetic with the
four roundings, min/max, compares and conversions to and from f32 and the
integers. The families of `ref_int` and `ref_float` hand their `.f64` forms
here."""

from __future__ import annotations

from collections.abc import Callable

from qgc.runtime import float64 as D
from qgc.runtime.ref_decode import (
    ALU,
    INT_ROUNDINGS,
    ROUNDINGS,
    Ctx,
    is_signed,
    mask,
    signed,
    type_bits,
)


def dsrc(cx: Ctx, operand) -> Callable:
    """Getter of an f64 operand as a Python float."""
    bits_of, to_float = cx.src(operand, "f64"), D.to_float
    return lambda th: to_float(bits_of(th))


def _plain(cx: Ctx) -> str:
    """The rounding of an f64 op (f64 has no `.ftz` or `.sat`)."""
    if cx.mods - set(ROUNDINGS):
        raise cx.unsupported()
    return cx.rounding()


def binary(cx: Ctx, fn: Callable[[float, float, str], int]):
    mode = _plain(cx)
    ops = cx.operands(3)
    d, a, b = cx.dst(ops[0], "f64"), dsrc(cx, ops[1]), dsrc(cx, ops[2])
    return ALU, lambda th: d(th, fn(a(th), b(th), mode))


def fma(cx: Ctx):
    if not any(m in cx.mods for m in ROUNDINGS):
        raise cx.unsupported("fma.f64 needs a rounding modifier")
    mode = _plain(cx)
    ops = cx.operands(4)
    d = cx.dst(ops[0], "f64")
    a, b, c = (dsrc(cx, o) for o in ops[1:])
    return ALU, lambda th: d(th, D.fma(a(th), b(th), c(th), mode))


def unary(cx: Ctx, fn: Callable[[float, str], int]):
    """rcp / sqrt with a rounding mode."""
    mode = _plain(cx)
    ops = cx.operands(2)
    d, a = cx.dst(ops[0], "f64"), dsrc(cx, ops[1])
    return ALU, lambda th: d(th, fn(a(th), mode))


def bits_unary(cx: Ctx, fn: Callable[[int], int]):
    """neg / abs: sign-bit operations."""
    if cx.mods:
        raise cx.unsupported()
    ops = cx.operands(2)
    d, a = cx.dst(ops[0], "f64"), cx.src(ops[1], "f64")
    return ALU, lambda th: d(th, fn(a(th)))


def minmax(cx: Ctx, pick_max: bool):
    if cx.mods:
        raise cx.unsupported()
    ops = cx.operands(3)
    d, a, b = cx.dst(ops[0], "f64"), cx.src(ops[1], "f64"), cx.src(ops[2], "f64")
    return ALU, lambda th: d(th, D.minmax(a(th), b(th), pick_max))


def convert(cx: Ctx, dt: str, at: str):
    """Every cvt with an f64 side."""
    if dt == "f64" and at == "f64":
        mode = cx.rounding(INT_ROUNDINGS, "")
        if not mode or cx.mods - {mode}:
            raise cx.unsupported()
        a, d = dsrc(cx, cx.ops[1]), cx.dst(cx.ops[0], "f64")
        return ALU, lambda th: d(th, D.round_integral(a(th), mode))
    if dt == "f64" and at == "f32":
        if cx.mods - {"ftz"}:
            raise cx.unsupported()
        ftz, a, d = "ftz" in cx.mods, cx.src(cx.ops[1], "f32"), cx.dst(cx.ops[0], "f64")
        return ALU, lambda th: d(th, D.from_f32(a(th), ftz))
    if dt == "f32":
        mode = cx.rounding(ROUNDINGS, "")
        if not mode or cx.mods - {mode, "ftz", "sat"}:
            raise cx.unsupported()
        ftz, sat = "ftz" in cx.mods, "sat" in cx.mods
        a, d = dsrc(cx, cx.ops[1]), cx.dst(cx.ops[0], "f32")
        return ALU, lambda th: d(th, D.to_f32(a(th), mode, ftz, sat))
    if dt == "f64":
        mode = cx.rounding(ROUNDINGS, "")
        if not mode or cx.mods - {mode}:
            raise cx.unsupported()
        bits, a, d = type_bits(at), cx.src(cx.ops[1], at), cx.dst(cx.ops[0], "f64")
        if is_signed(at):
            return ALU, lambda th: d(th, D.from_int(signed(a(th), bits), mode))
        return ALU, lambda th: d(th, D.from_int(a(th), mode))
    mode = cx.rounding(INT_ROUNDINGS, "")
    if not mode or cx.mods - {mode, "sat"}:      # float → integer saturates anyway
        raise cx.unsupported()
    bits, sgn, m = type_bits(dt), is_signed(dt), mask(type_bits(dt))
    a, d = dsrc(cx, cx.ops[1]), cx.dst(cx.ops[0], dt)
    return ALU, lambda th: d(th, D.to_int(a(th), mode, bits, sgn) & m)


def compare(cx: Ctx, fn: Callable[[float, float], bool], a_op, b_op) -> Callable:
    a, b = dsrc(cx, a_op), dsrc(cx, b_op)
    return lambda th: fn(a(th), b(th))

