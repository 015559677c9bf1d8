"""The machine at the tensor level: the token protocol (qgc.protocol), the
`convert-simt-to-tensor` step program and the host loop (runtime/trace.py),
run on the ideal `tensor` engine and checked against `ref` and `simt`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from qgc import driver
from qgc import protocol as P
from qgc.cli import main
from qgc.dialects import tensor
from qgc.machine.abi import pick_kernel
from qgc.machine.warps import make_warps
from qgc.passes.convert_simt_to_tensor import vocabulary_of
from qgc.pipeline import stage, up_to
from qgc.runtime.launch import LaunchError, load_launch
from qgc.runtime.memory import Trap
from qgc.runtime.ref import run_ref
from qgc.runtime.simt_engine import describe, run_simt
from qgc.runtime.trace import Records, fault_message, prompt, run_trace, tensor_stepper

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: the tensor stage without the layer schedule (the ideal engine needs none)
LOWER_TO_TENSOR = up_to(stage("tensor"), "tensor-schedule-layers")
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
    # A: 4 slots × 1024 addresses; D: 4 bytes × top × 256; EXEC; END(0..3), BAR(0..2)
    assert len(tokens) == vocab.size == 4 * 1024 + 2048 + 8 * 3 + 4 + 3
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
    for i, t in enumerate(stream):
        records.feed(t, i)
    assert memory == {0: 7, 3: 0x1234_5678, 9: 256}


def _faulty(stepper, at: int, named):
    """`stepper`, except that its `at`-th answer is `named`."""
    calls = 0

    def step(t):
        nonlocal calls
        calls += 1
        out = stepper(t)
        return named if calls == at else out
    return step


@pytest.mark.parametrize("named, what", [
    (None, r"no GPU token follows"),
    (P.Token("EXEC", w=0, b=0), r"EXEC\(0,0\) follows"),
    (P.Token("D", j=2, v=9), r"D\(2,9\) is byte 2 where byte 0 comes next"),
    (P.Token("END", b=0), r"END\(0\) comes before the open record ended"),
])
def test_a_token_out_of_place_traps_naming_its_position(compiled, named, what):
    """The machine's 2nd answer of the first step (the byte after `A`) is replaced: the run
    stops with a protocol trap at that token, never with a wrong buffer."""
    module, kernel, program, vocab = compiled("dot", ".ptx")
    launch = load_launch(EXAMPLES / "dot" / "launch.json")
    good = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))
    n_prompt = good.stats["prompt_tokens"]
    assert [t.kind for t in good.tokens[n_prompt:n_prompt + 4]] == ["EXEC", "A", "D", "END"]
    with pytest.raises(Trap, match=rf"^trap: protocol violation at token {n_prompt + 2}: {what}"):
        run_trace(kernel, vocab, launch,
                  _faulty(tensor_stepper(program, vocab), n_prompt + 2, named))


@pytest.mark.parametrize("name, suffix", SKELETON)
def test_skeleton_on_the_tensor_engine(compiled, name, suffix):
    module, kernel, program, vocab = compiled(name, suffix)
    launch = load_launch(EXAMPLES / name / "launch.json")
    expected = json.loads((EXAMPLES / name / "expected.json").read_text())["buffers"]
    result = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))
    assert result.buffers == expected
    assert result.buffers == run_simt(module, launch).buffers
    ctx, ptx_module = driver.load(str(EXAMPLES / name / f"{name}{suffix}"))
    driver.apply(ctx, ptx_module, stage("ptx"))
    assert result.buffers == run_ref(ptx_module, launch, warp_size=4).buffers


def test_dot_product_trace(compiled):
    _, kernel, program, vocab = compiled("dot", ".ptx")
    launch = load_launch(EXAMPLES / "dot" / "launch.json")
    result = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))
    trace = [t.spelled() for t in result.tokens[result.stats["prompt_tokens"]:]]
    # one EXEC step: lanes 0-2 add into c[0] (lane 3 has no element), so the
    # step's one record is lane 2's, the word 32 at c's address, then END(exit)
    assert trace == ["EXEC(0,0)", "A(2,16)", "D(0*,32)", "END(1)"]
    # the prompt: the parameters, 3 bounds pairs (the traps read them), the buffers
    assert result.stats["tokens"] == 43      # the published design needed 47


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


def vector_add_launch(n: int):
    launch = json.loads((EXAMPLES / "vector_add" / "launch.json").read_text())
    for arg in launch["args"][:3]:
        arg["data"] = [i % 7 for i in range(n)]
    launch["args"][3]["value"] = n
    return load_launch(launch, "launch.json")


@pytest.mark.parametrize("n, words", [(8, 127), (80, 254), (150, 508), (250, 1016),
                                      (400, 2032)])
def test_memory_takes_the_banks_the_launch_needs(n, words):
    """`apply_for_launch`: the fewest whole banks of 127 words that hold the
    launch (10 words of parameters and bounds, then three buffers of n)."""
    ctx, module = driver.load(str(EXAMPLES / "vector_add" / "vector_add.ptx"))
    launch = vector_add_launch(n)
    driver.apply_for_launch(ctx, module, LOWER_TO_TENSOR, launch)
    kernel = pick_kernel(module, None)
    assert kernel.mem_words.value.data == words
    (program,) = tensor.programs_of(module)
    banks = {name.partition("_b")[2] for name in program.memories() if name.startswith("mem_")}
    assert len(banks) == words // 127


def test_256_threads_in_eight_banks_and_wider_record_addresses():
    """A launch of 256 threads (8 CTAs of 32) over 778 words: seven banks,
    11-bit record addresses (the launch area at 1024, registers at 1536),
    and the tensor engine's buffers are `ref`'s."""
    launch = vector_add_launch(256)
    launch.grid, launch.block = (8, 1, 1), (32, 1, 1)
    ctx, module = driver.load(str(EXAMPLES / "vector_add" / "vector_add.ptx"))
    ref = run_ref(driver.load(str(EXAMPLES / "vector_add" / "vector_add.ptx"))[1], launch,
                  warp_size=4)
    driver.apply_for_launch(ctx, module, LOWER_TO_TENSOR, launch)
    (program,) = tensor.programs_of(module)
    vocab = vocabulary_of(program)
    assert vocab.address_bits == 11 and vocab.launch_area == 1024
    result = run_trace(pick_kernel(module, None), vocab, launch, tensor_stepper(program, vocab))
    assert result.buffers == ref.buffers


def test_a_launch_past_sixteen_banks_names_the_limit():
    ctx, module = driver.load(str(EXAMPLES / "vector_add" / "vector_add.ptx"))
    with pytest.raises(LaunchError, match=r"the launch needs 2110 words of machine memory .*"
                                          r"the machine has 2032 \(option mem-words\)"):
        driver.apply_for_launch(ctx, module, LOWER_TO_TENSOR, vector_add_launch(700))


def test_cli_mem_words_option(capsys):
    """`qgc --mem-words 254` compiles a two-bank machine; out of range is refused."""
    dot = str(EXAMPLES / "dot" / "dot.ptx")
    assert main([dot, "--mem-words", "254", "--emit", "tensor"]) == 0
    out = capsys.readouterr().out
    assert "mem_words 254" in out and re.search(r"tensor.memory @mem_\d+_b1 slots 127", out)
    assert main([dot, "--mem-words", "2033", "--emit", "tensor"]) == 2
    assert "error: --mem-words must be 1..2032, got 2033" in capsys.readouterr().err


def _faulting(name: str, change) -> tuple:
    """The example compiled to the tensor level, and its launch changed by
    `change` so that a thread faults."""
    launch = json.loads((EXAMPLES / name / "launch.json").read_text())
    change(launch)
    launch = load_launch(launch, "launch.json")
    ctx, module = driver.load(str(EXAMPLES / name / f"{name}.ptx"))
    driver.apply_for_launch(ctx, module, LOWER_TO_TENSOR, launch)
    return module, launch


def _n(value: int):
    def change(launch):
        launch["args"][-1]["value"] = value
    return change


def _short_a(launch):
    launch["args"][0]["data"] = launch["args"][0]["data"][:7]


def _window(nbytes: int):
    def change(launch):
        launch["dynamic_shared_bytes"] = nbytes
    return change


@pytest.mark.parametrize("name, change, what", [
    ("dot", _n(4), "word address 16 is outside buffer 1"),          # a[3] of 3
    ("vector_add", _short_a, "word address 17 is outside buffer 0"),  # the second CTA
    ("reverse_dynshared", _window(16), "shared byte address 16 is outside the CTA's 16 "
                                       "bytes"),
])
def test_a_fault_traps_with_the_simt_engines_message(name, change, what):
    """Out of bounds: the step program's `TRAP(site, lane)` in place of the
    step's records, and the host's message is the `simt` engine's, word for
    word (the thread, the op, the address)."""
    module, launch = _faulting(name, change)
    (program,) = tensor.programs_of(module)
    vocab = vocabulary_of(program)
    record: list = []
    with pytest.raises(Trap) as tensor_trap:
        run_trace(pick_kernel(module, None), vocab, launch,
                  tensor_stepper(program, vocab, record))
    with pytest.raises(Trap) as simt_trap:
        run_simt(module, launch, resident_warps=vocab.warps)
    assert str(tensor_trap.value) == str(simt_trap.value)
    assert what in str(tensor_trap.value)
    named = vocab.from_outputs(record[-1][1])
    assert record[-1][0].kind == "EXEC" and named.kind == "TRAP"
    site = pick_kernel(module, None).memory_sites()[named.site]
    assert f"{describe(site)} by warp" in str(tensor_trap.value)
    assert f" lane {named.lane} (" in str(tensor_trap.value)


def test_a_trap_the_simt_engine_does_not_make_is_said_so():
    module, launch = _faulting("dot", _n(3))       # in bounds
    (program,) = tensor.programs_of(module)
    vocab = vocabulary_of(program)
    kernel = pick_kernel(module, None)
    warp = make_warps(launch, 0, 0)[0]
    message = fault_message(kernel, launch, vocab.warps, warp, P.Token("TRAP", site=0, lane=1))
    assert message.startswith("trap: the machine faults at simt.ld at ")
    assert message.endswith("by warp 0 lane 1 (ctaid (0,0,0) tid (1,0,0)), where the simt "
                            "engine does not")
