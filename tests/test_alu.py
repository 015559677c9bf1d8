"""qgc.alu: every circuit against Python's integer semantics on the ideal
`tensor` engine, exhaustively at small widths and on drawn and edge operands
at 32 bits."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qgc.alu import Alu
from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.runtime.tensor_engine import from_bits, run_tensor, to_bits


def signed(v: int, w: int) -> int:
    return v - (1 << w) if v >> (w - 1) & 1 else v


def shift(op: str, a: int, s: int, w: int) -> int:
    m = (1 << w) - 1
    if op == "shl":
        return (a << s) & m if s < w else 0
    if op == "shr.u":
        return a >> s if s < w else 0
    return (signed(a, w) >> min(s, w - 1)) & m


def reference(op: str, w: int, a: int, b: int, c: int = 0) -> int:
    m = (1 << w) - 1
    sa, sb = signed(a, w), signed(b, w)
    table = {
        "add": a + b, "sub": a - b, "mul_lo": a * b, "mad_lo": a * b + c, "and_": a & b,
        "or_": a | b, "xor": a ^ b, "not_": ~a, "neg": -a, "sum": a + b + c,
        "min.s": min(sa, sb), "max.s": max(sa, sb), "min.u": min(a, b), "max.u": max(a, b),
        "select": a if c & 1 else b, "mask": a if c & 1 else 0,
    }
    if op in ("shl", "shr.u", "shr.s"):
        return shift(op, a, b, w)
    if op.startswith("setp."):
        cond = op[5:]
        x, y = (sa, sb) if cond.endswith(".s") else (a, b)
        base = cond.split(".")[0]
        return int({"eq": a == b, "ne": a != b, "lt": x < y, "le": x <= y, "gt": x > y,
                    "ge": x >= y}[base])
    return table[op] & m


OPS = ["add", "sub", "mul_lo", "mad_lo", "and_", "or_", "xor", "not_", "neg", "sum", "min.s",
       "max.s", "min.u", "max.u", "select", "mask", "shl", "shr.u", "shr.s",
       *(f"setp.{c}" for c in simt.SETP_CONDS)]


def build(op: str, w: int) -> T.ProgramOp:
    b = T.ProgramBuilder(op.replace(".", "_"))
    x, y, z = b.input("x", w), b.input("y", w), b.input("z", w)
    alu = Alu(b)
    p = b.slice(z, 0, 1)
    if op.startswith("setp."):
        out = alu.setp(op[5:], x, y)
    elif op in ("min.s", "max.s", "min.u", "max.u"):
        out = getattr(alu, op[:3])(x, y, op.endswith(".s"))
    elif op in ("shr.u", "shr.s"):
        out = alu.shr(x, y, op.endswith(".s"))
    elif op in ("not_", "neg"):
        out = getattr(alu, op)(x)
    elif op == "mad_lo":
        out = alu.mad_lo(x, y, z)
    elif op == "sum":
        out = alu.sum([x, y, z])
    elif op == "select":
        out = alu.select(p, x, y)
    elif op == "mask":
        out = alu.mask(x, p)
    else:
        out = getattr(alu, op)(x, y)
    b.output("out", out)
    program = b.program
    program.verify()
    return program


def check(program: T.ProgramOp, op: str, w: int, cases) -> None:
    for a, bb, c in cases:
        out, _ = run_tensor(program, {"x": to_bits(a, w), "y": to_bits(bb, w),
                                      "z": to_bits(c, w)})
        assert from_bits(out["out"]) == reference(op, w, a, bb, c), (op, w, a, bb, c)


@pytest.mark.parametrize("op", OPS)
def test_exhaustive_at_small_width(op):
    w = 3 if op in ("mul_lo", "mad_lo", "sum") else 4
    thirds = range(1 << w) if op in ("mad_lo", "sum", "select", "mask") else [0]
    check(build(op, w), op, w, itertools.product(range(1 << w), range(1 << w), thirds))


EDGES = [0, 1, 2, 3, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0xFFFF_FFFE, 0x0F0F_0F0F,
         0x1000_0000, 31, 32, 33]
WORDS = st.integers(0, 0xFFFF_FFFF) | st.sampled_from(EDGES)


@pytest.fixture(scope="module")
def wide():
    cache: dict[str, T.ProgramOp] = {}

    def get(op: str) -> T.ProgramOp:
        if op not in cache:
            cache[op] = build(op, 32)
        return cache[op]
    return get


@pytest.mark.parametrize("op", ["add", "sub", "mul_lo", "mad_lo", "setp.lt.s", "setp.ge.u",
                                "setp.le.s", "select", "shl", "shr.s", "min.s", "xor"])
def test_edges_at_32_bits(wide, op):
    check(wide(op), op, 32, [(a, b, c) for a in EDGES for b in EDGES[:6] for c in (0, 1, 5)])


@settings(max_examples=40, deadline=None)
@given(a=WORDS, b=WORDS, c=WORDS)
def test_drawn_operands_at_32_bits(wide, a, b, c):
    for op in ("add", "sub", "mul_lo", "mad_lo", "setp.gt.s", "setp.lt.u", "shr.u", "max.u"):
        check(wide(op), op, 32, [(a, b, c)])
