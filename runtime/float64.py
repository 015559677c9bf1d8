"""Exact IEEE-754 binary64 for the reference engine: the f64 that everyday
float code meets without asking for it (a `double` literal promotes
`0.5 * x` to f64; sinf's range reduction multiplies in f64).

Registers hold a float64 as its 64-bit pattern. Python floats are binary64,
so add, sub, mul, div and sqrt rounded to nearest are Python's own (each
correctly rounded); fma and the directed roundings go through exact
rationals (`float32.round_rational_to`). Arithmetic NaN results are the
canonical 0x7FFF_FFFF_FFFF_FFFF (qgc's choice, by analogy with the f32
canonical NaN; a converted-back f32 NaN is 0x7FFFFFFF either way). f32 ↔ f64
conversions are exact one way and rounded by mode the other (`.ftz`
flushes the f32 side, `.sat` clamps it).
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

from qgc.runtime import float32 as F

_D = struct.Struct("<d")
_Q = struct.Struct("<Q")

SIGN = 1 << 63
CANONICAL_NAN = 0x7FFF_FFFF_FFFF_FFFF
POS_INF = 0x7FF0_0000_0000_0000
MAX_FINITE = 0x7FEF_FFFF_FFFF_FFFF


def to_float(bits: int) -> float:
    return _D.unpack(_Q.pack(bits))[0]


def from_float(x: float) -> int:
    """The pattern of a Python float; NaN → canonical."""
    if math.isnan(x):
        return CANONICAL_NAN
    return _Q.unpack(_D.pack(x))[0]


def is_nan(bits: int) -> bool:
    return bits & ~SIGN > POS_INF


def _overflow(negative: bool, mode: str) -> int:
    to_inf = mode == "rn" or (mode == "rp" and not negative) or (mode == "rm" and negative)
    return (SIGN if negative else 0) | (POS_INF if to_inf else MAX_FINITE)


def round_rational(q: Fraction, mode: str, zero_sign: int = 0) -> int:
    """An exact rational rounded to float64 by mode (`zero_sign`: the
    pattern of an exact zero)."""
    return F.round_rational_to(q, mode, zero_sign, 52, 1023, _overflow)


def _sign(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def _zero_sign(x: float, y: float, mode: str) -> int:
    """The sign of an exact zero sum x + y: −0 for (−0) + (−0), or in rm."""
    if x == 0 and y == 0 and _sign(x) == _sign(y):
        return SIGN if _sign(x) else 0
    return SIGN if mode == "rm" else 0


def add(a: float, b: float, mode: str) -> int:
    if mode == "rn" or not (math.isfinite(a) and math.isfinite(b)):
        return from_float(a + b)
    return round_rational(Fraction(a) + Fraction(b), mode, _zero_sign(a, b, mode))


def sub(a: float, b: float, mode: str) -> int:
    return add(a, -b, mode)


def mul(a: float, b: float, mode: str) -> int:
    if mode == "rn" or not (math.isfinite(a) and math.isfinite(b)):
        return from_float(a * b)
    sign = SIGN if _sign(a) != _sign(b) else 0
    return round_rational(Fraction(a) * Fraction(b), mode, sign)


def fma(a: float, b: float, c: float, mode: str) -> int:
    """a · b + c rounded once (Python 3.11 has no math.fma: exact rationals)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return from_float(a * b + c)
    if not math.isfinite(c):     # a finite product, however large, leaves c
        return from_float(c)
    product_sign = -0.0 if _sign(a) != _sign(b) else 0.0
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    return round_rational(exact, mode, _zero_sign(product_sign, c, mode))


def div(a: float, b: float, mode: str) -> int:
    if mode == "rn" or not (math.isfinite(a) and math.isfinite(b)) or a == 0 or b == 0:
        return from_float(F.div_float(a, b))
    return round_rational(Fraction(a) / Fraction(b), mode)


def sqrt(a: float, mode: str) -> int:
    if math.isnan(a) or a < 0:
        return CANONICAL_NAN
    if a == 0.0 or math.isinf(a) or mode == "rn":
        return from_float(math.sqrt(a))
    shift = 1100         # a ≥ 2^-1074: the scaled root has ≥ 60 significant bits
    scaled = Fraction(a) * (1 << (2 * shift))
    n = scaled.numerator // scaled.denominator
    r = math.isqrt(n)
    exact = r * r == n and scaled.denominator == 1
    return round_rational(Fraction(2 * r + (0 if exact else 1), 2 << shift), mode)


def minmax(x: int, y: int, pick_max: bool) -> int:
    """min/max.f64: the other operand for one NaN, canonical for two; −0 < +0."""
    xn, yn = is_nan(x), is_nan(y)
    if xn or yn:
        return CANONICAL_NAN if xn and yn else (y if xn else x)
    fx, fy = to_float(x), to_float(y)
    if fx == fy:
        negative_x = x >> 63
        return (y if negative_x else x) if pick_max else (x if negative_x else y)
    return (x if fx > fy else y) if pick_max else (x if fx < fy else y)


# ------------------------------------------------------------------ conversions

def from_f32(bits: int, ftz: bool) -> int:
    """cvt{.ftz}.f64.f32: exact (NaN → canonical)."""
    if ftz:
        bits = F.flush(bits)
    return from_float(F.to_float(bits))


def to_f32(x: float, mode: str, ftz: bool, sat: bool) -> int:
    """cvt.RND{.ftz}{.sat}.f32.f64."""
    if math.isnan(x):
        out = F.CANONICAL_NAN
    elif math.isinf(x) or x == 0:
        out = F.from_float(x)
    else:
        out = F.round_rational(Fraction(x), mode)
    if ftz:
        out = F.flush(out)
    return F.saturate(out) if sat else out


def from_int(n: int, mode: str) -> int:
    """cvt.RND.f64.{s,u}N."""
    return round_rational(Fraction(n), mode)


def to_int(x: float, mode: str, bits: int, signed: bool) -> int:
    """cvt.RNDi.{s,u}N.f64: rounded, then saturated; NaN → 0."""
    return F.f32_to_int(x, mode, bits, signed)


def round_integral(x: float, mode: str) -> int:
    """cvt.RNDi.f64.f64."""
    if math.isnan(x):
        return CANONICAL_NAN
    return from_float(F.round_integral(x, mode))
