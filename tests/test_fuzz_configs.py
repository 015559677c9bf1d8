"""A fuzzer over base configs: the shipped ones mutated (fields dropped, wrong
types, huge and negative sizes, nested as a checkpoint's `text_config`), then
as bytes (truncated, a byte changed, random bytes). Through the real entry
points, `qgc --print-pipeline --base-config` and `load_text_config`, every
input is a pipeline or a diagnostic (status 2, `error:`), never an internal
error or a traceback, and each one is quick: a config is checked before
anything is sized by it."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES, FUZZ_INPUTS
from fuzzing import damaged_json, run_cli
from qgc.base_config import NAMED_CONFIGS, resolve_config_path
from qgc.diagnostics import QgcError

DOT = EXAMPLES / "dot" / "dot.ptx"
#: No input may take longer than this (seconds; a loaded 2-core machine).
SLOW = 5.0
SHIPPED = {name: json.loads(resolve_config_path(name).read_text()) for name in NAMED_CONFIGS}

ODD_VALUES = st.one_of(
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2, 10**9, 2**31, 2**63, 32768, 32769]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.none(), st.booleans(),
    st.lists(st.integers(min_value=-3, max_value=300000), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.lists(st.sampled_from(["linear_attention", "full_attention", "sliding"]), max_size=30),
)


@st.composite
def mutated_configs(draw) -> dict:
    config = dict(SHIPPED[draw(st.sampled_from(sorted(SHIPPED)))])
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        field = draw(st.sampled_from(sorted(config) or ["hidden_size"]))
        if draw(st.booleans()):
            config.pop(field, None)
        else:
            config[field] = draw(ODD_VALUES)
    return {"text_config": config} if draw(st.booleans()) else config


@st.composite
def config_bytes(draw) -> bytes:
    """Valid JSON of a mutated config, or its bytes damaged, or noise."""
    return damaged_json(draw, draw(mutated_configs()))


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "config.json"


def test_fuzzed_base_configs_are_pipelines_or_diagnostics(config_file, record_property):
    tried = []
    _load(resolve_config_path("small"))     # transformers' import is not the input's time

    @settings(max_examples=200, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(config_bytes())
    def one(raw: bytes):
        config_file.write_bytes(raw)
        start = time.perf_counter()
        status, out, err = run_cli([str(DOT), "--emit=tensor", "--print-pipeline",
                                 "--base-config", str(config_file)])
        assert status in (0, 2), err
        assert "internal error" not in err and "Traceback" not in err, err
        if status == 0:
            assert "tensor-schedule-layers{" in out
        else:
            assert "error: " in err.splitlines()[0], err
        _load(config_file)
        assert time.perf_counter() - start < SLOW
        tried.append(raw)

    one()
    record_property(FUZZ_INPUTS, len(tried))
    assert len(tried) >= 100


def _load(path) -> None:
    """`load_text_config` (what run, build and drift call first) gives a
    config or a diagnostic of status 2, and so does sizing a stand-in of it
    (on the meta device: nothing is allocated)."""
    from qgc.runtime.model import check_fits_in_memory, load_text_config
    try:
        check_fits_in_memory(load_text_config(path), "a stand-in base")
    except QgcError as err:
        assert err.status == 2 and str(err).startswith(("error: ", f"{path}:")), str(err)
