"""Predicates kept as 0/1 words (`simt-allocate-registers`' `Demoter`) where a
kernel needs more than `preds` at once: the examples with two predicates per
lane equal `ref`, before and after the f32 expansion (whose programs lean on
predicates) and at the tensor level; random programs equal their oracle; the
lit test testsuite/passes/simt-allocate-registers-demote.mlir shows the
rewrite. CUDA's powf needs nine at the default eight
(tests/test_expand_float.py runs it)."""

from __future__ import annotations

import pytest
from test_simt import _bits, accepted_cases

from conftest import EXAMPLES, on_random_programs
from qgc import driver
from qgc.diagnostics import QgcError
from qgc.dialects import simt
from qgc.pipeline import stage, up_to, with_options
from qgc.runtime.launch import load_launch
from qgc.runtime.ref import run_ref
from qgc.runtime.simt_engine import run_simt

SIMT = stage("simt")
#: the tensor stages up to the step program, memory sized for any example
EXPANDED = with_options(up_to(stage("tensor"), "convert-simt-to-tensor"), "convert-ptx-to-simt",
                        mem_words=2032)


def with_preds(preds: int, pipeline=SIMT):
    return with_options(pipeline, "simt-allocate-registers", preds=preds)


def _compiled(name: str, suffix: str, pipeline):
    path = EXAMPLES / name / f"{name}{suffix}"
    launch = load_launch(EXAMPLES / name / "launch.json")
    ctx, module = driver.load(str(path))
    ref = run_ref(module, launch, warp_size=4)
    driver.apply(ctx, module, pipeline)
    return module, launch, ref


def test_examples_with_two_predicates_equal_ref():
    """Every example compiles with two predicates per lane (no op reads
    more) and runs equal to `ref`; several need to demote."""
    demoted = []
    for name, compiler, suffix in accepted_cases():
        module, launch, ref = _compiled(name, suffix, with_preds(2))
        (kernel,) = simt.kernels_of(module)
        got = run_simt(module, launch).buffers
        assert _bits(got, launch) == _bits(ref.buffers, launch), (name, compiler)
        if kernel.demoted is not None:
            demoted.append(name)
            assert not any(r.is_pred and r.index.data >= 2 for r in simt.all_registers(
                list(kernel.body.blocks)))
    assert len(demoted) >= 8


@pytest.mark.parametrize("name", ["saxpy_f32", "float_ops", "convert_f32", "conv_const"])
@pytest.mark.parametrize("suffix", [".ptx", ".clang.ptx"])
def test_expanded_float_examples_with_two_predicates_equal_ref(name, suffix):
    module, launch, ref = _compiled(name, suffix, with_preds(2, EXPANDED))
    (kernel,) = simt.kernels_of(module)
    assert kernel.limit("demoted") >= 3
    got = run_simt(module, launch).buffers
    assert _bits(got, launch) == _bits(ref.buffers, launch)


@pytest.mark.parametrize("name, demoted", [
    ("grid_stride64", 2),
    pytest.param("saxpy_f32", 3, marks=pytest.mark.full),   # its f32 expansion's: 20 s
])
def test_demoted_predicates_at_the_tensor_level(name, demoted):
    """Two predicates a lane: grid_stride64's 64-bit compares and carries
    keep two as words, saxpy_f32's expanded program nine; the step
    program's run equals `ref`."""
    from qgc.dialects import tensor
    from qgc.machine.abi import pick_kernel
    from qgc.passes.convert_simt_to_tensor import vocabulary_of
    from qgc.runtime.trace import run_trace, tensor_stepper
    lower = with_preds(2, up_to(stage("tensor"), "tensor-schedule-layers"))
    path = EXAMPLES / name / f"{name}.ptx"
    launch = load_launch(EXAMPLES / name / "launch.json")
    ctx, module = driver.load(str(path))
    ref = run_ref(module, launch, warp_size=4)
    driver.apply_for_launch(ctx, module, lower, launch, verify_each=True)
    kernel = pick_kernel(module, None)
    assert kernel.limit("demoted") >= demoted
    (program,) = tensor.programs_of(module)
    vocab = vocabulary_of(program)
    got = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab)).buffers
    assert _bits(got, launch) == _bits(ref.buffers, launch)


def test_an_op_reading_more_predicates_than_the_machine_has():
    with pytest.raises(QgcError, match=r"error: kernel 'branchy' needs 2 predicate registers "
                       r"per lane at .*branchy\.ptx:\d+:\d+ even after keeping predicates as "
                       r"words, the machine has 1 \(option preds\)"):
        _compiled("branchy", ".ptx", with_preds(1))


@pytest.mark.parametrize("family, preds, examples", [
    ("f32", 2, 10), ("int64", 2, 25),
    pytest.param("f32", 2, 40, marks=pytest.mark.full),    # an f32 program: about 0.8 s
])
def test_random_programs_with_few_predicates_agree_with_the_oracle(family, preds, examples):
    """The families whose programs hold several predicates at once (the
    expanded f32 ops, 64-bit compares and carries)."""
    demoted = [0]

    def check(p, module, launch):
        got = run_simt(module, launch).buffers
        assert _bits(got, launch) == _bits(p.expected, launch), p.ptx
        demoted[0] += simt.kernels_of(module)[0].demoted is not None

    pipeline = with_preds(preds, EXPANDED if family == "f32" else SIMT)
    refusals = ("is not yet supported by the machine", "even after keeping predicates as words")
    assert on_random_programs([family], examples, pipeline, check, refusals) > 0
    assert demoted[0] > 0


#: an op that writes its own guard's predicate (vp0), demoted: the copy into
#: the word must be guarded by the value from before the op (regression: a
#: lane where the new value is false kept the old word)
SELF_GUARD = """
builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.special v1, "tid.x"
    simt.setp "lt.u" vp0, v1, 3
    simt.setp "lt.u" vp0, v1, 2 guard vp0
    simt.setp "gt.u" vp1, v1, 0
    simt.setp "ne" vp2, v1, 1
    simt.alu "selp" v3, 1, 2, vp1
    simt.alu "selp" v5, 100, 200, vp2
    simt.alu "selp" v6, 1000, 2000, vp1
    simt.alu "selp" v7, 10000, 20000, vp2
    simt.alu "add" v3, v3, v5
    simt.alu "add" v3, v3, v6
    simt.alu "add" v3, v3, v7
    simt.alu "selp" v2, 10, 20, vp0
    simt.alu "add" v2, v2, v3
    simt.alu "add" v4, v0, v1
    simt.st global[v4 + 0], v2 buffer 0
    simt.exit
  }
}
"""


def test_an_op_that_writes_its_own_guard_keeps_it_for_the_copy():
    from qgc.context import make_context
    launch = load_launch({"kernel": "k", "grid": [1, 1, 1], "block": [4, 1, 1],
                          "args": [{"type": "u32*", "data": [0] * 4}]})
    plain = driver.parse_ir(make_context(), SELF_GUARD, "self_guard.mlir")
    ctx = make_context()
    demoted = driver.parse_ir(ctx, SELF_GUARD, "self_guard.mlir")
    driver.apply(ctx, demoted, "simt-allocate-registers{preds=2}")
    assert simt.kernels_of(demoted)[0].limit("demoted") == 1
    want = [[12112, 21211, 11121, 11121]]
    assert run_simt(plain, launch).buffers == run_simt(demoted, launch).buffers == want

