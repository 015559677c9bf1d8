"""`qgc.machine.softfloat` (the f32 steps the machine will take) against
the `ref` engine's float32 (`qgc.runtime.float32`), bit for bit: the special
classes crossed with each other in every rounding mode, with and without
`.ftz`, and random operands (more under `make test-full`)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qgc.machine import softfloat as S
from qgc.runtime import float32 as F

#: ±0, the subnormal extremes, the normal extremes, ±1 and neighbours, ties
#: for rounding (1 + 2^-24, 2^24 + 1 ...), ±inf and NaNs with payloads
SPECIALS = [0x0000_0000, 0x0000_0001, 0x007F_FFFF, 0x0080_0000, 0x0080_0001, 0x7F7F_FFFF,
            0x7F7F_FFFE, 0x3F80_0000, 0x3F80_0001, 0x3F7F_FFFF, 0x3380_0000, 0x3400_0000,
            0x4B80_0000, 0x4B80_0001, 0x4040_0000, 0x3FC0_0000, 0x7F80_0000, 0x7FC0_0000,
            0x7F80_0001, 0x7FFF_FFFF]
SPECIALS += [b | S.SIGN for b in SPECIALS]
ROUNDINGS = [(mode, ftz) for mode in S.MODES for ftz in (False, True)]


def _in(bits: int, ftz: bool) -> float:
    return F.to_float(F.flush(bits) if ftz else bits)


def _out(bits: int, ftz: bool) -> int:
    return F.flush(bits) if ftz else bits


def ref_add(a: int, b: int, mode: str, ftz: bool) -> int:
    x, y = _in(a, ftz), _in(b, ftz)
    return _out(F.from_float(x + y) if mode == "rn" else F.add_exact(x, y, mode), ftz)


def ref_mul(a: int, b: int, mode: str, ftz: bool) -> int:
    x, y = _in(a, ftz), _in(b, ftz)
    return _out(F.from_float(x * y) if mode == "rn" else F.mul_exact(x, y, mode), ftz)


def ref_fma(a: int, b: int, c: int, mode: str, ftz: bool) -> int:
    return _out(F.fma_exact(_in(a, ftz), _in(b, ftz), _in(c, ftz), mode), ftz)


def _check(op, ref, *operands, mode: str, ftz: bool) -> None:
    got, want = op(*operands, mode, ftz), ref(*operands, mode, ftz)
    assert got == want, (f"{op.__name__}.{mode}{'.ftz' if ftz else ''}"
                         f"({', '.join(f'{x:#010x}' for x in operands)}) = {got:#010x}, "
                         f"ref {want:#010x}")


@pytest.mark.parametrize("mode, ftz", ROUNDINGS)
@pytest.mark.parametrize("op, ref", [(S.add, ref_add), (S.mul, ref_mul)], ids=["add", "mul"])
def test_special_classes_crossed(op, ref, mode, ftz):
    for a, b in itertools.product(SPECIALS, repeat=2):
        _check(op, ref, a, b, mode=mode, ftz=ftz)


@pytest.mark.parametrize("mode, ftz", ROUNDINGS)
def test_fma_special_classes_crossed(mode, ftz):
    for a, b, c in itertools.product(SPECIALS[::3], SPECIALS[1::3], SPECIALS[::2]):
        _check(S.fma, ref_fma, a, b, c, mode=mode, ftz=ftz)


def test_sub_is_add_of_the_negation():
    assert S.sub(0x3F80_0000, 0x3F80_0000) == 0
    assert S.sub(0x3F80_0000, 0x3F80_0000, "rm") == S.SIGN
    assert S.sub(0x4040_0000, 0x3F80_0000) == 0x4000_0000


#: any pattern; near patterns (close exponents: cancellation, ties)
BITS = st.integers(0, 0xFFFF_FFFF)
NEAR = st.tuples(st.integers(0, 1), st.integers(100, 154), st.integers(0, 0x7F_FFFF)).map(
    lambda t: t[0] << 31 | t[1] << 23 | t[2])
OPERAND = st.one_of(BITS, NEAR, st.sampled_from(SPECIALS))
MODE = st.sampled_from(ROUNDINGS)


@settings(max_examples=3000, deadline=None)
@given(OPERAND, OPERAND, MODE)
def test_random_add_and_mul(a, b, rounding):
    mode, ftz = rounding
    _check(S.add, ref_add, a, b, mode=mode, ftz=ftz)
    _check(S.mul, ref_mul, a, b, mode=mode, ftz=ftz)


@settings(max_examples=3000, deadline=None)
@given(OPERAND, OPERAND, OPERAND, MODE)
def test_random_fma(a, b, c, rounding):
    mode, ftz = rounding
    _check(S.fma, ref_fma, a, b, c, mode=mode, ftz=ftz)


@pytest.mark.full
@settings(max_examples=200_000, deadline=None)
@given(OPERAND, OPERAND, OPERAND, MODE)
def test_many_random_operands(a, b, c, rounding):
    mode, ftz = rounding
    _check(S.add, ref_add, a, b, mode=mode, ftz=ftz)
    _check(S.mul, ref_mul, a, b, mode=mode, ftz=ftz)
    _check(S.fma, ref_fma, a, b, c, mode=mode, ftz=ftz)
    _check(S.div, ref_div, a, b, mode=mode, ftz=ftz)
    _check(S.sqrt, ref_sqrt, c, mode=mode, ftz=ftz)


# ------------------------------------------------------------ compares, conversions

def test_the_compares_are_the_ref_engines():
    from qgc.runtime.ref_int import _FLOAT_CMP
    assert set(_FLOAT_CMP) == set(S.COMPARES)
    for cmp, ftz in itertools.product(S.COMPARES, (False, True)):
        for a, b in itertools.product(SPECIALS, repeat=2):
            want = _FLOAT_CMP[cmp](_in(a, ftz), _in(b, ftz))
            assert S.compare(cmp, a, b, ftz) == want, (cmp, ftz, hex(a), hex(b))


INT_ROUNDINGS = {"rn": "rni", "rz": "rzi", "rm": "rmi", "rp": "rpi"}


def _check_conversions(bits: int, n: int, mode: str, ftz: bool) -> None:
    assert S.from_int(n, mode) == F.int_to_f32(n, mode), (n, mode)
    x = _in(bits, ftz)
    for width, signed in ((32, True), (32, False), (64, True), (64, False)):
        assert S.to_int(bits, mode, width, signed, ftz) == \
            F.f32_to_int(x, INT_ROUNDINGS[mode], width, signed), (hex(bits), mode, width, signed)
    want = _out(F.from_float(F.round_integral(x, INT_ROUNDINGS[mode])), ftz)
    assert _out(S.round_integral(bits, mode, ftz), ftz) == want, (hex(bits), mode, ftz)


INTEGERS = st.one_of(st.integers(-(1 << 63), (1 << 64) - 1), st.integers(-(1 << 26), 1 << 26))


@pytest.mark.parametrize("mode, ftz", ROUNDINGS)
def test_conversions_of_the_special_classes(mode, ftz):
    for bits in SPECIALS + [0x3F00_0000, 0x3FC0_0000, 0x4020_0000, 0xBF00_0000, 0x4B00_0001,
                            0x5F00_0000, 0x5F80_0000, 0x4F00_0000, 0x4F80_0000, 0xCF00_0000]:
        for n in (0, 1, -1, (1 << 24) + 1, -(1 << 24) - 3, (1 << 63) - 1, -(1 << 63),
                  (1 << 64) - 1, (1 << 31) - 1):
            _check_conversions(bits, n, mode, ftz)


@settings(max_examples=3000, deadline=None)
@given(OPERAND, INTEGERS, MODE)
def test_random_conversions(bits, n, rounding):
    mode, ftz = rounding
    _check_conversions(bits, n, mode, ftz)


def ref_div(a: int, b: int, mode: str, ftz: bool) -> int:
    return _out(F.div_exact(_in(a, ftz), _in(b, ftz), mode), ftz)


def ref_sqrt(a: int, mode: str, ftz: bool) -> int:
    return _out(F.sqrt_exact(_in(a, ftz), mode), ftz)


@pytest.mark.parametrize("mode, ftz", ROUNDINGS)
def test_div_and_sqrt_of_the_special_classes(mode, ftz):
    for a, b in itertools.product(SPECIALS, repeat=2):
        _check(S.div, ref_div, a, b, mode=mode, ftz=ftz)
    for a in SPECIALS + [0x4080_0000, 0x4000_0000, 0x4110_0000, 0x0000_0004, 0x0000_0002]:
        _check(S.sqrt, ref_sqrt, a, mode=mode, ftz=ftz)


@settings(max_examples=3000, deadline=None)
@given(OPERAND, OPERAND, MODE)
def test_random_div_and_sqrt(a, b, rounding):
    mode, ftz = rounding
    _check(S.div, ref_div, a, b, mode=mode, ftz=ftz)
    _check(S.sqrt, ref_sqrt, a, mode=mode, ftz=ftz)


def test_sign_ops_and_min_max_are_the_ref_engines():
    """neg, abs, copysign, and min/max with PTX's NaN and signed-zero rules
    (the ref engine's `minmax_bits`)."""
    from qgc.runtime.ref_float import minmax_bits
    for a, b in itertools.product(SPECIALS, repeat=2):
        assert S.copysign(a, b) == (b & 0x7FFF_FFFF) | (a & S.SIGN)
        for ftz, keep_nan in itertools.product((False, True), repeat=2):
            x, y = (F.flush(a), F.flush(b)) if ftz else (a, b)
            for pick_max in (False, True):
                want = minmax_bits(x, y, pick_max, keep_nan)
                assert S.minmax(a, b, pick_max, ftz, keep_nan) == want, (hex(a), hex(b))
    for a in SPECIALS:
        assert S.neg(a) == a ^ S.SIGN and S.abs_(a) == a & 0x7FFF_FFFF
        assert S.neg(a, True) == F.flush(a) ^ S.SIGN
