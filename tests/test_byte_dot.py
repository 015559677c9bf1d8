"""`dp4a` (`__dp4a`: four byte products and an addend) and `sad` (`__sad`,
`__usad`: an absolute difference and an addend), which selection expands
into the machine's `bfe`, `mad.lo`, `min`, `max`, `sub` and `add`:
tests/inputs/byte_dot.cu from nvcc and clang on every engine, against
what Python computes on its own."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from qgc.cli import main

PTX = {"nvcc": REPO / "tests" / "inputs" / "byte_dot.ptx",
       "clang": REPO / "tests" / "inputs" / "byte_dot.clang.ptx"}
#: bytes at both ends of each range, mixed signs, and words of one byte
A = [0x01020304, -1, 0x7F80FF01, 5, 0, 1 << 24, -100, -0x7F7F7F80]   # the last 0x80808080
B = [0x05060708, -1, 0x01FF7F80, 9, -2147483648, 1 << 24, 3, 0x7F7F7F7F]


def _bytes(word: int, signed: bool) -> list[int]:
    raw = [(word >> (8 * k)) & 0xFF for k in range(4)]
    return [r - 256 if signed and r >= 128 else r for r in raw]


def _s32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _expected() -> list[int]:
    out = []
    for i, (a, b) in enumerate(zip(A, B, strict=True)):
        signed = sum(x * y for x, y in zip(_bytes(a, True), _bytes(b, True), strict=True))
        plain = sum(x * y for x, y in zip(_bytes(a, False), _bytes(b, False), strict=True))
        out += [_s32(signed + i - 3), _s32(plain + 7), _s32(abs(a - b) + i),
                _s32(abs((a & 0xFFFFFFFF) - (b & 0xFFFFFFFF)) + 1)]
    return out


#: the tensor runs (8–15 s; the machine ops simt runs, each tested at the
#: tensor level on its own) are under `make test-full`
RUNS = [pytest.param(compiler, engine, id=f"{engine}-{compiler}",
                     marks=[pytest.mark.full] if engine == "tensor" else [])
        for engine in ("ref", "simt", "tensor") for compiler in ("nvcc", "clang")]


@pytest.mark.parametrize("compiler, engine", RUNS)
def test_byte_dot_products_and_absolute_differences(tmp_path, capsys, compiler, engine):
    spec = tmp_path / "launch.json"
    spec.write_text(json.dumps({"kernel": "byte_dot", "grid": [2, 1, 1], "block": [4, 1, 1],
                                "args": [{"type": "s32*", "data": A}, {"type": "s32*", "data": B},
                                         {"type": "s32*", "data": [0] * 4 * len(A)},
                                         {"type": "s32", "value": len(A)}]}))
    status = main(["run", str(PTX[compiler]), "--launch", str(spec), "--engine", engine])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert json.loads(out)["buffers"][2] == _expected()
