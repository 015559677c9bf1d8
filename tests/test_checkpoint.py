"""`qgc build`: the merged model as a stock checkpoint that plain
`from_pretrained` loads and `generate` runs exactly; and the diagnostics of
the model paths (a layers file for another base, a checkpoint of another
kernel, a launch past the built machine's memory). The base is a local
checkpoint directory with the Qwen3.5-0.8B layer shape, two layers, a small
vocabulary and a word-level tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import SMALL_VOCAB, small_base_config  # noqa: E402
from qgc.cli import main  # noqa: E402
from qgc.runtime.launch import load_launch  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DOT = EXAMPLES / "dot"
VOCAB, WORDS = SMALL_VOCAB, 500


pytestmark = pytest.mark.usefixtures("two_torch_threads")


def write_config(directory: Path, **changes) -> Path:
    return small_base_config(directory, hidden=1024, **changes)


def word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    words = {f"w{i}": i for i in range(WORDS)} | {"[UNK]": WORDS}
    tok = Tokenizer(models.WordLevel(words, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory) -> Path:
    """A local Qwen3.5 checkpoint: seeded weights, a tokenizer of 501 ids."""
    from qgc.runtime.model import load_text_config, stand_in
    directory = tmp_path_factory.mktemp("base")
    config = load_text_config(write_config(directory))
    stand_in(config, seed=5).save_pretrained(directory)
    word_tokenizer().save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def built(base_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("built") / "dot-model"
    assert main(["build", str(DOT / "dot.ptx"), "--base", str(base_dir), "-o", str(out),
                 "--dtype", "float32"]) == 0
    return out


def expected(name: str):
    return json.loads((EXAMPLES / name / "expected.json").read_text())["buffers"]


def test_the_build_reloads_stock_with_the_base_unchanged(built, base_dir):
    from transformers import AutoModelForCausalLM
    from transformers.models.qwen3_5 import Qwen3_5ForCausalLM
    model = AutoModelForCausalLM.from_pretrained(built)
    base = AutoModelForCausalLM.from_pretrained(base_dir)
    assert type(model) is Qwen3_5ForCausalLM
    info = json.loads((built / "qgc.json").read_text())
    n = info["compiled_layers"]
    assert model.config.num_hidden_layers == n + 2
    assert model.config.layer_types[n:] == base.config.layer_types
    merged = model.state_dict()
    for name, value in base.state_dict().items():
        if name.startswith("model.layers."):
            index, _, rest = name[len("model.layers."):].partition(".")
            name = f"model.layers.{int(index) + n}.{rest}"
        got = merged[name][:VOCAB] if name in ("model.embed_tokens.weight",
                                               "lm_head.weight") else merged[name]
        assert torch.equal(got, value), name


def test_the_extended_tokenizer_names_every_gpu_token(built):
    from transformers import AutoTokenizer

    from qgc import protocol as P
    from qgc.runtime.checkpoint import token_string
    tokenizer = AutoTokenizer.from_pretrained(built)
    info = json.loads((built / "qgc.json").read_text())
    size = info["gpu_vocabulary"]["size"]
    assert len(tokenizer) == VOCAB + size
    assert tokenizer.convert_tokens_to_ids(token_string(P.Token("EXEC", w=0, b=0))) == \
        VOCAB + P.Vocabulary(**{k: info["gpu_vocabulary"][k] for k in
                                ("records", "blocks", "warps", "sites")}).id_of(
            P.Token("EXEC", w=0, b=0))
    assert tokenizer("w3 w7")["input_ids"] == [3, 7]     # text ids as they were


def test_stock_generate_runs_the_launch_exactly(built):
    """from_pretrained, then `generate` with the checkpoint's own generation
    config, one call per step: the stream is the ideal engine's and the
    buffers are the dot product's."""
    from transformers import AutoModelForCausalLM

    from qgc.merged_model import host_kernel
    from qgc.runtime.model_engine import GenerateMachine
    from qgc.runtime.trace import run_trace, tensor_stepper
    info = json.loads((built / "qgc.json").read_text())
    model = AutoModelForCausalLM.from_pretrained(built).eval()
    assert model.generation_config.do_sample is False
    kernel, program, vocab = host_kernel(str(DOT / "dot.ptx"), info["mem_words"])
    launch = load_launch(DOT / "launch.json")
    ideal = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))
    result = run_trace(kernel, vocab, launch, GenerateMachine(model, vocab, VOCAB))
    assert result.buffers == expected("dot")
    assert [t.spelled() for t in result.tokens] == [t.spelled() for t in ideal.tokens]
    # one plain generate call from the prompt and the first EXEC stops at the step's END
    first_exec = result.tokens.index(next(t for t in result.tokens if t.kind == "EXEC"))
    ids = torch.tensor([[VOCAB + vocab.id_of(t) for t in result.tokens[:first_exec + 1]]])
    out = model.generate(ids, max_new_tokens=50)[0, ids.shape[1]:].tolist()
    step = [vocab.token(i - VOCAB).spelled() for i in out]
    assert step[-1].startswith("END") and step == \
        [t.spelled() for t in result.tokens[first_exec + 1:first_exec + 1 + len(step)]]


def test_qgc_run_on_the_checkpoint(built, capsys):
    assert main(["run", str(DOT / "dot.ptx"), "--launch", str(DOT / "launch.json"),
                 "--engine", "model", "--model", str(built), "--dtype", "bfloat16"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["buffers"] == expected("dot")
    assert "model engine (decode, bfloat16): 43 tokens" in out.err


def test_the_compact_engine_runs_the_checkpoints_own_layers(built, tmp_path, capsys):
    """`--engine compact --model DIR`: the build's compiled layers as it holds
    them, text mute and all, give the buffers and pass `--verify` by the
    build's own model; the plan is the one compiling the PTX gives (the mute's
    marker layer keeps no unit and its gate terms no weight: they read
    coordinates every GPU token holds at 0)."""
    from qgc.merged_model import built_layers, compile_with_host
    from qgc.runtime.compact import CompactPlan
    from qgc.runtime.launch import load_launch
    from qgc.runtime.model import load_text_config
    assert main(["run", str(DOT / "dot.ptx"), "--launch", str(DOT / "launch.json"),
                 "--engine", "compact", "--model", str(built), "--verify", "--stats=json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["buffers"] == expected("dot")
    stats = json.loads(out.err.strip().splitlines()[-1])
    assert stats["verified"] is True and stats["verified_tokens"] > 0

    launch = load_launch(DOT / "launch.json")
    from_build = CompactPlan.of(built_layers(str(built), str(DOT / "dot.ptx"), launch)[0],
                                load_text_config(built))
    config = load_text_config(write_config(tmp_path))
    compiled = CompactPlan.of(compile_with_host(str(DOT / "dot.ptx"), config, launch)[0], config)
    marker, *layers = from_build.layers
    assert not marker.heads and not len(marker.gate.rows)
    assert len(layers) == len(compiled.layers)
    assert [layer.heads for layer in layers] == [layer.heads for layer in compiled.layers]
    assert from_build.weights - marker.weights == compiled.weights


def test_a_checkpoint_of_another_kernel_is_refused(built, capsys):
    status = main(["run", str(EXAMPLES / "vector_add" / "vector_add.ptx"), "--launch",
                   str(EXAMPLES / "vector_add" / "launch.json"), "--engine", "model",
                   "--model", str(built)])
    assert status == 2
    assert "was built from kernel 'dot'" in capsys.readouterr().err


def test_a_launch_past_the_built_memory_is_refused(built, tmp_path, capsys):
    data = json.loads((DOT / "launch.json").read_text())
    for arg in data["args"][:2]:
        arg["data"] = list(range(100))
    data["args"][3]["value"] = 100
    (tmp_path / "big.json").write_text(json.dumps(data))
    status = main(["run", str(DOT / "dot.ptx"), "--launch", str(tmp_path / "big.json"),
                   "--engine", "model", "--model", str(built)])
    err = capsys.readouterr().err
    assert status == 2
    assert "the launch needs 211 words of machine memory" in err and "was built with 127 words" in err


@pytest.fixture(scope="module")
def layers_file(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("layers")
    path = directory / "dot.safetensors"
    assert main([str(DOT / "dot.ptx"), "--base-config", str(write_config(directory)),
                 "-o", str(path)]) == 0
    return path


@pytest.mark.parametrize("changes, message", [
    ({"hidden_size": 2048, "intermediate_size": 6144}, "hidden_size 1024; the base model has 2048"),
    ({"vocab_size": 600}, "vocabulary size 512; the base model has 600"),
])
def test_a_layers_file_for_another_base_is_refused(layers_file, tmp_path, capsys, changes,
                                                   message):
    config = write_config(tmp_path / "other", **changes)
    status = main(["build", str(layers_file), "--base-config", str(config),
                   "-o", str(tmp_path / "out")])
    assert status == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_layers_file_of_another_protocol_is_refused(layers_file, tmp_path, capsys):
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    from qgc.protocol import PROTOCOL_VERSION
    with safe_open(str(layers_file), framework="np") as f:
        meta = f.metadata()
    old = tmp_path / "old.safetensors"
    save_file(load_file(str(layers_file)), str(old), metadata=meta | {"protocol_version": "0"})
    status = main(["build", str(old), "-o", str(tmp_path / "out")])
    assert status == 2
    assert f"speaks token protocol version 0; this qgc speaks version {PROTOCOL_VERSION}" in \
        capsys.readouterr().err


@pytest.mark.parametrize("format_meta, said", [
    ({}, "layers format 1"),                         # before the field: the rows stored dense
    ({"layers_format": "3"}, "layers format 3"),
])
def test_a_layers_file_of_another_format_is_refused(layers_file, tmp_path, capsys,
                                                    format_meta, said):
    """A file as an older qgc wrote it (dense `qgc.gpu_rows`, `code` in the
    metadata, no `layers_format`), or of a newer format: refused, saying recompile."""
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    from qgc.runtime.layers_file import read_layers
    layers = read_layers(layers_file)
    with safe_open(str(layers_file), framework="np") as f:
        meta = {k: v for k, v in f.metadata().items() if k not in ("layers_format", "encoding")}
    meta |= {"code": json.dumps(layers.code), **format_meta}
    old = tmp_path / "old.safetensors"
    save_file(load_file(str(layers_file)) | {"qgc.gpu_rows": layers.gpu_rows}, str(old),
              metadata=meta)
    status = main(["build", str(old), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2
    assert f"'{old}' is not a qgc layers file: it is in {said}" in err
    assert "this one reads format 2 (recompile the kernel)" in err


def test_a_build_from_the_layers_file_runs(layers_file, base_dir, tmp_path, capsys):
    out = tmp_path / "from-layers"
    assert main(["build", str(layers_file), "--base", str(base_dir), "-o", str(out),
                 "--dtype", "float32"]) == 0
    assert main(["run", str(DOT / "dot.ptx"), "--launch", str(DOT / "launch.json"),
                 "--engine", "model", "--model", str(out), "--replay"]) == 0
    assert json.loads(capsys.readouterr().out)["buffers"] == expected("dot")


def test_build_does_not_overwrite_what_it_did_not_write(tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    status = main(["build", str(DOT / "dot.ptx"), "--base-config",
                   str(write_config(tmp_path / "cfg")), "-o", str(tmp_path / "notes")])
    assert status == 2
    assert "is not a qgc build; not overwriting it" in capsys.readouterr().err
    assert (tmp_path / "notes" / "keep.txt").read_text() == "mine"


def test_model_flags_need_the_model_engine(capsys):
    status = main(["run", str(DOT / "dot.ptx"), "--launch", str(DOT / "launch.json"),
                   "--replay"])
    assert status == 2
    assert "--replay is a flag of the model engine" in capsys.readouterr().err
