"""The model level: the skeleton kernels' step programs as stock Qwen3.5
decoder layers on the 2B shape (hidden 2048, intermediate 6144, 16 linear
heads), checked token by token against the ideal `tensor` engine, and whole
launches through one merged stock `Qwen3_5ForCausalLM` in float32 and
bfloat16. The merged model's base is a seeded stand-in with the 2B layer
shape but two base layers (one linear, one full attention) and a small text
vocabulary, so that a launch takes seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qgc import driver
from qgc.codegen import compiled_machine, read_text_config
from qgc.pipeline import stage
from qgc.runtime.launch import load_launch
from qgc.runtime.trace import run_trace, tensor_stepper

torch = pytest.importorskip("torch")

from test_simt import accepted_cases  # noqa: E402
from test_tensor_core import assert_energy  # noqa: E402

from conftest import SMALL_VOCAB, small_base_config  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SKELETON = [(name, suffix) for name in ("dot", "vector_add") for suffix in (".ptx", ".clang.ptx")]
DTYPES = ("float32", "bfloat16")


pytestmark = pytest.mark.usefixtures("two_torch_threads")




@pytest.fixture(scope="module")
def base_config(tmp_path_factory):
    return small_base_config(tmp_path_factory.mktemp("base"))


@pytest.fixture(scope="module")
def machines(base_config):
    """(name, suffix) → (compiled program, vocabulary, simt kernel), compiled once."""
    cache = {}

    def get(name: str, suffix: str):
        if (name, suffix) not in cache:
            config = read_text_config(base_config)
            ctx, module = driver.load(str(EXAMPLES / name / f"{name}{suffix}"))
            driver.apply(ctx, module, stage("tensor", schedule=config))
            compiled, _, vocab, kernel = compiled_machine(module, config)
            cache[(name, suffix)] = compiled, vocab, kernel
        return cache[(name, suffix)]
    return get


def expected_buffers(name: str):
    return json.loads((EXAMPLES / name / "expected.json").read_text())["buffers"]


def recorded_trace(compiled, vocab, kernel, launch):
    """The launch on the ideal engine: every token fed, with the step's outputs."""
    record: list = []
    result = run_trace(kernel, vocab, launch, tensor_stepper(compiled.program, vocab, record))
    return result, [t for t, _ in record], [out for _, out in record]


class StreamedLayers:
    """The compiled layers as stock `Qwen3_5DecoderLayer` modules, built one at
    a time (a 2B-shaped layer is 58.8 M weights), run on the whole token stream
    at once (prefill: the chunked DeltaNet path), checking that every token's
    `sum(h²)` stays 64·hidden after every half-layer."""

    def __init__(self, compiled, dtype: str):
        from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding
        self.compiled, self.dtype = compiled, getattr(torch, dtype)
        self.rotary = Qwen3_5TextRotaryEmbedding(compiled.layer_config())
        self.halves = 0

    def _energy(self, h) -> None:
        assert_energy(h, self.compiled.hidden)
        self.halves += 1

    def run(self, h):
        from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer
        x = h.to(self.dtype)[None]
        pos = torch.arange(x.shape[1])[None]
        self._energy(x)
        with torch.no_grad():
            for i in range(len(self.compiled.layers)):
                with torch.device("meta"):
                    layer = Qwen3_5DecoderLayer(self.compiled.layer_config(), i)
                layer = layer.to_empty(device="cpu")
                self.compiled.fill_layer(layer, i)
                layer = layer.to(self.dtype).eval()
                hook = layer.post_attention_layernorm.register_forward_pre_hook(
                    lambda m, args: self._energy(args[0]))
                x = layer(x, position_embeddings=self.rotary(x, pos), attention_mask=None,
                          position_ids=pos)
                hook.remove()
                self._energy(x)
                del layer
        return x[0].double()


def check_stock_tokens(compiled, vocab, fed, outputs, dtype: str) -> None:
    """The fed tokens' embedding rows through the stock decoder layers: each
    output coordinate is exactly ±1 and equals the ideal engine's bit."""
    rows = torch.tensor([compiled.encode(vocab.inputs(t)) for t in fed], dtype=torch.float64)
    layers = StreamedLayers(compiled, dtype)
    h = layers.run(rows)
    assert layers.halves == 1 + 2 * len(compiled.layers)
    vals = h[:, compiled.output_coords()]
    assert bool(((vals == 1) | (vals == -1)).all()), \
        f"output coordinates off ±1 by up to {float((vals.abs() - 1).abs().max())}"
    got = [compiled.decode(row) for row in h.tolist()]
    bad = [i for i, (g, e) in enumerate(zip(got, outputs, strict=True)) if g != e]
    assert not bad, f"{len(bad)} of {len(fed)} tokens differ, first {fed[bad[0]].spelled()}"


@pytest.mark.parametrize("name, dtype", [
    ("dot", "float32"), pytest.param("dot", "bfloat16", marks=pytest.mark.full),
    *(pytest.param("vector_add", d, marks=pytest.mark.full) for d in DTYPES)])
def test_per_token_stock_layers(machines, name, dtype):
    """Every token of the launch, its step run by stock decoder layers.
    (bfloat16 in CI: the stock memories of test_tensor_core, the adder's
    digit patterns and `qgc run --engine model --dtype bfloat16` in
    test_checkpoint; here under `make test-full`.)"""
    compiled, vocab, kernel = machines(name, ".ptx")
    launch = load_launch(EXAMPLES / name / "launch.json")
    result, fed, outputs = recorded_trace(compiled, vocab, kernel, launch)
    assert result.buffers == expected_buffers(name)
    check_stock_tokens(compiled, vocab, fed, outputs, dtype)


def every_block_once(fed) -> int:
    """The length of the stream's prefix in which every block the launch
    runs has run once: up to the `EXEC` after the last block's first."""
    execs = [i for i, t in enumerate(fed) if t.kind == "EXEC"]
    first: dict[int, int] = {}
    for i in execs:
        first.setdefault(fed[i].b, i)
    last = max(first.values())
    return next((i for i in execs if i > last), len(fed))


#: the integer examples (test_simt's), every one in the 2B shape
#: every example the machine runs (from nvcc at least: `test_simt.accepted_cases`)
INTEGER_EXAMPLES = sorted({name for name, compiler, _ in accepted_cases() if compiler == "nvcc"})


@pytest.mark.full
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", INTEGER_EXAMPLES)
def test_per_token_stock_layers_of_every_example(machines, name, dtype):
    """Every example at hidden 2048, every block its launch runs (the
    launch's tokens up to the step after each block's first run; blocks are
    grouped by their block bit and share coordinates): the stock decoder
    layers give the ideal engine's outputs exactly."""
    compiled, vocab, kernel = machines(name, ".ptx")
    launch = load_launch(EXAMPLES / name / "launch.json")
    result, fed, outputs = recorded_trace(compiled, vocab, kernel, launch)
    assert result.buffers == expected_buffers(name)
    n = every_block_once(fed)
    check_stock_tokens(compiled, vocab, fed[:n], outputs[:n], dtype)


@pytest.fixture(scope="module")
def dot_model(machines, base_config):
    """dot's merged model in float32, built once: building 26 dense layers of
    the 2B shape is most of a test's time, and the tests below only read it."""
    from qgc.runtime.model import load_base, load_text_config
    from qgc.runtime.model_engine import CompiledMachine, build_model
    compiled, vocab, _ = machines("dot", ".ptx")
    base = load_base(None, load_text_config(base_config))
    return build_model(CompiledMachine(compiled, vocab), base, torch.float32)


def decoded_like_the_ideal_engine(model, compiled, vocab, kernel, name):
    """The launch decoded greedily by `model` with its own cache, the prompt
    prefilled: the buffers expected, the stream the ideal engine's."""
    from qgc.runtime.model_engine import model_stepper
    launch = load_launch(EXAMPLES / name / "launch.json")
    ideal = run_trace(kernel, vocab, launch, tensor_stepper(compiled.program, vocab))
    result = run_trace(kernel, vocab, launch, model_stepper(model, vocab, SMALL_VOCAB))
    assert result.buffers == expected_buffers(name), model.dtype
    assert [t.spelled() for t in result.tokens] == [t.spelled() for t in ideal.tokens], \
        model.dtype


def test_dot_through_the_merged_model(machines, dot_model):
    """One stock `Qwen3_5ForCausalLM` (the compiled layers, the readout, the
    base's layers) decodes nvcc's dot in float32 (bfloat16 and the other
    skeletons under `make test-full`; bfloat16 stock layers run in CI in
    tests/test_tensor_core.py's memories and `qgc run --dtype bfloat16` on a
    checkpoint, tests/test_checkpoint.py)."""
    compiled, vocab, kernel = machines("dot", ".ptx")
    assert dot_model.config.num_hidden_layers == 1 + len(compiled.layers) + 1 + 2
    decoded_like_the_ideal_engine(dot_model, compiled, vocab, kernel, "dot")


@pytest.mark.full
@pytest.mark.parametrize("name, suffix", SKELETON)
def test_launch_through_the_merged_model(machines, base_config, name, suffix):
    """As `test_dot_through_the_merged_model`, for each skeleton: in float32,
    then the same model cast to bfloat16."""
    from qgc.runtime.model import load_base, load_text_config
    from qgc.runtime.model_engine import CompiledMachine, build_model
    compiled, vocab, kernel = machines(name, suffix)
    base = load_base(None, load_text_config(base_config))
    model = build_model(CompiledMachine(compiled, vocab), base, torch.float32)
    assert model.config.num_hidden_layers == 1 + len(compiled.layers) + 1 + 2  # marker, readout
    for dtype in (torch.float32, torch.bfloat16):
        decoded_like_the_ideal_engine(model.to(dtype), compiled, vocab, kernel, name)


def test_a_fault_traps_through_the_merged_model(machines, dot_model):
    """a[3] of a 3-element buffer: the stock model names `TRAP` after the
    `EXEC`, and the host reports the `simt` engine's message."""
    from qgc.runtime.memory import Trap
    from qgc.runtime.model_engine import model_stepper
    _, vocab, kernel = machines("dot", ".ptx")
    data = json.loads((EXAMPLES / "dot" / "launch.json").read_text())
    data["args"][3]["value"] = 4
    launch = load_launch(data, "launch.json")
    with pytest.raises(Trap, match=r"^trap: out-of-bounds simt.ld at .*dot.ptx:43:2 .* by warp 0 "
                                   r"lane 3 .*: word address 16 is outside buffer 1"):
        run_trace(kernel, vocab, launch, model_stepper(dot_model, vocab, SMALL_VOCAB))


@pytest.fixture(scope="module")
def dot_stream(machines, dot_model):
    """(merged model, vocabulary, dot's recorded tokens, which were named)."""
    compiled, vocab, kernel = machines("dot", ".ptx")
    launch = load_launch(EXAMPLES / "dot" / "launch.json")
    ideal = run_trace(kernel, vocab, launch, tensor_stepper(compiled.program, vocab))
    return dot_model, vocab, list(ideal.tokens), ideal.predicted


def last_named_changed(tokens, predicted):
    """(position, the stream with the last named token that differs from the
    one before it repeated there)."""
    at = max(i for i, p in enumerate(predicted)
             if p and tokens[i - 1].spelled() != tokens[i].spelled())
    return at, tokens[:at] + [tokens[at - 1]] + tokens[at + 1:]


def test_the_replay_in_windows(dot_stream):
    """`replay_check` prefills the recorded stream in windows with the cache
    carried between them: in windows of 16 tokens it checks every named
    token, and a stream whose last named token is changed (in the third
    window) traps at that token."""
    from qgc.runtime.memory import Trap
    from qgc.runtime.model_engine import replay_check
    model, vocab, tokens, predicted = dot_stream
    assert replay_check(model, vocab, SMALL_VOCAB, tokens, predicted, window=16) == \
        {"tokens": len(tokens), "checked": sum(predicted[1:])}
    at, changed = last_named_changed(tokens, predicted)
    assert at > 32
    with pytest.raises(Trap, match=rf"^trap: replay: at token {at} the model names "):
        replay_check(model, vocab, SMALL_VOCAB, changed, predicted, window=16)


def test_the_replay_by_layers_is_the_windowed_forward_bit_for_bit(dot_stream, tmp_path):
    """`replay_by_layers` (a few layers at a time over every window), stopped
    after its first pass and resumed from its checkpoint, ends with the
    window-by-window forward's final hidden states bit for bit; and
    `replay_check` by layers, given the finished checkpoint, checks every
    named token without running a layer."""
    from transformers import DynamicCache

    from qgc.runtime.model_engine import replay_by_layers, replay_check
    model, vocab, tokens, predicted = dot_stream
    ids = torch.tensor([[SMALL_VOCAB + vocab.id_of(t) for t in tokens]])
    window = 24                         # two windows
    cache, windows = DynamicCache(config=model.config), []
    with torch.no_grad():
        for start in range(0, ids.shape[1], window):
            end = min(start + window, ids.shape[1])
            windows.append(model.model(input_ids=ids[:, start:end], cache=cache, use_cache=True,
                                       position_ids=torch.arange(start, end)[None]
                                       ).last_hidden_state[0])
    windowed = torch.cat(windows)

    def interrupted(layer: int, run):
        """`run()` with model layer `layer` raising KeyboardInterrupt."""
        module = model.model.layers[layer]
        module.forward = lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt)
        try:
            return run()
        finally:
            del module.forward

    with pytest.raises(KeyboardInterrupt):      # in the second pass
        interrupted(3, lambda: replay_by_layers(model, ids, window, 3, tmp_path))
    assert torch.load(tmp_path / "replay.pt")["done"] == 3
    assert torch.equal(replay_by_layers(model, ids, window, 3, tmp_path), windowed)
    assert interrupted(0, lambda: replay_check(
        model, vocab, SMALL_VOCAB, tokens, predicted, window=window, layers_per_pass=3,
        checkpoint=tmp_path)) == {"tokens": len(tokens), "checked": sum(predicted[1:])}
