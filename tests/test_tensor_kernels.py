"""Every integer kernel at the tensor level: the step program of
`convert-simt-to-tensor`, run token by token on the ideal `tensor` engine
through the host loop (runtime/trace.py), gives the `simt` engine's buffers
bit for bit, and the expected ones (examples/*/expected.json, the suite's
`expected`/`expected_warp4`).

CI runs a few kernels that cover each machine feature (divergence and loops,
shared memory and barriers, dynamic shared memory, warp shuffles and votes,
2-D thread blocks, 64-bit register pairs and elements, more warps than warp
slots: CTAs in waves, more memory than one bank); `make test-full` runs
them all, from both compilers (`-m full`)."""

from __future__ import annotations

import json

import pytest
from test_simt import accepted_cases

from conftest import EXAMPLES, SHARED_KERNELS, shared_params
from qgc import driver
from qgc.dialects import tensor
from qgc.machine.abi import pick_kernel
from qgc.passes.convert_simt_to_tensor import vocabulary_of
from qgc.pipeline import stage, up_to
from qgc.runtime.launch import load_launch
from qgc.runtime.simt_engine import run_simt
from qgc.runtime.trace import run_trace, tensor_stepper

#: the tensor stage without the layer schedule (the ideal engine needs none)
LOWER_TO_TENSOR = up_to(stage("tensor"), "tensor-schedule-layers")
#: (kernel, compiler) pairs CI runs; each covers a machine feature
IN_CI = {("branchy", "nvcc"), ("reduce_shared", "nvcc"), ("reverse_dynshared", "clang"),
         ("warp_reduce_shfl", "clang"), ("matmul4x4", "nvcc"), ("pointer_arith64", "nvcc"),
         ("floyd_step_i", "nvcc"), ("transpose_tiled_i", "nvcc"),
         ("atomic64_cas_exch", "nvcc"), ("shared_s16", "nvcc"), ("pointer_select", "nvcc"),
         ("uniform_loads", "nvcc")}
# (expanded floats run at the tensor level in CI in the random f32 programs
# below and tests/test_float_convert.py's special classes; saxpy_f32's with two
# predicates in test_demote_predicates under `make test-full`)
COMPILERS = (("nvcc", ".ptx"), ("clang", ".clang.ptx"))


def _cases():
    for name, compiler, suffix in sorted(accepted_cases()):
        d = EXAMPLES / name
        expected = json.loads((d / "expected.json").read_text())["buffers"]
        yield name, compiler, d / f"{name}{suffix}", load_launch(d / "launch.json"), expected
    for spec in sorted(SHARED_KERNELS.glob("*.json")):
        info = json.loads(spec.read_text())
        for compiler, suffix in COMPILERS:
            yield spec.stem, compiler, SHARED_KERNELS / f"{spec.stem}{suffix}", \
                load_launch(info, spec.name), None


def _params():
    for name, compiler, path, launch, expected in _cases():
        marks = [] if (name, compiler) in IN_CI else [pytest.mark.full]
        yield pytest.param(path, launch, expected, id=f"{name}-{compiler}", marks=marks)
    yield from shared_params([], 3)     # without the suite: its skip, said and counted


@pytest.mark.parametrize("path, launch, expected", list(_params()))
def test_tensor_equals_simt(path, launch, expected):
    """(Memory sized to the launch: transpose_tiled_i takes two banks.)"""
    ctx, module = driver.load(str(path))
    driver.apply_for_launch(ctx, module, LOWER_TO_TENSOR, launch, verify_each=True)
    (program,) = tensor.programs_of(module)
    vocab = vocabulary_of(program)
    ctx, simt_module = driver.load(str(path))
    driver.apply(ctx, simt_module, stage("simt"))
    want = run_simt(simt_module, launch, resident_warps=vocab.warps).buffers
    result = run_trace(pick_kernel(module, None), vocab, launch, tensor_stepper(program, vocab))
    assert result.buffers == want
    if expected is not None and not path.name.endswith(".clang.ptx"):
        assert result.buffers == expected


# ------------------------------------------------------- random programs

def _random_programs_agree(families: list[str], examples: int) -> None:
    """Programs of tests/ptxgen: the tensor level's buffers are the
    generator's oracle's (and so the `simt` engine's)."""
    from conftest import on_random_programs

    def check(p, module, launch):
        (program,) = tensor.programs_of(module)
        vocab = vocabulary_of(program)
        result = run_trace(pick_kernel(module, None), vocab, launch,
                           tensor_stepper(program, vocab))
        assert result.buffers == p.expected, p.ptx

    refusals = ("is not yet supported by the machine", "(option mem-words)")
    assert on_random_programs(families, examples, LOWER_TO_TENSOR, check, refusals) > 0


def test_random_branching_and_shared_programs_on_the_tensor_level():
    """Divergence, loops, shared memory and barriers: registers live across
    steps, lanes reconverge by min-PC, warps wait at barriers."""
    _random_programs_agree(["branch", "shared"], 2)


def test_random_straight_line_and_atomic_programs_on_the_tensor_level():
    _random_programs_agree(["int32", "atomic"], 4)


def test_random_float_programs_on_the_tensor_level():
    """f32 ops expanded into integer programs (`simt-expand-float`): the
    generator's oracle is numpy's float32 (one here, some 10 s; 60 drawn
    from every family under `make test-full`)."""
    _random_programs_agree(["f32"], 1)


def test_random_pointer_and_local_programs_on_the_tensor_level():
    """Located accesses (the buffer holding each lane's address found at run
    time) and per-thread .local frames."""
    _random_programs_agree(["pointer", "local"], 2)


@pytest.mark.full
def test_many_random_programs_on_the_tensor_level():
    _random_programs_agree(["int32", "branch", "shared", "atomic", "int64", "pointer",
                            "local", "f32"], 60)


SHUFFLE_IN_PLACE = """builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 127 {
    simt.ld v0, param[0]
    simt.special v1, "tid.x"
    simt.alu "add" v0, v0, v1
    simt.ld v2, global[v0 + 0] buffer 0
    simt.alu "mov" v3, 31
    simt.warp "shfl.bfly" v2, v2, 1, v3
    simt.warp "shfl.bfly" v2, v2, 2, v3
    simt.st global[v0 + 0], v2 buffer 0
    simt.exit
  }
}
"""


def test_a_shuffle_into_its_own_source_reads_every_lane_before_it():
    """Regression (warp_max_xor_f after f32 expansion: register allocation
    gave a shuffle its source as destination): lane l read lane j < l's
    new value instead of the one before the shuffle."""
    from qgc.context import make_context
    from qgc.pipeline import from_pass
    launch = load_launch({"kernel": "k", "grid": [1, 1, 1], "block": [4, 1, 1],
                          "args": [{"type": "u32*", "data": [1, 20, 300, 4000]}]})
    module = driver.parse_ir(make_context(), SHUFFLE_IN_PLACE, "shfl.mlir")
    want = run_simt(module.clone(), launch).buffers
    assert want == [[4000, 300, 20, 1]]
    driver.apply_for_launch(make_context(), module,
                            from_pass(LOWER_TO_TENSOR, "simt-layout-memory"), launch)
    (program,) = tensor.programs_of(module)
    vocab = vocabulary_of(program)
    result = run_trace(pick_kernel(module, None), vocab, launch, tensor_stepper(program, vocab))
    assert result.buffers == want
