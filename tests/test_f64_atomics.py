"""atomicAdd on a double (`atom.add.f64`; `ptx-expand-f64-atomics`: a
compare-and-swap loop of 64-bit ops): tests/inputs/atomic_f64.cu from nvcc
and clang on every engine, against Python's double additions in the
atomics' order (lanes in order, round to nearest even, subnormals kept)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from qgc.cli import main

PTX = {"nvcc": REPO / "tests" / "inputs" / "atomic_f64.ptx",
       "clang": REPO / "tests" / "inputs" / "atomic_f64.clang.ptx"}
#: a sum past 2⁵³ and back, ending on a subnormal (a flush would give 0)
TERMS = [0.1, 1e300, -1e300, 5e-324]
BINS = [0, 1, 0, 2, 1, 0, 0, 2, 1]
WEIGHTS = [0.5, 1e-310, 0.25, 3.0, -1e-310, 1e16, 1.0, -3.0, 2e-310]

#: the tensor runs are under `make test-full` (an f64 add is a long program
#: on register pairs: many minutes of the tensor engine)
RUNS = [pytest.param(compiler, engine, id=f"{engine}-{compiler}",
                     marks=[pytest.mark.full] if engine == "tensor" else [])
        for engine in ("ref", "simt", "tensor") for compiler in ("nvcc", "clang")]


def _run(tmp_path, capsys, compiler: str, engine: str, launch: dict) -> list:
    spec = tmp_path / "launch.json"
    spec.write_text(json.dumps(launch))
    status = main(["run", str(PTX[compiler]), "--launch", str(spec), "--engine", engine])
    out, err = capsys.readouterr()
    assert status == 0, err
    return json.loads(out)["buffers"]


@pytest.mark.parametrize("compiler, engine", RUNS)
def test_a_double_sum_and_the_old_values(tmp_path, capsys, compiler, engine):
    buffers = _run(tmp_path, capsys, compiler, engine, {
        "kernel": "sum_f64", "grid": [1, 1, 1], "block": [4, 1, 1],
        "args": [{"type": "f64*", "data": TERMS}, {"type": "f64*", "data": [1.0]},
                 {"type": "f64*", "data": [0.0] * len(TERMS)},
                 {"type": "s32", "value": len(TERMS)}]})
    total, olds = 1.0, []
    for term in TERMS:
        olds.append(total)
        total += term
    assert buffers[1:3] == [[total], olds]
    assert total == 5e-324


@pytest.mark.parametrize("compiler, engine", RUNS)
def test_a_histogram_of_double_weights(tmp_path, capsys, compiler, engine):
    buffers = _run(tmp_path, capsys, compiler, engine, {
        "kernel": "weighted_hist", "grid": [1, 1, 1], "block": [4, 1, 1],
        "args": [{"type": "s32*", "data": BINS}, {"type": "f64*", "data": WEIGHTS},
                 {"type": "f64*", "data": [0.0, 0.0, 0.0]},
                 {"type": "s32", "value": len(BINS)}]})
    hist = [0.0, 0.0, 0.0]
    for b, w in zip(BINS, WEIGHTS, strict=True):     # the grid-stride loop's order
        hist[b] += w
    assert buffers[2] == hist
    assert hist[1] == 2e-310
