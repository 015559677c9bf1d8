"""`qgc.machine.float_programs`: each f32 op as a program of the machine's
integer ops (what `simt-expand-float` emits), run op by op with the opcode
table's own semantics (`Evaluate`), against the `ref` engine's float32 bit
for bit: the special classes crossed with each other in every rounding mode,
with and without `.ftz` and `.sat`; random operands (a sample here, 10^6 per
operation under `make test-full`)."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_softfloat import (
    MODE,
    OPERAND,
    ROUNDINGS,
    SPECIALS,
    _in,
    ref_add,
    ref_div,
    ref_fma,
    ref_mul,
    ref_sqrt,
)

from qgc.machine import float_programs as FP
from qgc.machine.opcodes import Evaluate
from qgc.runtime import float32 as F
from qgc.runtime.ref_float import minmax_bits
from qgc.runtime.ref_int import _FLOAT_CMP

RUN = Evaluate()
INT_ROUNDINGS = {"rn": "rni", "rz": "rzi", "rm": "rmi", "rp": "rpi"}


def ref_sub(a: int, b: int, mode: str, ftz: bool) -> int:
    return ref_add(a, b ^ FP.SIGN, mode, ftz)


ARITHMETIC = {"add": (FP.add, ref_add), "sub": (FP.sub, ref_sub), "mul": (FP.mul, ref_mul),
              "fma": (FP.fma, ref_fma), "div": (FP.div, ref_div), "sqrt": (FP.sqrt, ref_sqrt)}


def _arith(name: str, operands, mode: str, ftz: bool, sat: bool = False) -> None:
    program, ref = ARITHMETIC[name]
    want = ref(*operands, mode, ftz)
    want = F.saturate(want) if sat else want
    got = program(RUN, *operands, mode, ftz, sat)
    assert got == want, (f"{name}.{mode}{'.ftz' * ftz}{'.sat' * sat}"
                         f"({', '.join(f'{x:#010x}' for x in operands)}) = {got:#010x}, "
                         f"ref {want:#010x}")


@pytest.mark.parametrize("mode, ftz", ROUNDINGS)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_special_classes_crossed(name, mode, ftz):
    for a, b in itertools.product(SPECIALS, repeat=2):
        _arith(name, (a, b), mode, ftz)


@pytest.mark.parametrize("mode, ftz", ROUNDINGS)
def test_sqrt_of_the_special_classes(mode, ftz):
    for a in SPECIALS + [0x4080_0000, 0x4000_0000, 0x4110_0000, 0x0000_0004, 0x0000_0002]:
        _arith("sqrt", (a,), mode, ftz)


@pytest.mark.parametrize("mode, ftz", ROUNDINGS)
def test_fma_special_classes_crossed(mode, ftz):
    for a, b, c in itertools.product(SPECIALS[::3], SPECIALS[1::3], SPECIALS[::2]):
        _arith("fma", (a, b, c), mode, ftz)


def test_saturation():
    for a, b in itertools.product(SPECIALS[::2], repeat=2):
        for name, (mode, ftz) in itertools.product(("add", "mul"), ROUNDINGS[::3]):
            _arith(name, (a, b), mode, ftz, sat=True)
        _arith("fma", (a, b, 0x3F00_0000), "rn", False, sat=True)


def _cancelling(a: int, b: int, tweak: int) -> tuple[int, int, int]:
    """a, b and c ≈ −a·b: the fma's sum cancels (most of) the product."""
    return a, b, F.from_float(-F.to_float(a) * F.to_float(b)) ^ tweak


@settings(max_examples=1000, deadline=None)
@given(OPERAND, OPERAND, OPERAND, MODE, st.integers(0, 3))
def test_random_operands(a, b, c, rounding, tweak):
    mode, ftz = rounding
    for name in ("add", "sub", "mul", "div"):
        _arith(name, (a, b), mode, ftz)
    _arith("fma", (a, b, c), mode, ftz)
    _arith("sqrt", (c,), mode, ftz)
    _arith("fma", _cancelling(a, b, tweak), mode, ftz)


def _compare_and_pick(a: int, b: int, ftz: bool) -> None:
    for cmp in FP.COMPARES:
        want = _FLOAT_CMP[cmp](_in(a, ftz), _in(b, ftz))
        assert FP.compare(RUN, cmp, a, b, ftz) == want, (cmp, ftz, hex(a), hex(b))
    x, y = (F.flush(a), F.flush(b)) if ftz else (a, b)
    for pick_max, keep_nan in itertools.product((False, True), repeat=2):
        assert FP.minmax(RUN, a, b, pick_max, ftz, keep_nan) == \
            minmax_bits(x, y, pick_max, keep_nan), (pick_max, keep_nan, ftz, hex(a), hex(b))
    assert FP.copysign(RUN, a, b) == (b & FP.MAG) | (a & FP.SIGN)
    assert FP.neg(RUN, a, ftz) == x ^ FP.SIGN and FP.abs_(RUN, a, ftz) == x & FP.MAG


def test_compares_and_sign_ops_of_the_special_classes():
    for (a, b), ftz in itertools.product(itertools.product(SPECIALS, repeat=2), (False, True)):
        _compare_and_pick(a, b, ftz)


def _conversions(bits: int, n: int, mode: str, ftz: bool) -> None:
    n &= 0xFFFF_FFFF
    s = n - (1 << 32) if n >> 31 else n
    assert FP.from_int(RUN, n, False, mode) == F.int_to_f32(n, mode), (hex(n), mode)
    assert FP.from_int(RUN, n, True, mode) == F.int_to_f32(s, mode), (hex(n), mode)
    x = _in(bits, ftz)
    for signed in (True, False):
        want = F.f32_to_int(x, INT_ROUNDINGS[mode], 32, signed) & 0xFFFF_FFFF
        assert FP.to_int(RUN, bits, mode, signed, ftz) == want, (hex(bits), mode, signed, ftz)
    want = F.CANONICAL_NAN if F.is_nan(bits) else \
        F.from_float(F.round_integral(x, INT_ROUNDINGS[mode]))
    assert FP.round_integral(RUN, bits, mode, ftz) == (F.flush(want) if ftz else want), \
        (hex(bits), mode, ftz)


CONVERTED = SPECIALS + [0x3F00_0000, 0x3FC0_0000, 0x4020_0000, 0xBF00_0000, 0x4B00_0001,
                        0x4EFF_FFFF, 0x4F00_0000, 0x4F7F_FFFF, 0x4F80_0000, 0xCF00_0000,
                        0xCF00_0001, 0x3EFF_FFFF, 0xBEFF_FFFF, 0x4B7F_FFFF]
INTEGERS = [0, 1, 2, 3, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0xFF_FFFF, 0x100_0001,
            0x7FFF_FFC0, 0xFFFF_FF80, 0x7FFF_FF40, 0x1FF_FFFF]


@pytest.mark.parametrize("mode, ftz", ROUNDINGS)
def test_conversions_of_the_special_classes(mode, ftz):
    for bits, n in itertools.zip_longest(CONVERTED, INTEGERS, fillvalue=5):
        _conversions(bits, n, mode, ftz)


@settings(max_examples=1000, deadline=None)
@given(OPERAND, OPERAND, st.one_of(st.integers(0, 0xFFFF_FFFF), st.integers(0, 1 << 26)), MODE)
def test_random_compares_and_conversions(a, b, n, rounding):
    mode, ftz = rounding
    _compare_and_pick(a, b, ftz)
    _conversions(a, n, mode, ftz)


# ------------------------------------------------------------ 10^6 per operation

def _operand(rng: random.Random) -> int:
    """As OPERAND: any pattern, close exponents, or a special class."""
    pick = rng.random()
    if pick < 0.4:
        return rng.getrandbits(32)
    if pick < 0.8:
        return rng.getrandbits(1) << 31 | rng.randint(100, 154) << 23 | rng.getrandbits(23)
    return rng.choice(SPECIALS)


MILLION = 1_000_000


@pytest.mark.full
@pytest.mark.parametrize("name", ["add", "sub", "mul", "fma", "fma-cancelling", "div",
                                  "sqrt"])
def test_a_million_operand_sets(name):
    rng = random.Random(name)
    for _ in range(MILLION):
        mode, ftz = rng.choice(ROUNDINGS)
        a, b, c = _operand(rng), _operand(rng), _operand(rng)
        if name == "fma-cancelling":
            _arith("fma", _cancelling(a, b, rng.getrandbits(2)), mode, ftz)
        else:
            _arith(name, {"fma": (a, b, c), "sqrt": (c,)}.get(name, (a, b)), mode, ftz)


@pytest.mark.full
def test_a_million_compares_and_conversions():
    rng = random.Random("convert")
    for _ in range(MILLION):
        mode, ftz = rng.choice(ROUNDINGS)
        a, b = _operand(rng), _operand(rng)
        _compare_and_pick(a, b, ftz)
        _conversions(a, rng.getrandbits(rng.randint(1, 32)), mode, ftz)


# ------------------------------------------------------------ binary16

def _numpy_to_f16(words: list[int]) -> list[int]:
    """numpy's float32 → float16 (round to nearest even), NaN as PTX's 0x7FFF."""
    np = pytest.importorskip("numpy")
    floats = np.array(words, dtype=np.uint32).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        halves = floats.astype(np.float16).view(np.uint16)
    return [0x7FFF if f != f else int(h) for f, h in zip(floats.tolist(), halves, strict=True)]


def test_every_half_converts_to_its_float():
    np = pytest.importorskip("numpy")
    halves = np.arange(1 << 16, dtype=np.uint16)
    widened = halves.view(np.float16).astype(np.float32).view(np.uint32).tolist()
    for h, want in zip(halves.tolist(), widened, strict=True):
        if h & 0x7C00 == 0x7C00 and h & 0x3FF:
            want = F.CANONICAL_NAN
        assert FP.from_f16(RUN, h) == want, hex(h)


def _near_halves() -> list[int]:
    """Floats around every binary16 boundary: ties, half-ulps either side,
    the subnormal range, overflow to infinity, and the special classes."""
    out = list(SPECIALS)
    for field in range(98, 145):
        for frac in (0, 0x1000, 0xFFF, 0x1001, 0x3000, 0x2000, 0x7FE000, 0x7FF000, 0x7FEFFF,
                     0x7FFFFF, 0x400000):
            out += [field << 23 | frac, FP.SIGN | field << 23 | frac]
    return out


@pytest.mark.parametrize("ftz", [False, True])
def test_floats_near_every_half_boundary_round_to_nearest_even(ftz):
    words = _near_halves()
    for a, want in zip(words, _numpy_to_f16([F.flush(w) if ftz else w for w in words]),
                       strict=True):
        assert FP.to_f16(RUN, a, ftz) == want, hex(a)


@settings(max_examples=2000, deadline=None)
@given(OPERAND)
def test_random_floats_to_half(a):
    assert FP.to_f16(RUN, a) == _numpy_to_f16([a])[0]
