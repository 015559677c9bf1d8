"""A fuzzer over launch JSON: the examples' launches mutated (fields dropped
and added, wrong types, huge and negative sizes and grids, arguments dropped,
duplicated and retyped), then as bytes (truncated, a byte changed, random
bytes). Through `qgc run` on the `ref` and `simt` engines with a small
`--max-steps`, every input ends in a result (status 0), a diagnostic (2) or a
trap (3), never an internal error or a traceback, and each one is quick and
small: a launch is checked against its limits before anything is allocated."""

from __future__ import annotations

import json
import resource
import time

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES, FUZZ_INPUTS
from fuzzing import damaged_json, run_cli

#: Kernels whose launches are mutated: buffers, scalars and an offset, 64-bit
#: values, shared memory and barriers, dynamic shared memory.
KERNELS = ("dot", "vector_add", "pointer_arith64", "reduce_shared", "reverse_dynshared")
LAUNCHES = {k: json.loads((EXAMPLES / k / "launch.json").read_text()) for k in KERNELS}
MAX_STEPS = "2000"
#: No input may take longer than this (seconds; a loaded 2-core machine).
SLOW = 5.0
#: Nor may the inputs together grow the process by more (bytes).
MEMORY = 512 << 20

SIZES = st.one_of(st.integers(min_value=-3, max_value=40),
                  st.sampled_from([0, -1, 1024, 1025, 65535, 65536, 2**31 - 1, 2**31, 10**9,
                                   2**63, 2**64, -(2**63)]),
                  st.integers(min_value=-(2**70), max_value=2**70))
ODD_VALUES = st.one_of(
    SIZES,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6), st.none(), st.booleans(),
    st.sampled_from(["s32", "u8*", "f32", "i32*", "nan", "-inf", "ptr", "scalar"]),
    st.lists(SIZES, max_size=4),
    st.dictionaries(st.sampled_from(["type", "data", "value", "offset", "name", "kind",
                                     "elem"]), SIZES, max_size=3),
)
TOP_FIELDS = ["kernel", "grid", "block", "args", "params", "dynamic_shared_bytes", "gird"]
ARG_FIELDS = ["type", "data", "value", "offset", "name", "colour"]


@st.composite
def mutated_launches(draw) -> tuple[str, dict]:
    kernel = draw(st.sampled_from(KERNELS))
    launch = json.loads(json.dumps(LAUNCHES[kernel]))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        draw(st.sampled_from([_top_field, _grid, _arg_field, _args]))(draw, launch)
    return kernel, launch


def _top_field(draw, launch: dict) -> None:
    field = draw(st.sampled_from(TOP_FIELDS))
    if draw(st.booleans()):
        launch.pop(field, None)
    else:
        launch[field] = draw(ODD_VALUES)


def _grid(draw, launch: dict) -> None:
    dims = st.lists(SIZES, min_size=1, max_size=3)
    launch[draw(st.sampled_from(["grid", "block"]))] = draw(st.one_of(dims, SIZES))


def _arg_field(draw, launch: dict) -> None:
    args = launch.get("args")
    if not isinstance(args, list) or not args or not isinstance(args[0], dict):
        return
    arg = args[draw(st.integers(min_value=0, max_value=len(args) - 1))]
    if not isinstance(arg, dict):
        return
    field = draw(st.sampled_from(ARG_FIELDS))
    if draw(st.booleans()):
        arg.pop(field, None)
    elif field == "data":
        arg["data"] = draw(st.lists(st.one_of(SIZES, ODD_VALUES), max_size=12))
    else:
        arg[field] = draw(ODD_VALUES)


def _args(draw, launch: dict) -> None:
    args = launch.get("args")
    if not isinstance(args, list) or not args:
        return
    i = draw(st.integers(min_value=0, max_value=len(args) - 1))
    how = draw(st.sampled_from(["drop", "duplicate", "swap"]))
    if how == "drop":
        args.pop(i)
    elif how == "duplicate":
        args.insert(i, json.loads(json.dumps(args[i])))
    else:
        args[i], args[-1] = args[-1], args[i]


@st.composite
def launch_bytes(draw) -> tuple[str, bytes]:
    """Valid JSON of a mutated launch, or its bytes damaged, or noise."""
    kernel, launch = draw(mutated_launches())
    return kernel, damaged_json(draw, launch, intact=6)


@pytest.fixture(scope="module")
def launch_file(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "L.json"


def test_fuzzed_launches_are_results_diagnostics_or_traps(launch_file, record_property):
    tried = []
    for kernel in KERNELS:      # the engines' first imports are not an input's time
        run_cli(["run", str(EXAMPLES / kernel / f"{kernel}.ptx"), "--launch",
              str(EXAMPLES / kernel / "launch.json"), "--engine", "simt"])
    grown_from = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(launch_bytes(), st.sampled_from(["ref", "ref", "simt"]))
    def one(drawn: tuple[str, bytes], engine: str):
        kernel, raw = drawn
        launch_file.write_bytes(raw)
        start = time.perf_counter()
        status, out, err = run_cli(["run", str(EXAMPLES / kernel / f"{kernel}.ptx"), "--launch",
                                 str(launch_file), "--engine", engine, "--max-steps",
                                 MAX_STEPS])
        event(f"{engine}: status {status}")
        assert status in (0, 2, 3), err
        assert "internal error" not in err and "Traceback" not in err, err
        if status == 0:
            assert json.loads(out)["buffers"] is not None
        else:
            first = err.splitlines()[0]
            assert first.startswith((f"{launch_file}:", "error: ", "trap: ")), err
            assert "error: " in first or first.startswith("trap: "), err
        assert time.perf_counter() - start < SLOW
        tried.append(raw)

    one()
    record_property(FUZZ_INPUTS, len(tried))
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10) - grown_from
    assert grown < MEMORY, f"the inputs grew the process by {grown >> 20} MB"
    assert len(tried) >= 100
