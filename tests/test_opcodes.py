"""The machine's opcode table (`qgc.machine.opcodes`): every ALU opcode's
circuit, built through the table as convert-simt-to-tensor builds it, equals
the opcode's own semantics (the simt engine's) on edge and drawn operands at
32 bits on the ideal tensor engine; with a constant last source the circuit
still agrees. Instruction selection reaches every opcode the table gives a
PTX form, and the table is consistent with itself. The per-op depth checks,
widths below 32 and the stock-layer runs are tests/test_alu.py's."""

from __future__ import annotations

import random

import pytest

from qgc.dialects import tensor as T
from qgc.machine.opcodes import ALU_OPCODES, PTX_SELECTION, LowerHints, select_alu
from qgc.passes.simt_to_tensor.circuits import Alu
from qgc.runtime.tensor_engine import from_bits, run_tensor, to_bits

EDGES = (0, 1, 2, 3, 7, 8, 31, 32, 33, 0x7F, 0x80, 0xFF, 0x100, 0x8000, 0x7FFF_FFFF,
         0x8000_0000, 0xFFFF_FFFE, 0xFFFF_FFFF, 0x0123_4567, 0x89AB_CDEF)
NAMES = "xyzu"
#: opcodes with a circuit (div/rem are loops of simt-expand-divrem)
LOWERED = [name for name, code in ALU_OPCODES.items() if code.lower is not None]
#: the multipliers are deep: fewer drawn operands
HEAVY = {"mul.lo", "mad.lo", "mul.hi.s", "mul.hi.u"}


def build(name: str, constant: int | None = None) -> T.ProgramOp:
    """The opcode's circuit over inputs x, y, ... (the last one `constant` if given)."""
    code = ALU_OPCODES[name]
    b = T.ProgramBuilder(name.replace(".", "_"))
    alu = Alu(b)
    widths = [1 if kind == "pred" else 32 for kind in code.sources]
    sources = [b.input(NAMES[k], w) for k, w in enumerate(widths)]
    if constant is not None:
        sources[-1] = alu.const(constant, widths[-1])
    b.output("out", code.lower(alu, sources, LowerHints()))
    program = b.program
    program.verify()
    return program


def operands(name: str, count: int, seed: int) -> list[tuple[int, ...]]:
    code = ALU_OPCODES[name]
    rng = random.Random(seed)

    def draw(kind: str) -> int:
        if kind == "pred":
            return rng.getrandbits(1)
        return rng.choice(EDGES) if rng.random() < 0.5 else rng.getrandbits(32)
    return [tuple(draw(kind) for kind in code.sources) for _ in range(count)]


def run(program: T.ProgramOp, name: str, values: tuple[int, ...]) -> int:
    widths = [1 if kind == "pred" else 32 for kind in ALU_OPCODES[name].sources]
    taken = {op.input_name.data for op in program.inputs()}
    inputs = {NAMES[k]: to_bits(v, w) for k, (v, w) in enumerate(zip(values, widths,
                                                                      strict=True))
              if NAMES[k] in taken}
    out, _ = run_tensor(program, inputs)
    return from_bits(out["out"])


@pytest.mark.parametrize("name", LOWERED)
def test_circuit_equals_semantics(name):
    program = build(name)
    code = ALU_OPCODES[name]
    for values in operands(name, 12 if name in HEAVY else 60, seed=len(name)):
        assert run(program, name, values) == code.evaluate(*values), (name, values)


@pytest.mark.parametrize("name", [n for n in LOWERED if n not in HEAVY])
def test_circuit_with_a_constant_last_source(name):
    code = ALU_OPCODES[name]
    for values in operands(name, 4, seed=7 * len(name)):
        program = build(name, constant=values[-1])
        assert run(program, name, values) == code.evaluate(*values), (name, values)


def test_constant_byte_selectors_are_views():
    """prmt with a constant selector only rewires bytes: no neuron."""
    for name in [n for n in ALU_OPCODES if n.startswith("prmt")]:
        program = build(name, constant=0x3210 | 0x8000 if name == "prmt" else 1)
        assert not any(isinstance(op, T.ThresholdOp) and op.gadget_neuron_count()
                       for op in program.ops()), name


def test_table_is_consistent():
    for name, code in ALU_OPCODES.items():
        assert code.name == name
        assert code.arity == len(code.sources) >= 1
        assert not (code.commutative and code.arity < 2), name
        for form in code.ptx:
            for t in form.types:
                assert select_alu(form.base, form.modifiers, t) is code
    assert all(code in ALU_OPCODES.values() for code in PTX_SELECTION.values())


def test_folding_agrees_with_the_semantics():
    """Identities and absorbing values the table states hold for every word."""
    rng = random.Random(3)
    for code in ALU_OPCODES.values():
        for _ in range(200):
            x = rng.choice(EDGES) if rng.random() < 0.5 else rng.getrandbits(32)
            if code.identity is not None:
                assert code.evaluate(x, code.identity) == x, code.name
                if code.commutative:
                    assert code.evaluate(code.identity, x) == x, code.name
            if code.absorbing is not None:
                z = code.absorbing
                assert code.evaluate(x, z) == z and code.evaluate(z, x) == z, code.name
