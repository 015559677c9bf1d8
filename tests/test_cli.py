"""The `qgc` and `qgc-opt` command lines: outputs, diagnostics, exit statuses."""

import json
import re
import subprocess
import sys

from conftest import BASE_2B, EXAMPLES, REPO
from qgc import __version__
from qgc.cli import main

DOT = EXAMPLES / "dot"


def run_qgc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qgc", *args], capture_output=True,
                          text=True, cwd=REPO)


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert capsys.readouterr().out.strip() == f"qgc {__version__}"


def test_help_lists_the_commands():
    proc = run_qgc("--help")
    assert proc.returncode == 0, proc.stderr
    for command in ("compile", "run", "build", "drift"):
        assert re.search(rf"^    {command} ", proc.stdout, re.MULTILINE), proc.stdout


def test_compile_is_the_default_command():
    explicit = run_qgc("compile", str(DOT / "dot.ptx"), "--emit=ptx")
    implicit = run_qgc(str(DOT / "dot.ptx"), "--emit=ptx")
    assert explicit.returncode == implicit.returncode == 0, explicit.stderr
    assert explicit.stdout == implicit.stdout and "ptx.entry" in implicit.stdout
    # a misspelt flag is the command's own error, with the command's usage
    proc = run_qgc(str(DOT / "dot.ptx"), "--no-such-flag")
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: qgc [-h] [-o OUTPUT]"), proc.stderr
    assert proc.stderr.endswith("qgc: error: unrecognized arguments: --no-such-flag\n")


def test_printed_pipeline_reads_back_as_the_stage():
    from qgc.pipeline import ALL_STAGES, parse_pipeline, stage
    for name in ALL_STAGES:
        proc = run_qgc(str(DOT / "dot.ptx"), f"--emit={name}", "--print-pipeline")
        assert proc.returncode == 0, proc.stderr
        assert parse_pipeline(proc.stdout.strip()).passes == stage(name)


def test_unknown_pass_in_a_dump_flag_is_an_error():
    for flag in ("--print-ir-after", "--print-ir-before"):
        proc = run_qgc(str(DOT / "dot.ptx"), "--emit=simt", f"{flag}=simt-no-such-pass")
        assert proc.returncode == 2
        (line,) = proc.stderr.splitlines()
        assert line.startswith(f"error: unknown pass 'simt-no-such-pass' in {flag} "
                               "(known passes: "), line
        assert "simt-cse" in line and not proc.stdout


def test_demo_prints_the_dot_product():
    proc = run_qgc("run", str(DOT / "dot.ptx"), "--launch", str(DOT / "launch.json"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == '{"buffers": [[1, 2, 3], [4, 5, 6], [32], null]}'


def test_clang_dot_product_too():
    proc = run_qgc("run", str(DOT / "dot.clang.ptx"), "--launch", str(DOT / "launch.json"))
    assert json.loads(proc.stdout)["buffers"][2] == [32]


def test_parse_print_and_ref_never_import_torch():
    code = (
        "import sys\n"
        "from qgc.cli import main\n"
        f"assert main([{str(DOT / 'dot.ptx')!r}, '--emit=ptx']) == 0\n"
        f"assert main(['run', {str(DOT / 'dot.ptx')!r}, '--launch', "
        f"{str(DOT / 'launch.json')!r}]) == 0\n"
        "heavy = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_missing_base_says_so_in_one_line(tmp_path):
    proc = run_qgc("run", str(DOT / "dot.ptx"), "--launch", str(DOT / "launch.json"),
                   "--engine", "model", "--base", str(tmp_path / "nowhere"))
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: base config") and "nowhere" in line and "no such file" in line


def test_malformed_launch_names_the_field(tmp_path):
    bad = tmp_path / "launch.json"
    bad.write_text(json.dumps({"grid": [1, 1, 1], "block": [4, 1, 1],
                               "args": [{"type": "i32*", "data": [1]}]}))
    proc = run_qgc("run", str(DOT / "dot.ptx"), "--launch", str(bad))
    assert proc.returncode == 2
    assert "args[0].type" in proc.stderr and "Traceback" not in proc.stderr


def test_launch_that_is_not_json(tmp_path):
    bad = tmp_path / "launch.json"
    bad.write_text("{grid: 1")
    proc = run_qgc("run", str(DOT / "dot.ptx"), "--launch", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "launch.json" in proc.stderr


def test_out_of_bounds_access_traps(tmp_path):
    launch = json.loads((DOT / "launch.json").read_text())
    launch["args"][3]["value"] = 4  # n = 4 over 3-element buffers: thread 3 reads a[3]
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(launch))
    proc = run_qgc("run", str(DOT / "dot.ptx"), "--launch", str(path))
    assert proc.returncode == 3, proc.stderr
    message = proc.stderr.strip()
    assert "Traceback" not in message
    assert "tid (3,0,0)" in message and "ld.global" in message and "0x" in message
    assert "dot.ptx:" in message


def test_unsupported_instruction_names_it(tmp_path):
    kernel = tmp_path / "k.ptx"
    kernel.write_text(".version 8.5\n.target sm_75\n.address_size 64\n"
                      ".visible .entry k()\n{\n\t.reg .b32 %r<3>;\n"
                      "\tbrkpt;\n\tret;\n}\n")
    launch = tmp_path / "launch.json"
    launch.write_text(json.dumps({"grid": [1, 1, 1], "block": [1, 1, 1], "args": []}))
    proc = run_qgc("run", str(kernel), "--launch", str(launch))
    assert proc.returncode == 2
    assert "k.ptx:7:2" in proc.stderr and "brkpt" in proc.stderr


def test_codegen_names_the_limit_it_misses(tmp_path):
    """On a base narrower than the step's live bits the error says which
    limit and by how much, and no file is left behind (a small kernel: a
    schedule that cannot fit is tried at every goal and block shape)."""
    config = json.loads(BASE_2B.read_text())
    config.update(hidden_size=256)
    (tmp_path / "narrow.json").write_text(json.dumps(config))
    out = tmp_path / "layers.safetensors"
    proc = run_qgc(str(EXAMPLES / "vector_add" / "vector_add.ptx"), "-o", str(out),
                   "--base-config", str(tmp_path / "narrow.json"))
    assert proc.returncode == 2 and not out.exists()
    assert re.search(r"needs \d+ residual coordinates .* the layers have hidden 256 "
                     r"\(option hidden\)", proc.stderr), proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["narrow.json"]


def test_layers_file_of_the_dot_product(tmp_path):
    """`qgc dot.ptx -o layers.safetensors`: Qwen3.5 decoder-layer names, the
    GPU tokens' embedding rows, the machine, vocabulary and base config in
    `__metadata__`."""
    from safetensors import safe_open

    from qgc.runtime.layers_file import read_layers
    out = tmp_path / "layers.safetensors"
    proc = run_qgc(str(DOT / "dot.ptx"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    with safe_open(str(out), "np") as f:
        meta, names = f.metadata(), list(f.keys())
    layers = int(meta["layers"])
    assert meta["kernel"] == "dot" and json.loads(meta["machine"])["layers"] == layers
    assert json.loads(meta["base_config"])["hidden_size"] == 2048
    assert {n.split(".")[2] for n in names} == {str(i) for i in range(layers)}
    assert "model.layers.0.mlp.down_proj.weight.values" in names
    assert all(n.startswith("model.layers.") for n in names)   # the rows: their encoding
    rows = read_layers(out).gpu_rows
    assert rows.shape == (json.loads(meta["gpu_vocabulary"])["size"], 2048)
    assert (rows[:, 0] == 8).all()          # every GPU row's flag coordinate


def test_weights_level_is_a_stage(tmp_path):
    """Codegen is a pass: `--emit=weights` prints one line per decoder layer
    (the readout last), `-o` dumps the same level after
    `convert-tensor-to-weights` and writes the file from it."""
    shown = run_qgc(str(DOT / "dot.ptx"), "--emit=weights")
    assert shown.returncode == 0, shown.stderr
    layers = re.findall(r"weights\.layer (\d+)( readout)? heads", shown.stdout)
    assert layers and layers[-1][1] == " readout"
    assert [int(i) for i, _ in layers] == list(range(len(layers)))
    out = tmp_path / "layers.safetensors"
    dumped = run_qgc(str(DOT / "dot.ptx"), "-o", str(out),
                     "--print-ir-after=convert-tensor-to-weights")
    assert dumped.returncode == 0 and out.exists(), dumped.stderr
    assert "IR Dump After ConvertTensorToWeightsPass (convert-tensor-to-weights)" in dumped.stderr
    assert shown.stdout.strip() in dumped.stderr


def test_stats_at_the_ptx_level():
    proc = run_qgc(str(DOT / "dot.ptx"), "--stats")
    assert proc.returncode == 0 and proc.stdout == ""   # like ptxas -v: stderr
    assert "kernel 'dot' (ptx level)" in proc.stderr
    # the tensor level's margin per layer: every gate at |G| ≥ 1/2 (or exactly 0)
    margins = re.search(r"smallest gate margin per layer ((?:\S+ )+)\(", proc.stderr)
    assert margins, proc.stderr
    values = margins[1].split()
    layers = int(re.search(r"the (\d+) step layers of hidden", proc.stderr)[1])
    assert len(values) == layers and all(v in ("1/2", "1", "-") for v in values), values


def test_qgc_opt_reads_ptx_directly():
    proc = subprocess.run([sys.executable, "-m", "qgc.opt", str(DOT / "dot.ptx"),
                           "-p", "ptx-strip-debug-info"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert 'ptx.entry "visible" @dot' in proc.stdout
