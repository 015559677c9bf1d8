"""IEEE-754 binary32 arithmetic on integers, in the steps the machine's f32
circuits take (issue 23): unpack, align with a sticky bit, add or multiply
the significands, normalise, round, pack; division and square root with
the remainder as a sticky bit; and the compares (`setp.f32`, ordered and
unordered), min/max (PTX's NaN and signed-zero rules), neg/abs/copysign
and conversions (integer ↔ f32, round to integral) as integer operations
on the patterns.

A float is its 32-bit pattern. Finite operands unpack to `sign, sig, exp`
with value `(-1)^sign · sig · 2^(exp − 150)`: `sig` the 24-bit significand
(the hidden bit set for a normal, clear for a subnormal) and `exp` the biased
exponent (1 for a subnormal). Every result goes through `round_pack`, which
rounds a significand of any width with the four IEEE modes; the adders keep
their aligned operands to a bounded window (3 or 26 bits below the larger
one's) with the bits shifted out ORed into a sticky bit, as a circuit of
fixed width does. NaN results are NVIDIA's canonical 0x7FFFFFFF; `.ftz`
flushes subnormal operands and results to a zero of the same sign.

This is the specification the machine's lowering follows; `tests/
test_softfloat.py` checks it against the `ref` engine's float32 bit for bit
(the special classes crossed with each other, and random operands). It
shares `ref`'s constants, not its rules: flushing, NaN tests, overflow and
rounding are its own, so the check compares two implementations.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import isqrt

from qgc.machine.float_programs import F16_INF, F16_NAN
from qgc.runtime.float32 import CANONICAL_NAN, MAX_FINITE, SIGN
from qgc.runtime.float32 import POS_INF as INF

MODES = ("rn", "rz", "rm", "rp")
HIDDEN = 1 << 23


@dataclass(frozen=True)
class Unpacked:
    """A float's class (`zero`, `finite`, `inf`, `nan`), sign, significand
    and biased exponent (finite: value = sig · 2^(exp − 150))."""

    kind: str
    sign: int
    sig: int = 0
    exp: int = 1


def unpack(bits: int, ftz: bool = False) -> Unpacked:
    sign, field, frac = bits >> 31 & 1, bits >> 23 & 0xFF, bits & 0x7F_FFFF
    if field == 0xFF:
        return Unpacked("nan" if frac else "inf", sign)
    if field == 0 and (frac == 0 or ftz):
        return Unpacked("zero", sign)
    return Unpacked("finite", sign, frac | (HIDDEN if field else 0), max(field, 1))


def flush(bits: int) -> int:
    """`.ftz` on a result: a subnormal becomes a zero of its sign."""
    return bits & SIGN if bits & INF == 0 else bits


def overflow(sign: int, mode: str) -> int:
    """The result of a finite value too large for float32, by mode."""
    to_inf = mode == "rn" or (mode == "rp" and not sign) or (mode == "rm" and sign)
    return sign << 31 | (INF if to_inf else MAX_FINITE)


def round_up(kept: int, rest: int, half: int, sign: int, mode: str) -> bool:
    """Whether rounding adds one to `kept`, the dropped bits being `rest`
    (`half`: the weight of the first dropped bit)."""
    if mode == "rn":
        return rest > half or rest == half and kept & 1 == 1
    if mode == "rz" or rest == 0:
        return False
    return bool(sign) == (mode == "rm")


def round_pack(sign: int, sig: int, exp: int, mode: str) -> int:
    """The float32 nearest `(-1)^sign · sig · 2^(exp − 150)` in `mode`
    (`sig` > 0, any width; a sticky bit, if any, sits below the round bit):
    keep 24 bits, or fewer where the result is subnormal, round, renormalise
    a carry out, and saturate to infinity or the largest finite by mode."""
    width = sig.bit_length()
    shift = width - 24 if exp + width - 24 >= 1 else 1 - exp
    if shift > 0:
        kept, rest = sig >> shift, sig & ((1 << shift) - 1)
        kept += round_up(kept, rest, 1 << (shift - 1), sign, mode)
    else:
        kept = sig << -shift
    lsb = exp + shift                   # the exponent field of a normal result
    if kept == 1 << 24:
        kept, lsb = kept >> 1, lsb + 1
    field = lsb if kept >= HIDDEN else 0
    if field >= 0xFF:
        return overflow(sign, mode)
    return sign << 31 | field << 23 | kept & 0x7F_FFFF


def _align(sig: int, by: int, window: int) -> int:
    """`sig` shifted right `by` bits, at most `window` of them kept below its
    lowest bit; the bits shifted out ORed into the lowest kept one (sticky)."""
    if by <= 0:
        return sig << -by
    by = min(by, window + sig.bit_length())
    return sig >> by | (1 if sig & ((1 << by) - 1) else 0)


def _sum(x: Unpacked, y: Unpacked, mode: str, guard: int) -> int:
    """x + y of two finite, non-zero operands: the larger exponent's
    significand shifted `guard` bits up, the other aligned to it with a
    sticky bit, added or subtracted, then rounded."""
    if (y.exp, y.sig) > (x.exp, x.sig):
        x, y = y, x
    big = x.sig << guard
    small = _align(y.sig << guard, x.exp - y.exp, guard)
    total = big + small if x.sign == y.sign else big - small
    if total == 0:                      # exact cancellation
        return SIGN if mode == "rm" else 0
    return round_pack(x.sign, total, x.exp - guard, mode)


def add(a: int, b: int, mode: str = "rn", ftz: bool = False) -> int:
    """`add{.rnd}{.ftz}.f32`."""
    x, y = unpack(a, ftz), unpack(b, ftz)
    if "nan" in (x.kind, y.kind) or x.kind == y.kind == "inf" and x.sign != y.sign:
        return CANONICAL_NAN
    if x.kind == "inf" or y.kind == "inf":
        return (x if x.kind == "inf" else y).sign << 31 | INF
    if x.kind == "zero" or y.kind == "zero":
        if x.kind == y.kind:            # ±0 + ±0: -0 only from two -0s or in rm
            return SIGN if x.sign and y.sign or x.sign != y.sign and mode == "rm" else 0
        nonzero = b if x.kind == "zero" else a
        return flush(nonzero) if ftz else nonzero
    return _result(_sum(x, y, mode, 3), ftz)


def sub(a: int, b: int, mode: str = "rn", ftz: bool = False) -> int:
    """`sub{.rnd}{.ftz}.f32`: a + (−b)."""
    return add(a, b ^ SIGN, mode, ftz)


def mul(a: int, b: int, mode: str = "rn", ftz: bool = False) -> int:
    """`mul{.rnd}{.ftz}.f32`: the 48-bit product of the significands, rounded."""
    x, y = unpack(a, ftz), unpack(b, ftz)
    sign = x.sign ^ y.sign
    kinds = {x.kind, y.kind}
    if "nan" in kinds or kinds == {"inf", "zero"}:
        return CANONICAL_NAN
    if "inf" in kinds:
        return sign << 31 | INF
    if "zero" in kinds:
        return sign << 31
    return _result(round_pack(sign, x.sig * y.sig, x.exp + y.exp - 150, mode), ftz)


def fma(a: int, b: int, c: int, mode: str = "rn", ftz: bool = False) -> int:
    """`fma{.rnd}{.ftz}.f32`: a · b + c rounded once. The exact 48-bit product
    and the addend meet in a window 26 bits below the larger of the two
    (the product's own bits are kept whole), the rest a sticky bit."""
    x, y, z = unpack(a, ftz), unpack(b, ftz), unpack(c, ftz)
    sign = x.sign ^ y.sign
    kinds = {x.kind, y.kind}
    if "nan" in kinds | {z.kind} or kinds == {"inf", "zero"} or \
            "inf" in kinds and z.kind == "inf" and z.sign != sign:
        return CANONICAL_NAN
    if "inf" in kinds:
        return sign << 31 | INF
    if z.kind == "inf":
        return c
    if "zero" in kinds:                 # an exact zero product: ±0 + c
        return add(sign << 31, c, mode, ftz)
    product = Unpacked("finite", sign, x.sig * y.sig, x.exp + y.exp - 150)
    if z.kind == "zero":                # a non-zero product plus ±0: the product
        return _result(round_pack(sign, product.sig, product.exp, mode), ftz)
    return _result(_wide_sum(product, z, mode), ftz)


def _wide_sum(p: Unpacked, z: Unpacked, mode: str) -> int:
    """A 48-bit product plus a 24-bit addend (`fma`), rounded once."""
    guard = 26
    big, small = (z, p) if z.exp + z.sig.bit_length() > p.exp + p.sig.bit_length() else (p, z)
    top = big.sig << guard
    aligned = _align(small.sig << guard, big.exp - small.exp, guard + 48)
    total = top + aligned if big.sign == small.sign else top - aligned
    if total == 0:
        return SIGN if mode == "rm" else 0
    if total < 0:
        return round_pack(small.sign, -total, big.exp - guard, mode)
    return round_pack(big.sign, total, big.exp - guard, mode)


def _result(bits: int, ftz: bool) -> int:
    return flush(bits) if ftz else bits


# ------------------------------------------------------------------ compares

def is_nan(bits: int) -> bool:
    return bits & 0x7FFF_FFFF > INF


def _key(bits: int) -> int:
    """A non-NaN float's order as an integer (±0 both 0)."""
    magnitude = bits & 0x7FFF_FFFF
    return -magnitude if bits & SIGN else magnitude


#: `setp.CMP.f32`: (unordered result, ordered test of the two keys)
COMPARES = {
    "eq": (False, lambda x, y: x == y), "ne": (False, lambda x, y: x != y),
    "lt": (False, lambda x, y: x < y), "le": (False, lambda x, y: x <= y),
    "gt": (False, lambda x, y: x > y), "ge": (False, lambda x, y: x >= y),
    "equ": (True, lambda x, y: x == y), "neu": (True, lambda x, y: x != y),
    "ltu": (True, lambda x, y: x < y), "leu": (True, lambda x, y: x <= y),
    "gtu": (True, lambda x, y: x > y), "geu": (True, lambda x, y: x >= y),
    "num": (False, lambda x, y: True), "nan": (True, lambda x, y: False),
}


def compare(cmp: str, a: int, b: int, ftz: bool = False) -> bool:
    """`setp.CMP{.ftz}.f32`: an ordered compare is false with a NaN operand,
    an unordered one (`...u`) true; -0 == +0."""
    if ftz:
        a, b = flush(a), flush(b)
    unordered, test = COMPARES[cmp]
    if is_nan(a) or is_nan(b):
        return unordered
    return test(_key(a), _key(b))


# --------------------------------------------------------------- conversions

def from_int(n: int, mode: str = "rn") -> int:
    """`cvt.RND.f32.{s,u}{32,64}` of the integer value `n`."""
    if n == 0:
        return 0
    return round_pack(int(n < 0), abs(n), 150, mode)


def _integral(x: Unpacked, mode: str) -> int:
    """The magnitude of a finite x rounded to an integer (`mode`: rn rz rm rp)."""
    if x.exp >= 150:
        return x.sig << (x.exp - 150)
    shift = 150 - x.exp
    if shift > 25:                      # below one half: only the bits' presence counts
        return int(round_up(0, 1, 2, x.sign, mode))
    kept, rest = x.sig >> shift, x.sig & ((1 << shift) - 1)
    return kept + round_up(kept, rest, 1 << (shift - 1), x.sign, mode)


def to_int(bits: int, mode: str, width: int, signed: bool, ftz: bool = False) -> int:
    """`cvt.RNDi{.ftz}.{s,u}WIDTH.f32` (RND in rn rz rm rp): rounded, then
    saturated to the type's range; NaN converts to 0."""
    x = unpack(bits, ftz)
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    if x.kind == "nan":
        return 0
    if x.kind == "inf":
        return lo if x.sign else hi
    n = 0 if x.kind == "zero" else _integral(x, mode)
    return min(max(-n if x.sign else n, lo), hi)


def round_integral(bits: int, mode: str, ftz: bool = False) -> int:
    """`cvt.RNDi{.ftz}.f32.f32`: to an integral float, keeping the sign of a zero."""
    x = unpack(bits, ftz)
    if x.kind == "nan":
        return CANONICAL_NAN
    if x.kind != "finite":
        return x.sign << 31 | (INF if x.kind == "inf" else 0)
    if x.exp >= 150:
        return bits
    n = _integral(x, mode)
    return x.sign << 31 if n == 0 else round_pack(x.sign, n, 150, "rz")


# ------------------------------------------------------------ division, root

def div(a: int, b: int, mode: str = "rn", ftz: bool = False) -> int:
    """`div{.rnd}{.ftz}.f32`, correctly rounded: the significands' quotient
    to 50 more bits than the dividend's, its remainder a sticky bit (a
    digit recurrence computes the same bits)."""
    x, y = unpack(a, ftz), unpack(b, ftz)
    sign = x.sign ^ y.sign
    if "nan" in (x.kind, y.kind) or x.kind == y.kind and x.kind in ("inf", "zero"):
        return CANONICAL_NAN
    if x.kind == "inf" or y.kind == "zero":
        return sign << 31 | INF
    if x.kind == "zero" or y.kind == "inf":
        return sign << 31
    quotient, rest = divmod(x.sig << 50, y.sig)
    return _result(round_pack(sign, quotient << 1 | (rest != 0), x.exp - y.exp - 51 + 150,
                              mode), ftz)


def sqrt(a: int, mode: str = "rn", ftz: bool = False) -> int:
    """`sqrt{.rnd}{.ftz}.f32`, correctly rounded: the integer square root of
    the significand (its exponent made even) to 30 more bits, the remainder
    a sticky bit."""
    x = unpack(a, ftz)
    if x.kind == "nan" or x.kind != "zero" and x.sign:
        return CANONICAL_NAN
    if x.kind != "finite":
        return x.sign << 31 | (INF if x.kind == "inf" else 0)
    sig, power = x.sig, x.exp - 150
    if power % 2:
        sig, power = sig << 1, power - 1
    root = isqrt(sig << 60)
    sticky = root * root != sig << 60
    return _result(round_pack(0, root << 1 | sticky, power // 2 - 31 + 150, mode), ftz)


# ------------------------------------------------------------ sign, min, max

def neg(a: int, ftz: bool = False) -> int:
    """`neg{.ftz}.f32`: the sign flipped (a NaN too: no arithmetic)."""
    return (flush(a) if ftz else a) ^ SIGN


def abs_(a: int, ftz: bool = False) -> int:
    """`abs{.ftz}.f32`: the sign cleared."""
    return (flush(a) if ftz else a) & ~SIGN & 0xFFFF_FFFF


def copysign(a: int, b: int) -> int:
    """`copysign.f32 d, a, b`: b with a's sign."""
    return b & ~SIGN & 0xFFFF_FFFF | a & SIGN


def minmax(a: int, b: int, pick_max: bool, ftz: bool = False, keep_nan: bool = False) -> int:
    """`min/max{.ftz}{.NaN}.f32`: the other operand for one NaN (the
    canonical NaN for two, or for any with `.NaN`); -0 below +0."""
    if ftz:
        a, b = flush(a), flush(b)
    if is_nan(a) or is_nan(b):
        if keep_nan or is_nan(a) and is_nan(b):
            return CANONICAL_NAN
        return b if is_nan(a) else a
    first = _key(a) < _key(b) or _key(a) == _key(b) and a & SIGN != 0
    return (b if first else a) if pick_max else (a if first else b)


# ------------------------------------------------------------------ binary16



def to_f16(bits: int, ftz: bool = False) -> int:
    """`cvt.rn{.ftz}.f16.f32`: the nearest binary16, ties to even; too large
    is infinity, NaN the canonical 0x7FFF."""
    x = unpack(bits, ftz)
    sign = x.sign << 15
    if x.kind == "nan":
        return F16_NAN
    if x.kind != "finite":
        return sign | (F16_INF if x.kind == "inf" else 0)
    # keep 11 bits (fewer below 2^-14: the subnormal quantum is 2^-24)
    shift = min(max(126 - x.exp, 13), 25)
    kept, rest = x.sig >> shift, x.sig & ((1 << shift) - 1)
    kept += round_up(kept, rest, 1 << (shift - 1), 0, "rn")
    # the hidden bit, once there, carries into the exponent field
    return sign | min((max(x.exp - 113, 0) << 10) + kept, F16_INF)


def from_f16(half: int) -> int:
    """`cvt.f32.f16`: exact; NaN becomes the canonical NaN."""
    sign, field, frac = half >> 15 & 1, half >> 10 & 0x1F, half & 0x3FF
    if field == 0x1F:
        return CANONICAL_NAN if frac else sign << 31 | INF
    if field == 0:
        return sign << 31 if frac == 0 else round_pack(sign, frac, 126, "rn")
    return sign << 31 | (field + 112) << 23 | frac << 13
