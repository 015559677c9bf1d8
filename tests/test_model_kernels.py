"""Every integer kernel through the merged model: each example of
`INTEGER_EXAMPLES` and each integer kernel of the shared suite, compiled for a
small stand-in base (2 base layers, one linear and one full attention, a
512-row text vocabulary) and run in one stock `Qwen3_5ForCausalLM`.

The launch is recorded on the ideal `tensor` engine, then the whole stream
goes through the merged model in float32 in one prefill pass
(`replay_check`): at every token the machine named, the model's argmax over
the whole vocabulary is that token, so the model's buffers are the trace's,
and those must be the expected ones bit for bit. A few kernels are also
decoded token by token with the model's cache in bfloat16
(`model_stepper`): the stream is the ideal engine's, token for token.

The base has the Qwen3.5-0.8B layer shape (hidden 1024, intermediate 3584,
the 2B's 16 linear heads), about 2.7 times fewer weights per layer than the
2B's; a kernel whose schedule does not fit it is compiled for the 2B shape
(hidden 2048, intermediate 6144; `-h2048` in the test id).

CI runs a few nvcc kernels (about a minute on 2 cores); `make test-full` runs
every one, from both compilers (`-m full`)."""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path

import pytest
from test_model_engine import INTEGER_EXAMPLES

from conftest import EXAMPLES, SHARED, SHARED_KERNELS
from qgc.runtime.launch import load_launch
from qgc.runtime.trace import run_trace, tensor_stepper

torch = pytest.importorskip("torch")

#: Text rows of the stand-in's vocabulary (GPU rows come after them).
SMALL_VOCAB = 512
#: hidden → intermediate: the 0.8B's and the 2B's layer shapes
SHAPES = {1024: 3584, 2048: 6144}
#: (kernel, compiler) whose schedule does not fit hidden 1024 (it says so
#: with a QgcError naming the limit): compiled for hidden 2048
WIDE: set[tuple[str, str]] = set()
#: (kernel, compiler) CI runs (replay in float32)
IN_CI: set[tuple[str, str]] = {("dot", "nvcc")}
#: (kernel, compiler) also decoded token by token in bfloat16
DECODED: set[tuple[str, str]] = {("dot", "nvcc")}
COMPILERS = (("nvcc", ".ptx"), ("clang", ".clang.ptx"))


@pytest.fixture(scope="module", autouse=True)
def two_threads():
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(n)


def base_config_file(directory: Path, hidden: int) -> Path:
    """The stand-in's config: the 2B text config with `hidden`'s layer shape,
    two base layers and a small text vocabulary."""
    data = json.loads((SHARED / "qwen3_5_2b_text_config.json").read_text())
    data.update(hidden_size=hidden, intermediate_size=SHAPES[hidden], num_hidden_layers=2,
                layer_types=["linear_attention", "full_attention"], vocab_size=SMALL_VOCAB,
                bos_token_id=None, eos_token_id=None)
    path = directory / f"config_{hidden}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    """hidden → the stand-in's text config."""
    from qgc.runtime.model import load_text_config
    directory = tmp_path_factory.mktemp("base")
    return {h: load_text_config(base_config_file(directory, h)) for h in SHAPES}


# ------------------------------------------------------------------ the kernels
class Case:
    """One kernel from one compiler: its PTX, launch and expected buffers."""

    def __init__(self, name: str, compiler: str, path: Path, launch, info: dict | None):
        self.name, self.compiler, self.path, self.launch = name, compiler, path, launch
        self.info = info             # the suite's JSON (None: an example)

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.compiler

    @property
    def hidden(self) -> int:
        return 2048 if self.key in WIDE else 1024

    def check(self, buffers) -> None:
        """The buffers are the expected ones, bit for bit (a suite kernel's
        `checks` say where the order of atomics may vary)."""
        if self.info is None:
            expected = json.loads((EXAMPLES / self.name / "expected.json").read_text())
            assert buffers == expected["buffers"]
            return
        info = self.info
        if self.compiler == "clang" and (info.get("warp4_undefined") or "expected_warp4" in info):
            # clang's PTX hard-codes 32-lane warps: its 4-lane answer is the simt engine's
            assert buffers == simt_buffers(self.path, self.launch)
            return
        from test_ref_engine import check_buffer
        expected = info.get("expected_warp4", info["expected"])
        for param, got in zip(info["params"], buffers, strict=True):
            if param["kind"] == "ptr":
                check_buffer(param["name"], param["elem"], got, expected[param["name"]],
                             info.get("checks", {}).get(param["name"], {}))
            else:
                assert got is None


def simt_buffers(path: Path, launch):
    from qgc import driver
    from qgc.pipeline import stage_pipeline
    from qgc.runtime.simt_engine import run_simt
    ctx, module = driver.load(str(path))
    driver.apply(ctx, module, stage_pipeline("simt"))
    return run_simt(module, launch).buffers


def cases() -> list[Case]:
    out = []
    for name in INTEGER_EXAMPLES:
        launch = load_launch(EXAMPLES / name / "launch.json")
        for compiler, suffix in COMPILERS:
            out.append(Case(name, compiler, EXAMPLES / name / f"{name}{suffix}", launch, None))
    for spec in sorted(SHARED_KERNELS.glob("*.json")):
        info = json.loads(spec.read_text())
        if info["kind"] != "int":
            continue
        launch = load_launch(info, spec.name)
        for compiler, suffix in COMPILERS:
            out.append(Case(spec.stem, compiler, SHARED_KERNELS / f"{spec.stem}{suffix}",
                            launch, info))
    return out


def _params():
    for case in cases():
        marks = [] if case.key in IN_CI else [pytest.mark.full]
        wide = "-h2048" if case.hidden == 2048 else ""
        yield pytest.param(case, id=f"{case.name}-{case.compiler}{wide}", marks=marks)


# ------------------------------------------------------------------ the runs
def run_case(case: Case, config, decode: bool, timings: dict | None = None) -> None:
    """Compile `case` for `config`, record its launch on the ideal engine,
    replay it through the merged model in float32 (and, with `decode`,
    decode it token by token in bfloat16); every stream's buffers are the
    expected ones. `timings` gets the measurements."""
    from qgc.model_commands import compile_machine, merged_model
    from qgc.runtime.model_engine import model_stepper, replay_check
    start = time.perf_counter()
    machine, kernel = compile_machine(str(case.path), config, case.launch)
    compiled = time.perf_counter()
    program, vocab = machine.compiled.program, machine.vocab
    ideal = run_trace(kernel, vocab, case.launch, tensor_stepper(program, vocab))
    case.check(ideal.buffers)
    traced = time.perf_counter()
    model, base_vocab = merged_model(machine, None, config, torch.float32)
    layers = model.config.num_hidden_layers - config.num_hidden_layers   # compiled + readout
    del machine
    built = time.perf_counter()
    stats = replay_check(model, vocab, base_vocab, ideal.tokens, ideal.predicted)
    assert stats["checked"] == sum(ideal.predicted[1:]) > 0
    replayed = time.perf_counter()
    if decode:
        model = model.to(torch.bfloat16)
        result = run_trace(kernel, vocab, case.launch, model_stepper(model, vocab, base_vocab))
        assert [t.spelled() for t in result.tokens] == [t.spelled() for t in ideal.tokens]
        case.check(result.buffers)
    decoded = time.perf_counter()
    del model
    gc.collect()
    if timings is not None:
        timings.update(layers=layers, tokens=len(ideal.tokens),
                       trace_tokens=ideal.stats["trace_tokens"], checked=stats["checked"],
                       compile=compiled - start, trace=traced - compiled, build=built - traced,
                       replay=replayed - built, decode=decoded - replayed)


@pytest.mark.parametrize("case", list(_params()))
def test_kernel_through_the_merged_model(configs, case):
    run_case(case, configs[case.hidden], case.key in DECODED)
