"""Everyday idioms on the machine (issue 22), each small enough to run on
every engine in CI: the lane and warp specials, bytes stored by four lanes
into one shared word, a 64-bit atomic whose high word leaves its buffer
(the same trap from `ref`, `simt` and `tensor`), vector accesses, and
pointers held as values (the reference engine's addresses; a null or
past-the-end one loaded from memory traps). The
examples (examples/, `test_simt.accepted_cases`) hold the same idioms in
full kernels from nvcc and clang."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from qgc.cli import main

HEADER = """.version 8.0
.target sm_75
.address_size 64
"""

SPECIALS = HEADER + """
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %laneid;
    mov.u32 %r3, %warpid;
    mov.u32 %r4, %nwarpid;
    mov.u32 %r5, %lanemask_ge;
    mov.u32 %r6, %lanemask_gt;
    shl.b32 %r2, %r2, 4;
    shl.b32 %r3, %r3, 8;
    shl.b32 %r4, %r4, 12;
    shl.b32 %r6, %r6, 20;
    or.b32 %r2, %r2, %r3;
    or.b32 %r2, %r2, %r4;
    or.b32 %r2, %r2, %r5;
    or.b32 %r2, %r2, %r6;
    membar.gl;
    bar.warp.sync -1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
    ret;
}
"""

BYTES = HEADER + """
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b32 %r<7>;
    .reg .b16 %rs<2>;
    .reg .b64 %rd<5>;
    .shared .align 4 .b8 flags[8];
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, flags;
    add.s32 %r3, %r2, %r1;
    add.s32 %r4, %r1, 161;
    st.shared.u8 [%r3], %r4;
    cvt.u16.u32 %rs1, %r4;
    st.shared.u16 [flags+6], %rs1;
    bar.sync 0;
    and.b32 %r6, %r1, 1;
    shl.b32 %r5, %r6, 2;
    add.s32 %r5, %r2, %r5;
    ld.shared.u32 %r5, [%r5];
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r5;
    ret;
}
"""

PAIR_MIN = HEADER + """
.visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<9>;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd4, [k_param_1];
    cvta.to.global.u64 %rd2, %rd1;
    cvta.to.global.u64 %rd5, %rd4;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd6, %rd5, %rd3;
    ld.global.v2.u32 {%r0, %r1}, [%rd6];
    mov.b64 %rd7, {%r0, %r1};
    add.s64 %rd8, %rd2, %rd3;
    atom.global.min.s64 %rd7, [%rd8], %rd7;
    st.global.u64 [%rd6], %rd7;
    ret;
}
"""

SHARED64 = HEADER + """
.visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<13>;
    .shared .align 8 .b8 acc[16];
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 8;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.u64 %rd7, [%rd6];
    st.shared.u64 [acc], 0;
    st.shared.u64 [acc+8], 4611686018427387904;
    atom.shared.add.u64 %rd8, [acc], %rd7;
    atom.shared.min.s64 %rd9, [acc+8], %rd7;
    atom.shared.cas.b64 %rd10, [acc], %rd8, %rd9;
    atom.shared.exch.b64 %rd11, [acc+8], %rd10;
    add.s64 %rd8, %rd8, %rd9;
    add.s64 %rd8, %rd8, %rd11;
    add.s64 %rd12, %rd3, %rd5;
    st.global.u64 [%rd12], %rd8;
    ret;
}
"""


#: nvcc -O3 of: each thread parks a pointer into a or b (or null) by its
#: selector in a __shared__ table, then writes its neighbour's as an integer
#: (`addr[t] = (u64)p`) and reads through it (`out[t] = *p`)
POINTER_VALUES = HEADER + """
.visible .entry k(
	.param .u64 k_param_0,
	.param .u64 k_param_1,
	.param .u64 k_param_2,
	.param .u64 k_param_3,
	.param .u64 k_param_4
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<11>;
	.reg .b64 	%rd<25>;
	.shared .align 8 .b8 _ZZ1kE4slot[64];
	ld.param.u64 	%rd5, [k_param_0];
	ld.param.u64 	%rd6, [k_param_1];
	ld.param.u64 	%rd10, [k_param_2];
	ld.param.u64 	%rd7, [k_param_3];
	ld.param.u64 	%rd8, [k_param_4];
	mov.u32 	%r2, %tid.x;
	cvt.u64.u32 	%rd1, %r2;
	cvta.to.global.u64 	%rd11, %rd10;
	mul.wide.u32 	%rd12, %r2, 4;
	add.s64 	%rd13, %rd11, %rd12;
	ld.global.u32 	%r1, [%rd13];
	mov.u64 	%rd24, 0;
	setp.eq.s32 	%p1, %r1, 0;
	@%p1 bra 	$L__BB0_4;
	setp.gt.s32 	%p2, %r1, 0;
	@%p2 bra 	$L__BB0_3;
	bra.uni 	$L__BB0_2;
$L__BB0_3:
	add.s32 	%r3, %r1, -1;
	mul.wide.s32 	%rd16, %r3, 4;
	add.s64 	%rd24, %rd5, %rd16;
	bra.uni 	$L__BB0_4;
$L__BB0_2:
	mul.wide.s32 	%rd14, %r1, 4;
	xor.b64  	%rd15, %rd14, -4;
	add.s64 	%rd24, %rd6, %rd15;
$L__BB0_4:
	cvt.u32.u64 	%r4, %rd1;
	shl.b32 	%r5, %r4, 3;
	mov.u32 	%r6, _ZZ1kE4slot;
	add.s32 	%r7, %r6, %r5;
	st.shared.u64 	[%r7], %rd24;
	bar.sync 	0;
	xor.b32  	%r8, %r5, 8;
	add.s32 	%r9, %r6, %r8;
	ld.shared.u64 	%rd17, [%r9];
	cvta.to.global.u64 	%rd18, %rd8;
	shl.b64 	%rd19, %rd1, 3;
	add.s64 	%rd20, %rd18, %rd19;
	st.global.u64 	[%rd20], %rd17;
	ld.u32 	%r10, [%rd17];
	cvta.to.global.u64 	%rd21, %rd7;
	shl.b64 	%rd22, %rd1, 2;
	add.s64 	%rd23, %rd21, %rd22;
	st.global.u32 	[%rd23], %r10;
	ret;
}
"""

#: nvcc -O3 of: `int v[4] = {10, 20, 30, 40}; int i = idx[t]; v[i] += t;
#: out[t] = v[i ^ 1] + v[i];` (a per-thread array indexed by data: .local)
LOCAL_ARRAY = HEADER + """
.visible .entry k(
	.param .u64 k_param_0,
	.param .u64 k_param_1
)
{
	.local .align 16 .b8 	__local_depot0[16];
	.reg .b64 	%SP;
	.reg .b64 	%SPL;
	.reg .b32 	%r<11>;
	.reg .b64 	%rd<14>;
	mov.u64 	%SPL, __local_depot0;
	ld.param.u64 	%rd1, [k_param_0];
	ld.param.u64 	%rd2, [k_param_1];
	cvta.to.global.u64 	%rd3, %rd2;
	cvta.to.global.u64 	%rd4, %rd1;
	add.u64 	%rd6, %SPL, 0;
	mov.u32 	%r1, 40;
	mov.u32 	%r2, 30;
	mov.u32 	%r3, 20;
	mov.u32 	%r4, 10;
	st.local.v4.u32 	[%rd6], {%r4, %r3, %r2, %r1};
	mov.u32 	%r5, %tid.x;
	mul.wide.u32 	%rd7, %r5, 4;
	add.s64 	%rd8, %rd4, %rd7;
	ld.global.u32 	%r6, [%rd8];
	mul.wide.s32 	%rd9, %r6, 4;
	add.s64 	%rd10, %rd6, %rd9;
	ld.local.u32 	%r7, [%rd10];
	add.s32 	%r8, %r7, %r5;
	st.local.u32 	[%rd10], %r8;
	xor.b64  	%rd11, %rd9, 4;
	add.s64 	%rd12, %rd6, %rd11;
	ld.local.u32 	%r9, [%rd12];
	add.s32 	%r10, %r9, %r8;
	add.s64 	%rd13, %rd3, %rd7;
	st.global.u32 	[%rd13], %r10;
	ret;
}
"""

RED = HEADER + """
.visible .entry k(.param .u64 p_f, .param .u64 p_u, .param .f32 p_x)
{
	.reg .b32 %r<6>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<8>;
	.shared .align 4 .b8 s[8];
	ld.param.u64 %rd1, [p_f];
	ld.param.u64 %rd2, [p_u];
	ld.param.f32 %f1, [p_x];
	cvta.to.global.u64 %rd3, %rd1;
	cvta.to.global.u64 %rd4, %rd2;
	mov.u32 %r1, %tid.x;
	red.global.add.f32 [%rd3], %f1;
	red.global.add.u32 [%rd4], %r1;
	red.global.max.s32 [%rd4+4], %r1;
	and.b32 %r2, %r1, 1;
	shl.b32 %r3, %r2, 2;
	mov.u32 %r4, s;
	add.s32 %r5, %r4, %r3;
	st.shared.f32 [%r5], 0f00000000;
	bar.sync 0;
	red.shared.add.f32 [%r5], %f1;
	bar.sync 0;
	ld.shared.f32 %f2, [%r5];
	mul.wide.u32 %rd5, %r1, 4;
	add.s64 %rd6, %rd3, %rd5;
	st.global.f32 [%rd6+4], %f2;
	ret;
}
"""

TESTP_CLASSES = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")
TESTP = HEADER + """
.visible .entry k(.param .u64 p_a, .param .u64 p_out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p_a];
    ld.param.u64 %rd2, [p_out];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.f32 %f1, [%rd6];
    mov.u32 %r2, 0;
""" + "".join(f"""    testp.{c}.f32 %p1, %f1;
    selp.u32 %r3, {1 << i}, 0, %p1;
    or.b32 %r2, %r2, %r3;
""" for i, c in enumerate(TESTP_CLASSES)) + """    add.s64 %rd7, %rd4, %rd5;
    st.global.u32 [%rd7], %r2;
    ret;
}
"""

PACK = HEADER + """
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b8 %rc<5>;
    .reg .b16 %rs<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r2, [%rd4];
    mov.b32 {%rs1, %rs2}, %r2;
    mov.b32 {%rc1, _, %rc3, %rc4}, %r2;
    mov.b32 %r3, {%rs2, %rs1};
    mov.b32 %r4, {%rc4, %rc3, 0, %rc1};
    xor.b32 %r5, %r3, %r4;
    st.global.u32 [%rd4], %r5;
    ret;
}
"""

#: odd lanes return at once, even lanes loop first: a warp ends with its
#: lanes at different blocks
EARLY_EXIT = HEADER + """
.visible .entry k(.param .u64 k_param_0)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    shl.b32 %r3, %r2, 2;
    add.s32 %r4, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r4;
    and.b32 %r5, %r1, 1;
    setp.ne.s32 %p1, %r5, 0;
    @%p1 bra $L__EXIT;
    mov.u32 %r6, 0;
$L__LOOP:
    add.s32 %r6, %r6, %r2;
    add.s32 %r1, %r1, 1;
    setp.lt.u32 %p2, %r1, 6;
    @%p2 bra $L__LOOP;
    st.global.u32 [%rd4], %r6;
$L__EXIT:
    ret;
}
"""


def _run(tmp_path, text: str, launch: dict, engine: str, capsys) -> tuple[int, str, str]:
    ptx, spec = tmp_path / "k.ptx", tmp_path / "k.json"
    ptx.write_text(text)
    spec.write_text(json.dumps({"kernel": "k", **launch}))
    status = main(["run", str(ptx), "--launch", str(spec), "--engine", engine])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_lane_and_warp_specials(tmp_path, capsys, engine):
    launch = {"grid": [1, 1, 1], "block": [10, 1, 1],
              "args": [{"type": "u32*", "data": [0] * 10}]}
    status, out, err = _run(tmp_path, SPECIALS, launch, engine, capsys)
    assert status == 0, err
    words = []
    for t in range(10):
        lane, warp = t % 4, t // 4
        ge, gt = 0xF & ~((1 << lane) - 1), 0xF & ~((2 << lane) - 1)
        words.append(lane << 4 | warp << 8 | 3 << 12 | ge | gt << 20)
    assert json.loads(out)["buffers"] == [words]


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_four_lanes_store_bytes_into_one_shared_word(tmp_path, capsys, engine):
    # lanes 0-3 store their bytes into word 0, lanes 4-7 into word 1, and
    # every lane its halfword into the top of word 1: the last lane's wins
    launch = {"grid": [1, 1, 1], "block": [8, 1, 1],
              "args": [{"type": "u32*", "data": [0] * 8}]}
    status, out, err = _run(tmp_path, BYTES, launch, engine, capsys)
    assert status == 0, err
    got = json.loads(out)["buffers"][0]
    assert got == [0xA4A3A2A1, 0x00A8A6A5] * 4     # the halfword store came last


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_a_pair_atomic_lane_by_lane(tmp_path, capsys, engine):
    launch = {"grid": [1, 1, 1], "block": [4, 1, 1],
              "args": [{"type": "s64*", "data": [5, -1, 1 << 40, -(1 << 40)]},
                       {"type": "s64*", "data": [7, -2, (1 << 40) - 1, 3]}]}
    status, out, err = _run(tmp_path, PAIR_MIN, launch, engine, capsys)
    assert status == 0, err
    assert json.loads(out)["buffers"] == [[5, -2, (1 << 40) - 1, -(1 << 40)],
                                          [5, -1, 1 << 40, -(1 << 40)]]


@pytest.mark.parametrize("engine", ["simt", "tensor"])
def test_64_bit_shared_atomics_lane_by_lane(tmp_path, capsys, engine):
    launch = {"grid": [1, 1, 1], "block": [4, 1, 1],
              "args": [{"type": "s64*", "data": [0] * 4},
                       {"type": "s64*", "data": [5, -(1 << 32), (1 << 32) + 1, -3]}]}
    ref = _run(tmp_path, SHARED64, launch, "ref", capsys)
    assert _run(tmp_path, SHARED64, launch, engine, capsys) == ref and ref[0] == 0


def _trap_messages(tmp_path, capsys, text: str, launch: dict) -> dict[str, str]:
    """Each engine's trap for the launch: all trap, `simt` and `tensor` alike."""
    messages = {}
    for engine in ("ref", "simt", "tensor"):
        status, _, err = _run(tmp_path, text, launch, engine, capsys)
        assert status == 3, err
        messages[engine] = err
    assert messages["simt"] == messages["tensor"]
    assert "Traceback" not in "".join(messages.values())
    return messages


def test_a_pair_atomic_whose_high_word_leaves_its_buffer_traps(tmp_path, capsys):
    launch = {"grid": [1, 1, 1], "block": [4, 1, 1],
              "args": [{"type": "u32*", "data": [1, 2, 3, 4, 5, 6, 7]},
                       {"type": "s64*", "data": [0, 0, 0, 0]}]}
    messages = _trap_messages(tmp_path, capsys, PAIR_MIN, launch)
    # lane 3's low word is the buffer's last: the high word is the one past it
    found = re.search(r"lane 3 .*word address (\d+) is outside buffer 0 'k_param_0' "
                      r"\(words \d+\.\.(\d+)\)", messages["simt"])
    assert found and int(found[1]) == int(found[2]) + 1


def _pointer_launch(sel: list[int]) -> dict:
    return {"grid": [1, 1, 1], "block": [len(sel), 1, 1],
            "args": [{"type": "s32*", "data": [11, 12, 13, 14]},
                     {"type": "s32*", "data": [21, 22, 23]},
                     {"type": "s32*", "data": sel},
                     {"type": "s32*", "data": [0] * len(sel)},
                     {"type": "u64*", "data": [0] * len(sel)}]}


@pytest.mark.parametrize("engine", ["simt", "tensor"])
def test_pointers_held_as_values_are_the_reference_addresses(tmp_path, capsys, engine):
    """Pointers into two buffers, parked in shared memory and loaded back:
    read through, and written out as integers, they equal `ref`'s."""
    launch = _pointer_launch([1, -3, 4, -1])
    ref = _run(tmp_path, POINTER_VALUES, launch, "ref", capsys)
    assert ref[0] == 0, ref[2]
    assert json.loads(ref[1])["buffers"][3] == [23, 11, 21, 14]
    assert _run(tmp_path, POINTER_VALUES, launch, engine, capsys) == ref


@pytest.mark.parametrize("sel, lane, why", [
    ([1, 0, 4, -1], 0, r"address 0x0 \(null\) is outside every buffer"),
    # one past a's end: on the machine the next word is b's first, yet it traps
    ([1, 5, 4, -1], 0, r"address 0x[0-9a-f]+ is outside every buffer"),
])
def test_a_bad_pointer_loaded_from_memory_traps(tmp_path, capsys, sel, lane, why):
    messages = _trap_messages(tmp_path, capsys, POINTER_VALUES, _pointer_launch(sel))
    assert re.search(rf"out-of-bounds simt.ld .*ld.u32 .* by warp 0 lane {lane} .*{why}",
                     messages["simt"]), messages["simt"]
    assert "out-of-bounds" in messages["ref"]


def _local_launch(idx: list[int]) -> dict:
    return {"grid": [1, 1, 1], "block": [len(idx), 1, 1],
            "args": [{"type": "s32*", "data": idx}, {"type": "s32*", "data": [0] * len(idx)}]}


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_a_local_array_indexed_by_data(tmp_path, capsys, engine):
    """Each thread's frame is its own: the same slots, different values."""
    idx = [0, 1, 2, 3, 3, 0]
    status, out, err = _run(tmp_path, LOCAL_ARRAY, _local_launch(idx), engine, capsys)
    assert status == 0, err
    v = [10, 20, 30, 40]
    assert json.loads(out)["buffers"][1] == [v[i ^ 1] + v[i] + t for t, i in enumerate(idx)]


@pytest.mark.parametrize("index, why", [
    (4, r"local byte address 16 is outside the thread's 16 bytes of local memory"),
    (-1, r"local byte address 4294967292 is outside the thread's 16 bytes"),
])
def test_a_local_index_past_the_frame_traps(tmp_path, capsys, index, why):
    messages = _trap_messages(tmp_path, capsys, LOCAL_ARRAY, _local_launch([0, 1, index, 2]))
    assert re.search(rf"out-of-bounds simt.ld .*ld.local.u32 .* lane 2 .*{why}",
                     messages["simt"]), messages["simt"]
    assert "out-of-bounds" in messages["ref"] and "local" in messages["ref"]


#: PAIR_MIN with its atomic's address moved 2 bytes off and back: a pointer
#: held as a value, so the pair atomic is located (both words found at run time)
PAIR_MIN_LOCATED = PAIR_MIN.replace(
    "    atom.global.min.s64 %rd7, [%rd8], %rd7;",
    "    add.s64 %rd9, %rd8, 2;\n    add.s64 %rd10, %rd9, -2;\n"
    "    atom.global.min.s64 %rd7, [%rd10], %rd7;").replace("%rd<9>", "%rd<11>")


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_a_located_pair_atomic(tmp_path, capsys, engine):
    """Both words of a pair atomic located at run time (the high one 4 bytes on)."""
    assert "[%rd10]" in PAIR_MIN_LOCATED
    launch = {"grid": [1, 1, 1], "block": [4, 1, 1],
              "args": [{"type": "s64*", "data": [5, -1, 1 << 40, -(1 << 40)]},
                       {"type": "s64*", "data": [7, -2, (1 << 40) - 1, 3]}]}
    status, out, err = _run(tmp_path, PAIR_MIN_LOCATED, launch, engine, capsys)
    assert status == 0, err
    assert json.loads(out)["buffers"] == [[5, -2, (1 << 40) - 1, -(1 << 40)],
                                          [5, -1, 1 << 40, -(1 << 40)]]


@pytest.mark.parametrize("engine", ["ref", "simt", pytest.param("tensor", marks=pytest.mark.full)])
def test_red_is_an_atomic_whose_old_value_nothing_reads(tmp_path, capsys, engine):
    """`red.{global,shared}.{add.f32,add.u32,max.s32}`: in lane order, f32
    sums rounded after each lane."""
    x = np.float32(0.1)
    launch = {"grid": [1, 1, 1], "block": [4, 1, 1],
              "args": [{"type": "f32*", "data": [0.5, 0, 0, 0, 0]},
                       {"type": "u32*", "data": [10, 0]}, {"type": "f32", "value": float(x)}]}
    status, out, err = _run(tmp_path, RED, launch, engine, capsys)
    assert status == 0, err
    total = np.float32(0.5)
    for _ in range(4):
        total = np.float32(total + x)
    pair = np.float32(x + x)
    assert json.loads(out)["buffers"][:2] == [[float(total)] + [float(pair)] * 4, [16, 3]]


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_testp_classifies_every_special_class(tmp_path, capsys, engine):
    words = [0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF800000, 0x7F800000,
             0x7FC00000, 0xFF800001, 0x3F800000, 0x80400000]
    floats = np.array(words, dtype=np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        classes = [np.isfinite(floats), np.isinf(floats), ~np.isnan(floats), np.isnan(floats),
                   np.isfinite(floats) & (np.abs(floats) >= np.finfo(np.float32).tiny),
                   (floats != 0) & (np.abs(floats) < np.finfo(np.float32).tiny)]
    want = [sum(int(c[i]) << k for k, c in enumerate(classes)) for i in range(len(words))]
    launch = {"grid": [1, 1, 1], "block": [len(words), 1, 1],
              "args": [{"type": "u32*", "data": words},
                       {"type": "u32*", "data": [0] * len(words)}]}
    status, out, err = _run(tmp_path, TESTP, launch, engine, capsys)
    assert status == 0, err
    assert json.loads(out)["buffers"][1] == want


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_vector_moves_pack_and_unpack_halves_and_bytes(tmp_path, capsys, engine):
    words = [0x11223344, 0xDEADBEEF, 0x80007FFF, 0]
    launch = {"grid": [1, 1, 1], "block": [4, 1, 1], "args": [{"type": "u32*", "data": words}]}
    status, out, err = _run(tmp_path, PACK, launch, engine, capsys)
    assert status == 0, err
    swapped = [(w >> 16 | w << 16) & 0xFFFF_FFFF for w in words]
    reordered = [(w >> 24) | (w >> 16 & 0xFF) << 8 | (w & 0xFF) << 24 for w in words]
    assert json.loads(out)["buffers"] == [[a ^ b for a, b in zip(swapped, reordered, strict=True)]]


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_warps_that_end_diverged_leave_their_slots_clean(tmp_path, capsys, engine):
    """Ten one-warp CTAs in the 8 warp slots, each warp diverging before it
    exits: the last two enter slots their predecessors left, and the host
    writes both control words of a slot a warp enters (`lanes` 0, `flags`
    with its absent lanes exited)."""
    launch = {"grid": [10, 1, 1], "block": [4, 1, 1], "args": [{"type": "u32*", "data": [7] * 40}]}
    status, out, err = _run(tmp_path, EARLY_EXIT, launch, engine, capsys)
    assert status == 0, err
    want = [c * (6 - t) if t % 2 == 0 else 4 * c + t for c in range(10) for t in range(4)]
    assert json.loads(out)["buffers"] == [want]


MUL_HI_16 = HEADER + """
.visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1)
{
    .reg .b16 %rs<6>;
    .reg .b32 %r<5>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.u16 %rs1, [%rd6];
    ld.global.u16 %rs2, [%rd6+2];
    mul.hi.s16 %rs3, %rs1, %rs2;
    mul.hi.u16 %rs4, %rs1, %rs2;
    mul.hi.s16 %rs5, %rs1, 18725;
    cvt.u32.u16 %r2, %rs3;
    cvt.u32.u16 %r3, %rs4;
    cvt.u32.u16 %r4, %rs5;
    add.s64 %rd7, %rd4, %rd5;
    st.global.u16 [%rd7], %rs3;
    st.global.u16 [%rd7+2], %rs4;
    mul.wide.u32 %rd8, %r1, 2;
    add.s64 %rd9, %rd4, %rd8;
    st.global.u16 [%rd9+16], %rs5;
    ret;
}
"""


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_the_high_half_of_a_16_bit_product(tmp_path, capsys, engine):
    """`mul.hi.s16`/`.u16` (clang divides a 16-bit value by 7 with
    `mul.hi.s16 r, x, 18725`): the high 16 bits of the exact 32-bit product,
    the operands read signed or unsigned."""
    pairs = [(0x8000, 0x8000), (0xFFFF, 0xFFFF), (0x7FFF, 0x8001), (0x1234, 0xFEDC)]
    launch = {"grid": [1, 1, 1], "block": [4, 1, 1],
              "args": [{"type": "u16*", "data": [x for pair in pairs for x in pair]},
                       {"type": "u16*", "data": [0] * 12}]}
    status, out, err = _run(tmp_path, MUL_HI_16, launch, engine, capsys)
    assert status == 0, err

    def signed(x: int) -> int:
        return x - (1 << 16) if x >> 15 else x
    want = []
    for a, b in pairs:
        want += [(signed(a) * signed(b) >> 16) & 0xFFFF, a * b >> 16]
    want += [(signed(a) * 18725 >> 16) & 0xFFFF for a, _ in pairs]
    assert json.loads(out)["buffers"][1] == want


TWO_KERNELS = HEADER + """
.visible .entry widen(.param .u64 widen_param_0)
{
    .reg .f32 %f<2>;
    .reg .f64 %fd<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [widen_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    ld.global.f32 %f1, [%rd2];
    cvt.f64.f32 %fd1, %f1;
    rsqrt.approx.f64 %fd1, %fd1;
    st.global.f64 [%rd2], %fd1;
    ret;
}
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.lo.s32 %r2, %r1, 3;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
    ret;
}
"""


@pytest.mark.parametrize("engine", ["simt", "tensor"])
def test_a_kernel_runs_beside_one_the_machine_lacks(tmp_path, capsys, engine):
    """nvcc puts every kernel of a `.cu` into one PTX file: the launched one
    is compiled alone (`ptx-remove-dead-functions{entry}`), so `widen`'s
    f64 reciprocal square root does not stop `k`; launching `widen` says
    what it lacks."""
    launch = {"grid": [1, 1, 1], "block": [4, 1, 1], "args": [{"type": "u32*", "data": [0] * 4}]}
    status, out, err = _run(tmp_path, TWO_KERNELS, launch, engine, capsys)
    assert status == 0, err
    assert json.loads(out)["buffers"] == [[0, 3, 6, 9]]
    spec = tmp_path / "widen.json"
    spec.write_text(json.dumps({"kernel": "widen", **launch}))
    assert main(["run", str(tmp_path / "k.ptx"), "--launch", str(spec), "--engine", engine]) == 2
    assert "k.ptx:14:5: error: 'rsqrt.approx.f64' is not yet supported by the machine" in \
        capsys.readouterr().err
