"""64-bit `div` and `rem` (`ptx-expand-wide-divrem`: restoring division in
a loop of 64-bit ops): tests/inputs/wide_divide.cu from nvcc and clang on
every engine, against Python's answer with PTX's rules (quotients truncate,
a remainder takes the dividend's sign, x / 0 is all ones and x % 0 is x,
−2⁶³ / −1 wraps)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from qgc.cli import main

PTX = {"nvcc": REPO / "tests" / "inputs" / "wide_divide.ptx",
       "clang": REPO / "tests" / "inputs" / "wide_divide.clang.ptx"}
#: pairs past 32 bits (the compilers' 32-bit fast path takes the others),
#: divisors at or past 2⁶³ unsigned (the shifted-out bit), zero, −2⁶³ / −1
PAIRS = [(100, 7), (-100, 7), (2**40 + 3, -3), (-7, 2**33), (2**62, 12345),
         (-2**63, -1), (2**40 + 9, 0), (2**63 - 1, -2), (-1, 3), (-2**62, 2**62 + 1),
         (1234567890123456789, 987654321), (-5, -2**63)]
M64 = (1 << 64) - 1


def _s64(v: int) -> int:
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def _expected() -> tuple[list[int], list[int], list[int], list[int]]:
    q, r, uq, ur = [], [], [], []
    for a, b in PAIRS:
        if b == 0:
            q.append(-1)
            r.append(a)
        else:
            magnitude = abs(a) // abs(b)
            q.append(_s64(-magnitude if (a < 0) != (b < 0) else magnitude))
            r.append(_s64(-(abs(a) % abs(b)) if a < 0 else abs(a) % abs(b)))
        ua, ub = a & M64, b & M64
        uq.append(ua // ub if ub else M64)
        ur.append(ua % ub if ub else ua)
    return q, r, uq, ur


#: the tensor runs are under `make test-full` (each division is 64 machine
#: loop iterations on register pairs: many minutes of the tensor engine)
RUNS = [pytest.param(compiler, engine, id=f"{engine}-{compiler}",
                     marks=[pytest.mark.full] if engine == "tensor" else [])
        for engine in ("ref", "simt", "tensor") for compiler in ("nvcc", "clang")]


@pytest.mark.parametrize("compiler, engine", RUNS)
def test_64_bit_quotients_and_remainders(tmp_path, capsys, compiler, engine):
    n = len(PAIRS)
    spec = tmp_path / "launch.json"
    spec.write_text(json.dumps({"kernel": "wide_divide", "grid": [3, 1, 1], "block": [4, 1, 1],
                                "args": [{"type": "s64*", "data": [a for a, _ in PAIRS]},
                                         {"type": "s64*", "data": [b for _, b in PAIRS]},
                                         {"type": "s64*", "data": [0] * n},
                                         {"type": "s64*", "data": [0] * n},
                                         {"type": "u64*", "data": [0] * n},
                                         {"type": "u64*", "data": [0] * n},
                                         {"type": "s32", "value": n}]}))
    status = main(["run", str(PTX[compiler]), "--launch", str(spec), "--engine", engine])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert json.loads(out)["buffers"][2:6] == list(_expected())
