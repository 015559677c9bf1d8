"""Launch JSON parsing/validation and the result JSON."""

from __future__ import annotations

import json
import math

import pytest

from qgc.runtime.launch import Arg, Launch, LaunchError, format_result, load_launch

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
     "s32 u64 s64 f32, with '*' for a pointer)"),
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
