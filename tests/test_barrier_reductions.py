"""`__syncthreads_count`, `__syncthreads_or` and `__syncthreads_and` (PTX
`bar.red`), which the machine runs as `bar.sync 0` around a shared counter
(`ptx-lower-barrier-reductions`): tests/inputs/barrier_reductions.cu from
nvcc and clang, on every engine, against what Python computes on its own,
and the pass's diagnostic for a reduction the machine cannot run."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from qgc.cli import main

INPUTS = REPO / "tests" / "inputs"
PTX = {"nvcc": INPUTS / "barrier_reductions.ptx",
       "clang": INPUTS / "barrier_reductions.clang.ptx"}
#: two CTAs of two warps each: values below, at and above the rounds (the
#: tensor engine runs `votes` under `make test-full`: nvcc unrolls its loop
#: into 16 reductions, 94 s on a core)
A = [0, 3, 1, 5, 2, 2, 7, 1, 4, 4, 6, 5, 4, 9, 8, 4]
BLOCK, ROUNDS = 8, 4


def _run(tmp_path, capsys, compiler: str, engine: str, kernel: str, args: list) -> list:
    spec = tmp_path / f"{kernel}.json"
    spec.write_text(json.dumps({"kernel": kernel, "grid": [len(A) // BLOCK, 1, 1],
                                "block": [BLOCK, 1, 1], "args": args}))
    status = main(["run", str(PTX[compiler]), "--launch", str(spec), "--engine", engine])
    out, err = capsys.readouterr()
    assert status == 0, err
    return json.loads(out)["buffers"]


def _votes() -> list[int]:
    out = []
    for i in range(len(A)):
        block = A[i - i % BLOCK:i - i % BLOCK + BLOCK]
        total = sum(sum(w > r for w in block) for r in range(ROUNDS))
        any_ = sum(any(w == r for w in block) for r in range(ROUNDS))
        all_ = sum(all(w >= r for w in block) for r in range(ROUNDS))
        out += [total, any_, all_]
    return out


def _halved() -> list[int]:
    out = []
    for start in range(0, len(A), BLOCK):
        block = A[start:start + BLOCK]
        values, steps = list(block), 0
        while any(v >= 4 for v in values):
            values = [v >> 1 if v >= 4 else v for v in values]
            steps += 1
        out += [v * 100 + steps for v in values]
    return out


@pytest.mark.parametrize("compiler", ["nvcc", "clang"])
@pytest.mark.parametrize("engine", ["ref", "simt", pytest.param("tensor", marks=pytest.mark.full)])
def test_counts_and_votes_over_the_cta_in_a_loop(tmp_path, capsys, compiler, engine):
    buffers = _run(tmp_path, capsys, compiler, engine, "votes",
                   [{"type": "s32*", "data": A}, {"type": "s32*", "data": [0] * 3 * len(A)},
                    {"type": "s32", "value": ROUNDS}])
    assert buffers[1] == _votes()


@pytest.mark.parametrize("compiler", ["nvcc", "clang"])
@pytest.mark.parametrize("engine", ["ref", "simt", "tensor"])
def test_a_loop_until_no_thread_of_the_cta_has_work(tmp_path, capsys, compiler, engine):
    buffers = _run(tmp_path, capsys, compiler, engine, "halve_until_small",
                   [{"type": "s32*", "data": A}])
    assert buffers[0] == _halved()


def test_a_reduction_at_another_barrier_is_refused(tmp_path, capsys):
    """Barrier 1 (the machine's only barrier is 0): the instruction, its
    line and what the machine can run."""
    text = PTX["nvcc"].read_text().replace("%r57, 0, %p1;", "%r57, 1, %p1;")
    ptx = tmp_path / "other.ptx"
    ptx.write_text(text)
    status = main(["compile", str(ptx), "--emit", "simt"])
    err = capsys.readouterr().err
    assert status != 0
    assert "other.ptx:61:" in err and "'bar.red.popc.u32' is not yet supported" in err
    assert "barrier 0" in err and "Traceback" not in err
