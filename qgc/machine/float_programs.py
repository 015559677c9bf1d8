"""The f32 operations as straight-line programs of the machine's integer ops
(issue 23), as a GPU without a float unit runs them in software.

The tensor level has integer circuits only (`passes/simt_to_tensor/circuits`);
`simt-expand-float` replaces every f32 op by the program here, so the
circuits a float runs on are the certified integer ones, and `tensor` and
`model` compute floats bit-exactly by construction. Each program follows
`softfloat` (the specification, checked against `ref`) step by step:
unpack, normalise with `clz`, align with a sticky bit, add or multiply the
significands (`mul.hi.u` / `mul.lo`), normalise, round by adding an
increment below the kept bits, pack (a carry out of the significand moves
into the exponent field), overflow by mode, then the special operands by
selects. There are no branches: every lane runs the same ops.

A program is written once against `IntOps`, which back ends implement:
`simt-expand-float` emits `simt.alu`/`simt.setp`/`simt.pred` ops,
`qgc.machine.opcodes.Evaluate` computes each op at once with the opcode
table's own semantics (the fast way to test a program on millions of
operands), and `ref` runs the `.approx` programs on its own arithmetic.

Words are 32-bit; a significand M handed to `round_pack` holds its leading
one at bit 30 and a sticky bit at bit 0, its value M · 2^(e − 157) with e
the biased exponent (the exponent field where the result is normal).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

SIGN, MAG, INF = 0x8000_0000, 0x7FFF_FFFF, 0x7F80_0000
CANONICAL_NAN, MAX_FINITE, ONE = 0x7FFF_FFFF, 0x7F7F_FFFF, 0x3F80_0000
FRAC, HIDDEN = 0x7F_FFFF, 0x80_0000
F16_NAN, F16_INF = 0x7FFF, 0x7C00
MODES = ("rn", "rz", "rm", "rp")
#: an exponent below every operand's: an exact zero's place in an fma
NO_EXPONENT = -1000

W = TypeVar("W")        # a word: a register or an immediate, or an int
P = TypeVar("P")        # a predicate


class IntOps(Generic[W, P]):
    """The machine's integer ops, as a program sees them (a back end gives
    `alu`, `setp`, `pred` and `select`)."""

    def alu(self, opcode: str, *srcs: W | int) -> W:
        raise NotImplementedError

    def setp(self, cond: str, a: W | int, b: W | int) -> P:
        raise NotImplementedError

    def pred(self, opcode: str, *srcs: P | bool) -> P:
        raise NotImplementedError

    def select(self, a: W | int, b: W | int, p: P | bool) -> W:
        """a where p, else b."""
        raise NotImplementedError

    def loop(self, trips: int, state: tuple, body: Callable[..., tuple]) -> tuple:
        """`body(ops, *state)` run `trips` times on the loop-carried words
        `state` (every lane the same count: no divergence); the last state."""
        raise NotImplementedError

    # the ops by name
    def add(self, a, b): return self.alu("add", a, b)
    def sub(self, a, b): return self.alu("sub", a, b)
    def and_(self, a, b): return self.alu("and", a, b)
    def or_(self, a, b): return self.alu("or", a, b)
    def xor(self, a, b): return self.alu("xor", a, b)
    def not_(self, a): return self.alu("not", a)
    def neg(self, a): return self.alu("neg", a)
    def shl(self, a, n): return self.alu("shl", a, n)
    def shr(self, a, n): return self.alu("shr.u", a, n)
    def sar(self, a, n): return self.alu("shr.s", a, n)
    def clz(self, a): return self.alu("clz", a)
    def ctz(self, a): return self.alu("clz", self.alu("brev", a))
    def min_u(self, a, b): return self.alu("min.u", a, b)
    def max_u(self, a, b): return self.alu("max.u", a, b)
    def min_s(self, a, b): return self.alu("min.s", a, b)
    def max_s(self, a, b): return self.alu("max.s", a, b)
    def any_(self, *ps): return _fold_left(self, "or", ps)
    def all_(self, *ps): return _fold_left(self, "and", ps)
    def not_p(self, p): return self.pred("not", p)


def _fold_left(ops: IntOps, opcode: str, ps):
    out = ps[0]
    for p in ps[1:]:
        out = ops.pred(opcode, out, p)
    return out


# ------------------------------------------------------------------ pieces

def flush_in(o: IntOps, x):
    """`.ftz` on an operand or result: a subnormal becomes a zero of its sign."""
    return o.select(o.and_(x, SIGN), x, o.setp("eq", o.and_(x, INF), 0))


def saturate(o: IntOps, x):
    """`.sat`: clamp to [0, 1]; NaN and every negative become +0."""
    return o.select(0, o.min_u(x, ONE), o.setp("gt.u", x, INF))


def finish(o: IntOps, x, ftz: bool, sat: bool):
    if ftz:
        x = flush_in(o, x)
    return saturate(o, x) if sat else x


class Fields:
    """A float's magnitude, significand (the hidden bit set where normal)
    and exponent (the field, 1 for a subnormal): value sig · 2^(exp − 150)."""

    def __init__(self, o: IntOps, x, mag=None):
        self.mag = o.and_(x, MAG) if mag is None else mag
        field = o.shr(self.mag, 23)
        self.sig = o.or_(o.and_(self.mag, FRAC), o.shl(o.min_u(field, 1), 23))
        self.exp = o.max_u(field, 1)


def shr_sticky(o: IntOps, m, n):
    """m >> n (n ≥ 0), the bits shifted out ORed into bit 0."""
    q = o.shr(m, n)
    lost = o.setp("ne", o.shl(q, n), m)
    return o.select(o.or_(q, 1), q, lost)


def _sign_mask(o: IntOps, sign):
    """All ones for a negative sign word, else 0."""
    return o.sar(sign, 31)


def round_pack(o: IntOps, sign, m, e, mode: str):
    """The float nearest sign · M · 2^(e − 157) in `mode` (M: leading one at
    bit 30, sticky at bit 0): a subnormal shifts M further right; the
    increment for the mode is added 7 bits below the kept 24, and the
    exponent field is added to the rounded significand, so a carry out
    renormalises; too large becomes infinity or the largest finite."""
    e = o.min_s(e, 255)
    m = shr_sticky(o, m, o.max_s(o.sub(1, e), 0))
    e = o.max_s(e, 1)
    if mode == "rn":                    # half − 1, plus 1 where the kept lsb is odd
        inc = o.add(o.and_(o.shr(m, 7), 1), 0x3F)
    elif mode == "rz":
        inc = 0
    else:                               # away from zero on the mode's side
        mask = _sign_mask(o, sign)
        inc = o.and_(mask if mode == "rm" else o.not_(mask), 0x7F)
    kept = o.shr(o.add(m, inc), 7)
    packed = o.add(o.shl(o.sub(e, 1), 23), kept)
    if mode == "rn":
        big = INF
    elif mode == "rz":
        big = MAX_FINITE
    else:                               # infinity on the mode's side
        negative = o.shr(sign, 31)
        big = o.add(MAX_FINITE, negative) if mode == "rm" else o.sub(INF, negative)
    packed = o.select(big, packed, o.setp("ge.u", packed, INF))
    return o.or_(packed, sign)


def zero_sign(o: IntOps, a, b, mode: str):
    """The sign of an exact zero sum of a and b: -0 from two -0s, or in rm
    from any negative."""
    return o.and_(o.or_(a, b) if mode == "rm" else o.and_(a, b), SIGN)


# ------------------------------------------------------------------ ops

def add(o: IntOps, a, b, mode: str = "rn", ftz: bool = False, sat: bool = False):
    """`add{.rnd}{.ftz}{.sat}.f32`: the larger magnitude x and the smaller y,
    y's significand aligned with a sticky bit 6 bits below x's, added or
    subtracted, normalised with clz, rounded."""
    if ftz:
        a, b = flush_in(o, a), flush_in(o, b)
    ma, mb = o.and_(a, MAG), o.and_(b, MAG)
    x = o.select(b, a, o.setp("gt.u", mb, ma))
    mx, my = o.max_u(ma, mb), o.min_u(ma, mb)
    differ = o.setp("lt.s", o.xor(a, b), 0)
    fx, fy = Fields(o, x, mx), Fields(o, None, my)
    big = o.shl(fx.sig, 6)
    small = shr_sticky(o, o.shl(fy.sig, 6), o.sub(fx.exp, fy.exp))
    total = o.select(o.sub(big, small), o.add(big, small), differ)
    lead = o.clz(total)
    m = o.shl(total, o.sub(lead, 1))
    out = round_pack(o, o.and_(x, SIGN), m, o.sub(o.add(fx.exp, 2), lead), mode)
    out = o.select(zero_sign(o, a, b, mode), out, o.setp("eq", total, 0))
    out = o.select(x, out, o.setp("ge.u", mx, INF))
    # predicates are few (8 a lane): the signs' difference is tested again
    opposite = o.setp("lt.s", o.xor(a, b), 0)
    nan = o.any_(o.setp("gt.u", mx, INF), o.all_(o.setp("eq", my, INF), opposite))
    return finish(o, o.select(CANONICAL_NAN, out, nan), ftz, sat)


def sub(o: IntOps, a, b, mode: str = "rn", ftz: bool = False, sat: bool = False):
    """`sub{.rnd}{.ftz}{.sat}.f32`: a + (−b)."""
    return add(o, a, o.xor(b, SIGN), mode, ftz, sat)


class Normalised:
    """A float's significand with its leading one at bit 31 (`sig`; 0 for a
    zero) and `exp` such that its value is sig · 2^(exp − 158)."""

    def __init__(self, o: IntOps, x):
        f = Fields(o, x)
        self.mag = f.mag
        lead = o.clz(f.sig)
        self.sig = o.shl(f.sig, lead)
        self.exp = o.sub(o.add(f.exp, 8), lead)


def _specials(o: IntOps, ma, mb):
    """A product's NaN (a NaN, or infinity times zero), infinity and zero."""
    hi, lo = o.max_u(ma, mb), o.min_u(ma, mb)
    inf, zero = o.setp("eq", hi, INF), o.setp("eq", lo, 0)
    nan = o.any_(o.setp("gt.u", hi, INF), o.all_(inf, zero))
    return nan, inf, zero


def mul(o: IntOps, a, b, mode: str = "rn", ftz: bool = False, sat: bool = False):
    """`mul{.rnd}{.ftz}{.sat}.f32`: the normalised significands' product's
    high word (`mul.hi.u`), its low word's presence a sticky bit from the
    operands' trailing zeros (no `mul.lo`), renormalised by one bit."""
    if ftz:
        a, b = flush_in(o, a), flush_in(o, b)
    sign = o.and_(o.xor(a, b), SIGN)
    x, y = Normalised(o, a), Normalised(o, b)
    hi = o.alu("mul.hi.u", x.sig, y.sig)
    inexact = o.setp("lt.u", o.add(o.ctz(x.sig), o.ctz(y.sig)), 32)
    top = o.shr(hi, 31)
    m = o.select(o.or_(o.shr(hi, 1), o.and_(hi, 1)), hi, o.setp("lt.s", hi, 0))
    m = o.select(o.or_(m, 1), m, inexact)
    # value hi · 2^32 · 2^(x.exp + y.exp − 316) = m · 2^(e − 157)
    e = o.add(o.add(x.exp, y.exp), o.sub(top, 127))
    out = round_pack(o, sign, m, e, mode)
    nan, inf, zero = _specials(o, x.mag, y.mag)
    out = o.select(sign, out, zero)
    out = o.select(o.or_(sign, INF), out, inf)
    return finish(o, o.select(CANONICAL_NAN, out, nan), ftz, sat)


# ------------------------------------------------------------------ fma

class Wide:
    """A 64-bit value as two words, `hi` and `lo`."""

    def __init__(self, hi, lo):
        self.hi, self.lo = hi, lo


def _pick(o: IntOps, x: Wide, y: Wide, p) -> Wide:
    return Wide(o.select(x.hi, y.hi, p), o.select(x.lo, y.lo, p))


def _negate(o: IntOps, x: Wide) -> Wide:
    """−x mod 2^64."""
    carry = o.select(1, 0, o.setp("eq", x.lo, 0))
    return Wide(o.add(o.not_(x.hi), carry), o.neg(x.lo))


def _add(o: IntOps, x: Wide, y: Wide) -> Wide:
    lo = o.add(x.lo, y.lo)
    carry = o.select(1, 0, o.setp("lt.u", lo, x.lo))
    return Wide(o.add(o.add(x.hi, y.hi), carry), lo)


def _shr_sticky(o: IntOps, x: Wide, n) -> Wide:
    """x >> n (n ≥ 0; x < 2^63), the bits shifted out ORed into bit 0: they
    are lost where n passes x's trailing zeros."""
    n = o.min_u(n, 63)
    lo = o.select(o.shr(x.hi, o.sub(n, 32)), o.alu("shf.r.clamp", x.lo, x.hi, n),
                  o.setp("ge.u", n, 32))
    trailing = o.add(o.ctz(x.lo), o.select(o.ctz(x.hi), 0, o.setp("eq", x.lo, 0)))
    lo = o.select(o.or_(lo, 1), lo, o.setp("gt.u", n, trailing))
    return Wide(o.shr(x.hi, n), lo)


def _normalise(o: IntOps, x: Wide):
    """A non-zero x as (M, lead): its top 31 bits with the leading one at bit
    30, the rest a sticky bit at bit 0; x's leading zeros."""
    lead = o.add(o.clz(x.hi), o.select(o.clz(x.lo), 0, o.setp("eq", x.hi, 0)))
    top = o.select(o.shl(x.lo, o.sub(lead, 32)), o.alu("shf.l.clamp", x.lo, x.hi, lead),
                   o.setp("ge.u", lead, 32))
    rest = o.or_(o.and_(top, 1), o.shl(x.lo, lead))
    m = o.shr(top, 1)
    return o.select(o.or_(m, 1), m, o.setp("ne", rest, 0)), lead


def fma(o: IntOps, a, b, c, mode: str = "rn", ftz: bool = False, sat: bool = False):
    """`fma{.rnd}{.ftz}{.sat}.f32`: the exact 64-bit product of the
    normalised significands (`mul.lo`, `mul.hi.u`) shifted right 2, and c's
    normalised significand at bit 60; the one with the lower exponent
    shifted right with a sticky bit, added or subtracted (negated back
    where the result is negative), normalised, rounded once."""
    if ftz:
        a, b, c = flush_in(o, a), flush_in(o, b), flush_in(o, c)
    sp = o.and_(o.xor(a, b), SIGN)
    sc = o.and_(c, SIGN)
    x, y, z = Normalised(o, a), Normalised(o, b), Normalised(o, c)
    p_zero = o.setp("eq", o.min_u(x.mag, y.mag), 0)
    # the product: (x.sig · y.sig) >> 2 < 2^62, exact (each has 8 zero bits)
    hi, lo = o.alu("mul.hi.u", x.sig, y.sig), o.alu("mul.lo", x.sig, y.sig)
    product = Wide(o.shr(hi, 2), o.alu("shf.r.wrap", lo, hi, 2))
    addend = Wide(o.shr(z.sig, 3), o.shl(z.sig, 29))
    # value = word · 2^(exp − 314): the product's x.exp + y.exp − 316 + 2,
    # c's z.exp − 158 − 29
    ep = o.select(NO_EXPONENT, o.add(x.exp, y.exp), p_zero)
    c_zero = o.setp("eq", z.mag, 0)
    ec = o.select(NO_EXPONENT, o.add(z.exp, 127), c_zero)
    c_first = o.setp("gt.s", ec, ep)
    big, small = _pick(o, addend, product, c_first), _pick(o, product, addend, c_first)
    exp = o.max_s(ep, ec)
    small = _shr_sticky(o, small, o.sub(exp, o.min_s(ep, ec)))
    sign = o.select(sc, sp, c_first)
    differ = o.setp("ne", sp, sc)
    total = _add(o, big, _pick(o, _negate(o, small), small, differ))
    negative = o.setp("lt.s", total.hi, 0)
    total = _pick(o, _negate(o, total), total, negative)
    sign = o.select(o.xor(sign, SIGN), sign, negative)
    m, lead = _normalise(o, total)
    # value = M · 2^(33 − lead) · 2^(exp − 314) = M · 2^(e − 157)
    out = round_pack(o, sign, m, o.sub(o.sub(exp, 124), lead), mode)
    exact_zero = o.all_(o.setp("eq", total.hi, 0), o.setp("eq", total.lo, 0))
    out = o.select(zero_sign(o, sp, sc, mode), out, exact_zero)
    out = o.select(c, out, o.setp("eq", z.mag, INF))
    nan, p_inf, _ = _specials(o, x.mag, y.mag)
    out = o.select(o.or_(sp, INF), out, p_inf)
    opposite = o.setp("ne", sp, sc)
    nan = o.any_(nan, o.setp("gt.u", z.mag, INF),
                 o.all_(p_inf, o.setp("eq", z.mag, INF), opposite))
    return finish(o, o.select(CANONICAL_NAN, out, nan), ftz, sat)


# ------------------------------------------------------------------ compares, sign

#: `setp.CMP.f32` → (the signed compare of the keys, true where unordered)
COMPARES = {
    "eq": ("eq", False), "ne": ("ne", False), "lt": ("lt.s", False),
    "le": ("le.s", False), "gt": ("gt.s", False), "ge": ("ge.s", False),
    "equ": ("eq", True), "neu": ("ne", True), "ltu": ("lt.s", True),
    "leu": ("le.s", True), "gtu": ("gt.s", True), "geu": ("ge.s", True),
    "num": (None, False), "nan": (None, True),
}


def _key(o: IntOps, x, mag):
    """A float's order as a signed word: ±magnitude (±0 both 0)."""
    return o.select(o.neg(mag), mag, o.setp("lt.s", x, 0))


def compare(o: IntOps, cmp: str, a, b, ftz: bool = False):
    """`setp.CMP{.ftz}.f32`: the keys compared as signed words; an ordered
    compare is false with a NaN, an unordered one true."""
    if ftz:
        a, b = flush_in(o, a), flush_in(o, b)
    ma, mb = o.and_(a, MAG), o.and_(b, MAG)
    nan = o.setp("gt.u", o.max_u(ma, mb), INF)
    test, unordered = COMPARES[cmp]
    if test is None:
        return nan if unordered else o.not_p(nan)
    ordered = o.setp(test, _key(o, a, ma), _key(o, b, mb))
    return o.any_(ordered, nan) if unordered else o.all_(ordered, o.not_p(nan))


def minmax(o: IntOps, a, b, pick_max: bool, ftz: bool = False, keep_nan: bool = False):
    """`min/max{.ftz}{.NaN}.f32`: keys with -0 below +0 (a negative's
    magnitude inverted); the other operand for one NaN, the canonical NaN
    for two (or for any with `.NaN`)."""
    if ftz:
        a, b = flush_in(o, a), flush_in(o, b)
    ka = o.xor(o.and_(a, MAG), o.sar(a, 31))
    kb = o.xor(o.and_(b, MAG), o.sar(b, 31))
    out = o.select(a, b, o.setp("ge.s" if pick_max else "le.s", ka, kb))
    a_nan = o.setp("gt.u", o.and_(a, MAG), INF)
    b_nan = o.setp("gt.u", o.and_(b, MAG), INF)
    if keep_nan:
        return o.select(CANONICAL_NAN, out, o.any_(a_nan, b_nan))
    out = o.select(b, out, a_nan)
    out = o.select(a, out, b_nan)
    return o.select(CANONICAL_NAN, out, o.all_(a_nan, b_nan))


def neg(o: IntOps, a, ftz: bool = False):
    return o.xor(flush_in(o, a) if ftz else a, SIGN)


def abs_(o: IntOps, a, ftz: bool = False):
    return o.and_(flush_in(o, a) if ftz else a, MAG)


def copysign(o: IntOps, a, b):
    """`copysign.f32 d, a, b`: b with a's sign."""
    return o.or_(o.and_(b, MAG), o.and_(a, SIGN))


# ------------------------------------------------------------------ conversions

def from_int(o: IntOps, n, signed: bool, mode: str = "rn", sat: bool = False):
    """`cvt.RND{.sat}.f32.{s,u}32`: the magnitude normalised with clz (its
    low bit a sticky one), rounded."""
    sign = o.and_(n, SIGN) if signed else 0
    mag = o.select(o.neg(n), n, o.setp("lt.s", n, 0)) if signed else n
    lead = o.clz(mag)
    top = o.shl(mag, lead)
    m = o.or_(o.shr(top, 1), o.and_(top, 1))
    # mag = M · 2^(1 − lead) = M · 2^(e − 157)
    out = round_pack(o, sign, m, o.sub(158, lead), mode)
    return finish(o, o.select(0, out, o.setp("eq", n, 0)), False, sat)


def _integral(o: IntOps, x, f: Fields, mode: str):
    """|x| rounded to an integer in `mode` (|x| < 2^32): the significand
    shifted right (at most 25 bits after a sticky pre-shift) with an
    increment, or left where x is already an integer."""
    shift = o.sub(150, f.exp)
    sig = shr_sticky(o, f.sig, o.max_s(o.sub(shift, 25), 0))
    shift = o.min_s(shift, 25)
    mask = o.sub(o.shl(1, shift), 1)
    if mode == "rn":
        inc = o.add(o.shr(mask, 1), o.and_(o.shr(sig, shift), 1))
    elif mode == "rz":
        inc = 0
    else:
        inc = o.and_(mask, o.not_(o.sar(x, 31)) if mode == "rp" else o.sar(x, 31))
    small = o.shr(o.add(sig, inc), shift)
    return o.select(o.shl(f.sig, o.sub(f.exp, 150)), small, o.setp("ge.u", f.exp, 150))


def to_int(o: IntOps, a, mode: str, signed: bool, ftz: bool = False):
    """`cvt.RNDi{.ftz}.{s,u}32.f32`: rounded to an integer, saturated (the
    bounds are compared as floats: 2^31, 2^32), NaN to 0."""
    if ftz:
        a = flush_in(o, a)
    f = Fields(o, a)
    n = _integral(o, a, f, mode)
    negative = o.setp("lt.s", a, 0)
    if signed:
        out = o.select(o.neg(n), n, negative)
        out = o.select(o.select(0x8000_0000, 0x7FFF_FFFF, negative), out,
                       o.setp("ge.u", f.mag, 0x4F00_0000))
    else:
        out = o.select(0xFFFF_FFFF, n, o.setp("ge.u", f.mag, 0x4F80_0000))
        out = o.select(0, out, negative)
    return o.select(0, out, o.setp("gt.u", f.mag, INF))


def round_integral(o: IntOps, a, mode: str, ftz: bool = False, sat: bool = False):
    """`cvt.RNDi{.ftz}{.sat}.f32.f32`: the integer (below 2^24 where x is
    not one already) converted back exactly, with x's sign."""
    if ftz:
        a = flush_in(o, a)
    f = Fields(o, a)
    n = _integral(o, a, f, mode)
    lead = o.clz(n)
    # n = (n << lead) · 2^(−lead): the field 158 − lead, the hidden bit added
    exact = o.add(o.shl(o.sub(157, lead), 23), o.shr(o.shl(n, lead), 8))
    out = o.or_(o.select(0, exact, o.setp("eq", n, 0)), o.and_(a, SIGN))
    out = o.select(a, out, o.setp("ge.u", f.exp, 150))
    return finish(o, o.select(CANONICAL_NAN, out, o.setp("gt.u", f.mag, INF)), ftz, sat)


def to_f16(o: IntOps, a, ftz: bool = False):
    """`cvt.rn{.ftz}.f16.f32`: the significand shifted right by 13 (more
    below 2^-14) with the round-to-even increment, added to the binary16
    exponent field so that a carry renormalises; at or past 0x7C00
    infinity; NaN 0x7FFF."""
    if ftz:
        a = flush_in(o, a)
    f = Fields(o, a)
    shift = o.min_s(o.max_s(o.sub(126, f.exp), 13), 25)
    half_less = o.sub(o.shl(1, o.sub(shift, 1)), 1)
    inc = o.add(half_less, o.and_(o.shr(f.sig, shift), 1))
    kept = o.shr(o.add(f.sig, inc), shift)
    out = o.min_u(o.add(o.shl(o.max_s(o.sub(f.exp, 113), 0), 10), kept), F16_INF)
    out = o.or_(out, o.shr(o.and_(a, SIGN), 16))
    return o.select(F16_NAN, out, o.setp("gt.u", f.mag, INF))


def from_f16(o: IntOps, h):
    """`cvt.f32.f16`: exact; the exponent rebiased, a subnormal normalised
    with clz; NaN canonical."""
    mag = o.and_(h, 0x7FFF)
    normal = o.add(o.shl(mag, 13), 112 << 23)
    lead = o.clz(mag)
    # mag · 2^-24 with its leading one moved to the hidden bit: the field
    # 134 − lead, less the hidden bit the shifted significand adds
    tiny = o.add(o.shl(o.sub(133, lead), 23), o.shl(mag, o.sub(lead, 8)))
    out = o.select(o.select(0, tiny, o.setp("eq", mag, 0)), normal, o.setp("lt.u", mag, 0x400))
    out = o.select(INF, out, o.setp("ge.u", mag, F16_INF))
    out = o.or_(out, o.shl(o.and_(h, 0x8000), 16))
    return o.select(CANONICAL_NAN, out, o.setp("gt.u", mag, F16_INF))


# ------------------------------------------------------------------ division, root

def _quotient_bit(o: IntOps, r, q, d):
    """One step of restoring division: r doubled, d subtracted where it
    fits, the quotient bit shifted into q."""
    r = o.add(r, r)
    t = o.sub(r, d)
    fits = o.setp("ge.s", t, 0)
    q = o.add(q, q)
    return o.select(t, r, fits), o.select(o.or_(q, 1), q, fits)


def div(o: IntOps, a, b, mode: str = "rn", ftz: bool = False, sat: bool = False):
    """`div.RND{.ftz}{.sat}.f32`, correctly rounded: the 24-bit significands
    (the dividend doubled where it is the smaller, so the quotient's first
    bit is 1), 25 more quotient bits by restoring division in a loop of
    machine blocks, the remainder a sticky bit."""
    if ftz:
        a, b = flush_in(o, a), flush_in(o, b)
    sign = o.and_(o.xor(a, b), SIGN)
    x, y = Normalised(o, a), Normalised(o, b)
    n, d = o.shr(x.sig, 8), o.shr(y.sig, 8)
    smaller = o.setp("lt.u", n, d)
    n = o.select(o.add(n, n), n, smaller)
    # a / b = q · 2^(x.exp − y.exp − smaller − 25) = m · 2^(e − 157)
    e = o.sub(o.add(o.sub(x.exp, y.exp), 127), o.select(1, 0, smaller))
    r, q = o.loop(25, (o.sub(n, d), 1), lambda o, r, q: _quotient_bit(o, r, q, d))
    m = o.shl(q, 5)
    m = o.select(o.or_(m, 1), m, o.setp("ne", r, 0))
    out = round_pack(o, sign, m, e, mode)
    # each test where it is used: a lane has 8 predicates
    ma, mb = x.mag, y.mag
    out = o.select(sign, out, o.any_(o.setp("eq", ma, 0), o.setp("eq", mb, INF)))
    out = o.select(o.or_(sign, INF), out, o.any_(o.setp("eq", ma, INF), o.setp("eq", mb, 0)))
    # 0/0 and inf/inf: equal magnitudes that are 0 or inf
    alike = o.all_(o.setp("eq", ma, mb), o.setp("eq", o.min_u(ma, o.sub(INF, ma)), 0))
    nan = o.any_(o.setp("gt.u", o.max_u(ma, mb), INF), alike)
    return finish(o, o.select(CANONICAL_NAN, out, nan), ftz, sat)


def _classes(o: IntOps, mag):
    return o.setp("gt.u", mag, INF), o.setp("eq", mag, INF), o.setp("eq", mag, 0)


def _root_bit(o: IntOps, x, r, root):
    """One digit of the square root: the radicand's next two bits (from the
    top of x) into the remainder r, 4·root + 1 subtracted where it fits."""
    r = o.or_(o.shl(r, 2), o.shr(x, 30))
    t = o.sub(r, o.or_(o.shl(root, 2), 1))
    fits = o.setp("ge.s", t, 0)
    root = o.add(root, root)
    return o.shl(x, 2), o.select(t, r, fits), o.select(o.or_(root, 1), root, fits)


def sqrt(o: IntOps, a, mode: str = "rn", ftz: bool = False, sat: bool = False):
    """`sqrt.RND{.ftz}{.sat}.f32`, correctly rounded: the significand (its
    exponent made even) as a 26-bit radicand scaled by 2^26, its 26-bit root
    two radicand bits per loop iteration, the remainder a sticky bit."""
    if ftz:
        a = flush_in(o, a)
    x = Normalised(o, a)
    s = o.shr(x.sig, 8)                     # value s · 2^(x.exp − 150)
    odd = o.setp("ne", o.and_(x.exp, 1), 0)
    s = o.select(o.add(s, s), s, odd)       # now an even power: x.exp − odd − 150
    half = o.sar(o.sub(o.sub(x.exp, o.select(1, 0, odd)), 150), 1)
    _, r, root = o.loop(26, (o.shl(s, 6), 0, 0), _root_bit)
    # root = isqrt(s · 2^26) < 2^26, its leading one moved to bit 30
    lead = o.clz(root)
    m = o.shl(root, o.sub(lead, 1))
    m = o.select(o.or_(m, 1), m, o.setp("ne", r, 0))
    # √a = root · 2^(E/2 − 13) = m · 2^(e − 157), E = x.exp − odd − 150 (even)
    out = round_pack(o, 0, m, o.sub(o.add(half, 145), lead), mode)
    nan, inf, zero = _classes(o, x.mag)
    out = o.select(a, out, o.any_(zero, inf))
    nan = o.any_(nan, o.all_(o.setp("lt.s", a, 0), o.not_p(zero)))
    return finish(o, o.select(CANONICAL_NAN, out, nan), ftz, sat)
