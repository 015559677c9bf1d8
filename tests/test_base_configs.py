"""The base configs: shipped in the package and named (`--base-config
2b|0.8b|small|PATH`), checked on every path that reads one (a bad config is
`error: base config 'PATH': ...`, status 2, before anything is compiled or
allocated), and a test suite that needs nothing beside the repository."""

from __future__ import annotations

import fnmatch
import json
import time
import tomllib

import pytest

import conftest
from conftest import EXAMPLES, REPO, small_base_config
from qgc.base_config import NAMED_CONFIGS, read_config_dict, resolve_config_path
from qgc.cli import main
from qgc.diagnostics import QgcError

DOT = EXAMPLES / "dot"
TWO_B = json.loads(resolve_config_path("2b").read_text())


# ------------------------------------------------------------ the shipped configs

def test_each_name_is_a_shipped_config_and_none_is_the_2b():
    for name in NAMED_CONFIGS:
        path = resolve_config_path(name)
        assert path.parent == REPO / "qgc" / "configs" and path.is_file()
    assert resolve_config_path(None) == resolve_config_path("2b")


def test_the_configs_are_package_data():
    """A wheel carries what `qgc.base_config` reads: pyproject's package-data
    patterns for `qgc` match every shipped config and the schema."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["package-data"]["qgc"]
    files = [f"configs/{resolve_config_path(n).name}" for n in NAMED_CONFIGS]
    for name in [*files, "configs/base_config.schema.json"]:
        assert any(fnmatch.fnmatch(name, p) for p in patterns), name


def test_the_0_8b_is_the_2b_at_the_0_8b_width():
    """Qwen3.5-0.8B differs from the 2B in its width and MLP; the rest (24
    layers, the attention and linear-attention heads) is the 2B's."""
    small = read_config_dict("0.8b")
    assert (small["hidden_size"], small["intermediate_size"]) == (1024, 3584)
    differ = {k for k in TWO_B if small.get(k) != TWO_B[k]}
    assert differ == {"hidden_size", "intermediate_size"}


def test_small_is_the_0_8b_with_two_layers_and_what_the_tests_build(tmp_path):
    small, wide = read_config_dict("small"), read_config_dict("0.8b")
    assert small["layer_types"] == ["linear_attention", "full_attention"]
    assert small["num_hidden_layers"] == 2 and small["vocab_size"] == conftest.SMALL_VOCAB
    assert small["eos_token_id"] is None and small["bos_token_id"] is None
    assert {k for k in wide if small.get(k) != wide[k]} == \
        {"num_hidden_layers", "layer_types", "vocab_size", "eos_token_id"}
    written = json.loads(small_base_config(tmp_path, hidden=1024).read_text())
    assert written == json.loads(resolve_config_path("small").read_text())


@pytest.mark.parametrize("name, hidden, intermediate",
                         [("2b", 2048, 6144), ("0.8b", 1024, 3584), ("small", 1024, 3584)])
def test_print_pipeline_follows_the_named_config(name, hidden, intermediate, capsys):
    assert main([str(DOT / "dot.ptx"), "--emit=tensor", "--print-pipeline",
                 "--base-config", name]) == 0
    assert f"tensor-schedule-layers{{hidden={hidden} intermediate={intermediate} heads=16}}" \
        in capsys.readouterr().out


def test_load_text_config_reads_names_and_checkpoint_directories(tmp_path):
    from qgc.runtime.model import load_text_config
    assert load_text_config().hidden_size == 2048
    assert load_text_config("small").num_hidden_layers == 2
    # a multimodal checkpoint's config.json nests the text config
    (tmp_path / "config.json").write_text(json.dumps({"text_config": read_config_dict("0.8b")}))
    assert load_text_config(tmp_path).hidden_size == 1024


# ------------------------------------------------------------ bad configs

def _with(**changes) -> bytes:
    return json.dumps({**TWO_B, **changes}).encode()


BAD = [
    (b'{"hidden_size": 64}', "fields 'head_dim', 'intermediate_size', 'layer_types'"),
    (b"\xff\xfe{}", "not UTF-8 text (byte 0xff at offset 0)"),
    (b"[1, 2]", "must be a JSON object (a Qwen3.5 config.json or its text_config), got a list"),
    (b'{"text_config": 3}', "'text_config' must be a JSON object, got an integer"),
    (b'{"hidden_size": NaN}', "NaN is not a JSON number"),
    (_with(hidden_size=10**9), "field 'hidden_size' is 1000000000, more than the limit 32768"),
    (_with(hidden_size=-1), "field 'hidden_size' is -1, less than the minimum 1"),
    (_with(hidden_size="2048"), "field 'hidden_size' is \"2048\", not an integer"),
    (_with(hidden_size=2048.0), "field 'hidden_size' is 2048.0, not an integer"),
    (_with(rms_norm_eps=None), "field 'rms_norm_eps' is null, not a number"),
    (_with(layer_types=["linear_attention"] * 23 + ["sliding"]),
     "field 'layer_types[23]' is \"sliding\", not one of"),
    (_with(layer_types=["linear_attention"] * 24), "field 'layer_types' needs a 'full_attention'"),
    (_with(num_hidden_layers=3), "field 'layer_types' has 24 entries, 'num_hidden_layers' is 3"),
    (_with(num_key_value_heads=3), "field 'num_attention_heads' (8) must be a multiple of "
                                   "'num_key_value_heads' (3)"),
    (_with(eos_token_id=248320), "field 'eos_token_id' is 248320, not a row of the vocabulary"),
    (_with(dtype=[]), "field 'dtype' is [], not one of"),
    # the gadgets are SiLU's; transformers refused "" with a KeyError traceback
    (_with(hidden_act=""), "field 'hidden_act' is \"\", not one of \"silu\""),
    (_with(hidden_act="gelu"), "field 'hidden_act' is \"gelu\", not one of \"silu\""),
]


@pytest.mark.parametrize("raw, message", BAD, ids=[m.split(",")[0][:40] for _, m in BAD])
def test_a_bad_config_is_a_diagnostic_on_print_pipeline(raw, message, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_bytes(raw)
    assert main([str(DOT / "dot.ptx"), "--print-pipeline", "--base-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: base config '{path}': ") and message in err, err


def test_json_syntax_errors_point_at_the_place(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 2048,\n "x": }')
    assert main([str(DOT / "dot.ptx"), "--print-pipeline", "--base-config", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{path}:2:7: error: base config is not JSON: Expecting value", ' "x": }', "      ^"]


def test_missing_files_and_directories_without_a_config(tmp_path, capsys):
    assert main([str(DOT / "dot.ptx"), "--print-pipeline", "--base-config", "0.9b"]) == 2
    assert capsys.readouterr().err == ("error: base config '0.9b': no such file (the shipped "
                                       "configs are 2b, 0.8b, small)\n")
    assert main([str(DOT / "dot.ptx"), "--print-pipeline", "--base-config", str(tmp_path)]) == 2
    assert capsys.readouterr().err == \
        f"error: base config '{tmp_path}': the directory has no config.json\n"


@pytest.fixture
def incomplete(tmp_path):
    path = tmp_path / "incomplete.json"
    path.write_text('{"hidden_size": 64}')
    return path


@pytest.mark.parametrize("command", [
    ["-o", "{out}/layers.safetensors"],
    ["run", "--launch", str(DOT / "launch.json"), "--engine", "model"],
    ["build", "-o", "{out}/model"],
    ["drift"],
], ids=["compile-o", "run-model", "build", "drift"])
def test_every_path_that_reads_a_config_checks_it_first(command, incomplete, tmp_path, capsys):
    """The issue's internal errors: each path says what is wrong before it
    compiles or builds anything (quick, no output left behind)."""
    argv = [a.format(out=tmp_path) for a in command]
    argv = ([*argv[:1], str(DOT / "dot.ptx"), *argv[1:]] if argv[0] in ("run", "build", "drift")
            else [str(DOT / "dot.ptx"), *argv])
    start = time.perf_counter()
    assert main([*argv, "--base-config", str(incomplete)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: base config '{incomplete}': fields 'head_dim'"), err
    assert time.perf_counter() - start < 10      # no compilation ran
    assert not any(p.name in ("layers.safetensors", "model") for p in tmp_path.iterdir())


def test_a_stand_in_larger_than_the_machine_is_refused_before_allocation(monkeypatch):
    from qgc.runtime import model
    monkeypatch.setattr(model, "machine_memory_bytes", lambda: 1 << 30)
    with pytest.raises(QgcError, match=r"^error: a stand-in base with hidden 1024, 24 layers "
                                       r"and 248320 vocabulary rows has 0\.\dB parameters, "
                                       r"\d\.\d GiB in float32: more than this machine's "
                                       r"1\.0 GiB of memory") as err:
        model.load_base(None, model.load_text_config("0.8b"))
    assert err.value.status == 2


# ------------------------------------------------------------ nothing beside the repo

def test_lit_tests_naming_shared_require_the_kernel_suite():
    """Without ../shared/kernels a lit test that names %shared is UNSUPPORTED
    (`REQUIRES: shared-kernels`), not failed."""
    for path in sorted((REPO / "testsuite").rglob("*")):
        if path.suffix in (".mlir", ".ptx", ".test") and "%shared" in path.read_text():
            assert "REQUIRES: shared-kernels" in path.read_text(), path


def test_without_the_kernel_suite_its_tests_skip_and_are_counted(monkeypatch, tmp_path):
    monkeypatch.setattr(conftest, "SHARED_KERNELS", tmp_path / "absent")
    (param,) = conftest.shared_params([pytest.param("k", id="k")], 2)
    assert param.values == (None, None) and param.id == "no-shared-kernels"
    assert param.marks[0].kwargs["reason"] == conftest.NO_SHARED_KERNELS
    kept = [pytest.param("k")]
    monkeypatch.setattr(conftest, "SHARED_KERNELS", tmp_path)
    assert conftest.shared_params(kept) is kept
