"""Conversions between f32 and 64-bit integers (`cvt.RND.f32.{s,u}64`,
`cvt.RNDi.{s,u}64.f32`), which selection builds from pair arithmetic around
a 32-bit f32 conversion: every rounding, `.sat` and `.ftz`, on the special
classes and on hypothesis-drawn values, against an oracle written here with
Python integers (`ref`, `simt` with and without `simt-expand-float`, and the
tensor level on the special classes)."""

from __future__ import annotations

import math
import struct
from functools import cache

import pytest
from test_softfloat import SPECIALS

from qgc import driver
from qgc.context import make_context
from qgc.dialects import tensor
from qgc.frontend import parse_ptx
from qgc.machine.abi import pick_kernel
from qgc.passes.convert_simt_to_tensor import vocabulary_of
from qgc.pipeline import stage, up_to
from qgc.runtime.launch import load_launch
from qgc.runtime.ref import run_ref
from qgc.runtime.simt_engine import run_simt
from qgc.runtime.trace import run_trace, tensor_stepper

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

M64 = (1 << 64) - 1
#: (cvt, source) to f32: the source is the s64 (%rd20) or the u64 (%rd21)
TO_FLOAT = [("rn.f32.s64", 20), ("rz.f32.s64", 20), ("rm.f32.s64", 20), ("rp.f32.s64", 20),
            ("rn.f32.u64", 21), ("rz.f32.u64", 21), ("rm.f32.u64", 21), ("rp.sat.f32.s64", 20)]
TO_INT = ["rzi.s64.f32", "rni.s64.f32", "rmi.s64.f32", "rpi.s64.f32", "rzi.u64.f32",
          "rni.ftz.u64.f32", "rmi.u64.f32", "rpi.sat.u64.f32"]
THREADS = 4


def _kernel(to_float=TO_FLOAT, to_int=TO_INT) -> str:
    lines = [".version 8.0", ".target sm_75", ".address_size 64", "",
             ".visible .entry k(.param .u64 p_s, .param .u64 p_u, .param .u64 p_f, "
             ".param .u64 p_of, .param .u64 p_oi)", "{",
             "\t.reg .b32 %r<4>;", "\t.reg .f32 %f<20>;", "\t.reg .b64 %rd<60>;"]
    for i, p in enumerate(("p_s", "p_u", "p_f", "p_of", "p_oi")):
        lines += [f"\tld.param.u64 %rd{i + 1}, [{p}];",
                  f"\tcvta.to.global.u64 %rd{i + 6}, %rd{i + 1};"]
    lines += ["\tmov.u32 %r1, %tid.x;",
              "\tmul.wide.u32 %rd11, %r1, 8;", "\tadd.s64 %rd12, %rd6, %rd11;",
              "\tld.global.s64 %rd20, [%rd12];", "\tadd.s64 %rd13, %rd7, %rd11;",
              "\tld.global.u64 %rd21, [%rd13];",
              "\tmul.wide.u32 %rd14, %r1, 4;", "\tadd.s64 %rd15, %rd8, %rd14;",
              "\tld.global.f32 %f1, [%rd15];",
              f"\tmul.wide.u32 %rd16, %r1, {4 * len(to_float)};", "\tadd.s64 %rd17, %rd9, %rd16;",
              f"\tmul.wide.u32 %rd18, %r1, {8 * len(to_int)};", "\tadd.s64 %rd19, %rd10, %rd18;"]
    for k, (cvt, src) in enumerate(to_float):
        lines += [f"\tcvt.{cvt} %f{k + 2}, %rd{src};", f"\tst.global.f32 [%rd17+{4 * k}], %f{k + 2};"]
    for k, cvt in enumerate(to_int):
        lines += [f"\tcvt.{cvt} %rd{30 + k}, %f1;", f"\tst.global.u64 [%rd19+{8 * k}], %rd{30 + k};"]
    return "\n".join(lines + ["\tret;", "}", ""])


KERNEL = _kernel()


# ------------------------------------------------------------------ the oracle

def _round(q: int, r: int, d: int, negative: bool, mode: str) -> int:
    """q + r/d (0 <= r < d) rounded to an integer in `mode`, as a magnitude
    whose sign is `negative`."""
    up = {"rn": 2 * r > d or 2 * r == d and q & 1, "rz": False,
          "rm": negative and r > 0, "rp": not negative and r > 0}[mode]
    return q + up


def _f32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def int_to_f32(n: int, mode: str, sat: bool = False) -> int:
    shift = max(abs(n).bit_length() - 24, 0)
    q, r = divmod(abs(n), 1 << shift)
    value = math.ldexp(_round(q, r, 1 << shift, n < 0, mode), shift) * (-1 if n < 0 else 1)
    if sat:
        value = min(max(value, 0.0), 1.0)
    return _f32(value)


def f32_to_int(bits: int, mode: str, signed: bool, ftz: bool = False) -> int:
    if bits & 0x7F80_0000 == 0x7F80_0000 and bits & 0x7F_FFFF:
        return 0
    if ftz and bits & 0x7F80_0000 == 0:
        bits &= 0x8000_0000
    x = struct.unpack("<f", struct.pack("<I", bits))[0]
    lo, hi = (-(1 << 63), (1 << 63) - 1) if signed else (0, M64)
    if math.isinf(x):
        return (hi if x > 0 else lo) & M64
    num, den = x.as_integer_ratio()
    q, r = divmod(abs(num), den)
    n = _round(q, r, den, x < 0, mode) * (-1 if x < 0 else 1)
    return min(max(n, lo), hi) & M64


def expected(s: list[int], u: list[int], f: list[int], to_float=TO_FLOAT,
             to_int=TO_INT) -> list[list[int]]:
    floats, ints = [], []
    for t in range(THREADS):
        for cvt, src in to_float:
            mode, *flags, _, _ = cvt.split(".")
            n = s[t] if src == 20 else u[t]
            floats.append(int_to_f32(n, mode, "sat" in flags))
        for cvt in to_int:
            mode, *flags, it, _ = cvt.split(".")
            ints.append(f32_to_int(f[t], mode[:2], it == "s64", "ftz" in flags))
    return [floats, ints]


# ------------------------------------------------------------------ the runs

def _launch(s: list[int], u: list[int], f: list[int], to_float=TO_FLOAT, to_int=TO_INT):
    return load_launch({"kernel": "k", "grid": [1, 1, 1], "block": [THREADS, 1, 1], "args": [
        {"type": "s64*", "data": s}, {"type": "u64*", "data": u}, {"type": "u32*", "data": f},
        {"type": "u32*", "data": [0] * (THREADS * len(to_float))},
        {"type": "u64*", "data": [0] * (THREADS * len(to_int))}]})


def _module(passes):
    """The kernel through `passes`, its memory sized to the launch (every
    launch here has the same shape)."""
    module = parse_ptx(KERNEL, "cvt64.ptx")
    driver.apply_for_launch(make_context(), module, passes, _launch([0] * 4, [0] * 4, [0] * 4))
    return module


@cache
def _machines():
    """The simt stage, and the tensor stage's machine passes (f32 expanded)."""
    return _module(stage("simt")), _module(up_to(stage("tensor"), "convert-simt-to-tensor"))


def _runs(s, u, f) -> list:
    launch = _launch(s, u, f)
    ref = run_ref(parse_ptx(KERNEL, "cvt64.ptx"), launch).buffers
    return [ref] + [run_simt(m, launch).buffers for m in _machines()]


S64 = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1),
                st.integers(0, 63).flatmap(lambda k: st.integers(-(1 << k), 1 << k)))
U64 = st.one_of(st.integers(0, M64), st.integers(0, 63).map(lambda k: (1 << k) + 1))
F32 = st.one_of(st.sampled_from(SPECIALS), st.integers(0, 0xFFFF_FFFF),
                st.tuples(st.integers(0, 1), st.integers(120, 192), st.integers(0, 0x7F_FFFF))
                .map(lambda t: t[0] << 31 | t[1] << 23 | t[2]))


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(st.lists(S64, min_size=THREADS, max_size=THREADS),
                  st.lists(U64, min_size=THREADS, max_size=THREADS),
                  st.lists(F32, min_size=THREADS, max_size=THREADS))
def test_conversions_with_64_bit_integers_are_exact(s, u, f):
    want = expected(s, u, f)
    for got in _runs(s, u, f):
        assert got[3:] == want, (s, u, f)


EDGES_S = [0, 1, -1, (1 << 24) + 1, -(1 << 24) - 3, (1 << 63) - 1, -(1 << 63), (1 << 40) + 7]
EDGES_U = [0, M64, (1 << 63) + 1, (1 << 32) - 1, 1 << 32, (1 << 25) + 1, 3 << 62, 12345]
EDGES_F = [0x5F00_0000, 0xDF00_0000, 0x5F80_0000, 0x5F7F_FFFF, 0xBF00_0000, 0x3FC0_0000,
           0x7FC0_0001, 0x8000_0001]


def test_the_special_classes_on_every_engine():
    """Edges: ±2^63, 2^64, ties, NaN, subnormals."""
    for i in range(0, len(EDGES_S), THREADS):
        s, u, f = (edges[i:i + THREADS] for edges in (EDGES_S, EDGES_U, EDGES_F))
        want = expected(s, u, f)
        for got in _runs(s, u, f):
            assert got[3:] == want


@pytest.mark.parametrize("to_float, to_int", [
    pytest.param(TO_FLOAT[3:5], TO_INT[5:6], id="some"),
    pytest.param(TO_FLOAT, TO_INT, id="all", marks=pytest.mark.full)])
def test_the_special_classes_at_the_tensor_level(to_float, to_int):
    """The tensor level on the edges (every conversion: `make test-full`,
    77 machine blocks, about 3 minutes)."""
    s, u, f = (edges[:THREADS] for edges in (EDGES_S, EDGES_U, EDGES_F))
    launch = _launch(s, u, f, to_float, to_int)
    module = parse_ptx(_kernel(to_float, to_int), "cvt64.ptx")
    driver.apply_for_launch(make_context(), module,
                            up_to(stage("tensor"), "tensor-schedule-layers"), launch)
    (program,) = tensor.programs_of(module)
    vocab = vocabulary_of(program)
    result = run_trace(pick_kernel(module, None), vocab, launch, tensor_stepper(program, vocab))
    assert result.buffers[3:] == expected(s, u, f, to_float, to_int)


# ------------------------------------------------------------ 8- and 16-bit integers

NARROW = """.version 8.0
.target sm_75
.address_size 64

.visible .entry k(.param .u64 p_h, .param .u64 p_f, .param .u64 p_of, .param .u64 p_oh)
{
    .reg .b16 %rs<8>;
    .reg .b32 %r<2>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [p_h];
    ld.param.u64 %rd2, [p_f];
    ld.param.u64 %rd3, [p_of];
    ld.param.u64 %rd4, [p_oh];
    cvta.to.global.u64 %rd5, %rd1;
    cvta.to.global.u64 %rd6, %rd2;
    cvta.to.global.u64 %rd7, %rd3;
    cvta.to.global.u64 %rd8, %rd4;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd9, %r1, 2;
    add.s64 %rd10, %rd5, %rd9;
    ld.global.u16 %rs1, [%rd10];
    mul.wide.u32 %rd11, %r1, 4;
    add.s64 %rd12, %rd6, %rd11;
    ld.global.f32 %f1, [%rd12];
    cvt.rn.f32.s16 %f2, %rs1;
    cvt.rz.f32.u16 %f3, %rs1;
    mul.wide.u32 %rd13, %r1, 8;
    add.s64 %rd14, %rd7, %rd13;
    st.global.f32 [%rd14], %f2;
    st.global.f32 [%rd14+4], %f3;
    cvt.rni.s16.f32 %rs2, %f1;
    cvt.rzi.u16.f32 %rs3, %f1;
    cvt.rmi.s8.f32 %rs4, %f1;
    cvt.rpi.u8.f32 %rs5, %f1;
    add.s64 %rd15, %rd8, %rd13;
    st.global.u16 [%rd15], %rs2;
    st.global.u16 [%rd15+2], %rs3;
    st.global.u16 [%rd15+4], %rs4;
    st.global.u16 [%rd15+6], %rs5;
    ret;
}
"""


def _narrow_expected(halves: list[int], floats: list[int]) -> list[list[int]]:
    converted, rounded = [], []
    for h, f in zip(halves, floats, strict=True):
        signed = h - (1 << 16) if h >> 15 else h
        converted += [int_to_f32(signed, "rn"), int_to_f32(h, "rz")]
        for mode, bits, is_signed in (("rn", 16, True), ("rz", 16, False), ("rm", 8, True),
                                      ("rp", 8, False)):
            n = f32_to_int(f, mode, True)
            n = n - (1 << 64) if n >> 63 else n
            lo, hi = (-(1 << bits - 1), (1 << bits - 1) - 1) if is_signed else (0, (1 << bits) - 1)
            rounded.append(min(max(n, lo), hi) & 0xFFFF)
    return [converted, rounded]


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_conversions_with_8_and_16_bit_integers(engine):
    halves = [0x7FFF, 0x8000, 0xFFFF, 12345]
    floats = [0x4700_0000, 0xC780_0000, 0x7FC0_0000, 0x42F7_0000]   # 32768, -65536, NaN, 123.5
    launch = load_launch({"kernel": "k", "grid": [1, 1, 1], "block": [4, 1, 1], "args": [
        {"type": "u16*", "data": halves}, {"type": "u32*", "data": floats},
        {"type": "u32*", "data": [0] * 8}, {"type": "u16*", "data": [0] * 16}]})
    module = parse_ptx(NARROW, "narrow.ptx")
    if engine == "ref":
        got = run_ref(module, launch).buffers
    elif engine == "simt":
        driver.apply_for_launch(make_context(), module, stage("simt"), launch)
        got = run_simt(module, launch).buffers
    else:
        driver.apply_for_launch(make_context(), module,
                                up_to(stage("tensor"), "tensor-schedule-layers"), launch)
        (program,) = tensor.programs_of(module)
        vocab = vocabulary_of(program)
        got = run_trace(pick_kernel(module, None), vocab, launch,
                        tensor_stepper(program, vocab)).buffers
    assert got[2:] == _narrow_expected(halves, floats)
