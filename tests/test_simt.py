"""The simt level (DESIGN §2, second rung): the machine dialect, the passes that
lower PTX to it, and the `simt` engine, checked against `ref` at warp size 4.

- the skeleton kernels (dot, vector_add; nvcc and clang) give ref's and the
  expected buffers, and so do the other examples the v0 machine accepts;
- an out-of-bounds launch traps with the thread, the op and the word address;
- every limit (max-ops, max-blocks, regs, preds, mem-words) is refused with the
  limit and the amount needed; everything the machine cannot run yet is refused
  with `file:L:C: error: 'OPCODE' is not yet supported by the machine`;
- random programs of tests/ptxgen (int32 and branch families) agree with the
  generator's oracle whenever the machine accepts them.
"""

from __future__ import annotations

import copy
import json
import re
import struct
import subprocess
import sys

import pytest
from xdsl.utils.exceptions import VerifyException

from conftest import (
    BASE_2B,
    EXAMPLES,
    REPO,
    SHARED_KERNELS,
    example_dirs,
    needs_shared_kernels,
    on_random_programs,
    shared_params,
)
from qgc import driver
from qgc.cli import main
from qgc.diagnostics import QgcError
from qgc.dialects import simt
from qgc.machine.warps import Residency, make_warps
from qgc.pipeline import stage, with_options
from qgc.runtime.launch import LaunchError, load_launch
from qgc.runtime.memory import Trap
from qgc.runtime.ref import run_ref
from qgc.runtime.simt_engine import run_simt

SKELETON = ("dot", "vector_add")
COMPILERS = (("nvcc", ".ptx"), ("clang", ".clang.ptx"))
#: other examples the machine already runs (32- and 64-bit integers; branches, loops and
#: divergence; div/rem, abs, mul.hi, predicate logic)
ALSO_ACCEPTED = ("matmul4x4", "saxpy_s32", "grid_stride", "branchy", "divrem_signed",
                 "histogram_atomic", "minmax_abs", "vote_ballot", "warp_reduce_shfl",
                 "reduce_shared", "inclusive_scan", "bit_tricks", "mulhi_wide",
                 "pointer_arith64", "bytes_u8", "reverse_dynshared", "byte_permute",
                 # everyday idioms (issue 22): lane masks and warp ids, vector and
                 # sub-word accesses, fences, 64-bit data and atomics, generic addresses
                 "aos_soa", "atomic64_accum", "atomic64_cas_exch", "bfs_frontier",
                 "bitonic_shared", "csr_spmv", "fnv1a64", "grid_stride64", "int4_vec",
                 "last_block_reduce", "radix_split", "rank_lanemask", "run_length",
                 "shared_s16", "shared_u8_flags", "shfl_xor_warpid", "splitmix64",
                 "stream_compact", "transpose_pad", "warp_agg_atomic", "warp_agg_laneid",
                 "warp_scan_shfl",
                 # pointers held as values: stored, loaded back, null, located at run time
                 "linked_list", "pointer_table", "pointer_select",
                 # a byte buffer also read in whole words (clang's uchar4): packed
                 "pack_bytes",
                 # per-thread arrays indexed by data: .local frames
                 "local_hist", "local_sort",
                 # f32: softfloat at this level, integer programs at the tensor level
                 "saxpy_f32", "convert_f32", "float_ops", "rmsnorm_f",
                 # f16 and bf16 storage, f32 <-> 64-bit integer conversions; __constant__
                 "half_mix", "conv_const",
                 # warp-uniform loads beside per-lane ones (one read for the warp)
                 "uniform_loads",
                 # f64: double literals in float code, double to int and back
                 "double_literals",
                 # module variables: __constant__ and __device__ tables indexed by
                 # data, a __device__ total (hidden pointer parameters)
                 "device_globals")


def accepted_cases() -> list[tuple[str, str, str]]:
    """(example, compiler, suffix) of every example the machine runs."""
    return [(name, compiler, suffix) for name in SKELETON + ALSO_ACCEPTED
            for compiler, suffix in COMPILERS]
#: (example, compiler) whose answer at 4 lanes is its PTX's own: clang's warp
#: reduction shuffles by 16, 8, ... (masked to 4 lanes), nvcc's by 2, 1; both
#: are checked against `ref`, expected.json holds nvcc's
WARP4_OWN_ANSWER = {("warp_reduce_shfl", "clang"), ("vote_ballot", "clang")}
PIPELINE = stage("simt")


def compile_simt(path, pipeline=PIPELINE, verify_each: bool = True):
    ctx, module = driver.load(str(path))
    driver.apply(ctx, module, pipeline, verify_each=verify_each)
    return module


def _bits(buffers, launch):
    return [b if b is None or a.type != "f32" else
            [struct.unpack("<I", struct.pack("<f", v))[0] for v in b]
            for a, b in zip(launch.args, buffers, strict=True)]


def _launch(name: str, **changes):
    obj = json.loads((EXAMPLES / name / "launch.json").read_text())
    for index, value in changes.get("values", {}).items():
        obj["args"][index]["value"] = value
    for index, data in changes.get("data", {}).items():
        obj["args"][index]["data"] = data
    for key in ("grid", "block"):
        if key in changes:
            obj[key] = changes[key]
    return load_launch(obj)


# ------------------------------------------------------------ the skeleton

@pytest.mark.parametrize("name, compiler, suffix", accepted_cases(),
                         ids=[f"{n}-{c}" for n, c, _ in accepted_cases()])
def test_kernel_matches_ref_and_expected(name, compiler, suffix):
    path = EXAMPLES / name / f"{name}{suffix}"
    launch = load_launch(EXAMPLES / name / "launch.json")
    expected = json.loads((EXAMPLES / name / "expected.json").read_text())["buffers"]
    ctx, module = driver.load(str(path))
    ref = run_ref(module, launch, warp_size=4)
    driver.apply(ctx, module, PIPELINE)
    result = run_simt(module, launch)
    assert _bits(result.buffers, launch) == _bits(ref.buffers, launch)
    if (name, compiler) not in WARP4_OWN_ANSWER:
        assert _bits(result.buffers, launch) == _bits(expected, launch)


@pytest.mark.parametrize("compiler, suffix", COMPILERS, ids=[c for c, _ in COMPILERS])
def test_skeleton_resources(compiler, suffix):
    from qgc.stats import simt_kernel_stats
    for name, warps in (("dot", 1), ("vector_add", 2)):
        module = compile_simt(EXAMPLES / name / f"{name}{suffix}")
        (kernel,) = simt.kernels_of(module)
        s = simt_kernel_stats(kernel)
        # one block of at most 16 ops: each warp's whole thread in one EXEC step
        assert s["blocks"] == 1 and s["max_ops"] <= 16 and s["registers"] <= 15
        result = run_simt(module, load_launch(EXAMPLES / name / "launch.json"))
        assert result.stats["exec_steps"] == warps
        assert result.stats["per_warp_steps"] == [1] * warps


def test_every_pass_leaves_an_executable_kernel():
    """After if-conversion the kernel runs with virtual registers and one long
    block; block formation and allocation change neither the answer nor (for
    EXEC-step counting) more than the block count."""
    path = EXAMPLES / "dot" / "dot.ptx"
    launch = load_launch(EXAMPLES / "dot" / "launch.json")
    expected = [[1, 2, 3], [4, 5, 6], [32], None]
    first = [p.name for p in PIPELINE].index("simt-if-convert") + 1
    for upto in range(first, len(PIPELINE) + 1):
        module = compile_simt(path, PIPELINE[:upto])
        assert run_simt(module, launch).buffers == expected, PIPELINE[:upto]


def test_guarded_off_lanes_do_not_touch_memory():
    # n = 2 over two-element buffers: lanes 2 and 3 would read past the end, but
    # their guard is off, so nothing traps
    launch = _launch("dot", values={3: 2}, data={0: [1, 2], 1: [3, 4]})
    module = compile_simt(EXAMPLES / "dot" / "dot.ptx")
    assert run_simt(module, launch).buffers == [[1, 2], [3, 4], [11], None]


def test_partial_warp_and_several_ctas():
    # 3 CTAs of 3 threads: the fourth lane of every warp has no thread
    launch = _launch("vector_add", grid=[3, 1, 1], block=[3, 1, 1], values={3: 8})
    for suffix in (".ptx", ".clang.ptx"):
        path = EXAMPLES / "vector_add" / f"vector_add{suffix}"
        ctx, module = driver.load(str(path))
        ref = run_ref(module, launch, warp_size=4)
        driver.apply(ctx, module, PIPELINE)
        result = run_simt(module, launch)
        assert result.buffers == ref.buffers
        assert result.stats["warps"] == 3 and result.stats["exec_steps"] == 3


def test_atomics_from_every_lane_on_one_word():
    launch = _launch("dot", block=[8, 1, 1], values={3: 8},
                     data={0: list(range(1, 9)), 1: [-3] * 8})
    module = compile_simt(EXAMPLES / "dot" / "dot.clang.ptx")
    assert run_simt(module, launch).buffers[2] == [-3 * 36]


def test_offset_pointer_argument():
    obj = json.loads((EXAMPLES / "vector_add" / "launch.json").read_text())
    obj["args"][2]["offset"] = 0
    obj["args"][0]["data"] = [9] + obj["args"][0]["data"]
    obj["args"][0]["offset"] = 1
    launch = load_launch(obj)
    ctx, module = driver.load(str(EXAMPLES / "vector_add" / "vector_add.ptx"))
    ref = run_ref(module, launch, warp_size=4)
    driver.apply(ctx, module, PIPELINE)
    assert run_simt(module, launch).buffers == ref.buffers


# ------------------------------------------------------------------ traps

def _oob_launch():
    return _launch("dot", values={3: 4})  # n = 4 over 3-element buffers


@pytest.mark.parametrize("compiler, suffix", COMPILERS, ids=[c for c, _ in COMPILERS])
def test_out_of_bounds_traps_with_thread_op_and_address(compiler, suffix):
    path = EXAMPLES / "dot" / f"dot{suffix}"
    module = compile_simt(path)
    with pytest.raises(Trap) as err:
        run_simt(module, _oob_launch())
    message = str(err.value)
    assert err.value.status == 3
    assert "warp 0 lane 3" in message and "ctaid (0,0,0) tid (3,0,0)" in message
    assert re.search(rf"simt\.ld at .*dot{re.escape(suffix)}:\d+:\d+ \(ld\.global\.u32 ", message)
    assert re.search(r"word address \d+ is outside buffer [01] 'dot_param_[01]' \(words \d+\.\.\d+\)",
                     message)
    with pytest.raises(Trap):  # ref agrees that this launch faults
        run_ref(driver.load(str(path))[1], _oob_launch(), warp_size=4)


def test_out_of_bounds_from_the_command_line(tmp_path):
    launch = tmp_path / "launch.json"
    obj = json.loads((EXAMPLES / "dot" / "launch.json").read_text())
    obj["args"][3]["value"] = 4
    launch.write_text(json.dumps(obj))
    proc = subprocess.run([sys.executable, "-m", "qgc.cli", "run",
                           str(EXAMPLES / "dot" / "dot.ptx"), "--launch", str(launch),
                           "--engine", "simt"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "tid (3,0,0)" in proc.stderr and "dot.ptx:43:2" in proc.stderr
    assert "word address 16" in proc.stderr


# ----------------------------------------------------------------- limits

DOT = EXAMPLES / "dot" / "dot.ptx"
FRONT = "ptx-remove-dead-functions,convert-ptx-to-simt,simt-if-convert"


def _apply_error(pipeline, path=DOT) -> str:
    with pytest.raises(QgcError) as err:
        compile_simt(path, pipeline)
    assert err.value.status == 2
    return str(err.value).splitlines()[0]


def test_limit_regs():
    """Too few registers are spilled (tests/test_spill.py); an op that reads more
    registers than the machine has is refused at its location."""
    message = _apply_error(FRONT + ",simt-allocate-registers{regs=2}")
    assert message.startswith(f"{DOT}:15:1: error: ")
    assert f"kernel 'dot' needs 3 registers per lane at {DOT}:34:2 even after spilling, " \
           "the machine has 2 (option regs)" in message


def test_limit_preds(tmp_path):
    kernel = tmp_path / "preds.ptx"
    kernel.write_text(
        ".version 8.5\n.target sm_75\n.address_size 64\n"
        ".visible .entry two(.param .u64 out)\n{\n"
        "\t.reg .pred %p<3>;\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n"
        "\tld.param.u64 %rd1, [out];\n\tmov.u32 %r1, %tid.x;\n"
        "\tsetp.eq.u32 %p1, %r1, 1;\n\tsetp.eq.u32 %p2, %r1, 2;\n"
        "\tselp.b32 %r2, 5, 6, %p1;\n\tselp.b32 %r3, %r2, 7, %p2;\n"
        "\tmul.wide.u32 %rd2, %r1, 4;\n\tadd.s64 %rd3, %rd1, %rd2;\n"
        "\tst.global.u32 [%rd3], %r3;\n\tret;\n}\n")
    launch = load_launch({"grid": [1, 1, 1], "block": [4, 1, 1],
                          "args": [{"type": "u32*", "data": [0, 0, 0, 0]}]})
    # two predicates live, one on the machine: both end up as words (the
    # first one's read back lands where the second is live); an op that
    # reads two is refused (tests/test_demote_predicates.py)
    one = compile_simt(kernel, FRONT + ",simt-form-blocks,simt-allocate-registers{preds=1}")
    assert simt.kernels_of(one)[0].limit("demoted") == 2
    assert run_simt(one, launch).buffers == [[7, 7, 6, 7]]
    module = compile_simt(kernel)
    assert run_simt(module, launch).buffers == [[7, 7, 6, 7]]
    assert run_ref(driver.load(str(kernel))[1], launch).buffers == [[7, 7, 6, 7]]


def test_limit_max_blocks():
    message = _apply_error(FRONT + ",simt-form-blocks{max-ops=1 max-blocks=8}")
    assert "kernel 'dot' needs 15 blocks, the machine has 8 (option max-blocks)" in message


def test_limit_max_ops_is_verified(ctx):
    text = (EXAMPLES.parent / "testsuite" / "inputs" / "simt" / "too_many_ops.mlir").read_text()
    module = driver.parse_ir(ctx, text, "too_many_ops.mlir")
    with pytest.raises(VerifyException, match=re.escape(
            "block ^bb0 of kernel 'k' needs 3 ops, the machine runs at most 2 per block "
            "(option max-ops)")):
        module.verify()


def test_max_ops_shapes_the_blocks():
    for max_ops in (1, 3, 8, 20):
        module = compile_simt(DOT, FRONT + f",simt-form-blocks{{max-ops={max_ops}}},"
                              "simt-allocate-registers")
        (kernel,) = simt.kernels_of(module)
        sizes = [len(b.ops) - 1 for b in kernel.body.blocks]
        assert max(sizes) <= max_ops and sum(sizes) == 15
        assert len(sizes) == -(-15 // max_ops)
        result = run_simt(module, load_launch(EXAMPLES / "dot" / "launch.json"))
        assert result.buffers[2] == [32] and result.stats["exec_steps"] == len(sizes)


def test_limit_mem_words():
    module = compile_simt(EXAMPLES / "vector_add" / "vector_add.ptx",
                          with_options(PIPELINE, "convert-ptx-to-simt", mem_words=32))
    with pytest.raises(LaunchError, match=re.escape(
            "the launch needs 34 words of machine memory (4 for parameters, 6 for bounds, "
            "8 for 'vector_add_param_0', 8 for 'vector_add_param_1', 8 for "
            "'vector_add_param_2'), the machine has 32 (option mem-words)")):
        run_simt(module, load_launch(EXAMPLES / "vector_add" / "launch.json"))


def test_bytes_passed_to_a_word_buffer_are_packed():
    """A u8* or u16* argument of a buffer the kernel reads in words lies in
    memory as its bytes do: the words `ref` reads."""
    obj = json.loads((EXAMPLES / "dot" / "launch.json").read_text())
    obj["args"][0] = {"type": "u8*", "data": list(range(1, 17)),
                      "offset": 4}
    obj["args"][1] = {"type": "u16*", "data": [1, 0, 2, 1, 3, 0, 4, 0]}
    launch = load_launch(obj)
    _, module = driver.load(str(DOT))
    ref = run_ref(module, launch, warp_size=4)
    assert run_simt(compile_simt(DOT), launch).buffers == ref.buffers


def test_machine_types_of_arguments():
    module = compile_simt(DOT)
    obj = json.loads((EXAMPLES / "dot" / "launch.json").read_text())
    bad = copy.deepcopy(obj)
    bad["args"][0] = {"type": "u8*", "data": [1, 2, 3]}
    with pytest.raises(LaunchError, match=r"args\[0\]: a u8\* buffer of 3 bytes cannot be "
                       "passed to parameter 'dot_param_0', which the kernel accesses in 32-bit "
                       "words: the machine packs its bytes into whole words"):
        run_simt(module, load_launch(bad))
    bad["args"][0] = {"type": "u8*", "data": [1] * 12, "offset": 2}
    with pytest.raises(LaunchError, match=r"args\[0\]: offset 2 into a u8\* buffer that the "
                       "kernel accesses in 32-bit words: the machine needs a whole word"):
        run_simt(module, load_launch(bad))
    bad = copy.deepcopy(obj)
    bad["args"][0] = {"type": "u64", "value": 3}
    with pytest.raises(LaunchError, match=r"args\[0\]: parameter 'dot_param_0' is a pointer "
                       r"on the machine; a scalar \(u64\) cannot be passed to it"):
        run_simt(module, load_launch(bad))


# ------------------------------------------------------------ rejections

def _rejected_cases():
    accepted = {(name, compiler) for name, compiler, _ in accepted_cases()}
    for d in example_dirs():
        for compiler, suffix in COMPILERS:
            if (d.name, compiler) not in accepted:
                yield pytest.param(d / f"{d.name}{suffix}", id=f"{d.name}-{compiler}")


@pytest.mark.parametrize("path", list(_rejected_cases()))
def test_other_examples_are_refused_with_the_opcode_and_location(path, capsys):
    status = main([str(path), "--emit=simt"])
    err = capsys.readouterr().err
    assert status == 2, err
    first = err.splitlines()[0]
    assert re.match(rf"^{re.escape(str(path))}:\d+:\d+: error: '[^']+' is not yet supported "
                    r"by the machine( \(.+\))?$", first), first
    assert "Traceback" not in err


def test_dynamic_shared_memory_is_sized_by_the_launch():
    """The extern array starts after the static ones; its window is the
    launch's `dynamic_shared_bytes`, and an access past it traps."""
    path = EXAMPLES / "reverse_dynshared" / "reverse_dynshared.ptx"
    module = compile_simt(path)
    (kernel,) = simt.kernels_of(module)
    assert kernel.dynamic_shared is not None and kernel.dynamic_shared.value.data == 0
    obj = json.loads((EXAMPLES / "reverse_dynshared" / "launch.json").read_text())
    assert run_simt(module, load_launch(obj)).stats["memory"]["shared"] == 8
    obj["dynamic_shared_bytes"] = 16     # 4 words for 6 threads
    with pytest.raises(Trap, match=r"tid \(4,0,0\)\): shared byte address 16 is outside "
                       "the CTA.s 16 bytes of shared memory"):
        run_simt(module, load_launch(obj))


def test_guarded_return_exits_only_its_lanes(tmp_path):
    text = (".version 8.5\n.target sm_75\n.address_size 64\n"
            ".visible .entry gret(.param .u64 out)\n{\n\t.reg .pred %p<2>;\n"
            "\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<5>;\n\tld.param.u64 %rd1, [out];\n"
            "\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, %tid.x;\n"
            "\tmul.wide.u32 %rd3, %r1, 4;\n\tadd.s64 %rd4, %rd2, %rd3;\n"
            "\tst.global.u32 [%rd4], 1;\n\tsetp.eq.u32 %p1, %r1, 2;\n\t@%p1 ret;\n"
            "\tst.global.u32 [%rd4], 7;\n\tret;\n}\n")
    launch = load_launch({"grid": [1, 1, 1], "block": [4, 1, 1],
                          "args": [{"type": "u32*", "data": [0, 0, 0, 0]}]})
    path = tmp_path / "gret.ptx"
    path.write_text(text)
    result = run_simt(compile_simt(path), launch)
    assert result.buffers == [[7, 7, 1, 7]]


def test_a_loop_runs_as_a_per_lane_branch():
    """grid_stride's loop stays a `simt.branch` the machine runs per lane."""
    path = EXAMPLES / "grid_stride" / "grid_stride.ptx"
    module = compile_simt(path)
    (kernel,) = simt.kernels_of(module)
    assert any(isinstance(b.last_op, simt.BranchOp) for b in kernel.body.blocks)
    launch = load_launch(EXAMPLES / "grid_stride" / "launch.json")
    result = run_simt(module, launch)
    ref = run_ref(compile_simt(path, stage("ptx")), launch, warp_size=4)
    assert result.buffers == ref.buffers


def test_divergent_lanes_reconverge_by_min_pc(ctx):
    """Lane 0 takes a detour (a block, then a loop of 3 trips) the others skip:
    the warp runs the detour for lane 0 alone, then the join once for all."""
    from xdsl.parser import Parser
    text = (REPO / "testsuite" / "inputs" / "simt" / "diverge.mlir").read_text()
    module = Parser(ctx, text).parse_module()
    launch = load_launch({"kernel": "k", "grid": [1, 1, 1], "block": [4, 1, 1],
                          "args": [{"type": "u32*", "data": [0, 0, 0, 0]}]})
    result = run_simt(module, launch)
    assert result.buffers == [[30, 1, 1, 1]]
    assert result.stats["exec_steps"] == 6      # entry, detour 1 + 3 (lane 0), join


def test_byte_offsets_are_located_and_trap_when_misaligned(tmp_path):
    """A pointer plus bytes that are not whole words is a value, located where
    it is used: an aligned address runs, a misaligned one traps as in `ref`."""
    src = (REPO / "testsuite" / "inputs" / "simt" / "byte_offset.ptx").read_text()
    launch = load_launch({"kernel": "half", "grid": [1, 1, 1], "block": [2, 1, 1],
                               "args": [{"type": "u32*", "data": [0, 0]}]})
    for scale, located in (("2", True), ("4", False), ("8", False), ("6", True)):
        path = tmp_path / f"k{scale}.ptx"
        path.write_text(src.replace("%r1, 2;", f"%r1, {scale};"))
        module = compile_simt(path)
        kernel = simt.kernels_of(module)[0]
        assert (kernel.pointer_values is not None) == located
        if scale in ("2", "6"):     # thread 1 stores 2 or 6 bytes past the buffer's start
            with pytest.raises(Trap, match=r"misaligned .* tid \(1,0,0\).*not a multiple of 4"):
                run_simt(module, launch)
            with pytest.raises(Trap, match=r"misaligned"):
                run_ref(driver.load(str(path))[1], launch)


# -------------------------------------------------------------- command line

def test_cli_runs_the_simt_engine(capsys):
    assert main(["run", str(DOT), "--launch", str(EXAMPLES / "dot" / "launch.json"),
                 "--engine", "simt"]) == 0
    assert json.loads(capsys.readouterr().out) == {"buffers": [[1, 2, 3], [4, 5, 6], [32],
                                                               None]}


def test_cli_runs_a_simt_listing(tmp_path, capsys):
    listing = tmp_path / "dot.mlir"
    assert main([str(DOT), "--emit=simt", "--print-debuginfo"]) == 0
    listing.write_text(capsys.readouterr().out)
    assert main(["run", str(listing), "--launch", str(EXAMPLES / "dot" / "launch.json"),
                 "--engine", "simt"]) == 0
    assert json.loads(capsys.readouterr().out)["buffers"][2] == [32]


def test_cli_stats_at_the_simt_level(capsys):
    assert main([str(EXAMPLES / "vector_add" / "vector_add.ptx"), "--stats", "--launch",
                 str(EXAMPLES / "vector_add" / "launch.json")]) == 0
    out = capsys.readouterr().err
    assert "kernel 'vector_add' (ptx level)" in out
    assert re.search(r"kernel 'vector_add' \(simt level\): 1 blocks of 256, 16 ops, ops per "
                     r"block max 16 of 16 mean 16\.00, registers \d+ of 15 per lane", out)
    assert "memory 34 of 127 words (params 4, bounds 6, buffer 0 (vector_add_param_0) 8" in out
    assert "2 EXEC steps over 2 warps in 2 CTAs (per warp: 1 1)" in out
    assert "step program 'vector_add_step' (tensor level)" in out


def test_cli_stats_when_the_layers_do_not_fit(capsys, tmp_path):
    """The machine's resources stand; one line says which limit of the layers
    the tensor level exceeds, by how much (here a config an eighth as wide as 2B;
    a small kernel, since a schedule that cannot fit is tried at every goal)."""
    config = json.loads(BASE_2B.read_text())
    config["hidden_size"] = 256
    (tmp_path / "narrow.json").write_text(json.dumps(config))
    assert main([str(EXAMPLES / "vector_add" / "vector_add.ptx"), "--stats",
                 "--base-config", str(tmp_path / "narrow.json")]) == 0
    out = capsys.readouterr().err.splitlines()
    assert re.match(r"qgc info: kernel 'vector_add' \(simt level\): \d+ blocks of 256", out[1])
    assert re.match(r"qgc info: no layer schedule: error: tensor program 'vector_add_step' needs "
                    r"\d+ residual coordinates .*the layers have hidden 256 \(option hidden\)",
                    out[-1]), out[-1]
    assert not any("need the tensor stage" in line for line in out)


# --------------------------------------------------------- random programs

def _random_programs_agree(family: str, examples: int):
    def check(p, module, launch):
        got = run_simt(module, launch).buffers
        assert _bits(got, launch) == _bits(p.expected, launch), p.ptx

    assert on_random_programs([family], examples, PIPELINE, check) > 0


def test_random_straight_line_programs_agree_with_the_oracle():
    _random_programs_agree("int32", 40)


def test_random_float_programs_agree_with_the_oracle():
    """f32 arithmetic, fma, division, square roots, compares, min/max and
    conversions (the `f32` family, numpy's float32 as its oracle)."""
    _random_programs_agree("f32", 40)


def test_random_branching_programs_agree_with_the_oracle():
    _random_programs_agree("branch", 60)


def test_random_shared_memory_programs_agree_with_the_oracle():
    """Shared arrays, barriers and divergent guards (`bar.sync` blocks)."""
    _random_programs_agree("shared", 40)


def test_random_64_bit_programs_agree_with_the_oracle():
    """64-bit integers as register pairs: add/sub with carry, mul.lo/hi,
    mul.wide, shifts, compares, conversions between widths, 64-bit loads and
    stores."""
    _random_programs_agree("int64", 20)


def test_random_atomic_programs_agree_with_the_oracle():
    """Atomics with lane conflicts on one word, every operation of the menu."""
    _random_programs_agree("atomic", 40)


def test_random_pointer_programs_agree_with_the_oracle():
    """Pointers held as values: parked in shared memory, compared with null,
    read and added to through (located accesses)."""
    _random_programs_agree("pointer", 30)


def test_random_local_programs_agree_with_the_oracle():
    """Per-thread arrays in .local frames, indexed by data."""
    _random_programs_agree("local", 30)


# ------------------------------------------------------- the shared suite

#: integer kernels of ../shared/kernels the machine runs (both compilers); the
#: others must be refused with the opcode and location until it runs them
SHARED_ON_SIMT = {"collatz_steps_u", "compact_atomic_i", "divrem_i", "floyd_step_i",
                  "hash_insert_cas_i", "bit_intrinsics_u", "scan_shfl_up_i",
                  "vote_ops_i", "red_interleaved_i", "bitonic_shared_i",
                  "stencil1d_halo_i", "transpose_tiled_i", "dot_ll_sizet", "mulhi_wide_u",
                  "hist_shared_u8"}


def _shared_integer_cases():
    from test_ref_engine import shared_dir
    for spec in sorted(shared_dir().glob("*.json")):
        if json.loads(spec.read_text())["kind"] == "int":
            for flavor, suffix in COMPILERS:
                yield pytest.param(spec.stem, suffix, id=f"{spec.stem}-{flavor}")


@pytest.mark.parametrize("stem, suffix", shared_params(list(_shared_integer_cases()), 2))
def test_shared_integer_kernel_on_simt(stem, suffix, capsys):
    from test_ref_engine import check_buffer, shared_dir
    spec = shared_dir() / f"{stem}.json"
    path = shared_dir() / f"{stem}{suffix}"
    info = json.loads(spec.read_text())
    if stem not in SHARED_ON_SIMT and f"{stem}{suffix}".removesuffix(".ptx") \
            not in SHARED_ON_SIMT:
        assert main([str(path), "--emit=simt"]) == 2
        first = capsys.readouterr().err.splitlines()[0]
        assert re.match(rf"^{re.escape(str(path))}:\d+:\d+: error: '[^']+' is not yet "
                        r"supported by the machine( \(.+\))?$", first), first
        return
    launch = load_launch(info, spec.name)
    result = run_simt(compile_simt(path), launch)
    ref = run_ref(compile_simt(path, stage("ptx")), launch, warp_size=4)
    assert result.buffers == ref.buffers
    warp_sensitive = info.get("warp4_undefined") or "expected_warp4" in info
    if suffix == ".clang.ptx" and warp_sensitive:
        return      # the suite's 4-lane answer is nvcc's PTX (as in test_ref_engine)
    expected = info.get("expected_warp4", info["expected"])
    for param, got in zip(info["params"], result.buffers, strict=True):
        if param["kind"] == "ptr":
            check_buffer(param["name"], param["elem"], got, expected[param["name"]],
                         info.get("checks", {}).get(param["name"], {}))


# ------------------------------------------------------- residency

def test_ctas_enter_free_warp_slots_in_grid_order():
    """Three CTAs of two warps on five slots: two CTAs enter, the third only
    when a whole CTA has exited, into the lowest free slots."""
    launch = load_launch({"kernel": "k", "grid": [3, 1, 1], "block": [8, 1, 1], "args": []})
    warps = make_warps(launch, 0, 0)
    residency = Residency(warps, 5)
    exited: set[int] = set()

    def done(w):
        return id(w) in exited

    assert [(s, w.cta) for s, w in residency.admit(done)] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    exited.add(id(warps[2]))                 # one warp of CTA 1: its slots stay held
    assert residency.admit(done) == []
    exited.update((id(warps[0]), id(warps[1])))
    assert [(s, w.cta) for s, w in residency.admit(done)] == [(0, 2), (1, 2)]
    assert [w.cta for _, w in residency.resident()] == [2, 2, 1, 1]


@needs_shared_kernels
def test_a_cta_wider_than_the_warp_slots_is_refused():
    path = SHARED_KERNELS / "scan_shfl_up_i.ptx"
    info = json.loads(path.with_suffix(".json").read_text())
    ctx, module = driver.load(str(path))
    driver.apply(ctx, module, stage("simt"))
    with pytest.raises(LaunchError, match=r"has 8 warps; the machine holds 4 warps "
                                          r"\(option max-warps\)"):
        run_simt(module, load_launch(info, path.name), resident_warps=4)
