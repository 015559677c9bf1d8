"""The f64 operations as straight-line programs of the machine's 32-bit
integer ops, over word pairs: the f64 that everyday float code meets
without asking for it (`0.5 * x` with a `double` literal; sinf's range
reduction), run as `float_programs` runs f32, against the same `IntOps`.

A double is a pair `(lo, hi)` of words. Wider intermediates are lists of
words, least significant first. `fma` is the one arithmetic program: add
is `fma(a, 1, b)`, mul `fma(a, b)` with no addend; its steps are those of
`float_programs.fma` at four words: the exact 106-bit product of the
significands and the addend's significand placed in a 128-bit window under
the larger exponent (the other shifted right with a sticky bit), added or
subtracted (negated back where negative), normalised with a leading-zero
count (no further than the smallest exponent: a subnormal result), rounded
once at bit 75 by the mode, packed so a carry out renormalises.
The specification is `qgc.runtime.float64` (the `ref` engine's, on Python
floats and exact rationals); tests/test_float64.py compares the two.
"""

from __future__ import annotations

from qgc.machine import float_programs as fp
from qgc.machine.float_programs import IntOps

SIGN, MAG = 0x8000_0000, 0x7FFF_FFFF
EXP_HI, FRAC_HI, HIDDEN_HI = 0x7FF0_0000, 0x000F_FFFF, 0x0010_0000
NAN = (0xFFFF_FFFF, 0x7FFF_FFFF)
ONE = (0, 0x3FF0_0000)
MAX_HI = 0x7FEF_FFFF
#: f64 exponent bias minus f32's
REBIAS = 1023 - 127


def _zero(v) -> bool:
    return isinstance(v, int) and v & 0xFFFF_FFFF == 0


def _bit(o: IntOps, p):
    return o.select(1, 0, p)


# ------------------------------------------------------------------ words

def add_words(o: IntOps, a: list, b: list, carry=0) -> list:
    """a + b (+ carry) mod 2^(32·len)."""
    out = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        last = i == len(a) - 1
        s = x if _zero(y) else o.add(x, y)
        c = 0 if _zero(y) or last else _bit(o, o.setp("lt.u", s, x))
        if not _zero(carry):
            total = o.add(s, carry)
            if not last:
                c = o.or_(c, _bit(o, o.setp("lt.u", total, s)))
            s = total
        out.append(s)
        carry = c
    return out


def negate_words(o: IntOps, a: list) -> list:
    return add_words(o, [o.not_(x) for x in a], [0] * len(a), 1)


def _any(o: IntOps, words: list):
    out = words[0]
    for w in words[1:]:
        out = o.or_(out, w)
    return out


def shr_sticky_words(o: IntOps, a: list, n) -> list:
    """a >> n (n ≥ 0), every bit shifted out ORed into bit 0."""
    k = len(a)
    n = o.min_u(n, 32 * k)
    q, r = o.shr(n, 5), o.and_(n, 31)
    by = [o.setp("eq", q, d) for d in range(k + 1)]
    moved = []
    for i in range(k):
        word = 0
        for d in range(k - i):
            word = o.select(a[i + d], word, by[d])
        moved.append(word)
    lost = 0
    for d in range(1, k + 1):
        lost = o.select(_any(o, a[:d]), lost, by[d])
    lost = o.or_(lost, o.shl(moved[0], o.sub(32, r)))
    out = [o.alu("shf.r.clamp", moved[i], moved[i + 1], r) for i in range(k - 1)]
    out.append(o.shr(moved[-1], r))
    out[0] = o.select(o.or_(out[0], 1), out[0], o.setp("ne", lost, 0))
    return out


def shl_words(o: IntOps, a: list, n) -> list:
    """a << n (0 ≤ n < 32·len)."""
    k = len(a)
    q, r = o.shr(n, 5), o.and_(n, 31)
    by = [o.setp("eq", q, d) for d in range(k)]
    moved = []
    for i in range(k):
        word = 0
        for d in range(i + 1):
            word = o.select(a[i - d], word, by[d])
        moved.append(word)
    return [o.shl(moved[0], r)] + [o.alu("shf.l.clamp", moved[i - 1], moved[i], r)
                                   for i in range(1, k)]


def clz_words(o: IntOps, a: list):
    """Leading zeros of the whole (32·len for zero)."""
    k = len(a)
    lead = o.clz(a[-1])
    above_zero = o.setp("eq", a[-1], 0)
    for i in range(k - 2, -1, -1):
        lead = o.select(o.add(o.clz(a[i]), 32 * (k - 1 - i)), lead, above_zero)
        above_zero = o.all_(above_zero, o.setp("eq", a[i], 0))
    return lead


def mul_pairs(o: IntOps, a: tuple, b: tuple) -> list:
    """The exact product of two 53-bit significands, four words."""
    (a0, a1), (b0, b1) = a, b

    def product(x, y):
        return o.alu("mul.lo", x, y), o.alu("mul.hi.u", x, y)
    l00, h00 = product(a0, b0)
    l01, h01 = product(a0, b1)
    l10, h10 = product(a1, b0)
    l11, h11 = product(a1, b1)
    total = add_words(o, [l00, h00, l11, h11], [0, l01, h01, 0])
    return add_words(o, total, [0, l10, h10, 0])


# ------------------------------------------------------------------ unpacking

class Unpacked:
    """A double's sign word, exponent (the field, 1 for a subnormal),
    significand (lo, hi) with the hidden bit set where normal (value
    sig · 2^(exp − 1075)) and classes."""

    def __init__(self, o: IntOps, lo, hi):
        self.sign = o.and_(hi, SIGN)
        field = o.shr(o.and_(hi, MAG), 20)
        frac_hi = o.and_(hi, FRAC_HI)
        self.exp = o.max_u(field, 1)
        self.sig = (lo, o.or_(frac_hi, o.shl(o.min_u(field, 1), 20)))
        top = o.setp("eq", field, 0x7FF)
        frac_zero = o.setp("eq", o.or_(frac_hi, lo), 0)
        self.nan = o.all_(top, o.not_p(frac_zero))
        self.inf = o.all_(top, frac_zero)
        self.zero = o.all_(o.setp("eq", field, 0), frac_zero)


def _pick(o: IntOps, x: tuple, y: tuple, p) -> tuple:
    return tuple(o.select(a, b, p) for a, b in zip(x, y, strict=True))


# ------------------------------------------------------------------ rounding

def round_pack(o: IntOps, sign, words: list, e, mode: str) -> tuple:
    """The double nearest sign · W · 2^(e − 1150) for a four-word W with its
    leading one at bit 127 (or e = 1 and W smaller: a subnormal): the 53
    bits from 127 kept, bit 74 the round bit, the rest sticky."""
    w0, w1, w2, w3 = words
    sig_hi = o.shr(w3, 11)
    sig_lo = o.alu("shf.r.clamp", w2, w3, 11)
    half = o.setp("ne", o.and_(w2, 0x400), 0)
    rest = o.setp("ne", o.or_(o.and_(w2, 0x3FF), o.or_(w1, w0)), 0)
    if mode == "rn":
        odd = o.setp("ne", o.and_(sig_lo, 1), 0)
        up = o.all_(half, o.any_(rest, odd))
    elif mode == "rz":
        up = False
    else:
        inexact = o.any_(half, rest)
        negative = o.setp("ne", sign, 0)
        up = o.all_(inexact, negative if mode == "rm" else o.not_p(negative))
    sig_lo, sig_hi = add_words(o, [sig_lo, sig_hi], [0, 0], _bit(o, up) if up is not False
                               else 0)
    packed = o.add(o.shl(o.sub(e, 1), 20), sig_hi)
    big = _overflow(o, sign, mode)
    over = o.setp("ge.u", packed, EXP_HI)
    return o.select(big[0], sig_lo, over), o.or_(o.select(big[1], packed, over), sign)


def _overflow(o: IntOps, sign, mode: str) -> tuple:
    """A finite result past the largest double, by mode (magnitude words)."""
    if mode == "rn":
        return 0, EXP_HI
    if mode == "rz":
        return 0xFFFF_FFFF, MAX_HI
    to_inf = o.setp("ne", sign, 0) if mode == "rm" else o.setp("eq", sign, 0)
    return o.select(0, 0xFFFF_FFFF, to_inf), o.select(EXP_HI, MAX_HI, to_inf)


# ------------------------------------------------------------------ arithmetic

def fma(o: IntOps, a: tuple, b: tuple, c: tuple | None, mode: str = "rn") -> tuple:
    """`fma.rnd.f64` (c None: `mul.rnd.f64`, the product's own zero sign)."""
    x, y = Unpacked(o, *a), Unpacked(o, *b)
    z = Unpacked(o, *(c if c is not None else (0, 0)))
    sp = o.xor(x.sign, y.sign)
    sc = z.sign if c is not None else sp
    product = mul_pairs(o, x.sig, y.sig)
    # window bit k weighs 2^(top − 1202 + k): the product's lead ≤ 126, c's ≤ 126
    ep = o.sub(o.add(x.exp, y.exp), 1075)
    ep = o.select(fp.NO_EXPONENT * 3, ep, o.any_(x.zero, y.zero))     # below any addend's
    top = o.max_s(o.add(ep, 106), o.add(z.exp, 53))
    product = shr_sticky_words(o, shl_words(o, product, 21), o.sub(o.sub(top, ep), 106))
    (c_lo, c_hi) = z.sig
    addend = [0, 0, o.shl(c_lo, 10), o.alu("shf.l.clamp", c_lo, c_hi, 10)]
    addend = shr_sticky_words(o, addend, o.sub(o.sub(top, z.exp), 53))
    differ = o.setp("ne", sp, sc)
    total = add_words(o, product, [o.select(o.not_(w), w, differ) for w in addend],
                      _bit(o, differ))
    # a difference is below 2^127 in magnitude: bit 127 is its sign (a sum's is its own)
    negative = o.all_(differ, o.setp("ne", o.and_(total[3], SIGN), 0))
    total = [o.select(n, w, negative) for n, w in zip(negate_words(o, total), total,
                                                       strict=True)]
    sign = o.select(o.xor(sp, SIGN), sp, negative)
    shift = o.min_u(clz_words(o, total), o.sub(top, 53))
    out = round_pack(o, sign, shl_words(o, total, shift), o.sub(o.sub(top, 52), shift), mode)
    exact_zero = o.setp("eq", _any(o, total), 0)
    out = _pick(o, (0, fp.zero_sign(o, sp, sc, mode)), out, exact_zero)
    return _fma_specials(o, out, x, y, z, sp, sc, c is not None)


def _fma_specials(o: IntOps, out: tuple, x: Unpacked, y: Unpacked, z: Unpacked, sp, sc,
                  has_c: bool) -> tuple:
    p_inf = o.any_(x.inf, y.inf)
    nan = o.any_(x.nan, y.nan, o.all_(x.inf, y.zero), o.all_(y.inf, x.zero))
    out = _pick(o, (0, o.or_(sp, EXP_HI)), out, p_inf)
    if has_c:
        out = _pick(o, (0, o.or_(sc, EXP_HI)), out, z.inf)
        nan = o.any_(nan, z.nan, o.all_(p_inf, z.inf, o.setp("ne", sp, sc)))
    return _pick(o, NAN, out, nan)


def add(o: IntOps, a: tuple, b: tuple, mode: str = "rn") -> tuple:
    return fma(o, a, ONE, b, mode)


def sub(o: IntOps, a: tuple, b: tuple, mode: str = "rn") -> tuple:
    return fma(o, a, ONE, (b[0], o.xor(b[1], SIGN)), mode)


def mul(o: IntOps, a: tuple, b: tuple, mode: str = "rn") -> tuple:
    return fma(o, a, b, None, mode)


def neg(o: IntOps, a: tuple) -> tuple:
    return a[0], o.xor(a[1], SIGN)


def abs_(o: IntOps, a: tuple) -> tuple:
    return a[0], o.and_(a[1], MAG)


def copysign(o: IntOps, a: tuple, b: tuple) -> tuple:
    """`copysign.f64 d, a, b`: b with a's sign."""
    return b[0], o.or_(o.and_(b[1], MAG), o.and_(a[1], SIGN))


# ------------------------------------------------------------------ compares

def _is_nan(o: IntOps, lo, hi):
    mag = o.and_(hi, MAG)
    return o.any_(o.setp("gt.u", mag, EXP_HI),
                  o.all_(o.setp("eq", mag, EXP_HI), o.setp("ne", lo, 0)))


def _key(o: IntOps, lo, hi) -> tuple:
    """An order-preserving unsigned pair: ±0 both 0x8000…, a negative's
    bits inverted, a positive's sign bit set."""
    negative = o.setp("ne", o.and_(hi, SIGN), 0)
    zero = o.setp("eq", o.or_(o.and_(hi, MAG), lo), 0)
    negative = o.all_(negative, o.not_p(zero))
    return (o.select(o.not_(lo), lo, negative),
            o.select(o.not_(hi), o.or_(hi, SIGN), negative))


def _less(o: IntOps, a: tuple, b: tuple, or_equal: bool):
    high = o.setp("lt.u", a[1], b[1])
    tie = o.all_(o.setp("eq", a[1], b[1]), o.setp("le.u" if or_equal else "lt.u", a[0], b[0]))
    return o.any_(high, tie)


def compare(o: IntOps, cmp: str, a: tuple, b: tuple):
    """`setp.CMP.f64`: ordered compares false with a NaN, unordered true."""
    nan = o.any_(_is_nan(o, *a), _is_nan(o, *b))
    test, unordered = fp.COMPARES[cmp]
    if test is None:
        return nan if unordered else o.not_p(nan)
    ka, kb = _key(o, *a), _key(o, *b)
    equal = o.all_(o.setp("eq", ka[0], kb[0]), o.setp("eq", ka[1], kb[1]))
    ordered = {"eq": equal, "ne": o.not_p(equal),
               "lt.s": _less(o, ka, kb, False), "le.s": _less(o, ka, kb, True),
               "gt.s": _less(o, kb, ka, False), "ge.s": _less(o, kb, ka, True)}[test]
    return o.any_(ordered, nan) if unordered else o.all_(ordered, o.not_p(nan))


def minmax(o: IntOps, a: tuple, b: tuple, pick_max: bool) -> tuple:
    """`min/max.f64`: −0 below +0; the other operand for one NaN, the
    canonical NaN for two."""
    def key(p):     # −0 keeps its own key, below +0's
        negative = o.setp("ne", o.and_(p[1], SIGN), 0)
        return (o.select(o.not_(p[0]), p[0], negative),
                o.select(o.not_(p[1]), o.or_(p[1], SIGN), negative))
    ka, kb = key(a), key(b)
    take_a = _less(o, kb, ka, True) if pick_max else _less(o, ka, kb, True)
    out = _pick(o, a, b, take_a)
    a_nan, b_nan = _is_nan(o, *a), _is_nan(o, *b)
    out = _pick(o, b, out, a_nan)
    out = _pick(o, a, out, b_nan)
    return _pick(o, NAN, out, o.all_(a_nan, b_nan))


# ------------------------------------------------------------------ conversions

def from_f32(o: IntOps, x, ftz: bool = False) -> tuple:
    """`cvt{.ftz}.f64.f32`: exact; a subnormal normalised with clz."""
    if ftz:
        x = fp.flush_in(o, x)
    f = fp.Fields(o, x)
    shift = o.max_s(o.sub(o.clz(f.sig), 8), 0)         # 0 for a normal
    sig = o.shl(f.sig, shift)
    field = o.sub(o.add(f.exp, REBIAS), shift)
    frac = o.and_(sig, fp.FRAC)
    hi = o.or_(o.shl(field, 20), o.shr(frac, 3))
    out = (o.shl(frac, 29), hi)
    out = _pick(o, (0, 0), out, o.setp("eq", f.mag, 0))
    out = _pick(o, (0, EXP_HI), out, o.setp("eq", f.mag, fp.INF))
    out = (out[0], o.or_(out[1], o.and_(x, SIGN)))
    return _pick(o, NAN, out, o.setp("gt.u", f.mag, fp.INF))


def to_f32(o: IntOps, a: tuple, mode: str = "rn", ftz: bool = False, sat: bool = False):
    """`cvt.rnd{.ftz}{.sat}.f32.f64`: the significand's top 30 bits and a
    sticky bit rounded by `float_programs.round_pack`; a subnormal double
    is far below every float (a sticky bit at the least exponent)."""
    lo, hi = a
    x = Unpacked(o, lo, hi)
    sticky = o.setp("ne", o.and_(lo, 0x7F_FFFF), 0)
    m = o.or_(o.shl(o.alu("shf.l.clamp", lo, x.sig[1], 9), 1), _bit(o, sticky))
    normal = o.setp("ge.u", o.and_(hi, MAG), HIDDEN_HI)
    m = o.select(m, 0x4000_0001, normal)
    e = o.select(o.sub(x.exp, REBIAS), -40, normal)
    out = fp.round_pack(o, x.sign, m, o.max_s(e, -40), mode)
    out = o.select(x.sign, out, x.zero)
    out = o.select(o.or_(x.sign, fp.INF), out, x.inf)
    return fp.finish(o, o.select(fp.CANONICAL_NAN, out, x.nan), ftz, sat)


def from_int(o: IntOps, n: tuple, signed: bool, mode: str = "rn") -> tuple:
    """`cvt.rnd.f64.{s,u}64` (a 32-bit integer extended to a pair first):
    the magnitude normalised with clz to bit 127 and rounded."""
    lo, hi = n
    negative = o.setp("lt.s", hi, 0) if signed else False
    mag = [lo, hi]
    if signed:
        mag = [o.select(m, w, negative) for m, w in zip(negate_words(o, mag), mag, strict=True)]
    lead = clz_words(o, mag)
    words = shl_words(o, [0, 0, *mag], lead)
    out = round_pack(o, o.select(SIGN, 0, negative), words, o.sub(1086, lead), mode)
    return _pick(o, (0, 0), out, o.setp("eq", lead, 64))


def _integral(o: IntOps, x: Unpacked, mode: str, negative) -> list:
    """|x| rounded to an integer by `mode` (rni rzi rmi rpi), two words: the
    significand shifted to put the integer part in the top two of four
    words (the fraction below, with a sticky bit); |x| ≥ 2^64 wraps."""
    words = [0, 0, *x.sig]
    n = o.sub(1075, x.exp)
    right = shr_sticky_words(o, words, o.max_s(n, 0))
    left = shl_words(o, words, o.min_u(o.max_s(o.neg(n), 0), 12))
    r = [o.select(lw, rw, o.setp("lt.s", n, 0)) for lw, rw in zip(left, right, strict=True)]
    half = o.setp("ne", o.and_(r[1], SIGN), 0)
    rest = o.setp("ne", o.or_(o.and_(r[1], MAG), r[0]), 0)
    if mode == "rni":
        up = o.all_(half, o.any_(rest, o.setp("ne", o.and_(r[2], 1), 0)))
    elif mode == "rzi":
        up = False
    else:
        inexact = o.any_(half, rest)
        up = o.all_(inexact, negative if mode == "rmi" else o.not_p(negative))
    return add_words(o, r[2:], [0, 0], _bit(o, up) if up is not False else 0)


def to_int(o: IntOps, a: tuple, mode: str, width: int, signed: bool) -> tuple:
    """`cvt.rndi.{s,u}{32,64}.f64`: the integer part rounded by the mode,
    saturated to the type (NaN → 0)."""
    x = Unpacked(o, *a)
    negative = o.setp("ne", x.sign, 0)
    mag = _integral(o, x, mode, negative)
    huge = o.setp("ge.u", x.exp, 1023 + 64)
    if signed:
        limit = (0, 1 << 31) if width == 64 else (1 << 31, 0)     # 2^(width − 1)
        over_neg = o.any_(huge, _less(o, limit, mag, False))
        over_pos = o.any_(huge, _less(o, (limit[0] - (width == 32), limit[1] - (width == 64)),
                                      mag, False))
        value = [o.select(m, w, negative) for m, w in zip(negate_words(o, mag), mag,
                                                           strict=True)]
        top = (0xFFFF_FFFF, 0x7FFF_FFFF) if width == 64 else (0x7FFF_FFFF, 0)
        least = (0, SIGN) if width == 64 else (SIGN, 0xFFFF_FFFF)
        value = _pick(o, least, value, o.all_(negative, over_neg))
        value = _pick(o, top, value, o.all_(o.not_p(negative), over_pos))
    else:
        top = (0xFFFF_FFFF, 0xFFFF_FFFF if width == 64 else 0)
        over = o.any_(huge, o.setp("ne", mag[1], 0)) if width == 32 else huge
        value = _pick(o, top, tuple(mag), over)
        value = _pick(o, (0, 0), value, negative)
    value = _pick(o, (0, 0), value, x.nan)
    return value if width == 64 else (value[0], 0)


# ------------------------------------------------------------------ division

def _normalised(o: IntOps, x: Unpacked) -> tuple[list, object]:
    """A non-zero significand with its leading one at bit 52, and its
    exponent lowered to match."""
    lead = o.sub(clz_words(o, list(x.sig)), 11)
    return shl_words(o, list(x.sig), lead), o.sub(x.exp, lead)


def _quotient_bit(o: IntOps, r: list, q: list, d: list) -> tuple[list, list]:
    """One step of restoring division on pairs: r doubled, d subtracted
    where it fits (r < 2d < 2^55: the difference's sign is its top bit)."""
    r = add_words(o, r, r)
    t = add_words(o, r, [o.not_(w) for w in d], 1)
    fits = o.setp("ge.s", t[1], 0)
    bit = _bit(o, fits)
    q = add_words(o, q, q, bit)
    return [o.select(a, b, fits) for a, b in zip(t, r, strict=True)], q


def div(o: IntOps, a: tuple, b: tuple, mode: str = "rn") -> tuple:
    """`div.rnd.f64`, correctly rounded: the normalised significands (the
    dividend doubled where it is the smaller, so the quotient's first bit is
    1), 54 more quotient bits by restoring division in a loop of machine
    blocks, the remainder a sticky bit; a subnormal quotient shifted right
    (sticky) before the one rounding."""
    x, y = Unpacked(o, *a), Unpacked(o, *b)
    sign = o.xor(x.sign, y.sign)
    n, ea = _normalised(o, x)
    d, eb = _normalised(o, y)
    smaller = o.any_(o.setp("lt.u", n[1], d[1]),
                     o.all_(o.setp("eq", n[1], d[1]), o.setp("lt.u", n[0], d[0])))
    n = [o.select(w2, w, smaller) for w2, w in zip(add_words(o, n, n), n, strict=True)]
    first = add_words(o, n, [o.not_(w) for w in d], 1)
    r0, r1, q0, q1 = o.loop(54, (*first, 1, 0), lambda o, r0, r1, q0, q1: tuple(
        w for part in _quotient_bit(o, [r0, r1], [q0, q1], d) for w in part))
    words = [_bit(o, o.setp("ne", o.or_(r0, r1), 0)), 0, o.shl(q0, 9),
             o.alu("shf.l.clamp", q0, q1, 9)]
    # a / b = q · 2^(ea − eb − smaller − 54), and q · 2^73 = W
    e = o.sub(o.add(o.sub(ea, eb), 1023), _bit(o, smaller))
    words = shr_sticky_words(o, words, o.max_s(o.sub(1, e), 0))
    out = round_pack(o, sign, words, o.max_s(e, 1), mode)
    out = _pick(o, (0, sign), out, o.any_(x.zero, y.inf))
    out = _pick(o, (0, o.or_(sign, EXP_HI)), out, o.any_(x.inf, y.zero))
    nan = o.any_(x.nan, y.nan, o.all_(x.zero, y.zero), o.all_(x.inf, y.inf))
    return _pick(o, NAN, out, nan)


def rcp(o: IntOps, a: tuple, mode: str = "rn") -> tuple:
    """`rcp.rnd.f64`: 1 / a."""
    return div(o, ONE, a, mode)


def _root_bit(o: IntOps, x1, x0, r0, r1, q0, q1) -> tuple:
    """One digit of the square root on pairs: the radicand's next two bits
    (the top of x) into the remainder r, 4·root + 1 subtracted where it
    fits."""
    r = [o.or_(o.shl(r0, 2), o.shr(x1, 30)), o.alu("shf.l.clamp", r0, r1, 2)]
    x = (o.alu("shf.l.clamp", x0, x1, 2), o.shl(x0, 2))
    trial = [o.or_(o.shl(q0, 2), 1), o.alu("shf.l.clamp", q0, q1, 2)]
    t = add_words(o, r, [o.not_(w) for w in trial], 1)
    fits = o.setp("ge.s", t[1], 0)
    q = add_words(o, [q0, q1], [q0, q1], _bit(o, fits))
    r = [o.select(a, b, fits) for a, b in zip(t, r, strict=True)]
    return (*x, *r, *q)


def sqrt(o: IntOps, a: tuple, mode: str = "rn") -> tuple:
    """`sqrt.rnd.f64`, correctly rounded: the normalised significand (its
    exponent made even) as a 110-bit radicand, its 55-bit root two radicand
    bits per trip of a loop of machine blocks, the remainder a sticky bit."""
    x = Unpacked(o, *a)
    s, exp = _normalised(o, x)                      # value s · 2^(exp − 1075)
    odd = o.setp("ne", o.and_(o.sub(exp, 1075), 1), 0)
    s = [o.select(d, w, odd) for d, w in zip(add_words(o, s, s), s, strict=True)]
    # the radicand s · 2^56, its bits from the top: s << 74 in four words, two of them zero
    top = (o.alu("shf.l.clamp", s[0], s[1], 10), o.shl(s[0], 10))
    _, _, r0, r1, q0, q1 = o.loop(55, (*top, 0, 0, 0, 0), _root_bit)
    words = [_bit(o, o.setp("ne", o.or_(r0, r1), 0)), 0, o.shl(q0, 9),
             o.alu("shf.l.clamp", q0, q1, 9)]
    # √a = root · 2^((exp − odd − 1131) / 2), and root · 2^73 = W
    e = o.add(o.sar(o.sub(o.sub(exp, _bit(o, odd)), 1131), 1), 1077)
    out = round_pack(o, 0, words, e, mode)
    out = _pick(o, a, out, o.any_(x.zero, x.inf))
    nan = o.any_(x.nan, o.all_(o.setp("ne", x.sign, 0), o.not_p(x.zero)))
    return _pick(o, NAN, out, nan)


def round_integral(o: IntOps, a: tuple, mode: str) -> tuple:
    """`cvt.rndi.f64.f64` (floor, ceil, trunc, rint of a double): below 2^52
    the rounded integer part converted back (exactly) with x's sign, so a
    negative that rounds to 0 is −0; from 2^52 up x is integral already."""
    x = Unpacked(o, *a)
    negative = o.setp("ne", x.sign, 0)
    mag = from_int(o, tuple(_integral(o, x, mode, negative)), False, "rn")
    out = (mag[0], o.or_(mag[1], x.sign))
    out = _pick(o, a, out, o.setp("ge.u", x.exp, 1075))
    return _pick(o, NAN, out, x.nan)
