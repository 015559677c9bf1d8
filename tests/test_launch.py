"""Launch JSON: the schema, the limits and their messages, the CLI's launch checks, --max-steps and --expect; the result JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from qgc.runtime.launch import Arg, Launch, LaunchError, blame, format_result, load_launch

DOT = {"kernel": "dot", "grid": [1, 1, 1], "block": [4, 1, 1],
       "args": [{"type": "s32*", "data": [1, 2, 3]},
                {"type": "s32*", "data": [4, 5, 6]},
                {"type": "s32*", "data": [0]},
                {"type": "s32", "value": 3}]}


def test_design_format():
    launch = load_launch(DOT)
    assert launch == Launch("dot", (1, 1, 1), (4, 1, 1), [
        Arg("s32", True, data=[1, 2, 3]), Arg("s32", True, data=[4, 5, 6]),
        Arg("s32", True, data=[0]), Arg("s32", False, value=3)], 0)


def test_short_dims_pad_with_ones_and_optional_fields():
    launch = load_launch({"grid": [2], "block": 8, "dynamic_shared_bytes": 64,
                          "args": [{"type": "f32*", "data": [1, 2.5, "nan", "-inf"],
                                    "offset": 1}]})
    assert launch.kernel is None
    assert launch.grid == (2, 1, 1) and launch.block == (8, 1, 1)
    assert launch.dynamic_shared_bytes == 64
    arg = launch.args[0]
    assert arg.pointer and arg.offset == 1 and arg.type == "f32"
    assert arg.data[:2] == [1.0, 2.5] and math.isnan(arg.data[2]) and arg.data[3] == -math.inf


def test_suite_format():
    obj = {"kernel": "k", "grid": [2, 1, 1], "block": [4, 1, 1], "dynamic_shared_bytes": 0,
           "expected": {"a": [1]}, "notes": "ignored",
           "params": [{"name": "a", "kind": "ptr", "elem": "u8", "data": [1, 255],
                       "offset": 0},
                      {"name": "n", "kind": "scalar", "type": "u64", "value": 2**64 - 1}]}
    launch = load_launch(obj)
    assert launch.args == [Arg("u8", True, data=[1, 255], offset=0, name="a"),
                           Arg("u64", False, value=2**64 - 1, name="n")]


def test_from_text_and_path(tmp_path):
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(DOT))
    assert load_launch(path) == load_launch(json.dumps(DOT)) == load_launch(str(path))


@pytest.mark.parametrize("mutate, message", [
    (lambda o: o["args"][2].update(type="i32*"),
     "launch.json: error: args[2].type: unknown type 'i32*' (expected one of u8 s8 u16 s16 u32 "
     "s32 u64 s64 f32 f64, with '*' for a pointer)"),
    (lambda o: o["args"][3].update(type="i32"),
     "launch.json: error: args[3].type: unknown type 'i32' (expected one of"),
    (lambda o: o.update(grid=[1, 0]), "launch.json: error: grid[1]: expected a positive integer, got 0"),
    (lambda o: o.update(block=[1, 1, 1, 1]), "launch.json: error: block: expected 1 to 3 positive"),
    (lambda o: o.update(block=[2048]), "launch.json: error: block[0]: 2048 exceeds CUDA's limit"),
    (lambda o: o.update(block=[32, 32, 2]), "launch.json: error: block: 32x32x2 threads exceed"),
    (lambda o: o.update(grid="4"), "launch.json: error: grid: expected 1 to 3 positive integers"),
    (lambda o: o.pop("grid"), "launch.json: error: grid: missing"),
    (lambda o: o.pop("args"), "launch.json: error: args: missing"),
    (lambda o: o.update(gird=[1]), "launch.json: error: gird: unknown field"),
    (lambda o: o.update(kernel=3), "launch.json: error: kernel: expected the name of a kernel"),
    (lambda o: o.update(dynamic_shared_bytes=-1),
     "launch.json: error: dynamic_shared_bytes: expected a non-negative integer, got -1"),
    (lambda o: o["args"][0].update(data=[1, 2**31]),
     "launch.json: error: args[0].data[1]: 2147483648 does not fit s32 (-2147483648..2147483647)"),
    (lambda o: o["args"][0].update(data=[1, 2.5]),
     "launch.json: error: args[0].data[1]: expected an integer (s32), got 2.5"),
    (lambda o: o["args"][0].update(data=[True]),
     "launch.json: error: args[0].data[0]: expected an integer (s32), got true"),
    (lambda o: o["args"][0].update(data=3), "launch.json: error: args[0].data: expected a list"),
    (lambda o: o["args"][0].pop("data"), "launch.json: error: args[0].data: missing"),
    (lambda o: o["args"][0].update(value=3), "launch.json: error: args[0].value: a pointer argument"),
    (lambda o: o["args"][0].update(offset="1"), "launch.json: error: args[0].offset: expected an"),
    (lambda o: o["args"][3].pop("value"), "launch.json: error: args[3].value: missing"),
    (lambda o: o["args"][3].update(value=-1, type="u32"),
     "launch.json: error: args[3].value: -1 does not fit u32 (0..4294967295)"),
    (lambda o: o["args"][3].update(data=[1]), "launch.json: error: args[3].data: a scalar argument"),
    (lambda o: o["args"][3].update(type="f32", value="x"),
     "launch.json: error: args[3].value: expected a number or \"nan\""),
    (lambda o: o["args"][3].update(type="f32", value=1e39),
     "launch.json: error: args[3].value: 1e+39 does not fit f32"),
    (lambda o: o["args"][1].update(colour=1), "launch.json: error: args[1].colour: unknown field"),
    (lambda o: o["args"].__setitem__(1, 5), "launch.json: error: args[1]: expected an object"),
])
def test_design_errors_name_the_field(mutate, message):
    obj = json.loads(json.dumps(DOT))
    mutate(obj)
    with pytest.raises(LaunchError) as err:
        load_launch(obj, "launch.json")
    assert str(err.value).startswith(message), str(err.value)
    assert err.value.status == 2


@pytest.mark.parametrize("param, message", [
    ({"name": "a", "kind": "pointer", "elem": "s32", "data": []},
     "params[0].kind: expected \"ptr\" or \"scalar\""),
    ({"name": "a", "kind": "ptr", "elem": "int", "data": []},
     "params[0].elem: unknown type 'int'"),
    ({"name": "a", "kind": "ptr", "data": []}, "params[0].elem: missing"),
    ({"name": "a", "kind": "ptr", "elem": "u8", "data": [256]},
     "params[0].data[0]: 256 does not fit u8"),
    ({"name": "n", "kind": "scalar", "type": "s32"}, "params[0].value: missing"),
])
def test_suite_errors_name_the_field(param, message):
    obj = {"grid": [1], "block": [1], "params": [param]}
    with pytest.raises(LaunchError) as err:
        load_launch(obj, "k.json")
    assert str(err.value).startswith("k.json: error: " + message), str(err.value)


def test_malformed_json_and_missing_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"grid": [1],\n "block": [1,]}')
    with pytest.raises(LaunchError, match=r"bad.json:2:\d+: error: malformed JSON"):
        load_launch(path)
    with pytest.raises(LaunchError, match="cannot read the launch file"):
        load_launch(tmp_path / "missing.json")
    with pytest.raises(LaunchError, match="expected a JSON object, got a list"):
        load_launch("[1, 2]")


def test_format_result_exact_text():
    assert format_result([[1, 2, 3], [4, 5, 6], [32], None]) == \
        '{"buffers": [[1, 2, 3], [4, 5, 6], [32], null]}'


def test_format_result_floats_round_trip():
    import struct
    values = [struct.unpack("<f", struct.pack("<f", v))[0] for v in (0.1, -2.5, 3e-45, 1e30)]
    text = format_result([values + [math.nan, math.inf, -math.inf, -0.0]])
    decoded = json.loads(text)["buffers"][0]
    for got, want in zip(decoded[:4], values, strict=True):
        assert struct.pack("<f", got) == struct.pack("<f", want)
    assert decoded[4:7] == ["nan", "inf", "-inf"]
    assert str(decoded[7]) == "-0.0"


# ------------------------------------------------------------------ the schema

def test_the_schema_is_a_valid_2020_12_schema_that_takes_every_example():
    from jsonschema import Draft202012Validator

    from conftest import SHARED_KERNELS, example_dirs
    from qgc.runtime.launch import SCHEMA_PATH, schema_problem
    schema = json.loads(SCHEMA_PATH.read_text())
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    files = [d / "launch.json" for d in example_dirs()] + sorted(SHARED_KERNELS.glob("*.json"))
    for path in files:
        assert schema_problem(json.loads(path.read_text())) is None, path
        load_launch(path)


@pytest.mark.parametrize("obj, message", [
    ({"grid": 1, "block": 1, "args": [], "dynamic_shared_bytes": 232449},
     "dynamic_shared_bytes: 232449 exceeds CUDA's limit of 232448 bytes of shared memory per "
     "block"),
    ({"grid": [1, 70000], "block": 1, "args": []}, "grid[1]: 70000 exceeds CUDA's limit of 65535"),
    ({"grid": [1.0], "block": 1, "args": []}, "grid[0]: expected a positive integer, got the number 1.0"),
    ({"grid": 1, "block": 1, "args": [{"type": 3, "data": []}]},
     "args[0].type: expected a type name, got the number 3"),
    ({"grid": 1, "block": 1, "args": [{"type": "s32"}]}, "args[0].value: missing"),
    ({"grid": 1, "block": 1, "args": [{"type": "s32*"}]},
     "args[0].data: missing (the buffer's initial contents)"),
    ({"grid": 1, "block": 1, "args": [{"type": "s32", "value": 1, "offset": 2}]},
     "args[0].offset: a scalar argument takes 'value' (use 's32*' for a buffer)"),
    ({"grid": 1, "block": 1, "params": [{"kind": "scalar", "type": "s32"}], "x": 1},
     "params[0].value: missing"),
    ({"grid": 1, "block": 1, "params": [{"type": "s32", "value": 1}]}, "params[0].kind: missing"),
    ({"grid": [1048576], "block": [2], "args": []},
     "the launch has 2097152 threads (1048576x1x1 CTAs of 2x1x1 threads), past qgc's limit "
     "of 1048576 threads per launch by 1048576"),
])
def test_schema_and_limits_name_the_field(obj, message):
    with pytest.raises(LaunchError) as err:
        load_launch(obj, "L.json")
    assert str(err.value) == f"L.json: error: {message}"


@pytest.mark.parametrize("raw, message", [
    (b'{"grid": [1], "block": \xff}', "the launch file is not UTF-8 text (byte 0xff at offset 23)"),
    (b"[" * 100_000, "malformed JSON: nested too deeply"),
    (b'{"grid": ' + b"9" * 5000 + b"}", "malformed JSON: Exceeds the limit"),
    (b'{"grid": [1],\n "block": [1,]}', "malformed JSON: Expecting value"),
])
def test_what_is_not_json_is_said_so(tmp_path, raw, message):
    path = tmp_path / "L.json"
    path.write_bytes(raw)
    with pytest.raises(LaunchError) as err:
        load_launch(path)
    assert message in str(err.value) and str(err.value).startswith(str(path))
    assert err.value.status == 2


def test_a_directory_is_not_a_launch(tmp_path):
    with pytest.raises(LaunchError, match=r"cannot read the launch file: Is a directory"):
        load_launch(tmp_path)


# ------------------------------------------------------------------ the CLI

def run_cli(capsys, *argv) -> tuple[int, str, str]:
    from qgc.cli import main
    status = main(["run", *map(str, argv)])
    out, err = capsys.readouterr()
    return status, out, err


def dot_launch(tmp_path, **changes) -> Path:
    from conftest import EXAMPLES
    obj = json.loads((EXAMPLES / "dot" / "launch.json").read_text())
    obj.update(changes)
    path = tmp_path / "L.json"
    path.write_text(json.dumps(obj))
    return path


@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_a_huge_grid_is_refused_before_anything_is_allocated(tmp_path, capsys, engine):
    """grid 10^9 grew the simt engine to 23 GB; ref ran 48 s, then said 'limit of 0'."""
    import time

    from conftest import EXAMPLES
    start = time.perf_counter()
    status, out, err = run_cli(capsys, EXAMPLES / "dot" / "dot.ptx", "--launch",
                               dot_launch(tmp_path, grid=[10**9, 1, 1]), "--engine", engine)
    assert (status, out) == (2, "")
    assert err.startswith(f"{tmp_path / 'L.json'}: error: the launch has 4000000000 threads")
    assert "past qgc's limit of 1048576 threads per launch" in err
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("engine, step", [("ref", "warp instructions"), ("simt", "EXEC steps"),
                                          ("tensor", "EXEC steps")])
def test_a_launch_past_its_step_limit_is_refused_up_front(tmp_path, capsys, engine, step):
    from conftest import EXAMPLES
    status, _, err = run_cli(capsys, EXAMPLES / "dot" / "dot.ptx", "--launch",
                             dot_launch(tmp_path, grid=[300]), "--engine", engine,
                             "--max-steps", 100)
    assert status == 2
    assert err == (f"{tmp_path / 'L.json'}: error: the launch needs at least 300 {step}, one "
                   "for each of its 300 warps (300 CTAs of 4 threads, 4-lane warps): past the "
                   f"limit of 100 {step} (--max-steps 100) by 200\n")


def test_the_step_limit_is_named_when_a_run_passes_it(tmp_path, capsys):
    """Three CTAs, a limit one step past the first CTA's: the second passes it,
    and the message gives the limit set, not what was left of it (it said 'the
    limit of 0')."""
    from conftest import EXAMPLES
    from qgc.frontend import parse_ptx
    from qgc.runtime.ref import run_ref
    dot = EXAMPLES / "dot" / "dot.ptx"
    one_cta = run_ref(parse_ptx(dot.read_text(), str(dot)),
                      load_launch(EXAMPLES / "dot" / "launch.json"))
    limit = one_cta.stats["warp_instructions"] + 1
    status, out, err = run_cli(capsys, dot, "--launch", dot_launch(tmp_path, grid=[3]),
                               "--max-steps", limit)
    assert (status, out) == (3, "")
    assert err == (f"error: the launch ran past the limit of {limit} warp instructions "
                   f"(--max-steps {limit}) in ctaid (1,0,0); an endless loop?\n")
    branchy = EXAMPLES / "branchy"
    status, out, err = run_cli(capsys, branchy / "branchy.ptx", "--launch",
                               branchy / "launch.json", "--engine", "simt", "--max-steps", 3)
    assert (status, out, err) == (3, "", "error: the launch ran past the limit of 3 EXEC "
                                         "steps (--max-steps 3); an endless loop?\n")


def test_the_engines_launch_errors_name_the_file(tmp_path, capsys):
    from conftest import EXAMPLES
    path = dot_launch(tmp_path, args=json.loads(
        (EXAMPLES / "dot" / "launch.json").read_text())["args"][:3])
    for engine in ("ref", "simt"):
        status, _, err = run_cli(capsys, EXAMPLES / "dot" / "dot.ptx", "--launch", path,
                                 "--engine", engine)
        assert (status, err) == (2, f"{path}: error: kernel 'dot' takes 4 arguments, the "
                                    "launch gives 3\n")


def test_ctas_are_made_as_they_enter():
    """A million CTAs on eight warp slots: admitting the first ones makes only them."""
    from qgc.machine.warps import Residency, iter_warps
    made = []

    def counted(warps):
        for w in warps:
            made.append(w)
            yield w

    launch = Launch(None, (10**6, 1, 1), (8, 1, 1))
    residency = Residency(counted(iter_warps(launch, 0, 0)), 8)
    assert [w.cta for _, w in residency.admit(lambda w: False)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert len(made) <= 8 + 2 + 1     # the next CTA waits, and one warp past it


def test_simt_memory_does_not_grow_with_the_grid():
    """On 16 warp slots (the engine's default is 1024) a grid ten times larger
    runs in the same memory: the CTAs are made as they enter (all of them
    were made up front, and 10^9 CTAs took 23 GB)."""
    import tracemalloc

    from conftest import EXAMPLES
    from qgc import driver
    from qgc.pipeline import stage
    from qgc.runtime.simt_engine import run_simt
    ctx, module = driver.load(str(EXAMPLES / "dot" / "dot.ptx"))
    driver.apply(ctx, module, stage("simt"))
    obj = json.loads((EXAMPLES / "dot" / "launch.json").read_text())

    def peak(ctas: int) -> int:
        launch = load_launch({**obj, "grid": [ctas], "block": [16]})
        tracemalloc.start()
        result = run_simt(module, launch, resident_warps=16)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert result.buffers[2] == [32] and result.stats["warps"] == 4 * ctas
        return top

    small, large = peak(60), peak(600)
    assert large < 1.25 * small, (small, large)


# ------------------------------------------------------------------ --expect

def example_params():
    from conftest import example_dirs
    return [pytest.param(d, id=d.name) for d in example_dirs()]


@pytest.mark.parametrize("example", example_params())
def test_every_example_equals_its_expected_file_on_ref(capsys, example):
    status, out, err = run_cli(capsys, example / f"{example.name}.ptx", "--launch",
                               example / "launch.json", "--expect", example / "expected.json")
    expected = json.loads((example / "expected.json").read_text())
    count = sum(b is not None for b in expected["buffers"])
    assert (status, err) == (0, f"qgc: {count} buffer{'s' if count != 1 else ''} equal to "
                                f"{example / 'expected.json'}\n")
    assert json.loads(out) == expected


def test_expect_names_the_first_difference(tmp_path, capsys):
    from conftest import EXAMPLES
    expected = tmp_path / "expected.json"
    expected.write_text('{"buffers": [[1, 2, 3], [4, 5, 6], [31], null]}')
    status, out, err = run_cli(capsys, EXAMPLES / "dot" / "dot.ptx", "--launch",
                               EXAMPLES / "dot" / "launch.json", "--expect", expected)
    assert json.loads(out)["buffers"][2] == [32]
    assert (status, err) == (1, f"{expected}: error: args[2][0]: expected 31, got 32\n")
    expected.write_text('{"buffers": [[1, 2, 3], [4, 5, 6], [32]]}')
    status, _, err = run_cli(capsys, EXAMPLES / "dot" / "dot.ptx", "--launch",
                             EXAMPLES / "dot" / "launch.json", "--expect", expected)
    assert (status, err) == (2, f"{expected}: error: buffers: expected a list of 4 entries, "
                                "one per argument of the launch, got [[1, 2, 3], [4, 5, 6], "
                                "[32]]\n")


def test_a_bad_expected_file_is_said_before_the_run(tmp_path, capsys):
    from conftest import EXAMPLES
    missing = tmp_path / "nope.json"
    status, out, err = run_cli(capsys, EXAMPLES / "dot" / "dot.ptx", "--launch",
                               EXAMPLES / "dot" / "launch.json", "--expect", missing)
    assert (status, out) == (2, "")
    assert err == f"{missing}: error: cannot read the expected-result file: No such file or " \
                  "directory\n"


def test_expect_reads_the_suite_form_with_its_checks(tmp_path):
    from qgc.runtime.expected import MismatchError, check_expected
    launch = load_launch({"grid": 1, "block": 4, "params": [
        {"name": "out", "kind": "ptr", "elem": "u32", "data": [0, 0, 0, 0]},
        {"name": "f", "kind": "ptr", "elem": "f32", "data": [0.0]}]})
    suite = {"expected": {"out": [1, 2, 3, 4], "f": [0.0]},
             "expected_warp4": {"out": [4, 3, 2, 1], "f": [0.0]},
             "checks": {"out": {"multiset_prefix": 2, "allowed": {"3": [9]}}}}
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(suite))
    assert check_expected(path, launch, [[1, 2, 3, 4], [0.0]], warp_size=32) == 2
    assert check_expected(path, launch, [[3, 4, 2, 9], [0.0]], warp_size=4) == 2
    with pytest.raises(MismatchError, match=r"args\[1\] 'f'\[0\]: expected 0.0, got -0.0"):
        check_expected(path, launch, [[4, 3, 2, 1], [-0.0]], warp_size=4)
    with pytest.raises(MismatchError, match=r"args\[0\] 'out'\[3\]: expected 1, got 8"):
        check_expected(path, launch, [[4, 3, 2, 8], [0.0]], warp_size=4)
    with pytest.raises(LaunchError, match="the expected results are for 4- and 32-lane "
                                          "warps; this run has 8-lane warps"):
        check_expected(path, launch, [[4, 3, 2, 1], [0.0]], warp_size=8)


def test_f32_values_compare_by_their_bits():
    from qgc.runtime.expected import differences
    assert differences("f32", [0.0, math.nan, 1.5, math.inf], [-0.0, math.nan, 1.5, math.inf]) \
        == [0]
    assert differences("f32", [1.0, 2.0], [1.0000001, 2.0], {"atol": 1e-6}) == []
    assert differences("s32", [1, 2, 3], [1, 2, 4]) == [2]


def test_blame_names_the_file_of_a_launch_read_from_one(tmp_path):
    path = tmp_path / "l.json"
    path.write_text(json.dumps(DOT))
    for launch, shown in ((load_launch(path), f"{path}: error: too big"), (None, "too big")):
        with pytest.raises(LaunchError) as caught, blame(launch):
            raise LaunchError("too big")
        assert str(caught.value) == shown


F64_KERNEL = """.version 8.0
.target sm_75
.address_size 64
.visible .entry scale(.param .u64 scale_param_0, .param .f64 scale_param_1)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<5>;
    .reg .f64 %fd<4>;
    ld.param.u64 %rd1, [scale_param_0];
    ld.param.f64 %fd1, [scale_param_1];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f64 %fd2, [%rd4];
    mul.rn.f64 %fd3, %fd2, %fd1;
    add.rn.f64 %fd3, %fd3, 0d3FB999999999999A;
    st.global.f64 [%rd4], %fd3;
    ret;
}
"""


@pytest.mark.parametrize("engine", ["ref", "simt"])
def test_f64_buffers_and_scalars(tmp_path, capsys, engine):
    """An f64 buffer and scalar (double kernels): JSON numbers in, the
    float64 results out as numbers that round-trip (Python's arithmetic
    is the same IEEE double), and the special values as strings."""
    from qgc.cli import main
    data = [1.5, -0.1, 1e300, 2.0 ** -1074, "inf", "nan", 0.0, -3.25]
    ptx, spec = tmp_path / "scale.ptx", tmp_path / "scale.json"
    ptx.write_text(F64_KERNEL)
    spec.write_text(json.dumps({"grid": [1, 1, 1], "block": [8, 1, 1], "args": [
        {"type": "f64*", "data": data}, {"type": "f64", "value": 1.1}]}))
    assert main(["run", str(ptx), "--launch", str(spec), "--engine", engine]) == 0
    got = json.loads(capsys.readouterr().out)["buffers"][0]
    floats = [float(v) for v in data]
    want = [format_value(v * 1.1 + 0.1) for v in floats]
    assert got == want


def format_value(x: float):
    return json.loads(format_result([[x]]))["buffers"][0][0]


def test_an_f64_value_does_not_fit_an_f32_parameter(tmp_path, capsys):
    from qgc.cli import main
    ptx, spec = tmp_path / "scale.ptx", tmp_path / "scale.json"
    ptx.write_text(F64_KERNEL.replace(".param .f64 scale_param_1", ".param .f32 scale_param_1")
                   .replace("ld.param.f64 %fd1", "ld.param.f32 %r1").replace("%fd2, %fd1", "%fd2, %fd2"))
    spec.write_text(json.dumps({"grid": [1, 1, 1], "block": [1, 1, 1], "args": [
        {"type": "f64*", "data": [1.0]}, {"type": "f64", "value": 1.1}]}))
    assert main(["run", str(ptx), "--launch", str(spec), "--engine", "ref"]) != 0
    err = capsys.readouterr().err
    assert "args[1]: a f64 value cannot be passed to parameter 'scale_param_1'" in err
