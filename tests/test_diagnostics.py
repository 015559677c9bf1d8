"""Diagnostics of bad input (issue 20, defect 6): every message is
`file:LINE:COL: error: ...` with the source line and a caret, or `error: ...`
where no position exists, on stderr with status 2 (qgc) or 1 (qgc-opt);
inputs by kind and from stdin; MLIR's --split-input-file and
--verify-diagnostics in qgc-opt."""

import io
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES, REPO
from qgc import driver, opt
from qgc.cli import main
from qgc.dialects.ptx import PTX_INSTRUCTIONS
from qgc.expected_diagnostics import check_expected, expected_diagnostics, split_input

#: The first line of every diagnostic.
DIAGNOSTIC = re.compile(r"^(\S+:\d+:\d+: )?error: \S")

HEADER = ".version 8.5\n.target sm_75\n.address_size 64\n"


def kernel(body: str) -> str:
    return HEADER + ".visible .entry k()\n{\n\t.reg .b32 %r<4>;\n" + body + "\tret;\n}\n"


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def run_opt(capsys, *argv: str) -> tuple[int, str, str]:
    status = opt.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def assert_caret(err: str, where: str, source_line: str, column: int) -> None:
    first, line, caret = err.splitlines()[:3]
    assert first.startswith(f"{where}: error: "), err
    assert line == source_line.expandtabs(1)
    assert caret == " " * (column - 1) + "^"


# ------------------------------------------------------------ unknown opcode

def test_an_opcode_that_is_no_ptx_instruction_is_refused_at_its_line(tmp_path, capsys):
    path = tmp_path / "k.ptx"
    path.write_text(kernel("\tfrobnicate.s32 %r1, %r2;\n"))
    status, out, err = run_main(capsys, str(path), "--emit=ptx")
    assert (status, out) == (2, "")
    assert_caret(err, f"{path}:7:2", "\tfrobnicate.s32 %r1, %r2;", 2)
    assert "unknown PTX instruction 'frobnicate'" in err


def test_a_ptx_instruction_the_machine_lacks_keeps_not_yet_supported(tmp_path, capsys):
    path = tmp_path / "k.ptx"
    path.write_text(kernel("\tbrkpt;\n"))
    assert run_main(capsys, str(path), "--emit=ptx")[0] == 0
    status, _, err = run_main(capsys, str(path), "--emit=simt")
    assert status == 2
    assert "error: 'brkpt' is not yet supported by the machine" in err


def test_every_opcode_the_engines_run_is_a_ptx_instruction():
    from qgc.machine.opcodes import PTX_SELECTION
    from qgc.runtime.ref_ops import TABLE
    assert set(TABLE) <= PTX_INSTRUCTIONS
    selected = {base for base, _, _ in PTX_SELECTION}
    assert selected and selected <= PTX_INSTRUCTIONS


def test_every_example_uses_ptx_instructions_only():
    from qgc.dialects import ptx
    from qgc.frontend import parse_ptx
    for path in sorted(EXAMPLES.glob("*/*.ptx")):
        module = parse_ptx(path.read_text(), str(path))
        bases = {op.op.base for op in module.walk() if isinstance(op, ptx.InstOp)}
        assert bases <= PTX_INSTRUCTIONS, path


# --------------------------------------------------------------- input kinds

@pytest.mark.parametrize("name", ["k.cu", "k.txt", "kernel"])
def test_an_input_of_unknown_kind_is_refused(tmp_path, capsys, name):
    path = tmp_path / name
    path.write_text(kernel(""))
    status, out, err = run_main(capsys, str(path), "--emit=ptx")
    assert (status, out) == (2, "")
    assert err.startswith(f"error: '{path}': unknown input kind "), err
    assert ("nvcc -ptx" in err) == name.endswith(".cu")
    assert len(err.splitlines()) == 1


@pytest.fixture
def stdin(monkeypatch):
    """Feed the standard input (qgc reads it once per process: forget it after)."""
    def feed(text: str) -> None:
        driver._stdin_text.cache_clear()
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    yield feed
    driver._stdin_text.cache_clear()


def test_stdin_is_ptx_or_textual_ir_by_what_it_holds(stdin, capsys):
    source = (EXAMPLES / "dot" / "dot.ptx").read_text()
    stdin(source)
    status, from_ptx, _ = run_main(capsys, "-", "--emit=ptx")
    assert status == 0 and 'ptx.entry "visible" @dot' in from_ptx
    stdin("// a comment first\n" + from_ptx)
    status, from_ir, _ = run_main(capsys, "-", "--emit=ptx")
    assert (status, from_ir) == (0, from_ptx)


def test_stdin_is_read_once_for_every_load(stdin, capsys):
    stdin((EXAMPLES / "dot" / "dot.ptx").read_text())
    launch = EXAMPLES / "dot" / "launch.json"
    status, out, _ = run_main(capsys, "run", "-", "--launch", str(launch), "--engine", "simt")
    assert status == 0 and json.loads(out)["buffers"][2] == [32]
    assert driver.load("-")[1].verify() is None   # the same text, again


def test_a_diagnostic_on_stdin_names_it_with_a_caret(stdin, capsys):
    stdin(kernel("\tadd.s32 %r1, %r2, %r9;\n"))
    status, _, err = run_main(capsys, "-", "--emit=ptx")
    assert status == 2
    assert_caret(err, "<stdin>:7:2", "\tadd.s32 %r1, %r2, %r9;", 2)


# ------------------------------------------------------------ textual IR input

@pytest.fixture
def dot_ir(capsys) -> str:
    status, out, _ = run_main(capsys, str(EXAMPLES / "dot" / "dot.ptx"), "--emit=ptx")
    assert status == 0
    return out


def test_a_verifier_error_on_textual_ir_points_at_the_op(tmp_path, capsys, dot_ir):
    bad = dot_ir.replace('"[dot_param_0]"', '"[nowhere]"')
    path = tmp_path / "dot.mlir"
    path.write_text(bad)
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "nowhere" in text)
    source = bad.splitlines()[line - 1]
    column = len(source) - len(source.lstrip()) + 1
    for status, _, err in (run_main(capsys, str(path), "--emit=ptx"),
                           run_opt(capsys, str(path))):
        assert status in (1, 2)
        assert_caret(err, f"{path}:{line}:{column}", source, column)
        assert "use of undefined symbol 'nowhere'" in err


def test_a_parse_error_on_textual_ir_is_one_diagnostic(tmp_path, capsys):
    path = tmp_path / "k.mlir"
    path.write_text("builtin.module {\n  ptx.nosuch\n}\n")
    status, _, err = run_main(capsys, str(path), "--emit=ptx")
    assert status == 2
    first, line, caret = err.splitlines()
    assert re.match(rf"{re.escape(str(path))}:\d+:\d+: error: Operation ptx.nosuch is not "
                    "registered$", first)
    assert line in ("  ptx.nosuch", "}") and caret.strip() == "^"


def test_the_ref_engines_unsupported_instruction_has_a_caret(tmp_path, capsys):
    path = tmp_path / "k.ptx"
    path.write_text(kernel("\tbrkpt;\n"))
    launch = tmp_path / "launch.json"
    launch.write_text(json.dumps({"grid": [1, 1, 1], "block": [1, 1, 1], "args": []}))
    status, _, err = run_main(capsys, "run", str(path), "--launch", str(launch))
    assert status == 2
    assert_caret(err, f"{path}:7:2", "\tbrkpt;", 2)
    assert "unsupported instruction 'brkpt'" in err


# ------------------------------------------------------------------ qgc-opt

def test_qgc_opt_says_a_missing_file_in_one_line(tmp_path, capsys):
    status, _, err = run_opt(capsys, str(tmp_path / "nope.mlir"))
    assert status == 1
    assert err == f"qgc-opt: error: cannot read '{tmp_path / 'nope.mlir'}': " \
                  "No such file or directory\n"


@pytest.mark.parametrize("passes, says", [
    ("nosuch-pass", "Unrecognized passes: ['nosuch-pass']"),
    ("ptx-strip-debug-info{nosuch=1}", "nosuch"),
    ("{x}", "invalid pass pipeline '{x}'"),
])
def test_qgc_opt_pipeline_errors_are_one_diagnostic(capsys, passes, says):
    status, out, err = run_opt(capsys, str(EXAMPLES / "dot" / "dot.ptx"), "-p", passes)
    assert (status, out) == (1, "")
    assert err.startswith("qgc-opt: error: ") and says in err and "Traceback" not in err


def test_qgc_opt_prints_the_ir_after_every_pass(capsys):
    status, out, err = run_opt(capsys, str(REPO / "testsuite" / "inputs" / "tiny.ptx"), "-p",
                               "ptx-strip-debug-info,ptx-remove-dead-functions",
                               "--print-ir-after-all", "--print-ir-before=ptx-strip-debug-info")
    assert status == 0 and "@tiny" in out
    headers = re.findall(r"// -----// IR Dump (\w+) \w+ \(([\w-]+)\)", err)
    assert headers == [("Before", "ptx-strip-debug-info"), ("After", "ptx-strip-debug-info"),
                       ("After", "ptx-remove-dead-functions")]
    status, _, err = run_opt(capsys, str(REPO / "testsuite" / "inputs" / "tiny.ptx"),
                             "--print-ir-after=nosuch")
    assert status == 1 and "unknown pass 'nosuch' in --print-ir-after" in err


def test_qgc_opt_takes_xdsl_opts_flags_or_refuses_them(tmp_path, capsys):
    tiny = str(REPO / "testsuite" / "inputs" / "tiny.ptx")
    status, _, err = run_opt(capsys, tiny, "-p", "ptx-strip-debug-info", "--time-passes")
    assert status == 0 and re.search(r"\d+\.\d+ \(100\.0%\)  Total", err)
    assert "PtxStripDebugInfoPass (ptx-strip-debug-info)" in err
    status, out, _ = run_opt(capsys, tiny, "-p", "ptx-strip-debug-info", "--print-between-passes")
    assert status == 0 and "@tiny" in out
    path = tmp_path / "k.mlir"
    path.write_text("{\n")
    status, out, err = run_opt(capsys, str(path), "--parsing-diagnostics")
    assert (status, err) == (0, "") and out.startswith(f"{path}:1:1: error: ")
    status, _, err = run_opt(capsys, tiny, "--shrink")
    assert status == 1 and err.startswith("qgc-opt: error: --shrink")


SIMT_KERNEL = """builtin.module {{
  {comment}
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {{
    simt.ld v0, param[0]
    simt.st global[v0 + 0], 5 buffer 0
    simt.next ^bb1
  ^bb1:
    simt.exit
  }}
}}
"""


@pytest.mark.parametrize("comment, status, says", [
    ("// expected-error@+1 {{needs 2 blocks, the machine has 1}}", 0, ""),
    ("// expected-error@+1 {{needs 3 blocks}}", 1, 'expected error "needs 3 blocks" was not'),
    ("// expected-error {{needs 2 blocks}}", 1, "unexpected error: kernel 'k' needs 2"),
    ("// nothing expected", 1, "unexpected error: kernel 'k' needs 2 blocks"),
])
def test_qgc_opt_matches_a_pass_error_against_expected_error(tmp_path, capsys, comment,
                                                               status, says):
    path = tmp_path / "k.mlir"
    path.write_text(SIMT_KERNEL.format(comment=comment))
    got, _, err = run_opt(capsys, str(path), "-p", "simt-form-blocks{max-ops=1 max-blocks=1}",
                          "--verify-diagnostics")
    assert got == status, err
    assert says in err
    assert all(DIAGNOSTIC.match(line) for line in err.splitlines()
               if not line.startswith(" ") and "^" not in line and "simt." not in line)


def test_qgc_opt_splits_the_input_and_numbers_lines_as_the_file(tmp_path, capsys):
    good = kernel("\tadd.s32 %r1, %r2, %r3;\n")
    bad = kernel("\tadd.s32 %r1, %r2, %r9; // expected-error {{undeclared register '%r9'}}\n")
    path = tmp_path / "k.ptx"
    path.write_text(f"{good}// -----\n{bad}// -----\n{good}")
    status, out, err = run_opt(capsys, str(path), "--split-input-file", "--verify-diagnostics")
    assert (status, err) == (0, "")
    assert out.count('ptx.entry "visible" @k') == 2 and out.count("// -----") == 2
    status, _, err = run_opt(capsys, str(path), "--split-input-file")
    assert status == 1
    assert err.startswith(f"{path}:{good.count(chr(10)) + 8}:2: error: use of undeclared")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b // x", "", "// ---"]), max_size=5),
                min_size=1, max_size=4))
def test_split_chunks_keep_their_lines(chunks):
    """Every chunk, padded by its offset, holds its lines where the file does."""
    text = "// -----\n".join("".join(f"{line}\n" for line in chunk) for chunk in chunks)
    pieces = split_input(text)
    assert len(pieces) == len(chunks)
    file_lines = text.splitlines()
    for offset, piece in pieces:
        for number, line in enumerate(piece.splitlines(), start=offset + 1):
            assert file_lines[number - 1] == line


def test_expected_diagnostics_read_mlirs_forms():
    text = ("x // expected-error {{here}}\n"
            "// expected-error@+2 {{two below}}\n"
            "// expected-error@-2 {{above}}\n"
            "y\n"
            "// expected-error@1 {{absolute}} expected-error@unknown {{anywhere}}\n")
    found = [(e.line, e.message) for e in expected_diagnostics(text, "f.mlir")]
    assert found == [(1, "here"), (4, "two below"), (1, "above"), (1, "absolute"),
                     (None, "anywhere")]
    expected = expected_diagnostics(text, "f.mlir")
    produced = ["f.mlir:1:1: error: it is here", "f.mlir:4:3: error: two below it",
                "f.mlir:1:1: error: above", "f.mlir:1:1: error: absolute",
                "error: anywhere at all"]
    assert check_expected(expected, produced, "f.mlir") == []
    # a diagnostic in another file has no position here
    assert check_expected(expected_diagnostics("// expected-error@unknown {{x}}\n", "f.mlir"),
                          ["g.ptx:3:1: error: x"], "f.mlir") == []


# ------------------------------------------------------------ message shape

BAD_INPUTS = sorted((REPO / "testsuite" / "inputs" / "bad").glob("*.ptx"))


@pytest.mark.parametrize("path", BAD_INPUTS, ids=lambda p: p.name)
def test_every_bad_input_is_one_located_diagnostic(capsys, path):
    status, out, err = run_main(capsys, str(path), "--emit=ptx")
    assert (status, out) == (2, "")
    first, line, caret = err.splitlines()[:3]
    assert DIAGNOSTIC.match(first) and first.startswith(f"{path}:"), first
    assert caret.strip() == "^"
