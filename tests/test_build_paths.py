"""`qgc build`: one model whichever the input (PTX or its layers file), files
with the modes the umask gives, the model card, the stand-in's tokenizer
refusal, the launch prompt from Python, and the layer count said one way."""

import json
import os
import stat
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import EXAMPLES, small_base_config  # noqa: E402
from qgc.cli import main  # noqa: E402
from qgc.diagnostics import QgcError  # noqa: E402
from qgc.protocol import PROTOCOL_VERSION  # noqa: E402
from qgc.runtime.checkpoint import describe_layers  # noqa: E402

pytestmark = pytest.mark.usefixtures("two_torch_threads")
DOT = EXAMPLES / "dot"


@pytest.fixture(scope="module")
def config_path(tmp_path_factory):
    return str(small_base_config(tmp_path_factory.mktemp("base"), hidden=1024))


@pytest.fixture(scope="module")
def layers(config_path, tmp_path_factory):
    """dot compiled for the small base: in memory, and written as `-o` writes it."""
    from qgc.merged_model import compile_layers
    from qgc.runtime.model import load_text_config
    compiled = compile_layers(str(DOT / "dot.ptx"), load_text_config(config_path))
    path = tmp_path_factory.mktemp("layers") / "dot.safetensors"
    compiled.write(path)
    return compiled, path


@pytest.fixture(scope="module")
def built(layers, config_path, tmp_path_factory):
    """A build from the layers file through the CLI, under umask 027."""
    out = tmp_path_factory.mktemp("build") / "dot-model"
    old = os.umask(0o027)
    try:
        assert main(["build", str(layers[1]), "-o", str(out), "--base-config", config_path,
                     "--dtype", "bfloat16"]) == 0
    finally:
        os.umask(old)
    return out


def test_ptx_and_layers_file_give_one_model(layers, config_path):
    """The model from PTX (compiled in memory) and from its layers file: the
    same tensors, the same config, qgc.json the same but for `source`."""
    from qgc.merged_model import build
    from qgc.runtime.layers_file import read_layers
    from qgc.runtime.model import load_text_config
    config = load_text_config(config_path)
    compiled, path = layers
    a, info_a = build(compiled, str(DOT / "dot.ptx"), None, config_path, config, torch.bfloat16)
    b, info_b = build(read_layers(path), str(path), None, config_path, config, torch.bfloat16)
    assert a.config.to_dict() == b.config.to_dict()
    assert not a.config.tie_word_embeddings
    state_a, state_b = a.state_dict(), b.state_dict()
    assert state_a.keys() == state_b.keys()
    assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)
    assert {k for k in info_a if info_a[k] != info_b[k]} == {"source"}
    assert info_a["layers"] == {"step": compiled.step_layers, "readout": 1, "text_mute": 1}
    assert a.config.num_hidden_layers - config.num_hidden_layers == info_a["compiled_layers"]


def test_the_model_engine_merges_the_same_model(layers, config_path):
    """`qgc run --engine model` (the machine, not the layers) merges the same tensors."""
    from qgc.merged_model import build, compile_machine, merged_model
    from qgc.runtime.model import load_text_config
    config = load_text_config(config_path)
    machine, _ = compile_machine(str(DOT / "dot.ptx"), config)
    a, _ = merged_model(machine, None, config, torch.float32)
    b, _ = build(layers[0], "dot.ptx", None, config_path, config, torch.float32)
    state_a, state_b = a.state_dict(), b.state_dict()
    assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)


def test_build_files_follow_the_umask(built):
    assert stat.S_IMODE(built.stat().st_mode) == 0o750
    for path in built.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o640, path.name


def test_layers_file_follows_the_umask(config_path, tmp_path, layers):
    old = os.umask(0o002)
    try:
        layers[0].write(tmp_path / "f.safetensors")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f.safetensors").stat().st_mode) == 0o664


def test_generation_config_stops_once_per_id(built):
    eos = json.loads((built / "generation_config.json").read_text())["eos_token_id"]
    assert len(eos) == len(set(eos)) > 1


def test_model_card_says_what_it_is_and_how_to_run_it(built):
    card = (built / "README.md").read_text()
    info = json.loads((built / "qgc.json").read_text())
    front, _, body = card.removeprefix("---\n").partition("\n---\n")
    assert "library_name: transformers" in front
    counts = info["layers"]
    for text in ("`dot`", info["fingerprint"], "bfloat16", "stand-in", "8215"
                 if info["gpu_vocabulary"]["size"] == 8215 else str(info["gpu_vocabulary"]["size"]),
                 f"version {info['protocol_version']}", "qgc.prompt_ids",
                 "--engine model --model dot-model", "from_pretrained",
                 describe_layers(counts["step"], True)):
        assert text in body, text


def test_autotokenizer_refuses_a_stand_in_build(built):
    from transformers import AutoTokenizer
    with pytest.raises(Exception, match="stand-in base .* no text tokenizer"):
        AutoTokenizer.from_pretrained(str(built))


def test_a_build_runs_in_its_own_dtype(built, capsys):
    from qgc.merged_model import built_model
    from qgc.runtime.launch import load_launch
    launch = load_launch(DOT / "launch.json")
    model, *_ = built_model(str(built), str(DOT / "dot.ptx"), launch)
    assert model.dtype == torch.bfloat16
    assert "in bfloat16 (its own dtype" in capsys.readouterr().err


def test_prompt_ids_and_stock_generate_make_the_engines_first_step(built):
    """`qgc.prompt_ids` + stock `generate` with the saved generation config
    name the first step's tokens as the engines' host loop does (the tensor
    engine's stream: the model engine's, token for token)."""
    from transformers import GenerationConfig

    import qgc
    from qgc.merged_model import built_model
    from qgc.runtime.launch import load_launch
    from qgc.runtime.trace import run_trace, tensor_stepper
    launch = load_launch(DOT / "launch.json")
    ids = qgc.prompt_ids(built, DOT / "dot.ptx", DOT / "launch.json")
    model, kernel, program, vocab, base_vocab, _ = built_model(str(built), str(DOT / "dot.ptx"),
                                                               launch)
    out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=int),
                         generation_config=GenerationConfig.from_pretrained(built))
    named = out[0, len(ids):].tolist()
    trace = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))
    stream = [base_vocab + vocab.id_of(t) for t in trace.tokens]
    assert stream[:len(ids)] == ids
    assert named == stream[len(ids):len(ids) + len(named)]
    assert vocab.token(named[-1] - base_vocab).kind == "END"


def test_describe_layers_says_the_count_one_way():
    assert describe_layers(25, True) == "27 compiled layers (25 step + 1 readout + 1 text mute)"
    assert describe_layers(25, False) == "26 compiled layers (25 step + 1 readout)"
    assert describe_layers(25, None).startswith("26 compiled layers (25 step + 1 readout; ")


def test_output_directory_is_checked_before_compiling(tmp_path):
    from qgc.runtime.layers_file import check_output_file
    with pytest.raises(QgcError, match=r"cannot write '/nonexistent/x.safetensors': the "
                                       r"directory '/nonexistent' does not exist"):
        check_output_file("/nonexistent/x.safetensors")
    with pytest.raises(QgcError, match="it is a directory"):
        check_output_file(tmp_path)


def test_a_failed_write_names_the_path_and_leaves_nothing(layers, tmp_path, monkeypatch):
    target = tmp_path / "x.safetensors"

    def full_disk(path, data):
        open(path, "wb").write(data[:7])
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(Path, "write_bytes", full_disk)
    with pytest.raises(QgcError, match=rf"cannot write '{target}': No space left on device"):
        layers[0].write(target)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("damage", [
    {"qgc.json": b"{not json"}, {"qgc.json": b"[]"},
    {"qgc.json": json.dumps({"protocol_version": PROTOCOL_VERSION, "mem_words": -5}).encode()},
    {"model.safetensors": b"\x10\x00\x00\x00\x00\x00\x00\x00{}"},
])
def test_a_damaged_build_is_not_a_qgc_build(built, tmp_path, capsys, damage):
    """`qgc run --model DIR` of a build whose qgc.json or weights are damaged."""
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for name in ("config.json", "qgc.json", "generation_config.json"):
        (damaged / name).write_bytes((built / name).read_bytes())
    if "model.safetensors" not in damage:
        (damaged / "model.safetensors").symlink_to(built / "model.safetensors")
    for name, content in damage.items():
        (damaged / name).write_bytes(content)
    status = main(["run", str(DOT / "dot.ptx"), "--launch", str(DOT / "launch.json"),
                   "--engine", "model", "--model", str(damaged)])
    assert status == 2
    assert f"error: '{damaged}' is not a qgc build: " in capsys.readouterr().err
