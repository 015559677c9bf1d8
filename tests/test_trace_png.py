"""The trace picture (`runtime/trace_png.py`): the dot launch through the
merged stock model (the 2B layer shape on a two-layer stand-in base with a
small text vocabulary, as in test_model_engine) with the compiled layers'
activity recorded token by token, checked against the ideal engine's step
outputs and the program's placement, then drawn as a PNG."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from qgc import driver
from qgc import protocol as P
from qgc.codegen import compiled_machine, read_text_config
from qgc.dialects import tensor as T
from qgc.pipeline import stage
from qgc.runtime.launch import load_launch
from qgc.runtime.trace import run_trace, tensor_stepper

torch = pytest.importorskip("torch")
pytest.importorskip("matplotlib")

from conftest import SMALL_VOCAB, small_base_config  # noqa: E402
from qgc.runtime.trace_png import GROUP, ActivityRecorder, draw_trace  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


pytestmark = pytest.mark.usefixtures("two_torch_threads")




@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The dot launch on the ideal engine (the step outputs of every fed token)
    and through the merged model inside an `ActivityRecorder`, then a text
    prompt through the same model, recorded too. Built once, on the 0.8B
    layer shape (hidden 1024)."""
    from qgc.runtime.model import load_base, load_text_config
    from qgc.runtime.model_engine import CompiledMachine, build_model, model_stepper
    base_config = small_base_config(tmp_path_factory.mktemp("base"), hidden=1024)
    config = read_text_config(base_config)
    ctx, module = driver.load(str(EXAMPLES / "dot" / "dot.ptx"))
    driver.apply(ctx, module, stage("tensor", schedule=config))
    compiled, _, vocab, kernel = compiled_machine(module, config)
    launch = load_launch(EXAMPLES / "dot" / "launch.json")
    record: list = []
    ideal = run_trace(kernel, vocab, launch, tensor_stepper(compiled.program, vocab, record))

    base = load_base(None, load_text_config(base_config))
    model = build_model(CompiledMachine(compiled, vocab), base, torch.float32)
    n_compiled = 1 + len(compiled.layers) + 1      # the text marker, the layers, the readout
    with ActivityRecorder(model, n_compiled) as recorder:
        result = run_trace(kernel, vocab, launch, model_stepper(model, vocab, SMALL_VOCAB))
    text_ids = (torch.arange(1, 33) * 37) % SMALL_VOCAB     # text rows only
    with ActivityRecorder(model, n_compiled) as text_recorder, torch.no_grad():
        model(input_ids=text_ids[None])
    hooks = sum(len(m._forward_pre_hooks) for layer in model.model.layers[:n_compiled]
                for m in layer.modules())
    memory_heads = {(1 + op.placed_layer, op.head.value.data)
                    for op in compiled.program.ops() if isinstance(op, T.MemoryOp)}
    return SimpleNamespace(
        compiled=compiled, vocab=vocab, record=record, ideal=ideal, result=result,
        activity=recorder.activity, text=text_recorder.activity, text_ids=text_ids,
        n_compiled=n_compiled, hooks_left=hooks, memory_heads=memory_heads, config=model.config)


def test_one_record_per_fed_token(run):
    """Every token the model is fed, prefill and decode alike, once; the
    stream's last token (the final `END`) is named but never fed."""
    a, result = run.activity, run.result
    assert [t.spelled() for t in result.tokens] == [t.spelled() for t in run.ideal.tokens]
    assert len(a) == len(result.tokens) - 1 == len(run.record)
    assert a.heads.shape == (len(a), run.n_compiled, run.config.linear_num_value_heads)
    groups = -(-run.config.intermediate_size // GROUP)
    assert a.groups.shape == (len(a), run.n_compiled, groups)
    assert a.heads.dtype == bool and a.groups.dtype.itemsize == 1
    assert int(a.group_sizes.sum()) == run.config.intermediate_size
    assert run.hooks_left == 0


def test_the_readout_fires_once_per_output_bit(run):
    """The readout's MLP is a constant neuron plus one neuron `ReLU(b)` per
    output bit of the step: on every GPU token it fires, 1 + the number of
    set bits the ideal engine names."""
    fired = run.activity.groups[:, -1].sum(-1, dtype=int)
    assert (fired >= 1).all()
    bits = [1 + sum(sum(out[name]) for name in P.Vocabulary.OUTPUTS) for _, out in run.record]
    assert fired.tolist() == bits


def test_memory_heads_fire_and_only_they(run):
    """A head reads a written row on some token, and only heads the schedule
    placed a memory on ever fire, on GPU tokens and on text."""
    for activity in (run.activity, run.text):
        tokens, layers, heads = activity.heads.nonzero()
        assert set(zip(layers.tolist(), heads.tolist(), strict=True)) <= run.memory_heads
    assert run.activity.heads.any()


def test_text_is_muted(run):
    """On text rows the marker layer writes the mark, the compiled layers
    stay silent (no head reads, no neuron fires) and only the readout's
    removal neurons fire; on GPU tokens the marker layer never fires."""
    t = run.text
    assert len(t) == len(run.text_ids)
    per_layer = t.groups.sum((0, 2), dtype=int).tolist()
    print(f"\ntext: {len(t)} tokens; neurons fired per compiled layer {per_layer} "
          "(the first is the marker layer, the last the readout)")
    assert not t.heads.any()
    assert t.groups[:, 0].any() and t.groups[:, -1].any()
    assert not t.groups[:, 1:-1].any()
    assert not run.activity.groups[:, 0].any()


def test_the_png(run, tmp_path):
    """A readable PNG of the expected size, all-zero rows collapsed and
    counted, no temporary file left beside it."""
    from matplotlib.image import imread
    from PIL import Image
    path = tmp_path / "dot.png"
    summary = draw_trace(run.activity, run.result.tokens, path, title="dot")
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    with Image.open(path) as img:
        img.verify()
    with Image.open(path) as img:
        width, height = img.size
    pixels = imread(path)
    assert pixels.shape[:2] == (height, width)       # rows (y) first
    assert height > width                            # many rows, 43 tokens
    rows_per_layer = run.config.linear_num_value_heads + len(run.activity.group_sizes)
    assert summary["rows"] + summary["omitted"] == run.n_compiled * rows_per_layer
    assert 0 < summary["rows"] and summary["omitted"] > 0
    assert summary["tokens"] == len(run.result.tokens)
    assert summary["path"] == str(path)
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask    # not a temp file's 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dot.png"]


def test_a_failed_write_leaves_the_old_file(run, tmp_path, monkeypatch):
    """The PNG is written to a temporary file and renamed: a failure midway
    leaves the previous file as it was and nothing else."""
    from matplotlib.figure import Figure
    path = tmp_path / "dot.png"
    path.write_bytes(b"old")

    def half_written(self, fname, **kwargs):
        if hasattr(fname, "write"):
            fname.write(PNG_MAGIC)
        else:
            Path(fname).write_bytes(PNG_MAGIC)
        raise OSError("disk full")
    monkeypatch.setattr(Figure, "savefig", half_written)
    with pytest.raises(OSError, match="disk full"):
        draw_trace(run.activity, run.result.tokens, path)
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dot.png"]


@pytest.mark.full
def test_the_png_says_what_each_row_is(run, tmp_path):
    """Rows labelled by head or neuron range, layers named as the merged
    model's tensors (`model.layers.N`, the text mute's marker layer first, the
    readout last), whatever rows the collapse keeps."""
    summary = draw_trace(run.activity, run.result.tokens, tmp_path / "t.png", collapse=False)
    heads = run.config.linear_num_value_heads
    groups = len(run.activity.group_sizes)
    assert summary["row_labels"][:heads + 1] == \
        [f"0: head {h}" for h in range(heads)] + [f"0: neurons 0-{GROUP - 1}"]
    last = run.n_compiled - 1
    assert summary["row_labels"][-1].startswith(f"{last}: neurons ")
    assert len(summary["row_labels"]) == run.n_compiled * (heads + groups)
    assert summary["layer_labels"][:3] == ["model.layers.0 attn (text mute)",
                                           "model.layers.0 mlp (text mute)",
                                           "model.layers.1 attn"]
    assert summary["layer_labels"][-1] == f"model.layers.{last} mlp (readout)"
