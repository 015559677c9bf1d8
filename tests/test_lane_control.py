"""The lane control's min-PC circuit (`LaneControl.next_block`) on the ideal
`tensor` engine against a Python model of the rule docs/machine.md states:
the warp's next block is the lowest block a ready lane waits at, else the
lowest a lane held at a barrier waits at, else 0. Every combination of the
four lanes' states, with blocks drawn to tie and to differ, for a kernel of
one block (no race), a few, a power of two (a key bit above the block
number), 255 (the all-ones block is free and stands for "out") and 256 (a
ninth key bit)."""

from __future__ import annotations

import itertools
import random

import pytest

from qgc import protocol as P
from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.passes.simt_to_tensor.circuits import Alu
from qgc.passes.simt_to_tensor.gates import Gates
from qgc.passes.simt_to_tensor.lane_control import LaneControl
from qgc.runtime.tensor_engine import from_bits, run_tensor, to_bits

LANES = range(simt.LANES)
#: a lane's state: (exited, waiting at a barrier)
STATES = ((0, 0), (1, 0), (0, 1), (1, 1))


class _Control(Gates, LaneControl):
    """Just enough of the lowering for `next_block`: a builder, an ALU and
    a block count."""

    def __init__(self, b: T.ProgramBuilder, blocks: int):
        self.b = b
        self.alu = self.common_alu = Alu(b)
        self.blocks = [None] * blocks


def build(blocks: int) -> T.ProgramOp:
    b = T.ProgramBuilder("next_block")
    ctl = _Control(b, blocks)
    pc = [b.input(f"pc{ln}", P.BLOCK_BITS) for ln in LANES]
    exited = [b.input(f"exit{ln}", 1) for ln in LANES]
    wait = [b.input(f"wait{ln}", 1) for ln in LANES]
    nb, waiting, exited_all, bar = ctl.next_block(pc, exited, wait)
    b.output("nb", nb)
    b.output("waiting", b.concat(waiting))
    b.output("exited_all", exited_all)
    b.output("bar", bar)
    program = b.program
    program.verify()
    return program


def model(pcs, states) -> dict[str, int]:
    ready = [pc for pc, (e, w) in zip(pcs, states, strict=True) if not e and not w]
    held = [pc for pc, (e, w) in zip(pcs, states, strict=True) if not e and w]
    return {"nb": min(ready) if ready else min(held) if held else 0,
            "waiting": sum(1 << ln for ln, (e, w) in enumerate(states) if w and not e),
            "exited_all": int(all(e for e, _ in states)),
            "bar": int(not ready and not all(e for e, _ in states))}


def run(program: T.ProgramOp, pcs, states) -> dict[str, int]:
    inputs = {f"pc{ln}": to_bits(pcs[ln], P.BLOCK_BITS) for ln in LANES}
    for ln, (e, w) in enumerate(states):
        inputs[f"exit{ln}"], inputs[f"wait{ln}"] = to_bits(e, 1), to_bits(w, 1)
    out, _ = run_tensor(program, inputs)
    return {name: from_bits(bits) for name, bits in out.items()}


@pytest.mark.parametrize("blocks", [1, 2, 4, 5, 128, 255, 1 << P.BLOCK_BITS])
def test_next_block_is_the_lowest_block_of_a_ready_lane_else_of_a_held_one(blocks):
    program = build(blocks)
    rng = random.Random(blocks)
    top = blocks - 1
    for states in itertools.product(STATES, repeat=simt.LANES):
        # ties, neighbours, the extremes (block 0 and the last block) and draws
        for pcs in ([0] * 4, [top] * 4, [top, 0, top, 0], [min(3, top)] * 2 + [min(2, top)] * 2,
                    [rng.randrange(blocks) for _ in LANES], [rng.randrange(blocks) for _ in LANES]):
            assert run(program, pcs, states) == model(pcs, states), (pcs, states)


def test_the_circuit_does_not_grow_with_the_blocks():
    """A one-hot of the blocks per lane cost about ten bits a block (1,230
    at 123 blocks, fastmath_f's and softmax's count): the compares' keys
    grow with the bits of a block number only."""
    def width(program: T.ProgramOp) -> int:
        return sum(T.width_of(op.result) for op in program.ops()
                   if isinstance(op, T.ThresholdOp) and op.inputs)
    assert width(build(5)) <= width(build(123)) < 64
    assert width(build(1 << P.BLOCK_BITS)) < 160
