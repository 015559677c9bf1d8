"""The compile command's reporting flags: `--stats[=json]` and `--timing` on
stderr (as ptxas -v and -mlir-timing), `--launch` sizing the memory, and `-o`
refused before compiling when its directory cannot take the file."""

from __future__ import annotations

import io
import json
import re
import sys
import time

import pytest

from conftest import EXAMPLES
from qgc.cli import main

DOT = EXAMPLES / "dot"


def test_stats_go_to_stderr_beside_the_ir(capsys):
    assert main([str(DOT / "dot.ptx"), "--emit=simt", "--stats"]) == 0
    out, err = capsys.readouterr()
    assert "simt.kernel" in out and "qgc info" not in out
    assert "kernel 'dot' (simt level)" in err


def test_stats_json_is_one_object_with_every_level(capsys):
    assert main([str(DOT / "dot.ptx"), "--stats=json", "--launch", str(DOT / "launch.json")]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    stats = json.loads(err)
    assert stats["ptx"][0]["kernel"] == "dot" and stats["ptx"][0]["instructions"] > 0
    assert stats["simt"][0]["limits"]["regs"] == 15
    assert stats["launch"]["exec_steps"] == 1 and stats["launch"]["memory_words"] == 17
    program = stats["tensor"][0]
    assert program["layers"] == len(program["neurons_per_layer"]) == len(program["gate_margins"])
    assert stats["notes"] == []


def test_stats_text_and_json_say_the_same(capsys):
    from qgc.stats import format_stats
    assert main([str(DOT / "dot.ptx"), "--emit=simt", "--stats=json"]) == 0
    stats = json.loads(capsys.readouterr().err)
    assert main([str(DOT / "dot.ptx"), "--emit=simt", "--stats"]) == 0
    assert capsys.readouterr().err.strip() == format_stats(stats)


def test_timing_reports_every_pass_that_ran(capsys):
    assert main([str(DOT / "dot.ptx"), "--emit=simt", "--timing"]) == 0
    err = capsys.readouterr().err
    assert "... Execution time report ..." in err
    names = re.findall(r"^\s+\d+\.\d+ \(\s*[\d.]+%\)  (.*)$", err, re.M)
    assert names[0] == "Parse" and names[-2:] == ["Output", "Total"]
    assert "ConvertPtxToSimtPass (convert-ptx-to-simt)" in names
    assert "SimtFormBlocksPass (simt-form-blocks)" in names
    assert not any("tensor" in n for n in names)


def test_launch_sizes_the_memory(capsys, tmp_path):
    """The fewest banks that hold the launch, as `qgc run` gives it: two for
    a launch past one bank."""
    launch = json.loads((DOT / "launch.json").read_text())
    for arg in launch["args"][:2]:
        arg["data"] = list(range(100))
    path = tmp_path / "big.json"
    path.write_text(json.dumps(launch))
    assert main([str(DOT / "dot.ptx"), "--emit=simt", "--launch", str(path)]) == 0
    assert "mem_words 254 " in capsys.readouterr().out
    assert main([str(DOT / "dot.ptx"), "--emit=simt", "--launch", str(DOT / "launch.json")]) == 0
    assert "mem_words 127 " in capsys.readouterr().out


def test_launch_with_a_custom_pipeline_needs_stats(capsys):
    assert main([str(DOT / "dot.ptx"), "-p", "ptx-strip-debug-info",
                 "--launch", str(DOT / "launch.json")]) == 2
    assert "error: --launch sizes the memory of qgc's own pipeline" in capsys.readouterr().err


def test_output_into_a_missing_directory_is_refused_before_compiling(capsys, tmp_path):
    target = tmp_path / "nope" / "x.safetensors"
    assert main([str(DOT / "dot.ptx"), "-o", str(target), "--timing"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write '{target}'")
    assert "Execution time report" not in err          # refused before anything ran
    assert not target.parent.exists()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False])
def test_a_long_step_shows_its_bar_on_a_terminal_only(monkeypatch, terminal):
    """The bar appears once the step has run DELAY seconds and its clock
    moves while one item takes long; scripts (no terminal) see nothing."""
    import qgc.progress as P
    stream = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(P, "DELAY", 0.05)
    monkeypatch.setattr(P, "TICK", 0.05)
    with P.progress(desc="scheduling k_step", total=2, unit="try") as bar:
        time.sleep(0.3)                      # one long try, no update
        bar.update()
    shown = stream.getvalue()
    assert ("qgc: scheduling k_step:   0%" in shown) == terminal, shown
