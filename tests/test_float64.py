"""f64 (the promotions of everyday float code): the machine's programs
(`qgc.machine.float64_programs`, run on Python ints with the opcode table's
own semantics) against the `ref` engine's binary64 (`qgc.runtime.float64`),
and `ref` against Python's own IEEE doubles and exact rationals: the
special classes crossed with each other, then random operands (a sample
in CI, more under `make test-full`)."""

from __future__ import annotations

import math
import random
import struct
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from qgc.machine import float64_programs as P
from qgc.machine.opcodes import Evaluate
from qgc.runtime import float32 as F
from qgc.runtime import float64 as D
from qgc.runtime.ref_int import _FLOAT_CMP

MODES = ("rn", "rz", "rm", "rp")
OPS = Evaluate()

#: ±0, ±subnormal min/max, ±normal min/max, ±1 and its neighbour, halves
#: and ties, ±inf, quiet and signalling NaNs with payloads
SPECIALS = [s | sign for sign in (0, 1 << 63) for s in (
    0, 1, 0x000F_FFFF_FFFF_FFFF, 0x0010_0000_0000_0000, 0x7FEF_FFFF_FFFF_FFFF,
    0x3FF0_0000_0000_0000, 0x3FF0_0000_0000_0001, 0x3FE0_0000_0000_0000,
    0x3CA0_0000_0000_0000, 0x4340_0000_0000_0001, 0x7FF0_0000_0000_0000,
    0x7FF8_0000_0000_0001, 0x7FF4_0000_0000_0000)]
#: a few classes crossed three ways for fma
FMA_SPECIALS = [0, 1 << 63, 1, 0x0010_0000_0000_0000, 0x3FF0_0000_0000_0001,
                0xBFF0_0000_0000_0000, 0x7FEF_FFFF_FFFF_FFFF, 0xFFF0_0000_0000_0000,
                0x7FF8_0000_0000_0001]


def pair(bits: int) -> tuple[int, int]:
    return bits & 0xFFFF_FFFF, bits >> 32


def bits_of(words: tuple[int, int]) -> int:
    return (words[0] & 0xFFFF_FFFF) | (words[1] & 0xFFFF_FFFF) << 32


def random_double(rng: random.Random) -> int:
    """Near 1 (exponents that interact), anywhere, or a special."""
    pick = rng.random()
    if pick < 0.2:
        return rng.choice(SPECIALS)
    if pick < 0.6:
        return rng.getrandbits(1) << 63 | rng.randint(960, 1090) << 52 | rng.getrandbits(52)
    return rng.getrandbits(64)


def check_arithmetic(a: int, b: int, c: int, mode: str) -> None:
    x, y, z = (D.to_float(v) for v in (a, b, c))
    assert bits_of(P.fma(OPS, pair(a), pair(b), pair(c), mode)) == D.fma(x, y, z, mode), \
        ("fma", mode, hex(a), hex(b), hex(c))
    for name, program, spec in (("add", P.add, D.add), ("sub", P.sub, D.sub),
                                ("mul", P.mul, D.mul)):
        assert bits_of(program(OPS, pair(a), pair(b), mode)) == spec(x, y, mode), \
            (name, mode, hex(a), hex(b))
    if mode != "rm":    # selection's mul: fma(a, b, −0), exact but in rm
        assert bits_of(P.fma(OPS, pair(a), pair(b), (0, P.SIGN), mode)) == D.mul(x, y, mode), \
            ("mul as fma", mode, hex(a), hex(b))


@pytest.mark.parametrize("mode", MODES)
def test_arithmetic_on_the_special_classes(mode):
    for a in SPECIALS:
        for b in SPECIALS:
            check_arithmetic(a, b, b ^ (1 << 63), mode)
    for a in FMA_SPECIALS:
        for b in FMA_SPECIALS:
            for c in FMA_SPECIALS:
                check_arithmetic(a, b, c, mode)


def _random_arithmetic(seed: int, count: int) -> None:
    rng = random.Random(seed)
    for _ in range(count):
        a, b = random_double(rng), random_double(rng)
        c = random_double(rng)
        if rng.random() < 0.3:     # near cancellation: c ≈ −a·b
            product = bits_of(P.mul(OPS, pair(a), pair(b)))
            c = (product ^ 1 << 63) + rng.randint(-2, 2) & (1 << 64) - 1
        check_arithmetic(a, b, c, rng.choice(MODES))


def test_random_arithmetic():
    _random_arithmetic(0, 400)


@pytest.mark.full
def test_random_arithmetic_many():
    _random_arithmetic(1, 50_000)


@pytest.mark.parametrize("mode", MODES)
def test_division(mode):
    """A digit recurrence in a loop: the special classes crossed, quotients
    that underflow and overflow, random operands."""
    rng = random.Random(7)
    operands = [(a, b) for a in SPECIALS for b in SPECIALS] + \
        [(random_double(rng), random_double(rng)) for _ in range(150)]
    for a, b in operands:
        assert bits_of(P.div(OPS, pair(a), pair(b), mode)) == \
            D.div(D.to_float(a), D.to_float(b), mode), (mode, hex(a), hex(b))


@pytest.mark.parametrize("mode", MODES)
def test_square_root(mode):
    """Two radicand bits per trip: the special classes, exact squares, random
    operands (negative ones: NaN)."""
    rng = random.Random(8)
    squares = [D.from_float(float(rng.getrandbits(26)) ** 2 * 2.0 ** rng.randint(-600, 600))
               for _ in range(40)]
    for a in SPECIALS + squares + [random_double(rng) for _ in range(120)]:
        assert bits_of(P.sqrt(OPS, pair(a), mode)) == D.sqrt(D.to_float(a), mode), \
            (mode, hex(a))


def test_compares_and_min_max():
    rng = random.Random(2)
    operands = [(a, b) for a in SPECIALS for b in SPECIALS] + \
        [(random_double(rng), random_double(rng)) for _ in range(300)]
    for a, b in operands:
        x, y = D.to_float(a), D.to_float(b)
        for cmp, spec in _FLOAT_CMP.items():
            assert P.compare(OPS, cmp, pair(a), pair(b)) == spec(x, y), (cmp, hex(a), hex(b))
        for pick_max in (False, True):
            assert bits_of(P.minmax(OPS, pair(a), pair(b), pick_max)) == \
                D.minmax(a, b, pick_max), (pick_max, hex(a), hex(b))


def test_conversions_with_f32():
    rng = random.Random(3)
    floats = [0, 1, 0x7F_FFFF, 0x80_0000, 0x7F7F_FFFF, 0x3F80_0000, 0x7F80_0000, 0x7FC0_0001]
    floats = [f | s for f in floats for s in (0, F.SIGN)] + \
        [rng.getrandbits(32) for _ in range(300)]
    for x in floats:
        for ftz in (False, True):
            assert bits_of(P.from_f32(OPS, x, ftz)) == D.from_f32(x, ftz), hex(x)
    doubles = SPECIALS + [0x36A0_0000_0000_0000, 0x36A0_0000_0000_0001, 0x47EF_FFFF_F000_0000,
                          0x47EF_FFFF_E000_0000] + [random_double(rng) for _ in range(300)]
    for a in doubles:
        for mode in MODES:
            for ftz, sat in ((False, False), (True, False), (False, True)):
                assert P.to_f32(OPS, pair(a), mode, ftz, sat) == \
                    D.to_f32(D.to_float(a), mode, ftz, sat), (hex(a), mode, ftz, sat)


def test_conversions_with_integers():
    rng = random.Random(4)
    edges = [0, 1, -1, 2**31 - 1, -2**31, 2**32 - 1, 2**53 + 1, 2**63 - 1, -2**63, 2**64 - 1]
    for _ in range(400):
        width, signed = rng.choice((32, 64)), rng.random() < 0.5
        n = rng.choice(edges) if rng.random() < 0.3 else rng.getrandbits(rng.randint(1, width))
        n = ((n + 2**(width - 1)) % 2**width - 2**(width - 1)) if signed else n % 2**width
        words = (n & 0xFFFF_FFFF, (n >> 32) & 0xFFFF_FFFF)
        mode = rng.choice(MODES)
        assert bits_of(P.from_int(OPS, words, signed, mode)) == D.from_int(n, mode), (n, mode)
        x = rng.choice(SPECIALS + [0x41DF_FFFF_FFC0_0000, 0xC1E0_0000_0000_0000,
                                   0x43E0_0000_0000_0000, 0x43EF_FFFF_FFFF_FFFF]) \
            if rng.random() < 0.3 else random_double(rng)
        mode = rng.choice(("rni", "rzi", "rmi", "rpi"))
        got = P.to_int(OPS, pair(x), mode, width, signed)
        got = bits_of(got) if width == 64 else got[0] & 0xFFFF_FFFF
        want = D.to_int(D.to_float(x), mode, width, signed) % 2**width
        assert got == want, (hex(x), mode, width, signed)


def test_rounding_to_integral():
    """cvt.rXi.f64.f64: halves and their neighbours, ±0 from small negatives,
    values past 2^52 (integral already), the specials."""
    rng = random.Random(9)
    doubles = SPECIALS + [D.from_float(v) for v in (0.5, -0.5, 1.5, -2.5, 0.49999999999999994,
                                                    2.0 ** 52 - 0.5, 2.0 ** 52 + 1, -0.3)]
    doubles += [random_double(rng) for _ in range(200)]
    for a in doubles:
        for mode in ("rni", "rzi", "rmi", "rpi"):
            assert bits_of(P.round_integral(OPS, pair(a), mode)) == \
                D.round_integral(D.to_float(a), mode), (hex(a), mode)


# ------------------------------------------------------------------ ref itself

def test_ref_rounds_to_nearest_as_python_does():
    """Python's float operations are IEEE binary64, correctly rounded."""
    rng = random.Random(5)
    for _ in range(2000):
        x, y = (D.to_float(random_double(rng)) for _ in range(2))
        assert D.add(x, y, "rn") == D.from_float(x + y)
        assert D.mul(x, y, "rn") == D.from_float(x * y)
        if y != 0:
            assert D.div(x, y, "rn") == D.from_float(x / y)
        if x >= 0:
            assert D.sqrt(x, "rn") == D.from_float(math.sqrt(x))
        assert D.to_f32(x, "rn", False, False) == F.from_float(x)


def test_ref_directed_roundings_bracket_the_exact_value():
    """rz, rm, rp give the neighbour of the nearest double on the mode's side
    of the exact value (or the exact value)."""
    rng = random.Random(6)
    for _ in range(1000):
        a, b, c = (D.to_float(random_double(rng)) for _ in range(3))
        if not all(math.isfinite(v) for v in (a, b, c)):
            continue
        exact = Fraction(a) * Fraction(b) + Fraction(c)
        down, up = D.to_float(D.fma(a, b, c, "rm")), D.to_float(D.fma(a, b, c, "rp"))
        if math.isinf(down) or math.isinf(up):
            continue
        assert Fraction(down) <= exact <= Fraction(up)
        assert down == up or math.nextafter(down, math.inf) == up
        toward = D.to_float(D.fma(a, b, c, "rz"))
        assert toward == (down if exact >= 0 else up)
        assert D.fma(a, b, c, "rn") == D.from_float(float(exact)) or exact == 0


def test_the_canonical_nan():
    nan = D.fma(math.inf, 0.0, 1.0, "rn")
    assert nan == D.CANONICAL_NAN == 0x7FFF_FFFF_FFFF_FFFF
    assert D.to_f32(D.to_float(struct.unpack("<Q", struct.pack("<d", math.nan))[0]), "rn",
                    False, False) == F.CANONICAL_NAN


# ------------------------------------------------------------------ kernels

IDIOMS = Path(__file__).parent / "inputs" / "f64_idioms.ptx"
ROUNDING_INPUTS = [3.0, -7.5, -0.25, 1e30, 0.5, -0.5, 2.5, -1e-40, 5.0, 7.0, -3.0, 0.0,
                   1.5, -2.5, 4e9, -123.375]
QUOTIENT_INPUTS = [1.0, -7.5, 0.0, 3e-40, 1e38, 0.1, -0.0, 2.0, 1e-3, -5.5, 7.0, 3.0, -1e-30,
                   0.3, 12.0, -2.0]
DIVISORS = [3, 0, -5, 7, 1, -1, 0, 100, 2**31 - 1, -2**31, 9, 10, -3, 6, 1, 2]


def _round_half_away(v: float) -> float:
    return math.copysign(math.floor(abs(v) + 0.5), v)


def _saturated(v: float) -> int:
    return min(max(int(v), -2**31), 2**31 - 1)


def rounding_model(xs: list[float]) -> list[list]:
    """floor, ceil, trunc, rint of x·0.5 (every sum exact here), round()."""
    ys, qs = [], []
    for x in xs:
        h = float(np.float32(x)) * 0.5
        ys.append(float(np.float32(math.floor(h) + math.ceil(h) * 0.25 + math.trunc(h)
                                   + round(h))))
        qs.append(_saturated(_round_half_away(h * 3.0)))
    return [ys, qs]


def quotients_model(xs: list[float], ks: list[int]) -> list[float]:
    """Each op an IEEE double, the sum in source order, rounded to f32 once."""
    out = []
    with np.errstate(all="ignore"):
        for x, k in zip(xs, ks, strict=True):
            x, k = np.float64(np.float32(x)), np.float64(k)
            total = x / np.float64(3.0) + k / x + np.float64(1.0) / k + np.sqrt(x * 3.0)
            out.append(float(np.float32(total)))
    return out


def _idiom_runs(name: str, args: list) -> tuple[list, list]:
    """(ref's buffers, the simt engine's after every tensor-stage pass before
    convert-simt-to-tensor: the f64 programs expanded, blocks formed)."""
    from qgc import driver
    from qgc.context import make_context
    from qgc.frontend import parse_ptx
    from qgc.pipeline import stage, up_to
    from qgc.runtime.launch import load_launch
    from qgc.runtime.ref import run_ref
    from qgc.runtime.simt_engine import run_simt
    launch = load_launch({"kernel": name, "grid": [1, 1, 1], "block": [16, 1, 1], "args": args})
    text = IDIOMS.read_text()
    want = run_ref(parse_ptx(text, IDIOMS.name), launch).buffers
    module = parse_ptx(text, IDIOMS.name)
    driver.apply_for_launch(make_context(), module,
                            up_to(stage("tensor"), "convert-simt-to-tensor"), launch)
    return want, run_simt(module, launch).buffers


def _f32_bits(values: list[float]) -> list[bytes]:
    return [struct.pack("<f", v) if v == v else b"nan" for v in values]


def test_rounding_idioms_on_ref_and_the_machine():
    ref, machine = _idiom_runs("rounding", [
        {"type": "f32*", "data": ROUNDING_INPUTS}, {"type": "s32*", "data": [0] * 16},
        {"type": "s32", "value": 16}])
    ys, qs = rounding_model(ROUNDING_INPUTS)
    assert _f32_bits(ref[0]) == _f32_bits(ys) and ref[1] == qs
    assert machine == ref


def test_division_and_root_idioms_on_ref_and_the_machine():
    ref, machine = _idiom_runs("quotients", [
        {"type": "f32*", "data": QUOTIENT_INPUTS}, {"type": "s32*", "data": DIVISORS},
        {"type": "s32", "value": 16}])
    assert _f32_bits(ref[0]) == _f32_bits(quotients_model(QUOTIENT_INPUTS, DIVISORS))
    assert _f32_bits(machine[0]) == _f32_bits(ref[0])
