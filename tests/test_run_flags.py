"""`qgc run`'s flags: one rule for flags an engine does not take, `--stats`
on stderr (text or JSON), the warp size's range."""

from __future__ import annotations

import json

import pytest

from conftest import EXAMPLES
from qgc.cli import main

DOT = EXAMPLES / "dot"
RUN = ["run", str(DOT / "dot.ptx"), "--launch", str(DOT / "launch.json")]


@pytest.mark.parametrize("engine, flag", [
    ("tensor", ["--dtype", "bfloat16"]),     # once silently ignored
    ("simt", ["--warp-size", "32"]),
    ("ref", ["--dtype", "float32"]),
    ("simt", ["--base-config", "small"]),
    ("tensor", ["--trace-png", "t.png"]),
    ("ref", ["--generate"]),
])
def test_a_flag_the_engine_does_not_take_is_refused(capsys, engine, flag):
    assert main([*RUN, "--engine", engine, *flag]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {flag[0]} is a flag of the ")
    assert err.endswith(f"engine; --engine {engine} does not take it")


def test_the_base_from_the_environment_is_no_flag(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("QGC_BASE", str(tmp_path))
    from qgc.cli import parser
    _, commands = parser()
    args = commands["run"].parse_args([*RUN[1:], "--engine", "ref"])
    assert args.base == str(tmp_path)       # the default, not a flag given
    assert main([*RUN, "--engine", "ref"]) == 0


@pytest.mark.parametrize("size", ["0", "3", "64"])
def test_the_warp_size_is_a_power_of_two_up_to_32(capsys, size):
    assert main([*RUN, "--warp-size", size]) == 2
    assert capsys.readouterr().err.strip() == \
        f"error: --warp-size must be a power of two in 1..32, got {size}"


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_run_stats_on_stderr(capsys, engine):
    assert main([*RUN, "--engine", engine, "--stats=json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["buffers"][2] == [32]
    stats = json.loads(err)
    assert stats["engine"] == engine and stats["seconds"] > 0
    assert stats["ctas" if engine != "tensor" else "exec_steps"] == 1
    assert main([*RUN, "--engine", engine, "--stats"]) == 0
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"qgc: info: launch on the {engine} engine in ")
