"""Circuits built once and instantiated (`circuits.templates`): lanes
lowered through `AluCore.instantiated` give the program a fresh build of
every lane gives, op for op (drawn opcodes over four lanes whose sources
are per-lane, uniform, constant, sliced or earlier results), and the
templates are really used."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from qgc.dialects import tensor as T
from qgc.machine.opcodes import ALU_OPCODES, LowerHints
from qgc.passes.simt_to_tensor.circuits import Alu

W = 8
LANES = 4
#: prmt selects bytes of a 32-bit word; every other circuit takes any width
OPCODES = sorted(name for name, code in ALU_OPCODES.items()
                 if code.lower is not None and not name.startswith("prmt"))

#: how one source of one lane is made: per-lane input, the lane-0 input
#: (uniform), a constant, a slice of a wide input, or an earlier result
SOURCES = st.one_of(st.just(("lane",)), st.just(("uniform",)),
                    st.tuples(st.just("const"), st.integers(0, (1 << W) - 1)),
                    st.just(("slice",)), st.just(("earlier",)))
STEP = st.tuples(st.sampled_from(OPCODES), st.lists(SOURCES, min_size=4, max_size=4),
                 st.sampled_from([None, True, False]))


def lower(steps, templated: bool) -> str:
    b = T.ProgramBuilder("lanes")
    alu = Alu(b)
    wide = [b.input(f"wide{ln}", 2 * W) for ln in range(LANES)]
    lanes = [[b.input(f"x{ln}_{k}", W) for k in range(4)] for ln in range(LANES)]
    preds = [b.input(f"p{ln}", 1) for ln in range(LANES)]
    results: list[list] = [[] for _ in range(LANES)]
    for opcode, sources, high_later in steps:
        code, hints = ALU_OPCODES[opcode], LowerHints(high_later=high_later)
        for ln in range(LANES):
            x = []
            for k, (source, kind) in enumerate(zip(sources, code.sources, strict=False)):
                if kind == "pred":
                    x.append(preds[ln] if source[0] == "lane" else preds[0])
                elif source[0] == "lane":
                    x.append(lanes[ln][k])
                elif source[0] == "uniform":
                    x.append(lanes[0][k])
                elif source[0] == "const":
                    x.append(alu.const(source[1], W))
                elif source[0] == "slice":
                    x.append(b.slice(wide[ln], k, k + W))
                else:
                    x.append(results[ln][-1] if results[ln] else lanes[ln][k])

            def build(x=x, code=code, hints=hints):
                return code.lower(alu, x, hints)
            out = (alu.instantiated((opcode, hints), x, build) if templated else build())
            results[ln].append(out)
    for ln in range(LANES):
        for j, r in enumerate(results[ln]):
            b.output(f"r{ln}_{j}", r)
    return str(b.program)


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=3))
def test_instantiated_lanes_are_fresh_builds(steps):
    assert lower(steps, templated=True) == lower(steps, templated=False)


def test_a_circuit_is_built_once_for_four_lanes(monkeypatch):
    b = T.ProgramBuilder("mad")
    alu = Alu(b)
    built = []
    lanes = [[b.input(f"x{ln}_{k}", 32) for k in range(3)] for ln in range(LANES)]
    for ln in range(LANES):
        alu.instantiated("mad.lo", lanes[ln],
                         lambda x=lanes[ln]: built.append(1) or alu.mad_lo(*x))
    assert len(built) == 1


def test_a_build_that_leaves_a_word_for_later_is_not_kept():
    # a narrow mul.lo that keeps the high word for a later mul.hi: a template
    # would not leave that word for the lane's mul.hi
    b = T.ProgramBuilder("wide")
    alu = Alu(b)
    built = []
    for ln in range(LANES):
        x = [b.input(f"x{ln}_{k}", 32) for k in range(2)]
        alu.instantiated("mul.lo", x, lambda x=x: built.append(1)
                         or alu.mul_lo(*x, high_later=False))
    assert len(built) == LANES
