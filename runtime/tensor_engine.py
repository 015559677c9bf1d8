"""The `tensor` engine: runs a `tensor.program` with its ideal semantics.

Exact arithmetic on bits, one token (one step) per call; memories persist
across calls in `state`. This is the level the stock-layer forward
(`runtime/tensor_codegen.py`) must reproduce bit for bit, and the level the
`simt` → `tensor` lowering is checked against.

    outputs, state = run_tensor(module, {"a": [1, 0, 1, 1], "b": [...]}, state)

Inputs and outputs are bit lists (0/1, bit i of a value at index i). `state`
maps a memory's name to its written rows {slot: bits}; `None` starts empty.

A program is compiled once (`compile_program`: kept on the program op, rebuilt
when its ops, operands or properties change) into a plan that evaluates whole stages of
`tensor.threshold` ops with numpy: every bit of every value lives in one flat
integer buffer, slices and concats are index gathers fixed at compile time,
and the threshold ops whose inputs are ready at the same stage run as one
sparse product (`_Stage`). Memory accesses run in program order per memory.
A token that meets anything undefined (a row that is not a bit, a bad input,
a one-hot key with several bits) is rerun by the reference interpreter
(`_interpret`, op by op), so errors and their messages are exactly its own.
`tensor_runner(program)` skips the per-token check for a hot loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np
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
    plan = compile_program(program)
    if plan is None:
        return _interpret(program, inputs, state)
    return plan.run(program, inputs, state)


def _interpret(module: Operation, inputs: Mapping[str, Sequence[int]],
               state: State | None = None) -> tuple[dict[str, list[int]], State]:
    """The reference: `run_tensor` op by op, row by row (slow, obviously right).
    The compiled plan hands every token it cannot vouch for to it."""
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

    def off(op: Operation) -> bool:
        """A grouped op while its group does not run: zero bits."""
        g = getattr(op, "group_index", None)
        return g is not None and not inputs[program.groups_input][g]  # type: ignore[index]

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
        elif isinstance(op, T.ThresholdOp) and off(op):
            values[op.result] = (0,) * T.width_of(op.result)
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
        elif isinstance(op, T.MergeOp):
            values[op.result] = _merged(op, [values[v] for v in op.inputs])
        elif isinstance(op, T.KvWriteOp):
            mem = memories[op.memory_name]
            slot = _slot(op, values[op.key], get(op.enable), mem.n_slots)
            if slot is not None:
                state.setdefault(op.memory_name, {})[slot] = values[op.value]
        elif isinstance(op, T.KvReadOp):
            mem = memories[op.memory_name]
            slot = None if off(op) else _slot(op, values[op.key], get(op.enable), mem.n_slots)
            rows = state.get(op.memory_name, {})
            values[op.result] = rows.get(slot, (0,) * mem.n_width) if slot is not None \
                else (0,) * mem.n_width
        elif isinstance(op, T.OutputOp):
            outputs[op.output_name.data] = list(values[op.value])
    return outputs, state


def tensor_runner(module: Operation) -> Callable[..., tuple[dict[str, list[int]], State]]:
    """`run_tensor` bound to one program for a hot loop: `runner(inputs,
    state)`. The plan is compiled once and not checked against the program
    again (`run_tensor` checks it every token, a few hundred microseconds on a
    big program), so the program must not change while the runner is in use."""
    program = program_of(module)
    plan = compile_program(program)

    def run(inputs: Mapping[str, Sequence[int]], state: State | None = None):
        if plan is None:
            return _interpret(program, inputs, state)
        return plan.run(program, inputs, state)
    return run


def _merged(op: T.MergeOp, rows: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The one read of a merge that gave set bits (zero bits if none)."""
    given = [i for i, row in enumerate(rows) if any(row)]
    if len(given) > 1:
        names = ", ".join(f"@{op.reads()[i].memory_name}" for i in given)
        raise TensorEngineError(f"tensor.merge: reads of {names} all gave set bits in one "
                                "token; at most one may: the program is wrong")
    return tuple(rows[given[0]]) if given else (0,) * T.width_of(op.result)


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


# ------------------------------------------------------------- compiled plans

class _Fallback(Exception):
    """The token needs the reference interpreter (an error, or an odd state row)."""


class _Uncompilable(Exception):
    """The program has something the plan does not model: interpret it."""


#: Largest Σ|w| and |threshold| of one part, and Σ|c| of one row, that int64
#: sums keep exact.
_MAX_MAGNITUDE = 1 << 62

_INDEX = np.intp


@dataclass
class _Stage:
    """The threshold ops of one stage, evaluated together. Form f is
    `Σ_{terms in segment f} w·buf[src]` (every segment holds at least one
    term: an empty form reads the zero bit with weight 0); part k is
    `[form[part_form[k]] ≥ ceil_t[k]]` (a counter's staircase reads one form
    at many thresholds); output bit r (buffer index lo + r) is
    `Σ_{uses in segment r} coef·part`."""

    src: np.ndarray               # term → buffer index
    weight: np.ndarray | None     # term → weight (None: all ones)
    form_start: np.ndarray        # form → first term
    part_form: np.ndarray | None  # part → form (None: one part per form, in order)
    ceil_t: np.ndarray            # part → integer threshold
    use_part: np.ndarray          # use → part
    use_coef: np.ndarray | None   # use → coefficient (None: every row one part, coefficient 1)
    row_start: np.ndarray | None  # row → first use (None with use_coef None)
    lo: int                       # the stage's outputs are buf[lo:hi]
    hi: int
    gates: list[tuple[int, int, int]] = field(default_factory=list)
    """Grouped ops: outputs [a, b) (from lo) are zero unless buf[bit] is set."""

    def run(self, buf: np.ndarray) -> None:
        x = buf[self.src]
        if self.weight is not None:
            x *= self.weight
        forms = np.add.reduceat(x, self.form_start)
        if self.part_form is not None:
            forms = forms[self.part_form]
        parts = forms >= self.ceil_t
        if self.use_coef is None:
            vals = parts[self.use_part].astype(np.int64)
        else:
            vals = np.add.reduceat(self.use_coef * parts[self.use_part], self.row_start)
        for a, b, bit in self.gates:
            if not buf[bit]:
                vals[a:b] = 0
        if self.use_coef is not None and (vals >> 1).any():   # a sum row that is not 0 or 1
            raise _Fallback
        buf[self.lo:self.hi] = vals


@dataclass
class _Access:
    """A kv_write (`value` set) or kv_read (`lo`, `hi` set) at its place; bits
    are read from the buffer at `key`, `value` (slices where contiguous) and
    `enable` (one index)."""

    memory: str
    onehot: bool
    slots: int
    key: slice | np.ndarray
    enable: int | None
    group: int | None = None       # a grouped read: buffer index of its group's bit
    value: slice | np.ndarray | None = None
    lo: int = 0
    hi: int = 0


@dataclass
class _Merge:
    """A tensor.merge: the one operand row with set bits, into [lo, hi)."""

    lo: int
    hi: int
    parts: list[slice | np.ndarray]

    def run(self, buf: np.ndarray) -> None:
        given = [p for p in self.parts if buf[p].any()]
        if len(given) > 1:
            raise _Fallback                      # the interpreter names the reads
        buf[self.lo:self.hi] = buf[given[0]] if given else 0


def _view(index: np.ndarray) -> slice | np.ndarray:
    """A buffer index array as a slice when it is a contiguous run (cheaper to read)."""
    if len(index) and (len(index) == 1 or (np.diff(index) == 1).all()):
        return slice(int(index[0]), int(index[-1]) + 1)
    return index


_NEXT, _OPERANDS, _PROPERTIES = (attrgetter("_next_op"), attrgetter("_operands"),
                                 attrgetter("properties"))


class _Watch:
    """What a plan depends on, cheap to check every token: the block's ops in
    order, their operands and their properties (attributes are immutable: an
    unchanged object, or an equal one, means an unchanged program)."""

    def __init__(self, program: T.ProgramOp):
        self.block = program.body.block
        self.ops = list(self.block.ops)
        self.first = self.block.first_op
        self.nexts = list(map(_NEXT, self.ops))
        self.operands = list(map(_OPERANDS, self.ops))
        self.properties = [dict(p) for p in map(_PROPERTIES, self.ops)]

    def current(self, program: T.ProgramOp) -> bool:
        block = program.body.block
        ops = self.ops
        return (block is self.block and block.first_op is self.first
                and list(map(_NEXT, ops)) == self.nexts
                and list(map(_OPERANDS, ops)) == self.operands
                and list(map(_PROPERTIES, ops)) == self.properties)


class CompiledProgram:
    """A `tensor.program` compiled for `run_tensor` (see the module docstring).
    `run` gives exactly what `_interpret` gives, token by token."""

    def __init__(self, program: T.ProgramOp, watch: _Watch | None = None):
        self.watch = _Watch(program) if watch is None else watch
        ops = self.watch.ops
        memories = program.memories()
        self.names = {op.input_name.data for op in ops if isinstance(op, T.InputOp)}
        self.names_spelled = ", ".join(sorted(self.names)) or "none"

        # ---- stages: when each value is ready; slices/concats are views
        ready: dict[SSAValue, int] = {}
        stage_of: dict[Operation, int] = {}
        last_access: dict[str, int] = {}
        for op in ops:
            if isinstance(op, T.InputOp):
                ready[op.result] = 0
            elif isinstance(op, T.ThresholdOp):
                s = 1 + max((ready[v] for v in op.inputs), default=0)
                stage_of[op] = ready[op.result] = s
            elif isinstance(op, T.SliceOp | T.ConcatOp):
                ready[op.result] = max(ready[v] for v in op.operands)
            elif isinstance(op, T.MergeOp):
                stage_of[op] = ready[op.result] = max(ready[v] for v in op.operands)
            elif isinstance(op, T.KvWriteOp | T.KvReadOp):
                if op.memory_name not in memories or op.key_kind.data not in T.KEY_KINDS:
                    raise _Uncompilable
                s = max([ready[v] for v in op.operands] + [last_access.get(op.memory_name, 0)])
                stage_of[op] = last_access[op.memory_name] = s
                if isinstance(op, T.KvReadOp):
                    ready[op.result] = s
            elif isinstance(op, T.OutputOp):
                ready[op.value]  # noqa: B018 (defined before use)
            elif not isinstance(op, T.MemoryOp | T.PadOp | T.ClearOp):
                raise _Uncompilable
        n_stages = max(stage_of.values(), default=0) + 1

        # ---- buffer layout: [0] is a constant zero bit, then the inputs (in
        # program order), then each stage's threshold outputs, then kv reads
        index: dict[SSAValue, np.ndarray] = {}
        size = 1
        self.inputs: list[tuple[str, int]] = []
        for op in ops:
            if isinstance(op, T.InputOp):
                width = T.width_of(op.result)
                self.inputs.append((op.input_name.data, width))
                index[op.result] = np.arange(size, size + width, dtype=_INDEX)
                size += width
        self.input_hi = size
        by_stage: list[list[Operation]] = [[] for _ in range(n_stages)]
        for op in ops:
            if op in stage_of:
                by_stage[stage_of[op]].append(op)
        layout: dict[Operation, int] = {}
        for stage_ops in by_stage:
            for kind in (T.ThresholdOp, T.KvReadOp, T.MergeOp):  # thresholds side by side
                for op in stage_ops:
                    if isinstance(op, kind):
                        layout[op] = size
                        size += T.width_of(op.result)
        self.size = size

        def idx(v: SSAValue) -> np.ndarray:
            found = index.get(v)
            if found is not None:
                return found
            op = v.owner
            if isinstance(op, T.SliceOp):
                out = idx(op.input)[op.lo.value.data:op.hi.value.data]
            elif isinstance(op, T.ConcatOp):
                parts = [idx(u) for u in op.inputs]
                out = np.concatenate(parts) if parts else np.zeros(0, _INDEX)
            else:
                assert isinstance(op, T.ThresholdOp | T.KvReadOp | T.MergeOp)
                lo = layout[op]
                out = np.arange(lo, lo + T.width_of(v), dtype=_INDEX)
            index[v] = out
            return out

        # ---- steps
        group_bits = next((idx(op.result) for op in ops if isinstance(op, T.InputOp)
                           and op.input_name.data == program.groups_input), None)

        def group_bit(op: Operation) -> int | None:
            g = getattr(op, "group_index", None)
            if g is None:
                return None
            if group_bits is None or g >= len(group_bits):
                raise _Uncompilable
            return int(group_bits[g])

        self.steps: list[_Stage | _Access | _Merge] = []
        for stage_ops in by_stage:
            thresholds = [op for op in stage_ops if isinstance(op, T.ThresholdOp)]
            if thresholds:
                stage = self._stage(thresholds, idx, layout)
                for op in thresholds:
                    bit = group_bit(op)
                    if bit is not None:
                        a = layout[op] - stage.lo
                        stage.gates.append((a, a + T.width_of(op.result), bit))
                self.steps.append(stage)
            for op in stage_ops:
                if isinstance(op, T.KvWriteOp | T.KvReadOp):
                    mem = memories[op.memory_name]
                    enable = None if op.enable is None else idx(op.enable)
                    if enable is not None and len(enable) < 1:
                        raise _Uncompilable
                    access = _Access(op.memory_name, op.key_kind.data == "onehot",
                                     mem.n_slots, _view(idx(op.key)),
                                     None if enable is None else int(enable[0]),
                                     group_bit(op))
                    if isinstance(op, T.KvWriteOp):
                        access.value = _view(idx(op.value))
                    else:
                        access.lo, access.hi = layout[op], layout[op] + mem.n_width
                        if T.width_of(op.result) != mem.n_width:
                            raise _Uncompilable
                    self.steps.append(access)
                elif isinstance(op, T.MergeOp):
                    self.steps.append(_Merge(layout[op], layout[op] + T.width_of(op.result),
                                             [_view(idx(v)) for v in op.inputs]))
        self.outputs = [(op.output_name.data, _view(idx(op.value))) for op in ops
                        if isinstance(op, T.OutputOp)]

    @staticmethod
    def _stage(thresholds: list[T.ThresholdOp], idx, layout: dict[Operation, int]) -> _Stage:
        src: list[int] = []
        weight: list[int] = []
        form_start: list[int] = []
        form_id: dict[tuple, int] = {}
        part_form: list[int] = []
        ceil_t: list[int] = []
        part_id: dict[tuple[int, int], int] = {}
        use_part: list[int] = []
        use_coef: list[int] = []
        row_start: list[int] = []
        lo = layout[thresholds[0]]
        expect = lo
        for op in thresholds:
            if layout[op] != expect:
                raise _Uncompilable
            x = np.concatenate([idx(v) for v in op.inputs]).tolist() if op.inputs else []
            n_in = len(x)
            local: dict[T.ThresholdRow, int] = {}
            rows = op.row_list()
            if len(rows) != T.width_of(op.result):
                raise _Uncompilable
            for row in rows:
                if not row.parts or sum(abs(c) for c, _ in row.parts) >= _MAX_MAGNITUDE:
                    raise _Uncompilable
                row_start.append(len(use_part))
                for coef, part in row.parts:
                    k = local.get(part)
                    if k is None:
                        terms = part.terms
                        if any(not 0 <= i < n_in for i, _ in terms):
                            raise _Uncompilable
                        t = part.int_threshold
                        if sum(abs(w) for _, w in terms) >= _MAX_MAGNITUDE or \
                                abs(t) >= _MAX_MAGNITUDE:
                            raise _Uncompilable
                        form = tuple((x[i], w) for i, w in terms)
                        f = form_id.get(form)
                        if f is None:
                            f = form_id[form] = len(form_start)
                            form_start.append(len(src))
                            for i, w in form or ((0, 0),):   # empty: the zero bit
                                src.append(i)
                                weight.append(w)
                        k = part_id.get((f, t))
                        if k is None:
                            k = part_id[(f, t)] = len(part_form)
                            part_form.append(f)
                            ceil_t.append(t)
                        local[part] = k
                    use_part.append(k)
                    use_coef.append(coef)
            expect += len(rows)
        plain = all(c == 1 for c in use_coef) and len(use_part) == len(row_start)
        return _Stage(
            src=np.array(src, dtype=_INDEX),
            weight=None if all(w == 1 for w in weight) else np.array(weight, dtype=np.int64),
            form_start=np.array(form_start, dtype=_INDEX),
            part_form=None if part_form == list(range(len(form_start)))
            else np.array(part_form, dtype=_INDEX),
            ceil_t=np.array(ceil_t, dtype=np.int64),
            use_part=np.array(use_part, dtype=_INDEX),
            use_coef=None if plain else np.array(use_coef, dtype=np.int64),
            row_start=None if plain else np.array(row_start, dtype=_INDEX),
            lo=lo, hi=expect)

    def run(self, program: T.ProgramOp, inputs: Mapping[str, Sequence[int]],
            state: State | None = None) -> tuple[dict[str, list[int]], State]:
        """One token (`run_tensor`); `program` is the one compiled, for the
        reference to rerun a token that fails."""
        for name in inputs:
            if name not in self.names:
                unknown = sorted(set(inputs) - self.names)
                raise TensorEngineError(f"unknown input '{unknown[0]}' (the program takes "
                                        f"{self.names_spelled})")
        try:
            return self._run(inputs, state)
        except _Fallback:
            pass
        except (TypeError, ValueError, OverflowError, KeyError, IndexError):
            pass
        return _interpret(program, inputs, state)

    def _run(self, inputs: Mapping[str, Sequence[int]],
             state: State | None) -> tuple[dict[str, list[int]], State]:
        bits: list[int] = []
        for name, width in self.inputs:
            given = inputs.get(name)
            if given is None:
                raise _Fallback
            part = [int(b) for b in given]
            if len(part) != width:
                raise _Fallback
            bits += part
        buf = np.zeros(self.size, dtype=np.int64)
        buf[1:self.input_hi] = bits
        if (buf[1:self.input_hi] >> 1).any():
            raise _Fallback                      # an input bit that is not 0 or 1
        new_state = {name: dict(rows) for name, rows in (state or {}).items()}
        for step in self.steps:
            if type(step) is _Stage:
                step.run(buf)
                continue
            if type(step) is _Merge:
                step.run(buf)
                continue
            slot = None
            if (step.enable is None or buf[step.enable]) and \
                    (step.group is None or buf[step.group]):
                key = buf[step.key].tolist()     # bits: 0 or 1
                if step.onehot:
                    ones = key.count(1)
                    if ones > 1:
                        raise _Fallback
                    if ones:
                        slot = key.index(1)
                else:
                    address = 0
                    for b in reversed(key):
                        address = address << 1 | b
                    if address < step.slots:
                        slot = address
            if slot is None:
                continue
            if step.value is not None:           # kv_write
                new_state.setdefault(step.memory, {})[slot] = tuple(buf[step.value].tolist())
                continue
            row = new_state.get(step.memory, {}).get(slot)  # kv_read
            if row is not None:
                if len(row) != step.hi - step.lo or not _BITS.issuperset(row):
                    raise _Fallback              # a state row that is not bits
                buf[step.lo:step.hi] = row
        return {name: buf[i].tolist() for name, i in self.outputs}, new_state


_BITS = frozenset((0, 1))

#: Where a program keeps its plan (or, for a program the plan does not model,
#: the `_Watch` that says when to try again): on the op itself, so that the
#: plan lives exactly as long as the program.
_PLAN_ATTR = "_tensor_engine_plan"


def compile_program(program: T.ProgramOp) -> CompiledProgram | None:
    """The plan `run_tensor` uses for `program`, compiled on first use and
    again whenever the program's ops, operands or properties change (`_Watch`);
    None for a program the plan does not model (it is interpreted op by op)."""
    cached = program.__dict__.get(_PLAN_ATTR)
    if cached is not None:
        watch = cached if isinstance(cached, _Watch) else cached.watch
        if watch.current(program):
            return None if isinstance(cached, _Watch) else cached
    watch = _Watch(program)
    plan: CompiledProgram | _Watch
    try:
        plan = CompiledProgram(program, watch)
    except (_Uncompilable, KeyError, IndexError, ValueError, TypeError, AttributeError):
        plan = watch
    object.__setattr__(program, _PLAN_ATTR, plan)
    return plan if isinstance(plan, CompiledProgram) else None
