"""Exact IEEE-754 binary32 helpers for the reference engine.

Registers hold a float32 as its 32-bit pattern (a Python int). Arithmetic reads
the pattern as a Python float (a double holding the float32 value exactly),
computes in double and rounds once to float32:

- add, sub, mul, div and sqrt of float32 operands computed in double and then
  rounded to float32 give the correctly rounded float32 result (double has
  53 >= 2*24 + 2 significant bits, so the double rounding is innocuous);
- `fma_rn` is a correctly rounded fused multiply-add: the product of two float32
  values is exact in double, the sum's rounding error is recovered exactly
  (TwoSum) and the double is rounded *to odd* before the final rounding to
  float32, which makes that final rounding correct (Boldo–Melquiond);
- directed roundings (`.rz`, `.rm`, `.rp`) go through exact rationals
  (`round_rational`).

Arithmetic NaN results are the canonical NVIDIA NaN 0x7FFFFFFF.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

_F = struct.Struct("<f")
_I = struct.Struct("<I")
_D = struct.Struct("<d")
_Q = struct.Struct("<Q")

CANONICAL_NAN = 0x7FFFFFFF
POS_INF = 0x7F800000
NEG_INF = 0xFF800000
MAX_FINITE = 0x7F7FFFFF
SIGN = 0x80000000


def to_float(bits: int) -> float:
    """The float32 with pattern `bits`, as a Python float (exact)."""
    return _F.unpack(_I.pack(bits))[0]


def from_float(x: float) -> int:
    """Round a Python float to the nearest float32 (ties to even); NaN → canonical."""
    try:
        b = _I.unpack(_F.pack(x))[0]
    except OverflowError:
        return POS_INF if x > 0 else NEG_INF
    if (b & 0x7FFFFFFF) > POS_INF:
        return CANONICAL_NAN
    return b


def is_nan(bits: int) -> bool:
    return (bits & 0x7FFFFFFF) > POS_INF


def is_subnormal(bits: int) -> bool:
    return (bits & 0x7F800000) == 0 and (bits & 0x7FFFFF) != 0


def flush(bits: int) -> int:
    """`.ftz`: a subnormal becomes a zero of the same sign."""
    if (bits & 0x7F800000) == 0:
        return bits & SIGN
    return bits


def flush_float(x: float) -> float:
    if x != 0.0 and abs(x) < 1.1754943508222875e-38:
        return math.copysign(0.0, x)
    return x


def saturate(bits: int) -> int:
    """`.sat`: clamp to [0.0, 1.0]; NaN becomes +0.0."""
    if is_nan(bits) or bits & SIGN:
        return 0
    if bits > 0x3F800000:
        return 0x3F800000
    return bits


# ------------------------------------------------------------------ exact rounding

def _overflow(negative: bool, mode: str) -> int:
    to_inf = mode == "rn" or (mode == "rp" and not negative) or (mode == "rm" and negative)
    return (SIGN if negative else 0) | (POS_INF if to_inf else MAX_FINITE)


def round_rational(q: Fraction, mode: str = "rn", zero_sign: int = 0) -> int:
    """Round an exact rational to float32 with `mode` in rn/rz/rm/rp.

    `zero_sign` is the sign bit used when q is exactly zero.
    """
    return round_rational_to(q, mode, zero_sign, 23, 127, _overflow)


def round_rational_to(q: Fraction, mode: str, zero_sign: int, frac_bits: int, emax: int,
                      overflow) -> int:
    """Round an exact rational to the binary format with `frac_bits` stored
    significand bits and largest exponent `emax` (float32: 23, 127; float64:
    52, 1023); `overflow(negative, mode)` gives the pattern past it."""
    if q == 0:
        return zero_sign
    negative = q < 0
    num, den = abs(q.numerator), q.denominator
    e = num.bit_length() - den.bit_length()
    if (num << max(0, -e)) < (den << max(0, e)):
        e -= 1
    e = max(e, 1 - emax)  # subnormals share the smallest exponent
    shift = frac_bits - e
    n, d = (num << shift, den) if shift >= 0 else (num, den << -shift)
    m, rem = divmod(n, d)
    if rem and _round_up(m, rem, d, negative, mode):
        m += 1
    if m == 1 << (frac_bits + 1):
        m >>= 1
        e += 1
    if e > emax:
        return overflow(negative, mode)
    hidden = 1 << frac_bits
    bits = m if m < hidden else ((e + emax) << frac_bits) | (m - hidden)
    return bits | (int(negative) << (frac_bits + (2 * emax + 1).bit_length()))


def _round_up(m: int, rem: int, d: int, negative: bool, mode: str) -> bool:
    if mode == "rn":
        return 2 * rem > d or (2 * rem == d and m & 1 == 1)
    if mode == "rz":
        return False
    if mode == "rm":
        return negative
    return not negative  # rp


def round_float(x: float, mode: str) -> int:
    """Round a Python float to float32 with a rounding mode."""
    if mode == "rn" or math.isnan(x) or math.isinf(x):
        return from_float(x)
    return round_rational(Fraction(x), mode, SIGN if math.copysign(1.0, x) < 0 else 0)


def int_to_f32(n: int, mode: str = "rn") -> int:
    """An integer converted to float32 (cvt.frnd.f32.s64 and friends)."""
    if -(1 << 24) <= n <= (1 << 24):
        return from_float(float(n))
    return round_rational(Fraction(n), mode)


# -------------------------------------------------------------------------- fma

def _round_to_odd(s: float, err: float) -> float:
    if err == 0.0:
        return s
    if _Q.unpack(_D.pack(s))[0] & 1:
        return s
    return math.nextafter(s, math.inf if err > 0 else -math.inf)


def fma_rn(a: float, b: float, c: float) -> int:
    """Correctly rounded float32 fma(a, b, c) of float32 values given as floats."""
    p = a * b  # exact: 48 significant bits, exponent well inside double's range
    s = p + c
    if not math.isfinite(s) or not math.isfinite(p):
        return from_float(s)
    bp = s - p
    err = (p - (s - bp)) + (c - bp)  # TwoSum: s + err == p + c exactly
    return from_float(_round_to_odd(s, err))


def fma_exact(a: float, b: float, c: float, mode: str) -> int:
    """fma with a directed rounding mode, via exact rationals."""
    if mode == "rn":
        return fma_rn(a, b, c)
    if not all(math.isfinite(v) for v in (a, b, c)):
        return from_float(a * b + c)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    return round_rational(exact, mode, _zero_sign_of_sum(a * b, c, mode))


def _zero_sign_of_sum(x: float, y: float, mode: str) -> int:
    """IEEE sign of an exact zero sum x + y: -0 only for (-0)+(-0) or in rm."""
    neg_x = math.copysign(1.0, x) < 0
    neg_y = math.copysign(1.0, y) < 0
    if x == 0 and y == 0 and neg_x == neg_y:
        return SIGN if neg_x else 0
    return SIGN if mode == "rm" else 0


def add_exact(a: float, b: float, mode: str) -> int:
    if mode == "rn" or not (math.isfinite(a) and math.isfinite(b)):
        return from_float(a + b)
    return round_rational(Fraction(a) + Fraction(b), mode, _zero_sign_of_sum(a, b, mode))


def mul_exact(a: float, b: float, mode: str) -> int:
    if mode == "rn" or not (math.isfinite(a) and math.isfinite(b)):
        return from_float(a * b)
    sign = SIGN if (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0) else 0
    return round_rational(Fraction(a) * Fraction(b), mode, sign)


def div_exact(a: float, b: float, mode: str) -> int:
    if mode == "rn" or not (math.isfinite(a) and math.isfinite(b)) or b == 0 or a == 0:
        return from_float(div_float(a, b))
    return round_rational(Fraction(a) / Fraction(b), mode)


def div_float(a: float, b: float) -> float:
    """IEEE division in double (Python raises on /0)."""
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
        return -math.inf if negative else math.inf
    return a / b


def sqrt_exact(a: float, mode: str) -> int:
    """Correctly rounded float32 square root in any rounding mode."""
    if math.isnan(a) or a < 0:
        return CANONICAL_NAN
    if a == 0.0 or math.isinf(a):
        return from_float(a)
    if mode == "rn":
        return from_float(math.sqrt(a))
    q = Fraction(a)
    shift = 120  # q >= 2**-149, so sqrt(q * 4**shift) has >= 45 significant bits
    scaled = q * (1 << (2 * shift))
    n = scaled.numerator // scaled.denominator
    r = math.isqrt(n)
    exact = r * r == n and scaled.denominator == 1
    # an inexact root lies strictly between r and r+1: represent it by r + 1/2
    value = Fraction(2 * r + (0 if exact else 1), 2 << shift)
    return round_rational(value, mode)


# ------------------------------------------------------------------ float → int

def f32_to_int(x: float, mode: str, bits: int, signed: bool) -> int:
    """cvt.{rni,rzi,rmi,rpi}.{s,u}N.f32: round, then saturate; NaN → 0."""
    if math.isnan(x):
        return 0
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if math.isinf(x):
        return hi if x > 0 else lo
    n = round_integral(x, mode)
    return min(max(int(n), lo), hi)


def round_integral(x: float, mode: str) -> float:
    """Round to an integral value (rni/rzi/rmi/rpi), keeping the sign of zero."""
    if not math.isfinite(x):
        return x
    if mode in ("rni", "rn"):
        n = round(x)  # Python rounds half to even
    elif mode in ("rzi", "rz"):
        n = math.trunc(x)
    elif mode in ("rmi", "rm"):
        n = math.floor(x)
    else:
        n = math.ceil(x)
    return math.copysign(float(n), x)


def minmax_bits(x: int, y: int, pick_max: bool, keep_nan: bool) -> int:
    """min/max.f32 of two patterns: the other operand for one NaN (the
    canonical NaN for two, or for any with `.NaN`); -0 < +0."""
    xn, yn = is_nan(x), is_nan(y)
    if xn or yn:
        if keep_nan or (xn and yn):
            return CANONICAL_NAN
        return y if xn else x
    fx, fy = to_float(x), to_float(y)
    if fx == fy:  # only ±0 differ: -0 < +0
        neg_x = x >> 31
        return (y if neg_x else x) if pick_max else (x if neg_x else y)
    return (x if fx > fy else y) if pick_max else (x if fx < fy else y)
