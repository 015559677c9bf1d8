"""Bit patterns: integer widths, f32 conversions and rounding, and the hypothesis
strategies that draw raw values."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

# ============================================================ value helpers


def bit_mask(bits: int) -> int:
    return (1 << bits) - 1


def to_signed(v: int, bits: int) -> int:
    v &= bit_mask(bits)
    return v - (1 << bits) if v >> (bits - 1) else v


def type_bits(ty: str) -> int:
    return int(ty[1:])


def typed_value(v: int, ty: str) -> int:
    """The raw bits v as an integer of PTX type ty (signed for .sNN)."""
    bits = type_bits(ty)
    return to_signed(v, bits) if ty[0] == "s" else v & bit_mask(bits)


def f32_from_bits(bits: int) -> np.float32:
    return np.uint32(bits & 0xFFFFFFFF).view(np.float32)


def f32_bits(x) -> int:
    return int(np.float32(x).view(np.uint32))


def from_raw(ty: str, raw: int):
    """Launch-JSON value of raw bits: signed/unsigned int, or a Python float."""
    if ty == "f32":
        return float(f32_from_bits(raw))
    return typed_value(raw, ty)


def to_raw(ty: str, value) -> int:
    if ty == "f32":
        return struct.unpack("<I", struct.pack("<f", value))[0]
    return int(value) & bit_mask(type_bits(ty))


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


# ============================================================= value strategies

MASK32, MASK64 = bit_mask(32), bit_mask(64)
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
                     raw32().map(lambda v: to_signed(v, 32) & MASK64), st.integers(0, MASK64))


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
