"""`tensor-schedule-layers{hidden=2048 intermediate=6144 heads=16}`: place a
`tensor.program` on a stack of Qwen3.5 linear-attention decoder layers.

The layer stack is a sequence of halves `attn 0, mlp 0, attn 1, mlp 1, ...`;
every value is ready after the half that produces it (program inputs before
the first). List scheduling, in dataflow order, each unit as early as its
operands and the half's resources allow:

- a `tensor.threshold` goes to the first MLP half after all its operands,
  whose neurons (`intermediate`, neuron 0 being the constant neuron) still
  hold its gadgets;
- a `tensor.memory` with its `kv_write` and `kv_read` goes to the first
  attention half after all their operands (key, value, query, enables) that
  has a free head (`heads`); the read's bits are ready after that half, so an
  MLP of the same layer may consume them.

Residual coordinates are then allocated along lifetimes: coordinate 0 is
the flag, then fresh coordinates for the inputs and the kv_read results
(which hold −1 until their layer writes them). A bit is dead after the last
half that reads it (a threshold or memory access in half h reads at h's
input; outputs live to the end). Threshold outputs, in time order, take the
lowest coordinate whose bit exists before their half and is dead by it
(marked `overwrites`: one copy neuron each, while the half has neurons
left), else a fresh one, which the embedding sets to −1 (bit 0), so that
writing it moves ±1 to ±1 like an overwrite: no write changes a token's
energy. Last the constant pads (`tensor.pad`) fill `sum(h²)` up to
`64·hidden` (one unit per bit coordinate is used) so every RMSNorm scale is
exactly 1/8. Running out of coordinates (the message
counts the peak of live bits), neurons or heads is an error that names the
limit and the amount.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import tensor as T

#: Largest pad value (exact in bfloat16, and x = P/8 stays exact).
MAX_PAD = T.MAX_ACTIVE_GATE


def filler_pads(energy: int) -> list[int]:
    """Constant pads whose squares sum to `energy` (greedy, each ≤ 256)."""
    pads = []
    while energy > 0:
        s = min(MAX_PAD, math.isqrt(energy))
        pads.append(s)
        energy -= s * s
    return pads


@dataclass
class _Unit:
    """What the scheduler places at once: a threshold op, or a memory with its accesses."""

    ops: list[Operation]
    deps: list[SSAValue]
    memory: T.MemoryOp | None = None


@dataclass
class _Resources:
    neurons: dict[int, int] = field(default_factory=dict)   # mlp half -> next free neuron
    heads: dict[int, int] = field(default_factory=dict)     # attn half -> next free head


class ScheduleError(DiagnosticException):
    pass


def _fail(program: T.ProgramOp, message: str) -> ScheduleError:
    return ScheduleError(f"error: tensor program '{program.program_name}' {message}")


def strip_schedule(program: T.ProgramOp) -> None:
    """Forget an earlier schedule: placements, coordinates, pads, limits."""
    for op in program.ops():
        if isinstance(op, T.PadOp):
            op.detach()
            op.erase()
        elif isinstance(op, T.PlacedOp):
            op.unplace()
            op.properties.pop("overwrites", None)
        elif isinstance(op, T.InputOp):
            op.properties.pop("coords", None)
    for name in T.ProgramOp.LIMITS:
        program.properties.pop(name, None)


def _units(program: T.ProgramOp) -> list[_Unit]:
    units: list[_Unit] = []
    by_memory: dict[str, _Unit] = {}
    for op in program.ops():
        if isinstance(op, T.ThresholdOp):
            units.append(_Unit([op], list(op.inputs)))
        elif isinstance(op, T.MemoryOp):
            unit = _Unit([op], [], memory=op)
            by_memory[op.memory_name] = unit
            units.append(unit)
    for op in program.ops():
        if isinstance(op, T.KvWriteOp | T.KvReadOp):
            unit = by_memory.get(op.memory_name)
            if unit is None:
                raise _fail(program, f"accesses memory @{op.memory_name}, which it does not "
                                     "declare")
            unit.ops.append(op)
            unit.deps += list(op.operands)
    return units


def _producers(program: T.ProgramOp, units: list[_Unit]) -> dict[SSAValue, frozenset[int]]:
    """Each value → the units (by index) whose results it is made of (views
    look through to the bits they show; inputs come from no unit)."""
    made_by: dict[SSAValue, int] = {}
    for i, unit in enumerate(units):
        for op in unit.ops:
            if isinstance(op, T.ThresholdOp | T.KvReadOp):
                made_by[op.results[0]] = i
    out: dict[SSAValue, frozenset[int]] = {}
    for op in program.ops():
        for r in op.results:
            if r in made_by:
                out[r] = frozenset((made_by[r],))
            elif isinstance(op, T.SliceOp | T.ConcatOp):
                out[r] = frozenset().union(*(out[v] for v in op.operands))
            else:
                out[r] = frozenset()
    return out


def _in_dependency_order(program: T.ProgramOp, units: list[_Unit]):
    """The units in the order the list scheduler takes them: always the first
    (in program order) whose operands are all placed."""
    producers = _producers(program, units)
    needs = [set().union(*(producers[v] for v in u.deps)) - {i} for i, u in enumerate(units)]
    users: list[list[int]] = [[] for _ in units]
    for i, need in enumerate(needs):
        for j in need:
            users[j].append(i)
    waiting = [len(n) for n in needs]
    ready = [i for i, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    done = 0
    while ready:
        i = heapq.heappop(ready)
        done += 1
        yield units[i]
        for j in users[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    if done < len(units):
        raise _fail(program, "has a dataflow cycle through its memories")


def schedule(program: T.ProgramOp, hidden: int, intermediate: int, heads: int) -> None:
    strip_schedule(program)
    ready: dict[SSAValue, int] = {}
    for op in program.ops():
        if isinstance(op, T.InputOp):
            ready[op.result] = -1

    def when(v: SSAValue) -> int:
        """The half after which value v is ready (views: their latest bit)."""
        if v not in ready:
            op = v.owner
            assert isinstance(op, T.SliceOp | T.ConcatOp), op
            ready[v] = max((when(u) for u in op.operands), default=-1)
        return ready[v]

    res = _Resources()
    last_half = 0
    for unit in _in_dependency_order(program, _units(program)):
        earliest = max((when(v) for v in unit.deps), default=-1) + 1
        if unit.memory is None:
            op = unit.ops[0]
            assert isinstance(op, T.ThresholdOp)
            need = op.gadget_neuron_count()
            if need + 1 > intermediate:
                raise _fail(program, f"has a tensor.threshold of {need} neurons; an MLP half "
                                     f"has {intermediate} including the constant neuron "
                                     "(option intermediate)")
            half = earliest if earliest % 2 else earliest + 1
            while res.neurons.get(half, 1) + need > intermediate:
                half += 2
            lo = res.neurons.get(half, 1)
            res.neurons[half] = lo + need
            op.place(half // 2, "mlp")
            op.properties["neurons"] = T._dense([lo, lo + need])
            ready[op.result] = half
        else:
            if heads < 1:
                raise _fail(program, "needs a linear-attention head for memory "
                                     f"@{unit.memory.memory_name}; the layers have none "
                                     "(option heads)")
            half = earliest if earliest % 2 == 0 else earliest + 1
            while res.heads.get(half, 0) >= heads:
                half += 2
            head = res.heads.get(half, 0)
            res.heads[half] = head + 1
            for op in unit.ops:
                assert isinstance(op, T.PlacedOp)
                op.place(half // 2, "attn")
                op.properties["head"] = T._i64(head)
                if isinstance(op, T.KvReadOp):
                    ready[op.result] = half
        last_half = max(last_half, half)
    for op in program.ops():              # views nobody placed a unit after
        for r in op.results:
            if isinstance(op, T.SliceOp | T.ConcatOp):
                when(r)

    # ---------------------------------------------------------------- coordinates
    n_layers = last_half // 2 + 1
    next_coord = T.ProgramOp.FLAG + 1
    energy = 64  # the flag: 8²

    def take(n: int) -> list[int]:
        nonlocal next_coord
        coords = list(range(next_coord, next_coord + n))
        next_coord += n
        return coords

    last = _last_reads(program)
    intervals: list[tuple[int, int]] = []     # [start, release) of every bit
    released: list[tuple[int, int]] = []      # heap of (release half, coordinate)

    banks = _Banks()

    def hold(op: Operation, i: int, c: int, start: int, group: int | None = None) -> None:
        """Bit i of op holds coordinate c from `start` to its last read; then
        the coordinate is free again (for the bit's group, if it has one)."""
        birth = T.birth_half(op)
        release = max(last.get((op.results[0], i), birth), birth + 1)
        intervals.append((start, release))
        if release >= T.LIVE_TO_END:
            return
        if group is None:
            heapq.heappush(released, (release, c))
        else:
            banks.release(group, release, c)

    for op in program.ops():
        if isinstance(op, T.InputOp):
            coords = take(T.width_of(op.result))
            op.properties["coords"] = T._dense(T.ranges_of(coords))
            energy += len(coords)
            for i, c in enumerate(coords):
                hold(op, i, c, -1)
    for op in program.ops():
        if isinstance(op, T.KvReadOp):
            g = op.group_index
            if g is None:
                coords = take(T.width_of(op.result))   # −1 from the start: never reused
                energy += len(coords)
            else:                  # −1 for its group: a coordinate the group never used
                coords = []
                for _ in range(T.width_of(op.result)):
                    c, fresh = banks.clean(g, take)
                    energy += fresh
                    coords.append(c)
            op.properties["coords"] = T._dense(T.ranges_of(coords))
            for i, c in enumerate(coords):
                hold(op, i, c, -1 if g is None else T.birth_half(op), g)
    # thresholds in time order: an output bit takes the lowest coordinate whose
    # bit is dead by its half (one copy neuron, while the half has neurons
    # left), else a fresh one (paid for by a pad). A grouped bit (zero unless
    # its group runs) takes a banked coordinate its group never used (the
    # other groups' bits there are zero when it runs), else one its group
    # released (a copy neuron), else a fresh banked one.
    order = {op: n for n, op in enumerate(program.ops())}
    thresholds = sorted((op for op in program.ops() if isinstance(op, T.ThresholdOp)),
                        key=lambda op: (T.half_index(op), order[op]))
    free: list[int] = []
    copies: dict[int, int] = {}

    def copy_neuron_left(half: int) -> bool:
        return res.neurons.get(half, 1) + copies.get(half, 0) < intermediate

    for op in thresholds:
        half = T.half_index(op)
        g = op.group_index
        while released and released[0][0] <= half:
            heapq.heappush(free, heapq.heappop(released)[1])
        coords, over = [], []
        for i in range(T.width_of(op.result)):
            if g is not None:
                c, how = banks.take(g, half, take, copy_neuron_left(half))
                if how == "fresh":
                    energy += 1
                elif how == "overwrite":
                    over.append(c)
                    copies[half] = copies.get(half, 0) + 1
                coords.append(c)
                hold(op, i, c, half, g)
                continue
            if free and copy_neuron_left(half):
                c = heapq.heappop(free)
                over.append(c)
                copies[half] = copies.get(half, 0) + 1
            else:
                c = take(1)[0]              # −1 from the embedding on
                energy += 1
            coords.append(c)
            hold(op, i, c, half)
        op.properties["coords"] = T._dense(T.ranges_of(coords))
        if over:
            op.properties["overwrites"] = T._dense(T.ranges_of(sorted(over)))
    _lay_out_neurons(thresholds)
    pads: list[T.PadOp] = []
    budget = 64 * hidden - energy
    if budget < 0:
        raise _fail(program, f"needs sum(h²) = {energy} before its first layer, more than "
                             f"64·hidden = {64 * hidden} (option hidden)")
    for p in filler_pads(budget):
        pads.append(T.PadOp(take(1)[0], p))
    if next_coord > hidden:
        n_data = next_coord - len(pads)
        raise _fail(program, f"needs {next_coord} residual coordinates ({n_data} for the flag "
                             f"and bits, of which at most {peak_live(intervals)} bits live at "
                             f"once, {len(pads)} pads), the layers have hidden {hidden} "
                             "(option hidden)")
    block = program.body.block
    for pad in pads:
        block.add_op(pad)
    program.set_limit("layers", n_layers)
    program.set_limit("hidden", hidden)
    program.set_limit("intermediate", intermediate)
    program.set_limit("heads", heads)


class _Banks:
    """Coordinates shared by mutually exclusive groups (the bits of a group
    are zero unless it runs, so the other groups' bits on a coordinate do not
    disturb it): each group takes the banked coordinates it never used in
    order (still −1 for it), then those its own dead bits free (overwritten:
    a copy neuron gated by the group), then new ones."""

    def __init__(self) -> None:
        self.coords: list[int] = []
        self.next_clean: dict[int, int] = {}
        self.released: dict[int, list[tuple[int, int]]] = {}
        self.free: dict[int, list[int]] = {}

    def release(self, group: int, half: int, c: int) -> None:
        heapq.heappush(self.released.setdefault(group, []), (half, c))

    def clean(self, group: int, take) -> tuple[int, int]:
        """A coordinate the group never used; (c, 1) when it is new."""
        k = self.next_clean.get(group, 0)
        if k < len(self.coords):
            self.next_clean[group] = k + 1
            return self.coords[k], 0
        c = take(1)[0]
        self.coords.append(c)
        self.next_clean[group] = len(self.coords)
        return c, 1

    def take(self, group: int, half: int, take, may_copy: bool) -> tuple[int, str]:
        """(coordinate, 'clean' | 'overwrite' | 'fresh') for a bit born in `half`."""
        released, free = self.released.setdefault(group, []), self.free.setdefault(group, [])
        while released and released[0][0] <= half:
            heapq.heappush(free, heapq.heappop(released)[1])
        if self.next_clean.get(group, 0) < len(self.coords):
            return self.clean(group, take)[0], "clean"
        if free and may_copy:
            return heapq.heappop(free), "overwrite"
        c, _ = self.clean(group, take)
        return c, "fresh"


def _last_reads(program: T.ProgramOp) -> dict[tuple[SSAValue, int], int]:
    """The last half that reads each bit (value, index) of the program's
    inputs, kv_read results and threshold results (slices and concats are
    views); outputs read at `T.LIVE_TO_END`."""
    src: dict[SSAValue, list[tuple[SSAValue, int]]] = {}
    last: dict[tuple[SSAValue, int], int] = {}
    for op in program.ops():
        if isinstance(op, T.InputOp | T.ThresholdOp | T.KvReadOp):
            src[op.result] = [(op.result, i) for i in range(T.width_of(op.result))]
        elif isinstance(op, T.SliceOp):
            src[op.result] = src[op.input][op.lo.value.data:op.hi.value.data]
        elif isinstance(op, T.ConcatOp):
            src[op.result] = [b for v in op.inputs for b in src[v]]
        for b, half in T.read_points(op, src):
            last[b] = max(last.get(b, half), half)
    return last


def peak_live(intervals: list[tuple[int, int]]) -> int:
    """Most bits holding a coordinate at once, over [start, release) intervals
    of halves (a bit released at h frees its coordinate for a bit born at h)."""
    events = sorted([(r, -1) for _, r in intervals] + [(s, 1) for s, _ in intervals])
    live = peak = 0
    for _, d in events:
        live += d
        peak = max(peak, live)
    return peak


def _lay_out_neurons(thresholds: list[T.ThresholdOp]) -> None:
    """Neuron ranges again, now with the copy neurons, in each half in the order
    the list scheduler packed them."""
    by_half: dict[int, list[T.ThresholdOp]] = {}
    for op in thresholds:
        by_half.setdefault(T.half_index(op), []).append(op)
    for ops in by_half.values():
        lo = 1
        for op in sorted(ops, key=lambda o: o.neurons.get_values()[0]):  # type: ignore[union-attr]
            need = op.neuron_count()
            op.properties["neurons"] = T._dense([lo, lo + need])
            lo += need


@dataclass(frozen=True)
class TensorScheduleLayersPass(ModulePass):
    name = "tensor-schedule-layers"

    hidden: int = T.DEFAULT_HIDDEN
    """Residual coordinates per token (the config's hidden_size)."""

    intermediate: int = T.DEFAULT_INTERMEDIATE
    """MLP neurons per layer (the config's intermediate_size)."""

    heads: int = T.DEFAULT_HEADS
    """Linear-attention heads per layer (the config's linear_num_value_heads)."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.hidden < 2 or self.intermediate < 2 or self.heads < 0:
            raise DiagnosticException("error: tensor-schedule-layers: hidden and intermediate "
                                      "must be at least 2, heads non-negative")
        for program in T.programs_of(op):
            schedule(program, self.hidden, self.intermediate, self.heads)
