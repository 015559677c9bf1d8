"""The compile-speed changes keep what they replace (issue 21, "Speed"):

- `ProgramOp.memory_named` (the table `KvReadOp.memory_op` reads) follows
  memories added, removed and renamed after it was built;
- `margins_by_layer` (one walk, scaled integers) equals `margins` layer by layer;
- `conjunction_penalties` (memoised) hands out fresh lists;
- `SparseLayer.check_bf16` (numpy) agrees with `is_bf16` and names the first
  inexact weight;
- the pipeline verifies after the last pass (`qgc`, `qgc run`, the library),
  after each with `--verify-each` (and always in `qgc-opt`);
- `bench/compile.py` reports per-stage seconds and ratios.
"""

from __future__ import annotations

import importlib.util
import json
import math
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects import builtin
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import VerifyException

from qgc.dialects import tensor as T
from qgc.passes.tensor_schedule_layers import schedule
from qgc.passes.tensor_to_weights import conjunction_penalties, is_bf16, margins
from qgc.passes.tensor_to_weights.margins import margins_by_layer
from qgc.passes.tensor_to_weights.sparse import CodegenError, SparseLayer, _bf16_mask
from qgc.pipeline import run_pipeline

ROOT = Path(__file__).resolve().parents[1]
VECTOR_ADD = ROOT / "examples" / "vector_add" / "vector_add.ptx"


def memory_program() -> T.ProgramOp:
    bld = T.ProgramBuilder("mems")
    key, value = bld.input("key", 1), bld.input("value", 4)
    bld.memory("m", 2, 4)
    bld.kv_write("m", "binary", key, value)
    bld.output("r", bld.kv_read("m", "binary", key))
    return bld.program


def test_memory_lookup_follows_the_program():
    program = memory_program()
    read = next(op for op in program.ops() if isinstance(op, T.KvReadOp))
    first = read.memory_op()
    assert first is program.memories()["m"] and program.memory_named("m") is first
    # replaced: the cached memory left the program, the lookup finds the new one
    second = T.MemoryOp("m", 2, 4)
    program.body.block.insert_op_before(second, first)
    first.detach()
    assert read.memory_op() is second
    # renamed: the name no longer answers
    second.properties["sym_name"] = builtin.StringAttr("n")
    with pytest.raises(VerifyException, match="no tensor.memory @m"):
        read.memory_op()
    assert program.memory_named("n") is second


def test_margins_by_layer_equal_margins_per_layer():
    from test_tensor_core import HEADS, HIDDEN, INTERMEDIATE
    from test_tensor_schedule import add_chain
    program = add_chain()
    schedule(program, HIDDEN, INTERMEDIATE, HEADS)
    layers = program.limit("layers")
    by_layer = margins_by_layer(program, layers)
    assert by_layer == [margins(program, i) for i in range(layers)]
    assert sum(sum(m.kinds.values()) for m in by_layer) == sum(margins(program).kinds.values())


def test_penalties_are_fresh_lists():
    pens = conjunction_penalties(32.0, 5)
    pens.append(1.0)
    assert conjunction_penalties(32.0, 5) == pens[:-1]


def _is_bf16_struct(value: float) -> bool:
    """`is_bf16` as it was before numpy: through struct's float32."""
    if not (math.isfinite(value) and abs(value) < 3.4e38):
        return False
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return bits & 0xFFFF == 0 and struct.unpack("<f", struct.pack("<I", bits))[0] == value


EDGES = [0.0, -0.0, 1.0, 1.5, 1 + 2 ** -7, 1 + 2 ** -8, 2.0 ** -133, 2.0 ** -140, 3.3e38,
         3.39e38, 3.4e38, 3.5e38, 1e300, math.inf, -math.inf, math.nan, 0.1]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True)
                | st.sampled_from(EDGES)
                | st.integers(-2 ** 20, 2 ** 20).map(lambda m: m * 2.0 ** -7), max_size=20))
def test_bf16_mask_is_is_bf16(values):
    mask = _bf16_mask(np.array(values, dtype=np.float64))
    assert mask.tolist() == [is_bf16(v) for v in values] == [_is_bf16_struct(v) for v in values]


def test_check_bf16_names_the_first_inexact_weight():
    layer = SparseLayer(3)
    layer.set("w", (0, 0), 1.5)
    layer.set("w", (0, 1), 1 + 2 ** -9)
    layer.set("w", (1, 0), 0.1)
    with pytest.raises(CodegenError, match=r"layer 3 w\[0, 1\] = 1.001953125 is not exact"):
        layer.check_bf16()
    layer.set("w", (0, 1), 2.0)
    layer.set("w", (1, 0), -256.0)
    layer.check_bf16()


class _Count(ModulePass):
    name = "count"

    def apply(self, ctx, op) -> None:
        pass


def test_verify_each_or_after_the_last_pass(monkeypatch):
    calls = []
    monkeypatch.setattr(builtin.ModuleOp, "verify", lambda self: calls.append(1))
    module = builtin.ModuleOp([])
    pipeline = PassPipeline((_Count(), _Count(), _Count()))
    run_pipeline(None, module, pipeline)
    assert len(calls) == 3
    calls.clear()
    run_pipeline(None, module, pipeline, verify_each=False)
    assert len(calls) == 1


def test_qgc_and_library_callers_verify_after_the_last_pass_and_qgc_opt_after_each(
        monkeypatch, tmp_path):
    from qgc import driver
    from qgc.opt import main as qgc_opt
    calls = []
    monkeypatch.setattr(builtin.ModuleOp, "verify", lambda self: calls.append(1))
    driver.apply(None, builtin.ModuleOp([]), (_Count(), _Count(), _Count()))
    assert len(calls) == 1
    calls.clear()
    (tmp_path / "m.mlir").write_text("builtin.module {}\n")
    monkeypatch.setattr(sys, "argv", ["qgc-opt", str(tmp_path / "m.mlir"),
                                      "-p", "simt-cse,simt-cse,simt-cse"])
    qgc_opt()
    assert len(calls) == 1 + 3       # the input, then each pass


def test_cli_verify_each_prints_the_same():
    run = [sys.executable, "-m", "qgc", str(VECTOR_ADD), "--emit=simt"]
    plain = subprocess.run(run, capture_output=True, text=True, check=True)
    each = subprocess.run(run + ["--verify-each"], capture_output=True, text=True, check=True)
    assert each.stdout == plain.stdout and "simt.kernel" in plain.stdout


def test_bench_compile_reports_stages(capsys):
    spec = importlib.util.spec_from_file_location("bench_compile", ROOT / "bench" / "compile.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--only", r"^vector_add \(nvcc\)", "--stages", "ptx,simt",
                       "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (row,) = report["kernels"]
    assert row["kernel"] == "vector_add (nvcc)" and list(row["stages"]) == ["ptx", "simt"]
    assert row["stages"]["ptx"]["ratio"] == 1.0
    assert row["stages"]["simt"]["seconds"] > 0
    with pytest.raises(SystemExit):
        bench.main(["--stages", "ptx,nope"])


@settings(max_examples=300, deadline=None)
@given(weights=st.lists(st.integers(-5, 5).filter(bool), min_size=1, max_size=6),
       threshold2=st.integers(-30, 30))
def test_gadget_bounds_equal_every_gate_value_of_the_range(weights, threshold2):
    """The scaled-integer bounds look only at the range's ends and the
    integers around each gate's root (G is linear in L); every integer L of
    the range, in exact Fractions, is the oracle."""
    from fractions import Fraction

    from qgc.dialects.tensor.attributes import ThresholdRow
    from qgc.passes.tensor_to_weights.margins import _SCALE, _gadget_bounds
    g = ThresholdRow(tuple(enumerate(weights)), Fraction(threshold2, 2)).gadget()
    gates = [slope * L + offset for _, slope, offset in g.neurons
             for L in range(g.lo, g.hi + 1)]
    on = [G for G in gates if G > 0]
    off = [G for G in gates if G < 0]
    min_on, max_off, max_on = _gadget_bounds(g)
    if on:
        assert Fraction(min_on, _SCALE) == min(on) and Fraction(max_on, _SCALE) == max(on)
    else:
        assert max_on == 0
    if off:
        assert Fraction(max_off, _SCALE) == max(off)
