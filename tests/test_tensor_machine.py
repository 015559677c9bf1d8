"""The machine at the tensor level: the token protocol (qgc.protocol), the
`convert-simt-to-tensor` step program and the host loop (runtime/trace.py),
run on the ideal `tensor` engine and checked against `ref` and `simt`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qgc import driver
from qgc import protocol as P
from qgc.cli import main
from qgc.dialects import tensor
from qgc.passes.convert_simt_to_tensor import vocabulary_of
from qgc.pipeline import stage_pipeline
from qgc.runtime.launch import load_launch
from qgc.runtime.ref import run_ref
from qgc.runtime.simt_engine import pick_kernel, run_simt
from qgc.runtime.trace import Records, prompt, run_trace, tensor_stepper

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: the tensor stage without the layer schedule (the ideal engine needs none)
LOWER_TO_TENSOR = stage_pipeline("tensor").partition(",tensor-schedule-layers")[0]
SKELETON = [(name, suffix) for name in ("dot", "vector_add") for suffix in (".ptx", ".clang.ptx")]


@pytest.fixture(scope="module")
def compiled():
    """name, suffix → (module, kernel, program, vocabulary), compiled once."""
    cache = {}

    def get(name: str, suffix: str):
        if (name, suffix) not in cache:
            ctx, module = driver.load(str(EXAMPLES / name / f"{name}{suffix}"))
            driver.apply(ctx, module, LOWER_TO_TENSOR)
            (program,) = tensor.programs_of(module)
            cache[(name, suffix)] = (module, pick_kernel(module, None), program,
                                     vocabulary_of(program))
        return cache[(name, suffix)]
    return get


def test_vocabulary_round_trips():
    vocab = P.Vocabulary(records=4, blocks=3, warps=8)
    tokens = vocab.tokens()
    # A: 4 slots × 512 addresses; D: 4 bytes × top × 256; EXEC; END(0..3), BAR(0..2)
    assert len(tokens) == vocab.size == 4 * 512 + 2048 + 8 * 3 + 4 + 3
    assert all(vocab.token(vocab.id_of(t)) == t for t in tokens)
    emitted = [t for t in tokens if t.kind != "EXEC"]      # the model never emits EXEC
    assert len({tuple(vocab.code(t)) for t in emitted}) == len(emitted)
    for t in emitted:
        assert vocab.from_outputs(vocab.output_fields(t)) == t
    with pytest.raises(ValueError):
        vocab.token(vocab.size)


def test_records_encode_and_read_back():
    memory: dict[int, int] = {}
    records = Records(memory)
    words = {0: 7, 3: 0x1234_5678, 9: 256, 12: 0}
    stream = prompt(words)
    assert [t.spelled() for t in stream[:2]] == ["A(0,0)", "D(0*,7)"]
    assert len(stream) == 2 + 5 + 3      # zero words need no record: memory starts at 0
    for t in stream:
        records.feed(t)
    assert memory == {0: 7, 3: 0x1234_5678, 9: 256}


@pytest.mark.parametrize("name, suffix", SKELETON)
def test_skeleton_on_the_tensor_engine(compiled, name, suffix):
    module, kernel, program, vocab = compiled(name, suffix)
    launch = load_launch(EXAMPLES / name / "launch.json")
    expected = json.loads((EXAMPLES / name / "expected.json").read_text())["buffers"]
    result = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))
    assert result.buffers == expected
    assert result.buffers == run_simt(module, launch).buffers
    ctx, ptx_module = driver.load(str(EXAMPLES / name / f"{name}{suffix}"))
    driver.apply(ctx, ptx_module, stage_pipeline("ptx"))
    assert result.buffers == run_ref(ptx_module, launch, warp_size=4).buffers


def test_dot_product_trace(compiled):
    _, kernel, program, vocab = compiled("dot", ".ptx")
    launch = load_launch(EXAMPLES / "dot" / "launch.json")
    result = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))
    trace = [t.spelled() for t in result.tokens[result.stats["prompt_tokens"]:]]
    # one EXEC step: lanes 0-2 add into c[0] (lane 3 has no element), so the
    # step's one record is lane 2's, the word 32 at c's address, then END(exit)
    assert trace == ["EXEC(0,0)", "A(2,16)", "D(0*,32)", "END(1)"]
    assert result.stats["tokens"] == 31      # the published design needed 47


def test_partial_warps_and_several_ctas(compiled):
    module, kernel, program, vocab = compiled("vector_add", ".ptx")
    launch = load_launch(EXAMPLES / "vector_add" / "launch.json")
    launch.grid = (3, 1, 1)
    launch.block = (3, 1, 1)
    result = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))
    assert result.buffers == run_simt(module, launch).buffers
    assert result.stats["exec_steps"] == 3


def test_cli_runs_the_tensor_engine(capsys):
    assert main(["run", str(EXAMPLES / "dot" / "dot.ptx"), "--launch",
                 str(EXAMPLES / "dot" / "launch.json"), "--engine", "tensor"]) == 0
    assert json.loads(capsys.readouterr().out) == {"buffers": [[1, 2, 3], [4, 5, 6], [32], None]}
