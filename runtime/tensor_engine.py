"""The `tensor` engine: runs a `tensor.program` with its ideal semantics.

Exact arithmetic on bits, one token (one step) per call; memories persist
across calls in `state`. This is the level the stock-layer forward
(`runtime/tensor_codegen.py`) must reproduce bit for bit, and the level the
`simt` → `tensor` lowering is checked against.

    outputs, state = run_tensor(module, {"a": [1, 0, 1, 1], "b": [...]}, state)

Inputs and outputs are bit lists (0/1, bit i of a value at index i). `state`
maps a memory's name to its written rows {slot: bits}; `None` starts empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xdsl.ir import Operation, SSAValue

from qgc.dialects import tensor as T

State = dict[str, dict[int, tuple[int, ...]]]


class TensorEngineError(Exception):
    """A program run that has no defined result (bad inputs, an invalid key)."""


def program_of(module: Operation) -> T.ProgramOp:
    if isinstance(module, T.ProgramOp):
        return module
    programs = T.programs_of(module)
    if len(programs) != 1:
        raise TensorEngineError(f"expected one tensor.program, found {len(programs)}")
    return programs[0]


def _slot(op: T.KvWriteOp | T.KvReadOp, key: Sequence[int], enable: Sequence[int] | None,
          slots: int) -> int | None:
    """The addressed slot, or None (disabled, all-zero one-hot, out of range)."""
    if enable is not None and not enable[0]:
        return None
    if op.key_kind.data == "onehot":
        ones = [i for i, b in enumerate(key) if b]
        if len(ones) > 1:
            raise TensorEngineError(f"{op.name} @{op.memory_name}: one-hot key has "
                                    f"{len(ones)} bits set (slots {ones})")
        return ones[0] if ones else None
    address = sum(b << i for i, b in enumerate(key))
    return address if address < slots else None


def run_tensor(module: Operation, inputs: Mapping[str, Sequence[int]],
               state: State | None = None) -> tuple[dict[str, list[int]], State]:
    """Run one step; returns the outputs and the new memory state (the given
    state is not modified)."""
    program = program_of(module)
    state = {name: dict(rows) for name, rows in (state or {}).items()}
    memories = program.memories()
    values: dict[SSAValue, tuple[int, ...]] = {}
    outputs: dict[str, list[int]] = {}
    names = {op.input_name.data for op in program.inputs()}
    unknown = sorted(set(inputs) - names)
    if unknown:
        raise TensorEngineError(f"unknown input '{unknown[0]}' (the program takes "
                                f"{', '.join(sorted(names)) or 'none'})")

    def get(v: SSAValue | None) -> tuple[int, ...] | None:
        return None if v is None else values[v]

    for op in program.ops():
        if isinstance(op, T.InputOp):
            name, width = op.input_name.data, T.width_of(op.result)
            if name not in inputs:
                raise TensorEngineError(f"missing input '{name}' ({width} bits)")
            bits = tuple(int(b) for b in inputs[name])
            if len(bits) != width or any(b not in (0, 1) for b in bits):
                raise TensorEngineError(f"input '{name}' takes {width} bits (0 or 1), got "
                                        f"{list(inputs[name])}")
            values[op.result] = bits
        elif isinstance(op, T.ThresholdOp):
            x = [b for v in op.inputs for b in values[v]]
            out = tuple(row.value(x) for row in op.row_list())
            bad = next((j for j, b in enumerate(out) if b not in (0, 1)), None)
            if bad is not None:
                raise TensorEngineError(f"{op.name} row {bad} "
                                        f"({op.row_list()[bad].spelled()}) sums to {out[bad]}, "
                                        "not a bit: the program is wrong")
            values[op.result] = out
        elif isinstance(op, T.SliceOp):
            values[op.result] = values[op.input][op.lo.value.data:op.hi.value.data]
        elif isinstance(op, T.ConcatOp):
            values[op.result] = tuple(b for v in op.inputs for b in values[v])
        elif isinstance(op, T.KvWriteOp):
            mem = memories[op.memory_name]
            slot = _slot(op, values[op.key], get(op.enable), mem.n_slots)
            if slot is not None:
                state.setdefault(op.memory_name, {})[slot] = values[op.value]
        elif isinstance(op, T.KvReadOp):
            mem = memories[op.memory_name]
            slot = _slot(op, values[op.key], get(op.enable), mem.n_slots)
            rows = state.get(op.memory_name, {})
            values[op.result] = rows.get(slot, (0,) * mem.n_width) if slot is not None \
                else (0,) * mem.n_width
        elif isinstance(op, T.OutputOp):
            outputs[op.output_name.data] = list(values[op.value])
    return outputs, state


def run_tensor_tokens(module: Operation, tokens: Sequence[Mapping[str, Sequence[int]]],
                      state: State | None = None) -> tuple[list[dict[str, list[int]]], State]:
    """Run a sequence of steps (tokens) through the same memories."""
    outs = []
    for inputs in tokens:
        out, state = run_tensor(module, inputs, state)
        outs.append(out)
    return outs, state or {}


def to_bits(value: int, width: int) -> list[int]:
    return [(value >> i) & 1 for i in range(width)]


def from_bits(bits: Sequence[int]) -> int:
    return sum(int(b) << i for i, b in enumerate(bits))
