"""`tensor-split-thresholds`: a one-hot pick too wide for one MLP half is
cut into picks that fit and their OR, and the program's bits stay the same
(the ideal engine on random one-hot inputs, hypothesis-generated picks)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import StringAttr

from qgc.dialects import tensor as T
from qgc.passes.tensor_schedule.dataflow import ScheduleError
from qgc.passes.tensor_schedule_layers import schedule
from qgc.passes.tensor_split_thresholds import split
from qgc.runtime.tensor_engine import run_tensor


def pick_program(choices: int, width: int, grouped: bool) -> T.ProgramOp:
    """p = Σ_k [e_k ∧ v_k] (`Gates.pick`), in group 0 of input "g" if `grouped`."""
    b = T.ProgramBuilder("pick")
    e, v = b.input("e", choices), b.input("v", choices * width)
    if grouped:
        b.input("g", 1)
        b.program.properties["groups"] = StringAttr("g")
    vals, offsets, at = [], [], 0
    for k in range(choices):
        vals += [b.slice(e, k, k + 1), b.slice(v, k * width, (k + 1) * width)]
        offsets.append(at)
        at += 1 + width
    rows = [[(1, {o: 1, o + 1 + i: 1}, 2) for o in offsets] for i in range(width)]
    p = b.threshold(vals, rows)
    if grouped:
        p.owner.properties["group"] = T.i64_attr(0)
    b.output("p", p)
    return b.program


def thresholds(program: T.ProgramOp) -> list[T.ThresholdOp]:
    return [op for op in program.ops() if isinstance(op, T.ThresholdOp)]


@settings(max_examples=40, deadline=None)
@given(choices=st.integers(3, 12), width=st.integers(1, 5), grouped=st.booleans(),
       data=st.data())
def test_a_split_pick_gives_the_same_bits(choices, width, grouped, data):
    whole, cut = (pick_program(choices, width, grouped) for _ in range(2))
    (op,) = thresholds(cut)
    capacity = data.draw(st.integers(1 + grouped, op.gadget_neuron_count() - 1))
    assert split(op, capacity)
    pieces = thresholds(cut)
    assert len(pieces) >= 3
    assert all(piece.gadget_neuron_count() <= capacity for piece in pieces[:-1])
    for _ in range(8):
        chosen = data.draw(st.integers(-1, choices - 1))     # -1: none chosen
        inputs = {"e": [int(k == chosen) for k in range(choices)],
                  "v": data.draw(st.lists(st.integers(0, 1), min_size=choices * width,
                                          max_size=choices * width))}
        if grouped:
            inputs["g"] = [data.draw(st.integers(0, 1))]
        assert run_tensor(cut, inputs)[0] == run_tensor(whole, inputs)[0]


def test_a_pick_that_fits_or_a_signed_sum_is_left_whole():
    program = pick_program(4, 2, False)
    (op,) = thresholds(program)
    assert not split(op, op.gadget_neuron_count())
    b = T.ProgramBuilder("xor")
    x = b.input("x", 2)
    b.output("x", b.threshold([x], [[(1, {0: 1, 1: 1}, 1), (-1, {0: 1, 1: 1}, 2)]]))
    (xor,) = thresholds(b.program)
    assert not split(xor, 1)


def test_the_split_program_schedules_where_the_whole_does_not():
    program = pick_program(12, 4, False)             # 48 neurons
    with pytest.raises(ScheduleError, match="an MLP half has 20"):
        schedule(pick_program(12, 4, False), 128, 20, 1)
    for op in thresholds(program):
        split(op, 19)
    schedule(program, 128, 20, 1)
    assert program.limit("layers") >= 2
