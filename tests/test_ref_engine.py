"""The reference engine: the shared kernel suite, traps, and PTX semantics."""

from __future__ import annotations

import json
import math
import random
import struct
from fractions import Fraction
from pathlib import Path

import pytest
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr

from conftest import SHARED_KERNELS, needs_shared_kernels, shared_params
from qgc.dialects import ptx
from qgc.frontend import parse_ptx
from qgc.runtime import float32 as F
from qgc.runtime.coverage import supported_opcodes
from qgc.runtime.launch import Arg, Launch, LaunchError, format_result, load_launch
from qgc.runtime.memory import Trap
from qgc.runtime.ref import run_ref
from qgc.runtime.ref_decode import UnsupportedError
from qgc.runtime.ref_int import prmt

# ------------------------------------------------------------ the shared suite


def shared_dir() -> Path:
    return SHARED_KERNELS


def suite_cases() -> list:
    kernels = shared_dir()
    cases = []
    for spec in sorted(kernels.glob("*.json")):
        info = json.loads(spec.read_text())
        warp_sensitive = info.get("warp4_undefined") or "expected_warp4" in info
        for flavor in ("nvcc", "clang"):
            for warp in (4, 32):
                if flavor == "clang" and warp == 4 and warp_sensitive:
                    continue
                cases.append(pytest.param(spec.stem, flavor, warp,
                                          id=f"{spec.stem}-{flavor}-w{warp}"))
    return cases


def f32_bits(value) -> int:
    if isinstance(value, str):
        value = float(value)
    return struct.unpack("<I", struct.pack("<f", value))[0]


def check_buffer(name: str, elem: str, got: list, want: list, check: dict) -> None:
    assert len(got) == len(want), f"{name}: length {len(got)} != {len(want)}"
    dont_care = check.get("dont_care", [])
    skip = set(range(len(want))) if dont_care is True else set(dont_care)
    allowed = {int(k): v for k, v in check.get("allowed", {}).items()}
    key = f32_bits if elem == "f32" else (lambda v: v)
    prefix = check.get("multiset_prefix", 0)
    if prefix:
        assert sorted(map(key, got[:prefix])) == sorted(map(key, want[:prefix])), name
        skip |= set(range(prefix))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if i in skip:
            continue
        if i in allowed:
            assert key(g) in {key(v) for v in allowed[i]}, f"{name}[{i}] = {g}"
        elif "atol" in check or "rtol" in check:
            w = float(w)
            ok = (math.isnan(g) and math.isnan(w)) or \
                abs(g - w) <= check.get("atol", 0) + check.get("rtol", 0) * abs(w)
            assert ok, f"{name}[{i}] = {g}, expected {w}"
        else:
            assert key(g) == key(w), f"{name}[{i}] = {g}, expected {w}"


@pytest.mark.parametrize("stem, flavor, warp", shared_params(suite_cases(), 3))
def test_shared_kernel(stem, flavor, warp):
    kernels = shared_dir()
    info = json.loads((kernels / f"{stem}.json").read_text())
    path = kernels / (f"{stem}.ptx" if flavor == "nvcc" else f"{stem}.clang.ptx")
    module = parse_ptx(path.read_text(), path.name)
    result = run_ref(module, load_launch(info, f"{stem}.json"), warp_size=warp)
    expected = info.get("expected_warp4", info["expected"]) if warp == 4 else info["expected"]
    checks = info.get("checks", {})
    for param, got in zip(info["params"], result.buffers, strict=True):
        if param["kind"] == "ptr":
            check_buffer(param["name"], param["elem"], got, expected[param["name"]],
                         checks.get(param["name"], {}))
        else:
            assert got is None


@needs_shared_kernels
def test_suite_is_present():
    assert len(suite_cases()) >= 80


# --------------------------------------------------------------- helpers

HEADER = ".version 8.0\n.target sm_75\n.address_size 64\n"
DECLS = """
    .reg .pred %p<8>;
    .reg .b16 %rs<8>;
    .reg .b32 %r<40>;
    .reg .f32 %f<16>;
    .reg .b64 %rd<16>;
"""
# out[tid.x] address in %rd4, %r1 = tid.x, %rd2 = out (global)
PROLOGUE = """
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
"""


def kernel_text(body: str, params: str = ".param .u64 k_param_0", prologue: bool = True,
                globals_: str = "") -> str:
    pro = PROLOGUE if prologue else ""
    return (HEADER + globals_ + f".visible .entry k(\n    {params}\n)\n{{\n{DECLS}{pro}"
            f"{body}\n    ret;\n}}\n")


def run(body: str, out, *, block=4, grid=1, warp=4, elem="u32", extra_args=(),
        params=None, dyn=0, globals_="") -> list:
    """Run a kernel whose first parameter is the output buffer; returns it."""
    if params is None:
        params = ".param .u64 k_param_0" + "".join(
            f",\n    .param .{'u64' if a.pointer else a.type} k_param_{i + 1}"
            for i, a in enumerate(extra_args))
    text = kernel_text(body, params, globals_=globals_)
    data = out if isinstance(out, list) else [0] * out
    launch = Launch(None, (grid, 1, 1), (block, 1, 1),
                    [Arg(elem, True, data=data)] + list(extra_args), dyn)
    return run_ref(parse_ptx(text, "k.ptx"), launch, warp_size=warp).buffers[0]


def line_of(text: str, needle: str) -> tuple[int, int]:
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number, line.index(needle.strip()) + 1
    raise AssertionError(needle)


def signed32(values: list[int]) -> list[int]:
    return [v - (1 << 32) if v >> 31 else v for v in values]


# ----------------------------------------------------------------- traps

def test_trap_out_of_bounds_message():
    body = "    ld.global.u32 %r2, [%rd4];\n    st.global.u32 [%rd4], %r2;"
    text = kernel_text(body)
    line, col = line_of(text, "ld.global.u32 %r2")
    launch = Launch("k", (1, 1, 1), (4, 1, 1), [Arg("s32", True, data=[1, 2, 3], name="a")])
    with pytest.raises(Trap) as err:
        run_ref(parse_ptx(text, "k.ptx"), launch)
    assert str(err.value) == (
        f"trap: out-of-bounds ld.global.u32 at k.ptx:{line}:{col} by ctaid (0,0,0) "
        "tid (3,0,0): address 0x1000000c is past the end of buffer 0 "
        "(arg 'a', 12 bytes at 0x10000000)")
    assert err.value.status == 3


def test_trap_before_start_and_crossing_end():
    body = "    ld.global.u32 %r2, [%rd2+-4];\n    st.global.u32 [%rd4], %r2;"
    with pytest.raises(Trap, match=r"address 0xffffffc is before the start of buffer 0 "
                                   r"\(arg 'k_param_0', 16 bytes at 0x10000000\)"):
        run(body, 4)
    body = "    ld.global.u64 %rd5, [%rd2+8];"
    with pytest.raises(Trap, match=r"out-of-bounds ld.global.u64 .* a 8-byte access at address "
                                   r"0x10000008 crosses the end of buffer 0"):
        run(body, 3)


def test_trap_misaligned_message():
    body = "    st.global.u32 [%rd2+2], %r1;"
    with pytest.raises(Trap) as err:
        run(body, 4)
    assert "trap: misaligned st.global.u32 at k.ptx:" in str(err.value)
    assert "by ctaid (0,0,0) tid (0,0,0): address 0x10000002 is not a multiple of 4 " \
           "(in buffer 0 (arg 'k_param_0', 16 bytes at 0x10000000))" in str(err.value)


def test_trap_shared_out_of_bounds_names_the_variable():
    globals_ = ".shared .align 4 .b8 smem[8];\n"
    body = """
    mov.u32 %r2, smem;
    shl.b32 %r3, %r1, 2;
    add.s32 %r4, %r2, %r3;
    st.shared.u32 [%r4], %r1;"""
    with pytest.raises(Trap, match=r"out-of-bounds st.shared.u32 .* tid \(2,0,0\): address 0x8 "
                                   r"is past the end of shared variable 'smem' \(8 bytes at 0x0\)"):
        run(body, 4, globals_=globals_)


def test_trap_null_pointer():
    body = "    mov.u64 %rd5, 0;\n    ld.u32 %r2, [%rd5];"
    with pytest.raises(Trap, match=r"out-of-bounds ld.u32 .* address 0x0 \(null\) is before "
                                   r"the start of buffer 0"):
        run(body, 4)


def test_trap_barrier_deadlock():
    body = """
    setp.lt.u32 %p1, %r1, 2;
    @%p1 bra $L_a;
    bar.sync 1;
    bra.uni $L_end;
$L_a:
    bar.sync 0;
$L_end:
    st.global.u32 [%rd4], %r1;"""
    with pytest.raises(Trap) as err:
        run(body, 4)
    text = str(err.value)
    assert text.startswith("trap: barrier deadlock in ctaid (0,0,0): no thread can run")
    assert "2 threads wait at barrier 1 (bar.sync at k.ptx:" in text
    assert "2 threads wait at barrier 0 (bar.sync at k.ptx:" in text


def test_trap_barrier_count_never_reached():
    with pytest.raises(Trap, match="barrier deadlock"):
        run("    bar.sync 0, 8;\n    st.global.u32 [%rd4], %r1;", 4)


def test_barrier_after_early_exit_releases():
    body = """
    setp.ge.u32 %p1, %r1, 2;
    @%p1 ret;
    bar.sync 0;
    st.global.u32 [%rd4], %r1;"""
    assert run(body, [9, 9, 9, 9]) == [0, 1, 9, 9]


def test_trap_instruction_and_step_limit():
    with pytest.raises(Trap, match=r"trap: trap at k.ptx:\d+:\d+ by ctaid \(0,0,0\) tid "
                                   r"\(0,0,0\): trap instruction executed"):
        run("    trap;", 4)
    text = kernel_text("$L_loop:\n    bra.uni $L_loop;")
    launch = Launch(None, (1, 1, 1), (4, 1, 1), [Arg("u32", True, data=[0])])
    with pytest.raises(Trap, match="ran past the limit of 1000 warp instructions"):
        run_ref(parse_ptx(text, "k.ptx"), launch, max_steps=1000)


# ------------------------------------------------------- launch vs kernel

def test_launch_mismatches():
    text = kernel_text("    st.global.u32 [%rd4], %r1;",
                       ".param .u64 k_param_0,\n    .param .u32 k_param_1")
    module = parse_ptx(text, "k.ptx")
    buf = Arg("u32", True, data=[0] * 4)
    with pytest.raises(LaunchError, match="kernel 'k' takes 2 arguments, the launch gives 1"):
        run_ref(module, Launch(None, (1, 1, 1), (4, 1, 1), [buf]))
    with pytest.raises(LaunchError, match=r"args\[1\]: a pointer \(s32\*\) cannot be passed to "
                                          r"parameter 'k_param_1' of type .u32"):
        run_ref(module, Launch(None, (1, 1, 1), (4, 1, 1), [buf, Arg("s32", True, data=[])]))
    with pytest.raises(LaunchError, match=r"args\[1\]: a u64 value cannot be passed"):
        run_ref(module, Launch(None, (1, 1, 1), (4, 1, 1), [buf, Arg("u64", False, value=1)]))
    with pytest.raises(LaunchError, match=r"args\[1\]: a f32 value cannot be passed"):
        run_ref(module, Launch(None, (1, 1, 1), (4, 1, 1), [buf, Arg("f32", False, value=1.0)]))
    with pytest.raises(LaunchError, match=r"kernel 'nope' is not an entry of the PTX "
                                          r"\(entries: 'k'\)"):
        run_ref(module, Launch("nope", (1, 1, 1), (4, 1, 1), [buf, Arg("u32", False, value=1)]))
    with pytest.raises(LaunchError, match="warp size 3"):
        run_ref(module, Launch(None, (1, 1, 1), (4, 1, 1), [buf, Arg("u32", False, value=1)]),
                warp_size=3)


def test_unsupported_instruction_reported_before_running():
    text = kernel_text("    st.global.u32 [%rd4], %r1;\n"
                       "    tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [tex0];")
    line, col = line_of(text, "tex.1d")
    launch = Launch(None, (1, 1, 1), (4, 1, 1), [Arg("u32", True, data=[0])])
    with pytest.raises(UnsupportedError) as err:
        run_ref(parse_ptx(text, "k.ptx"), launch)  # would trap if it ran
    assert str(err.value) == f"k.ptx:{line}:{col}: error: unsupported instruction " \
                             "'tex.1d.v4.f32.s32'"
    assert err.value.status == 2


def test_call_is_unsupported():
    module = parse_ptx(kernel_text("    st.global.u32 [%rd4], %r1;"), "k.ptx")
    entry = next(op for op in module.walk() if isinstance(op, ptx.EntryOp))
    call = ptx.InstOp("call.uni", ["helper"])
    call.location = FileLineColLoc(StringAttr("k.ptx"), IntAttr(20), IntAttr(5))
    entry.body.block.insert_op_before(call, entry.body.block.first_op)
    launch = Launch(None, (1, 1, 1), (4, 1, 1), [Arg("u32", True, data=[0])])
    with pytest.raises(UnsupportedError, match=r"^k.ptx:20:5: error: calls to device "
                                               r"functions are not supported$"):
        run_ref(module, launch)


# ------------------------------------------------------------------- fma

def fraction_fma(a: int, b: int, c: int) -> int:
    x, y, z = (Fraction(F.to_float(v)) for v in (a, b, c))
    return F.round_rational(x * y + z, "rn")


FMA_CASES = [
    # (1 + 2^-12)^2 - (1 + 2^-11) = 2^-24: an unfused mul + add gives 0
    (0x3F800800, 0x3F800800, 0xBF801000, 0x33800000),
    # a*b = 2^-24 - 2^-70, c = 1 + 2^-23: the exact sum lies 2^-70 below the midpoint
    # between 1 + 2^-23 and 1 + 2^-22; rounded to double it *is* the midpoint, which then
    # rounds to even (up) — a double-rounding error; the correct fma rounds down
    (0x33800001, 0x3F7FFFFE, 0x3F800001, 0x3F800001),
    # the same below 1: negative product, result rounds toward the odd neighbour
    (0xB3800001, 0x3F7FFFFE, 0xBF800001, 0xBF800001),
]


def test_fma_is_exact_on_double_rounding_cases():
    body_lines = []
    for i, (a, b, c, _) in enumerate(FMA_CASES):
        body_lines.append(f"    fma.rn.f32 %f{i + 1}, 0f{a:08X}, 0f{b:08X}, 0f{c:08X};\n"
                          f"    st.global.f32 [%rd2+{4 * i}], %f{i + 1};")
    got = run("\n".join(body_lines), [0.0] * len(FMA_CASES), block=1, elem="f32")
    for (a, b, c, want), value in zip(FMA_CASES, got, strict=True):
        assert f32_bits(value) == fraction_fma(a, b, c) == want
    a, b, c, want = FMA_CASES[1]
    naive = F.from_float(F.to_float(a) * F.to_float(b) + F.to_float(c))
    assert naive == 0x3F800002 != want  # what rounding through double would give


def test_fma_random_against_fractions():
    rng = random.Random(1)
    for _ in range(3000):
        a, b, c = (rng.getrandbits(32) & 0xFF7FFFFF for _ in range(3))
        if any(F.is_nan(v) or (v & 0x7F800000) == 0x7F800000 for v in (a, b, c)):
            continue
        got = F.fma_rn(F.to_float(a), F.to_float(b), F.to_float(c))
        assert got == fraction_fma(a, b, c) or (F.is_nan(got))


def test_fma_ftz_and_sat():
    body = """
    fma.rn.ftz.f32 %f1, 0f00400000, 0f3F800000, 0f00000000;
    st.global.f32 [%rd2], %f1;
    fma.rn.f32 %f2, 0f00400000, 0f3F800000, 0f00000000;
    st.global.f32 [%rd2+4], %f2;
    fma.rn.sat.f32 %f3, 0f40000000, 0f40000000, 0f00000000;
    st.global.f32 [%rd2+8], %f3;"""
    got = run(body, [9.0] * 3, block=1, elem="f32")
    assert [f32_bits(v) for v in got] == [0, 0x00400000, 0x3F800000]


# ------------------------------------------------------------------ shfl

SHFL = """
    mul.lo.u32 %r2, %r1, 10;
    shfl.sync.{mode}.b32 %r3|%p1, %r2, {b}, {c}, -1;
    selp.u32 %r4, 1000, 0, %p1;
    add.u32 %r5, %r3, %r4;
    st.global.u32 [%rd4], %r5;"""


@pytest.mark.parametrize("mode, b, c, warp, want", [
    ("down", 1, 0x1F, 4, [1010, 1020, 1030, 30, 1050, 1060, 1070, 70]),
    ("up", 1, 0, 4, [0, 1000, 1010, 1020, 40, 1040, 1050, 1060]),
    ("bfly", 2, 0x1F, 4, [1020, 1030, 1000, 1010, 1060, 1070, 1040, 1050]),
    ("idx", 5, 0x1F, 4, [1010] * 4 + [1050] * 4),  # lane 5 of a 4-lane warp is lane 1
    ("idx", 5, 0x1F, 32, [1050] * 8),
    ("down", 1, 0x1F, 32, [1010, 1020, 1030, 1040, 1050, 1060, 1070, 1070]),
    ("up", 2, 0, 32, [0, 10, 1000, 1010, 1020, 1030, 1040, 1050]),
    # two-lane segments: c = ((32 - 2) << 8) | 31 at warp 32, ((4 - 2) << 8) | 3 at warp 4
    ("down", 1, 0x1E1F, 32, [1010, 10, 1030, 30, 1050, 50, 1070, 70]),
    ("down", 1, 0x0203, 4, [1010, 10, 1030, 30, 1050, 50, 1070, 70]),
    ("bfly", 16, 0x1F, 4, [1000, 1010, 1020, 1030, 1040, 1050, 1060, 1070]),  # 16 & 3 == 0
])
def test_shfl_modes(mode, b, c, warp, want):
    # at warp 32 the 8 threads form one partial warp: lane 8 does not exist
    assert run(SHFL.format(mode=mode, b=b, c=c), 8, block=8, warp=warp) == want


def test_shfl_in_divergent_code_reads_inactive_lane_register():
    body = """
    mov.u32 %r2, %r1;
    setp.lt.u32 %p1, %r1, 2;
    @!%p1 bra $L_skip;
    shfl.sync.down.b32 %r2, %r1, 2, 0x1f, 3;
$L_skip:
    st.global.u32 [%rd4], %r2;"""
    assert run(body, 4) == [2, 3, 2, 3]


# ------------------------------------------------------------------ vote

VOTE = """
    and.b32 %r2, %r1, {andmask};
    setp.ne.u32 %p1, %r2, 0;
    vote.sync.ballot.b32 %r3, %p1, -1;
    vote.sync.any.pred %p2, %p1, -1;
    vote.sync.all.pred %p3, %p1, -1;
    vote.sync.uni.pred %p4, %p1, -1;
    activemask.b32 %r4;
    selp.u32 %r5, 1, 0, %p2;
    selp.u32 %r6, 2, 0, %p3;
    selp.u32 %r7, 4, 0, %p4;
    or.b32 %r8, %r5, %r6;
    or.b32 %r8, %r8, %r7;
    shl.b32 %r9, %r8, 24;
    shl.b32 %r10, %r4, 12;
    or.b32 %r11, %r3, %r9;
    or.b32 %r11, %r11, %r10;
    st.global.u32 [%rd4], %r11;"""


def vote_word(ballot: int, flags: int, active: int) -> int:
    return ballot | (active << 12) | (flags << 24)


def test_vote_warp4():
    got = run(VOTE.format(andmask=4), 8, block=8, warp=4)
    # lanes 0-3 all false; lanes 4-7 all true
    assert got == [vote_word(0, 4, 0xF)] * 4 + [vote_word(0xF, 7, 0xF)] * 4
    got = run(VOTE.format(andmask=1), 8, block=8, warp=4)
    assert got == [vote_word(0b1010, 1, 0xF)] * 8


def test_vote_warp32_partial_warp():
    got = run(VOTE.format(andmask=4), 8, block=8, warp=32)
    assert got == [vote_word(0xF0, 1, 0xFF)] * 8
    got = run(VOTE.format(andmask=8), 8, block=8, warp=32)
    assert got == [vote_word(0, 4, 0xFF)] * 8


def test_vote_in_divergent_code_sees_only_its_group():
    body = """
    setp.lt.u32 %p1, %r1, 3;
    mov.u32 %r3, 0;
    @!%p1 bra $L_skip;
    setp.ne.u32 %p2, %r1, 1;
    vote.sync.ballot.b32 %r3, %p2, -1;
    activemask.b32 %r4;
    shl.b32 %r4, %r4, 8;
    or.b32 %r3, %r3, %r4;
$L_skip:
    st.global.u32 [%rd4], %r3;"""
    assert run(body, 8, block=8, warp=4) == [0x705] * 3 + [0] * 5
    assert run(body, 8, block=8, warp=32) == [0x705] * 3 + [0] * 5


# ------------------------------------------------------- divergence

def test_nested_branches_reconverge():
    # tid 0..7: a 3-level if/else tree; after the join every lane is active again
    body = """
    and.b32 %r2, %r1, 1;
    and.b32 %r3, %r1, 2;
    mov.u32 %r5, 0;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra $L_even;
    setp.eq.u32 %p2, %r3, 0;
    @%p2 bra $L_odd_low;
    activemask.b32 %r6;
    add.u32 %r5, %r5, 300;
    bra.uni $L_odd_join;
$L_odd_low:
    activemask.b32 %r6;
    add.u32 %r5, %r5, 100;
$L_odd_join:
    add.u32 %r5, %r5, 1;
    bra.uni $L_join;
$L_even:
    setp.eq.u32 %p3, %r3, 0;
    @%p3 bra $L_join_even;
    activemask.b32 %r6;
    add.u32 %r5, %r5, 200;
    bra.uni $L_join;
$L_join_even:
    activemask.b32 %r6;
$L_join:
    activemask.b32 %r7;
    shl.b32 %r7, %r7, 16;
    shl.b32 %r6, %r6, 8;
    or.b32 %r5, %r5, %r6;
    or.b32 %r5, %r5, %r7;
    st.global.u32 [%rd4], %r5;"""
    for warp, full in ((4, 0xF), (32, 0xFF)):
        got = run(body, 8, block=8, warp=warp)
        lanes = list(range(8))
        groups = {0: [t for t in lanes if t % 4 == 0], 1: [t for t in lanes if t % 4 == 1],
                  2: [t for t in lanes if t % 4 == 2], 3: [t for t in lanes if t % 4 == 3]}
        want = []
        for t in lanes:
            kind = t % 4
            mask = sum(1 << (u % warp) for u in groups[kind] if u // warp == t // warp)
            value = {0: 0, 1: 101, 2: 200, 3: 301}[kind]
            want.append(value | (mask << 8) | (full << 16))
        assert got == want, warp


def test_loop_with_divergent_trip_counts_and_clock():
    body = """
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
$L_loop:
    setp.ge.u32 %p1, %r3, %r1;
    @%p1 bra $L_done;
    add.u32 %r2, %r2, %r3;
    add.u32 %r3, %r3, 1;
    bra.uni $L_loop;
$L_done:
    mov.u32 %r4, %clock;
    mov.u32 %r5, %clock;
    setp.gt.u32 %p2, %r5, %r4;
    selp.u32 %r6, 1000, 0, %p2;
    add.u32 %r2, %r2, %r6;
    st.global.u32 [%rd4], %r2;"""
    assert run(body, 6, block=6) == [1000, 1000, 1001, 1003, 1006, 1010]


# ------------------------------------------------------------------- cvt

def test_cvt_saturation_and_nan():
    cases = [  # (instruction, source register kind, source immediate, expected u32 bits)
        ("cvt.rzi.s32.f32", "f", "0f4F32D05E", 0x7FFFFFFF),   # 3e9
        ("cvt.rzi.s32.f32", "f", "0fCF32D05E", 0x80000000),   # -3e9
        ("cvt.rzi.s32.f32", "f", "0f7FC00000", 0),            # NaN
        ("cvt.rzi.u32.f32", "f", "0fC0A00000", 0),            # -5.0
        ("cvt.rzi.u32.f32", "f", "0f7F800000", 0xFFFFFFFF),   # +inf
        ("cvt.rni.s32.f32", "f", "0f40200000", 2),            # 2.5 → 2 (even)
        ("cvt.rni.s32.f32", "f", "0f40600000", 4),            # 3.5 → 4
        ("cvt.rmi.s32.f32", "f", "0fBF000000", 0xFFFFFFFF),   # -0.5 → -1
        ("cvt.rpi.s32.f32", "f", "0f3F000001", 1),
        ("cvt.sat.u8.s32", "r", "300", 255),
        ("cvt.sat.u8.s32", "r", "-1", 0),
        ("cvt.sat.s8.s32", "r", "-300", 0xFFFFFF80),          # -128, sign-extended
        ("cvt.s8.s32", "r", "200", 0xFFFFFFC8),               # wraps to -56
        ("cvt.u8.s32", "r", "-1", 255),
        ("cvt.sat.s32.u32", "r", "0xFFFFFFFF", 0x7FFFFFFF),
    ]
    lines = []
    for i, (inst, kind, imm, _) in enumerate(cases):
        src = f"%{kind}{10 + i if kind == 'r' else 1}"
        mov = f"mov.b32 %f1, {imm};" if kind == "f" else f"mov.u32 {src}, {imm};"
        lines.append(f"    {mov}\n    {inst} %r{i + 1}, {src};\n"
                     f"    st.global.u32 [%rd2+{4 * i}], %r{i + 1};")
    got = run("\n".join(lines), len(cases), block=1)
    assert got == [c[3] for c in cases]


def test_cvt_int_to_float_rounding_and_f32_rounding():
    cases = [
        ("cvt.rn.f32.s32 %f2, %r2;", "mov.u32 %r2, 16777217;", 16777216.0),
        ("cvt.rn.f32.s32 %f2, %r2;", "mov.u32 %r2, 16777219;", 16777220.0),
        ("cvt.rz.f32.u32 %f2, %r2;", "mov.u32 %r2, 0xFFFFFFFF;", 4294967040.0),
        ("cvt.rp.f32.u32 %f2, %r2;", "mov.u32 %r2, 16777217;", 16777218.0),
        ("cvt.rmi.f32.f32 %f2, %f1;", "mov.f32 %f1, 0fBF000000;", -1.0),
        ("cvt.rpi.f32.f32 %f2, %f1;", "mov.f32 %f1, 0fBF000000;", -0.0),
        ("cvt.rni.f32.f32 %f2, %f1;", "mov.f32 %f1, 0f40200000;", 2.0),
        ("cvt.rzi.f32.f32 %f2, %f1;", "mov.f32 %f1, 0fC0600000;", -3.0),
        ("cvt.ftz.f32.f32 %f2, %f1;", "mov.f32 %f1, 0f80000001;", -0.0),
        ("cvt.sat.f32.f32 %f2, %f1;", "mov.f32 %f1, 0f40000000;", 1.0),
    ]
    lines = [f"    {setup}\n    {inst}\n    st.global.f32 [%rd2+{4 * i}], %f2;"
             for i, (inst, setup, _) in enumerate(cases)]
    got = run("\n".join(lines), [0.0] * len(cases), block=1, elem="f32")
    assert [f32_bits(v) for v in got] == [f32_bits(c[2]) for c in cases]


# ------------------------------------------------------- integer division

def test_division_by_zero_and_overflow():
    cases = [
        ("div.u32", 7, 0, 0xFFFFFFFF), ("div.s32", -7, 0, 0xFFFFFFFF),
        ("div.s32", 7, 0, 0xFFFFFFFF), ("rem.u32", 7, 0, 7), ("rem.s32", -7, 0, (-7) & 0xFFFFFFFF),
        ("div.s32", -2**31, -1, 0x80000000), ("rem.s32", -2**31, -1, 0),
        ("div.s32", -7, 2, (-3) & 0xFFFFFFFF), ("rem.s32", -7, 2, (-1) & 0xFFFFFFFF),
        ("rem.s32", 7, -2, 1), ("div.u32", 0xFFFFFFFF, 2, 0x7FFFFFFF),
    ]
    lines = [f"    mov.u32 %r2, {a & 0xFFFFFFFF};\n    mov.u32 %r3, {b & 0xFFFFFFFF};\n"
             f"    {inst} %r4, %r2, %r3;\n    st.global.u32 [%rd2+{4 * i}], %r4;"
             for i, (inst, a, b, _) in enumerate(cases)]
    assert run("\n".join(lines), len(cases), block=1) == [c[3] for c in cases]


def test_division_by_zero_64bit():
    body = """
    mov.u64 %rd5, 12345;
    mov.u64 %rd6, 0;
    div.u64 %rd7, %rd5, %rd6;
    rem.s64 %rd8, %rd5, %rd6;
    st.global.u64 [%rd2], %rd7;
    st.global.u64 [%rd2+8], %rd8;"""
    assert run(body, 2, block=1, elem="u64") == [2**64 - 1, 12345]


# --------------------------------------------------------- integer semantics

def test_integer_bit_operations():
    cases = [
        ("shl.b32 %r4, %r2, %r3;", 0xF0F0F0F0, 40, 0),
        ("shr.u32 %r4, %r2, %r3;", 0xF0F0F0F0, 40, 0),
        ("shr.s32 %r4, %r2, %r3;", 0xF0F0F0F0, 40, 0xFFFFFFFF),
        ("shr.s32 %r4, %r2, %r3;", 0xF0F0F0F0, 4, 0xFF0F0F0F),
        ("bfe.u32 %r4, %r2, 4, 8;", 0xABCDEF12, 0, 0xF1),
        ("bfe.s32 %r4, %r2, 4, 8;", 0xABCDEF12, 0, 0xFFFFFFF1),
        ("bfe.s32 %r4, %r2, 28, 8;", 0xABCDEF12, 0, 0xFFFFFFFA),
        ("bfi.b32 %r4, %r2, %r3, 8, 4;", 0x5, 0xFFFFFFFF, 0xFFFFF5FF),
        ("bfind.u32 %r4, %r2;", 0x00010000, 0, 16),
        ("bfind.shiftamt.u32 %r4, %r2;", 0x00010000, 0, 15),
        ("bfind.s32 %r4, %r2;", 0xFFFFFFFF, 0, 0xFFFFFFFF),
        ("bfind.s32 %r4, %r2;", 0xFFFF0000, 0, 15),
        ("brev.b32 %r4, %r2;", 1, 0, 0x80000000),
        ("clz.b32 %r4, %r2;", 0x00F00000, 0, 8),
        ("popc.b32 %r4, %r2;", 0xF0F00001, 0, 9),
        ("prmt.b32 %r4, %r2, %r3, 0x7531;", 0x33221100, 0x77665544, 0x77553311),
        ("prmt.b32 %r4, %r2, %r3, 0x8880;", 0x000000F0, 0, 0xFFFFFFF0),
        ("prmt.b32.f4e %r4, %r2, %r3, 1;", 0x33221100, 0x77665544, 0x44332211),
        ("prmt.b32.b4e %r4, %r2, %r3, 0;", 0x33221100, 0x77665544, 0x55667700),
        ("prmt.b32.ecl %r4, %r2, %r3, 2;", 0x33221100, 0x77665544, 0x33222222),
        ("prmt.b32.ecr %r4, %r2, %r3, 1;", 0x33221100, 0x77665544, 0x11111100),
        ("prmt.b32.rc8 %r4, %r2, %r3, 2;", 0x33221100, 0x77665544, 0x22222222),
        ("prmt.b32.rc16 %r4, %r2, %r3, 1;", 0x33221100, 0x77665544, 0x33223322),
        ("mul.hi.s32 %r4, %r2, %r3;", 0xFFFFFFFF, 0xFFFFFFFF, 0),
        ("mul.hi.u32 %r4, %r2, %r3;", 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFE),
        ("min.s32 %r4, %r2, %r3;", 0xFFFFFFFF, 1, 0xFFFFFFFF),
        ("min.u32 %r4, %r2, %r3;", 0xFFFFFFFF, 1, 1),
        ("abs.s32 %r4, %r2;", 0x80000000, 0, 0x80000000),
        ("add.sat.s32 %r4, %r2, %r3;", 0x7FFFFFFF, 1, 0x7FFFFFFF),
        ("sad.u32 %r4, %r2, %r3, 10;", 3, 8, 15),
        ("lop3.b32 %r4, %r2, %r3, 0xF0F0F0F0, 0x96;", 0xFF00FF00, 0xFFFF0000, 0xF00F0FF0),
        ("shf.l.wrap.b32 %r4, %r2, %r3, 36;", 0x80000000, 0x1, 0x18),
        ("shf.r.clamp.b32 %r4, %r2, %r3, 40;", 0x80000000, 0x1, 1),
        ("mul24.lo.s32 %r4, %r2, %r3;", 0x00FFFFFF, 2, 0xFFFFFFFE),
    ]
    assert prmt(0x33221100, 0x77665544, 0x3210, None) == 0x33221100
    lines = [f"    mov.u32 %r2, {a};\n    mov.u32 %r3, {b};\n    {inst}\n"
             f"    st.global.u32 [%rd2+{4 * i}], %r4;" for i, (inst, a, b, _) in enumerate(cases)]
    got = run("\n".join(lines), len(cases), block=1)
    for (inst, _, _, want), value in zip(cases, got, strict=True):
        assert value == want, f"{inst}: {value:#x} != {want:#x}"


def test_setp_combining_and_dual_destination():
    body = """
    setp.lt.and.s32 %p1|%p2, %r1, 2, %p3;
    setp.ge.or.u32 %p3|%p4, %r1, 1, !%p1;
    selp.u32 %r2, 1, 0, %p1;
    selp.u32 %r3, 2, 0, %p2;
    selp.u32 %r4, 4, 0, %p3;
    selp.u32 %r5, 8, 0, %p4;
    add.u32 %r2, %r2, %r3;
    add.u32 %r2, %r2, %r4;
    add.u32 %r2, %r2, %r5;
    st.global.u32 [%rd4], %r2;"""
    # %p3 starts false: p1 = p2 = false; then p3 = (t >= 1) | true, p4 = (t < 1) | true
    assert run(body, 4) == [12, 12, 12, 12]


def test_float_compare_unordered():
    body = """
    mov.f32 %f1, 0f7FC00000;
    mov.f32 %f2, 0f3F800000;
    setp.lt.f32 %p1, %f1, %f2;
    setp.ltu.f32 %p2, %f1, %f2;
    setp.ne.f32 %p3, %f1, %f2;
    setp.neu.f32 %p4, %f1, %f2;
    setp.nan.f32 %p5, %f1, %f2;
    setp.num.f32 %p6, %f2, %f2;
    selp.u32 %r2, 1, 0, %p1;
    selp.u32 %r3, 2, 0, %p2;
    selp.u32 %r4, 4, 0, %p3;
    selp.u32 %r5, 8, 0, %p4;
    selp.u32 %r6, 16, 0, %p5;
    selp.u32 %r7, 32, 0, %p6;
    add.u32 %r2, %r2, %r3;
    add.u32 %r2, %r2, %r4;
    add.u32 %r2, %r2, %r5;
    add.u32 %r2, %r2, %r6;
    add.u32 %r2, %r2, %r7;
    st.global.u32 [%rd4], %r2;"""
    assert run(body, 1, block=1) == [2 + 8 + 16 + 32]


def test_float_arithmetic_edge_cases():
    body = """
    mov.f32 %f1, 0f7F7FFFFF;
    add.f32 %f2, %f1, %f1;
    st.global.f32 [%rd2], %f2;
    add.rz.f32 %f3, %f1, %f1;
    st.global.f32 [%rd2+4], %f3;
    mov.f32 %f4, 0f00000001;
    mul.f32 %f5, %f4, 0f3F000000;
    st.global.f32 [%rd2+8], %f5;
    mul.f32 %f6, %f4, 0f3FC00000;
    st.global.f32 [%rd2+12], %f6;
    add.ftz.f32 %f7, %f4, %f4;
    st.global.f32 [%rd2+16], %f7;
    div.rn.f32 %f8, 0f3F800000, 0f40400000;
    st.global.f32 [%rd2+20], %f8;
    sqrt.rn.f32 %f9, 0f40000000;
    st.global.f32 [%rd2+24], %f9;
    min.f32 %f10, 0f7FC00000, 0f3F800000;
    st.global.f32 [%rd2+28], %f10;
    max.f32 %f11, 0f80000000, 0f00000000;
    st.global.f32 [%rd2+32], %f11;
    div.rn.f32 %f12, 0f00000000, 0f00000000;
    st.global.f32 [%rd2+36], %f12;
    neg.f32 %f13, 0f00000000;
    st.global.f32 [%rd2+40], %f13;"""
    got = [f32_bits(v) for v in run(body, [0.0] * 11, block=1, elem="f32")]
    assert got == [0x7F800000, 0x7F7FFFFF, 0, 0x00000002, 0, 0x3EAAAAAB, 0x3FB504F3,
                   0x3F800000, 0x00000000, 0x7FFFFFFF, 0x80000000]


# ----------------------------------------------------------- memory forms

def test_atomics_run_in_lane_order():
    body = """
    atom.global.add.u32 %r2, [%rd2+16], 5;
    st.global.u32 [%rd4], %r2;
    atom.global.cas.b32 %r3, [%rd2+20], %r1, 100;
    atom.global.exch.b32 %r4, [%rd2+24], %r1;
    atom.global.inc.u32 %r5, [%rd2+28], 2;
    atom.global.max.s32 %r6, [%rd2+32], %r1;"""
    got = run(body, [0, 0, 0, 0, 0, 1, 0, 0, 0], block=4)
    assert got == [0, 5, 10, 15, 20, 100, 3, 1, 3]


def test_generic_shared_and_dynamic_shared():
    globals_ = ".extern .shared .align 4 .b8 dyn[];\n"
    body = """
    mov.u64 %rd5, dyn;
    cvta.shared.u64 %rd6, %rd5;
    mul.wide.u32 %rd7, %r1, 4;
    add.s64 %rd8, %rd6, %rd7;
    st.u32 [%rd8], %r1;
    bar.sync 0;
    xor.b32 %r2, %r1, 3;
    mul.wide.u32 %rd9, %r2, 4;
    add.s64 %rd10, %rd6, %rd9;
    ld.u32 %r3, [%rd10];
    isspacep.shared %p1, %rd10;
    selp.u32 %r4, 100, 0, %p1;
    add.u32 %r3, %r3, %r4;
    st.global.u32 [%rd4], %r3;"""
    assert run(body, 4, dyn=16, globals_=globals_) == [103, 102, 101, 100]
    with pytest.raises(Trap, match=r"generic address 0x7f000000000c maps to address 0xc is "
                                   r"past the end of dynamic shared memory 'dyn' \(12 bytes"):
        run(body, 4, dyn=12, globals_=globals_)


def test_vector_loads_narrow_types_and_offsets():
    body = """
    ld.param.u64 %rd5, [k_param_1];
    cvta.to.global.u64 %rd6, %rd5;
    ld.global.v2.u32 {%r2, %r3}, [%rd6];
    ld.global.s8 %r4, [%rd6+8];
    ld.global.u8 %r5, [%rd6+8];
    ld.global.u16 %rs1, [%rd6+10];
    cvt.u32.u16 %r6, %rs1;
    st.global.v4.u32 [%rd2], {%r2, %r3, %r4, %r5};
    st.global.u32 [%rd2+16], %r6;
    st.global.u8 [%rd2+20], 0x1FF;"""
    src = Arg("u32", True, data=[0, 0, 7, 8, 0xBEEF00FF], offset=2)
    got = run(body, 6, block=1, extra_args=[src])
    assert got == [7, 8, 0xFFFFFFFF, 0xFF, 0xBEEF, 0xFF]


def test_global_and_const_variables():
    globals_ = (".const .align 4 .u32 table[3] = {10, 20, 30};\n"
                ".global .align 4 .u32 counter = 5;\n")
    body = """
    shl.b32 %r2, %r1, 2;
    mov.u64 %rd5, table;
    cvt.u64.u32 %rd6, %r2;
    add.s64 %rd7, %rd5, %rd6;
    ld.const.u32 %r3, [%rd7];
    atom.global.add.u32 %r4, [counter], 1;
    add.u32 %r3, %r3, %r4;
    st.global.u32 [%rd4], %r3;"""
    assert run(body, 3, block=3, globals_=globals_) == [15, 26, 37]


def test_result_buffers_and_stats():
    text = kernel_text("    st.global.u32 [%rd4], %r1;",
                       ".param .u64 k_param_0,\n    .param .u32 k_param_1")
    launch = load_launch({"grid": [2], "block": [4], "args": [
        {"type": "u32*", "data": [9] * 6}, {"type": "u32", "value": 1}]})
    result = run_ref(parse_ptx(text, "k.ptx"), launch)
    assert format_result(result.buffers) == '{"buffers": [[0, 1, 2, 3, 9, 9], null]}'
    assert result.stats["warps"] == 2 and result.stats["ctas"] == 2
    assert result.stats["instructions"] > 0


def test_coverage_lists_the_dispatch_table():
    ops = supported_opcodes()
    assert len(ops) > 80
    families = {form.split(".")[0].split()[0].split("{")[0] for form in ops}
    for name in ("ld", "st", "atom", "shfl", "vote", "cvt", "fma", "setp", "bar", "prmt"):
        assert name in families
