"""The `.approx` f32 operations (`qgc.machine.approx_programs`): the same
float32 algorithm on the machine's arithmetic (`Evaluate`, what the simt
engine runs and `simt-expand-float` expands) and on the `ref` engine's own
(`ref_approx.RefOps`), bit for bit, over the special classes and random
operands (10^6 under `make test-full`); and each algorithm's error against
the true function within the PTX ISA's bounds (the measured figures are in
docs/machine.md)."""

from __future__ import annotations

import math
import random

import pytest
from test_softfloat import SPECIALS

from qgc.machine import approx_programs as ap
from qgc.machine.opcodes import ALU_OPCODES, Evaluate
from qgc.runtime import float32 as F
from qgc.runtime.ref_approx import REF_OPS

MACHINE = Evaluate()
UNARY = [(name, ftz) for name in ap.UNARY for ftz in ((False,) if name == "tanh" else
                                                      (False, True))]
DIVIDES = [(program, ftz) for program in (ap.div_approx, ap.div_full) for ftz in (False, True)]


def _operand(rng: random.Random) -> int:
    pick = rng.random()
    if pick < 0.3:
        return rng.getrandbits(32)
    if pick < 0.8:           # the functions' interesting range
        return F.from_float(rng.uniform(-300.0, 300.0))
    return rng.choice(SPECIALS)


def _agree(operands, count: int, seed: str) -> None:
    rng = random.Random(seed)
    for i in range(count):
        x = operands[i] if i < len(operands) else _operand(rng)
        y = _operand(rng)
        for name, ftz in UNARY:
            program = ap.UNARY[name]
            assert program(MACHINE, x, ftz) == program(REF_OPS, x, ftz), (name, ftz, hex(x))
        for program, ftz in DIVIDES:
            assert program(MACHINE, x, y, ftz) == program(REF_OPS, x, y, ftz), \
                (program.__name__, ftz, hex(x), hex(y))


def test_machine_and_ref_agree_on_the_special_classes_and_a_sample():
    _agree(SPECIALS, len(SPECIALS) + 1500, "sample")


@pytest.mark.full
def test_machine_and_ref_agree_on_a_million_operands():
    _agree(SPECIALS, 1_000_000, "million")


def test_the_opcodes_run_the_programs():
    assert ALU_OPCODES["ex2.approx.ftz.f32"].composite
    x = F.from_float(0.75)
    assert ALU_OPCODES["sin.approx.f32"].evaluate(x) == ap.sin(REF_OPS, x)
    assert ALU_OPCODES["div.approx.f32"].evaluate(x, x) == ap.div_approx(REF_OPS, x, x)


#: (program, true function, range, relative?, bound as a power of two): the
#: PTX ISA's bounds as we read them (ex2 relative 2^-22; lg2 absolute 2^-22.6
#: on [1/2, 2]; sin, cos absolute 2^-20.9 on [−π, π]; tanh relative 2^-11;
#: rsqrt relative 2^-22.9)
BOUNDS = [
    ("ex2", lambda x: 2.0 ** x, (-120.0, 120.0), True, -22.0),
    ("lg2", math.log2, (0.5, 2.0), False, -22.6),
    ("sin", math.sin, (-math.pi, math.pi), False, -20.9),
    ("cos", math.cos, (-math.pi, math.pi), False, -20.9),
    ("tanh", math.tanh, (-6.0, 6.0), True, -11.0),
    ("rsqrt", lambda x: 1 / math.sqrt(x), (1e-10, 1e10), True, -22.9),
]


@pytest.mark.parametrize("name, fn, span, relative, bound", BOUNDS, ids=[b[0] for b in BOUNDS])
def test_the_error_is_within_the_isa_bound(name, fn, span, relative, bound):
    rng = random.Random(name)
    program = ap.UNARY[name]
    for _ in range(3000):
        x = F.to_float(F.from_float(rng.uniform(*span)))
        want = fn(x)
        got = F.to_float(program(REF_OPS, F.from_float(x)))
        err = abs(got - want) / (abs(want) if relative else 1.0)
        assert err <= 2.0 ** bound, (name, x, got, want)


def test_the_special_values():
    inf, ninf, nan = 0x7F80_0000, 0xFF80_0000, F.CANONICAL_NAN
    assert ap.ex2(REF_OPS, inf) == inf and ap.ex2(REF_OPS, ninf) == 0
    assert ap.lg2(REF_OPS, 0) == ninf and ap.lg2(REF_OPS, 0x8000_0000) == ninf
    assert ap.lg2(REF_OPS, F.from_float(-1.0)) == nan and ap.lg2(REF_OPS, inf) == inf
    assert ap.sin(REF_OPS, inf) == nan and ap.sin(REF_OPS, 0x8000_0000) == 0x8000_0000
    assert ap.tanh(REF_OPS, inf) == F.from_float(1.0)
    assert ap.rsqrt(REF_OPS, 0) == inf and ap.rsqrt(REF_OPS, F.from_float(-4.0)) == nan
