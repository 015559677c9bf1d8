"""The `.approx` (and `div.full`) f32 operations as float32 algorithms: what
`ref` computes and the machine runs, bit for bit by construction (issue 23).

A GPU's special-function unit computes these with tables and quadratic
interpolation whose exact results NVIDIA does not publish; a correctly
rounded transcendental is out of reach of a cheap circuit. qgc therefore
*defines* each one as the algorithm below, in f32 operations rounded to
nearest (`fma.rn`, `mul.rn`, ...) and integer operations on the patterns,
within the PTX ISA's stated error bound (docs/machine.md gives the measured
errors). Each program is written against `IntOps`: the machine expands the
f32 operations it uses like any other (`simt-expand-float` expands these
first), and `ref` runs the same program on its own float32 arithmetic
(`qgc.runtime.ref_float`), so the two still check each other's operations.

- `ex2`: x clamped to [−200, 254], i = rni(x), f = x − i ∈ [−½, ½] (exact),
  2^f by a degree-7 polynomial (Horner, fma), times 2^⌊i/2⌋ (exact) and
  2^(i − ⌊i/2⌋) (one rounding, so subnormal results round once).
- `lg2`: x = m · 2^e with m ∈ [√½, √2) (a subnormal scaled by 2^23 first),
  s = (m − 1)/(m + 1), log2 m = s · Q(s²), Q the atanh series' first five
  terms times 2/ln 2, the result fma(s, Q, e).
- `sin`, `cos`: k = rni(x · 2/π), r = x − k·π/2 in two fma steps (π/2 split
  in two floats), degree-7/8 polynomials for sin r and cos r on [−π/4, π/4],
  the quadrant k mod 4 choosing and negating; sin x = x below 2^-12.
- `tanh`: x itself below 2^-7 in magnitude (x³/3 is 2^-13.6 of it there),
  else ±(1 − 2/(2^(2|x|·log2 e) + 1))
  with `ex2` above.
- `rcp`, `sqrt`: the correctly rounded `rcp.rn`, `sqrt.rn`; `rsqrt`:
  rcp.rn(sqrt.rn(x)); `div.approx`: a · rcp.rn(b), as the ISA describes it;
  `div.full`: `div.rn`.

`.ftz` flushes the operand and the result.
"""

from __future__ import annotations

from qgc.machine.float_programs import (
    CANONICAL_NAN,
    FRAC,
    INF,
    MAG,
    ONE,
    SIGN,
    IntOps,
    finish,
    flush_in,
)

#: 2^f on [−½, ½], least squares at Chebyshev nodes, relative weight (c0 = 1)
EX2 = (0x3F80_0000, 0x3F31_7218, 0x3E75_FDF0, 0x3D63_5845, 0x3C1D_94EE, 0x3AAE_C550,
       0x3922_34EA, 0x377E_F082)
#: 2/ln 2 · 1/(2k + 1), k = 0..4: log2 m = s · Σ c_k s^2k
LG2 = (0x4038_AA3B, 0x3F76_384F, 0x3F13_BB63, 0x3ED3_0BB1, 0x3EA4_258A)
#: sin r = r + r³ (s0 + s1 r² + s2 r⁴); cos r = 1 + r² (c0 + c1 r² + c2 r⁴ + c3 r⁶)
SIN = (0xBE2A_AAA3, 0x3C08_83CC, 0xB94C_AF2D)
COS = (0xBF00_0000, 0x3D2A_AA9F, 0xBAB6_0466, 0x37CC_A1F1)
TWO_OVER_PI, HALF_PI, HALF_PI_LO = 0x3F22_F983, 0x3FC9_0FDB, 0xB33B_BD2E
LOG2_E, SQRT_2, TWO = 0x3FB8_AA3B, 0x3FB5_04F3, 0x4000_0000


def _f(o: IntOps, name: str, *srcs):
    """An f32 operation, rounded to nearest."""
    return o.alu(name, *srcs)


def _horner(o: IntOps, x, coefficients):
    """c0 + x (c1 + x (c2 + ...)), one fma per coefficient."""
    acc = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        acc = _f(o, "fma.rn.f32", x, acc, c)
    return acc


def _nan(o: IntOps, x):
    return o.setp("gt.u", o.and_(x, MAG), INF)


def ex2(o: IntOps, x, ftz: bool = False):
    if ftz:
        x = flush_in(o, x)
    clamped = _f(o, "max.f32", _f(o, "min.f32", x, 0x437E_0000), 0xC348_0000)
    i = _f(o, "cvt.rni.s32.f32", clamped)
    frac = _f(o, "sub.rn.f32", clamped, _f(o, "cvt.rn.f32.s32", i))
    p = _horner(o, frac, EX2)
    low = o.sar(i, 1)
    p = _f(o, "mul.rn.f32", p, o.shl(o.add(low, 127), 23))
    p = _f(o, "mul.rn.f32", p, o.shl(o.add(o.sub(i, low), 127), 23))
    return finish(o, o.select(CANONICAL_NAN, p, _nan(o, x)), ftz, False)


def lg2(o: IntOps, x, ftz: bool = False):
    if ftz:
        x = flush_in(o, x)
    tiny = o.setp("lt.u", x, 0x80_0000)                 # +0 or a positive subnormal
    scaled = o.select(_f(o, "mul.rn.f32", x, 0x4B00_0000), x, tiny)
    e = o.sub(o.shr(o.and_(scaled, MAG), 23), o.select(150, 127, tiny))
    m = o.or_(o.and_(scaled, FRAC), ONE)
    big = o.setp("ge.u", m, SQRT_2)
    m = o.select(o.sub(m, 0x80_0000), m, big)
    e = o.select(o.add(e, 1), e, big)
    s = _f(o, "div.rn.f32", _f(o, "sub.rn.f32", m, ONE), _f(o, "add.rn.f32", m, ONE))
    q = _horner(o, _f(o, "mul.rn.f32", s, s), LG2)
    out = _f(o, "fma.rn.f32", s, q, _f(o, "cvt.rn.f32.s32", e))
    mag = o.and_(x, MAG)
    out = o.select(0xFF80_0000, out, o.setp("eq", mag, 0))
    out = o.select(INF, out, o.setp("eq", x, INF))
    nan = o.any_(_nan(o, x), o.all_(o.setp("lt.s", x, 0), o.setp("ne", mag, 0)))
    return finish(o, o.select(CANONICAL_NAN, out, nan), ftz, False)


def _sin_cos(o: IntOps, x, ftz: bool, cosine: bool):
    if ftz:
        x = flush_in(o, x)
    k = _f(o, "cvt.rni.s32.f32", _f(o, "mul.rn.f32", x, TWO_OVER_PI))
    minus_k = o.xor(_f(o, "cvt.rn.f32.s32", k), SIGN)
    r = _f(o, "fma.rn.f32", minus_k, HALF_PI, x)
    r = _f(o, "fma.rn.f32", minus_k, HALF_PI_LO, r)
    z = _f(o, "mul.rn.f32", r, r)
    sine = _f(o, "fma.rn.f32", r, _f(o, "mul.rn.f32", _horner(o, z, SIN), z), r)
    cos = _f(o, "fma.rn.f32", z, _horner(o, z, COS), ONE)
    quadrant = o.add(k, 1) if cosine else k
    out = o.select(cos, sine, o.setp("ne", o.and_(quadrant, 1), 0))
    out = o.select(o.xor(out, SIGN), out, o.setp("ne", o.and_(quadrant, 2), 0))
    if not cosine:              # sin x = x below 2^-12, ±0 included
        out = o.select(x, out, o.setp("lt.u", o.and_(x, MAG), 0x3980_0000))
    return finish(o, o.select(CANONICAL_NAN, out, o.setp("ge.u", o.and_(x, MAG), INF)),
                  ftz, False)


def sin(o: IntOps, x, ftz: bool = False):
    return _sin_cos(o, x, ftz, False)


def cos(o: IntOps, x, ftz: bool = False):
    return _sin_cos(o, x, ftz, True)


def tanh(o: IntOps, x, ftz: bool = False):
    if ftz:
        x = flush_in(o, x)
    mag = o.and_(x, MAG)
    e = ex2(o, _f(o, "mul.rn.f32", _f(o, "add.rn.f32", mag, mag), LOG2_E))
    t = _f(o, "sub.rn.f32", ONE, _f(o, "div.rn.f32", TWO, _f(o, "add.rn.f32", e, ONE)))
    out = o.select(x, o.or_(t, o.and_(x, SIGN)), o.setp("lt.u", mag, 0x3C00_0000))
    return finish(o, o.select(CANONICAL_NAN, out, _nan(o, x)), ftz, False)


def rcp(o: IntOps, x, ftz: bool = False):
    return _f(o, f"rcp.rn{'.ftz' * ftz}.f32", x)


def sqrt(o: IntOps, x, ftz: bool = False):
    return _f(o, f"sqrt.rn{'.ftz' * ftz}.f32", x)


def rsqrt(o: IntOps, x, ftz: bool = False):
    return _f(o, f"rcp.rn{'.ftz' * ftz}.f32", _f(o, f"sqrt.rn{'.ftz' * ftz}.f32", x))


def div_approx(o: IntOps, a, b, ftz: bool = False):
    flag = ".ftz" * ftz
    return _f(o, f"mul.rn{flag}.f32", a, _f(o, f"rcp.rn{flag}.f32", b))


def div_full(o: IntOps, a, b, ftz: bool = False):
    return _f(o, f"div.rn{'.ftz' * ftz}.f32", a, b)


#: PTX base → (the program, sources): `base.approx{.ftz}.f32` (`div.full`
#: for div_full)
UNARY = {"ex2": ex2, "lg2": lg2, "sin": sin, "cos": cos, "tanh": tanh, "rcp": rcp,
         "sqrt": sqrt, "rsqrt": rsqrt}
