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

import bisect
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
    reserved: dict[int, int] = field(default_factory=dict)  # mlp half -> kept for copies
    heads: dict[int, int] = field(default_factory=dict)     # attn half -> next free head


class ScheduleError(DiagnosticException):
    pass


def _fail(program: T.ProgramOp, message: str) -> ScheduleError:
    return ScheduleError(f"error: tensor program '{program.program_name}' {message}")


def strip_schedule(program: T.ProgramOp) -> None:
    """Forget an earlier schedule: placements, coordinates, clears, pads, limits."""
    for op in program.ops():
        if isinstance(op, T.PadOp | T.ClearOp):
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
            elif isinstance(op, T.SliceOp | T.ConcatOp | T.MergeOp):
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
            assert isinstance(op, T.SliceOp | T.ConcatOp | T.MergeOp), op
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
            # each output bit keeps a neuron of the half in reserve for its copy
            # (or another bit's clear), while the op fits with them
            spare = min(T.width_of(op.result), intermediate - 1 - need)
            half = earliest if earliest % 2 else earliest + 1
            while res.neurons.get(half, 1) + res.reserved.get(half, 0) + need + spare \
                    > intermediate:
                half += 2
            lo = res.neurons.get(half, 1)
            res.neurons[half] = lo + need
            res.reserved[half] = res.reserved.get(half, 0) + spare
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
            if isinstance(op, T.SliceOp | T.ConcatOp | T.MergeOp):
                when(r)

    # ---------------------------------------------------------------- coordinates
    n_layers = last_half // 2 + 1
    spare = _Neurons(res.neurons, intermediate)
    coords = _Coordinates(program.group_bits(), spare)
    last = _last_reads(program)
    intervals: list[tuple[int, int, int | None]] = []     # [birth, release), group of every bit
    for op in program.ops():
        if isinstance(op, T.InputOp):
            taken = [coords.fresh() for _ in range(T.width_of(op.result))]
            op.properties["coords"] = T._dense(T.ranges_of(taken))
            for i, c in enumerate(taken):
                coords.hold(c, None, _release(last, op, i))
                intervals.append((-1, _release(last, op, i), None))
    # reads and thresholds in time order: each bit takes a coordinate that
    # is −1 where it runs (never used, or cleared after its last bit died),
    # else a dead one cleared in time (one neuron), else a fresh one
    order = {op: n for n, op in enumerate(program.ops())}
    bits_ops = sorted((op for op in program.ops() if isinstance(op, T.ThresholdOp | T.KvReadOp)),
                      key=lambda op: (T.half_index(op), order[op]))
    merged: set[T.MergeOp] = set()
    for op in bits_ops:
        merge = T.merge_of(op) if isinstance(op, T.KvReadOp) else None
        if merge is not None:                 # one set of coordinates for all its reads
            if merge in merged:
                continue
            merged.add(merge)
            op = merge.first_read()
        birth, g = T.half_index(op), op.group_index
        taken, over = [], []
        for i in range(T.width_of(op.result)):
            release = _release(last, op, i)
            c, clear_half = coords.take(g, birth, isinstance(op, T.ThresholdOp))
            if clear_half == birth:
                over.append(c)            # the threshold's own copy neuron
            coords.hold(c, g, release)
            intervals.append((birth, release, g))
            taken.append(c)
        for holder in merge.reads() if merge is not None else [op]:
            holder.properties["coords"] = T._dense(T.ranges_of(taken))
        if over:
            op.properties["overwrites"] = T._dense(T.ranges_of(sorted(over)))
    thresholds = [op for op in bits_ops if isinstance(op, T.ThresholdOp)]
    energy = 64 + coords.next - 1    # the flag (8²), then one unit per bit coordinate
    clears = coords.clear_ops()
    _lay_out_neurons(thresholds, clears)
    pads: list[T.PadOp] = []
    budget = 64 * hidden - energy
    if budget < 0:
        raise _fail(program, f"needs sum(h²) = {energy} before its first layer, more than "
                             f"64·hidden = {64 * hidden} (option hidden)")
    for p in filler_pads(budget):
        pads.append(T.PadOp(coords.fresh(), p))
    next_coord = coords.next
    if next_coord > hidden:
        n_data = next_coord - len(pads)
        raise _fail(program, f"needs {next_coord} residual coordinates ({n_data} for the flag "
                             f"and bits, of which at most {peak_live(intervals)} bits live at "
                             f"once, {len(pads)} pads), the layers have hidden {hidden} "
                             "(option hidden)")
    block = program.body.block
    for op in [*clears, *pads]:
        block.add_op(op)
    program.set_limit("layers", n_layers)
    program.set_limit("hidden", hidden)
    program.set_limit("intermediate", intermediate)
    program.set_limit("heads", heads)


def _release(last: dict[tuple[SSAValue, int], int], op: Operation, i: int) -> int:
    """The half after which bit i of op's result is dead (read at its input)."""
    birth = T.birth_half(op)
    return max(last.get((op.results[0], i), birth), birth + 1)


class _Neurons:
    """MLP neurons per half: the thresholds' gadgets (placed), then one more
    per copy or clear neuron while the half has room."""

    def __init__(self, placed: dict[int, int], intermediate: int) -> None:
        self.used = dict(placed)
        self.intermediate = intermediate

    def take(self, lo: int, hi: int) -> int | None:
        """An MLP half in [lo, hi] with a neuron to spare (the latest), taken."""
        for h in range(hi if hi % 2 else hi - 1, max(lo, 0) - 1, -2):
            if self.used.get(h, 1) < self.intermediate:
                self.used[h] = self.used.get(h, 1) + 1
                return h
        return None


class _Coordinates:
    """Residual coordinates along the bits' lifetimes, per *view*: the tokens
    on which group g runs see only ungrouped bits and g's (another group's
    bits are zero there, so its coordinates stay −1), the tokens on which no
    group runs only ungrouped bits. A bit needs a coordinate that holds −1 in
    every view it appears in when it is written:

    - one nobody used in those views (a fresh coordinate, or one only other
      groups use: free for a grouped bit);
    - one whose bits there are dead, reset to −1 by a clear neuron in an MLP
      half between the last read and the write (gated by the group for a
      grouped bit; ungrouped, it clears every view), the threshold's own copy
      neuron when that is its own half;
    - else a new one.

    `state[c]` maps a view (group, or None) to the release half of the last
    bit there; a view absent holds −1. An ungrouped bit is in every view."""

    def __init__(self, n_groups: int, neurons: _Neurons) -> None:
        self.views: list[int | None] = [None, *range(n_groups)]
        self.neurons = neurons
        self.next = T.ProgramOp.FLAG + 1
        self.state: dict[int, dict[int | None, int]] = {}
        self.clean: dict[int | None, list[int]] = {v: [] for v in self.views}
        self.dirty: dict[int | None, list[tuple[int, int]]] = {v: [] for v in self.views}
        self.all_dirty: list[tuple[int, int]] = []
        self.clears: dict[tuple[int, int | None], list[int]] = {}

    def fresh(self) -> int:
        c = self.next
        self.next += 1
        return c

    def hold(self, c: int, group: int | None, release: int) -> None:
        """Bit of `group` lives on c until `release`."""
        st = self.state.setdefault(c, {})
        if group is None:
            for v in self.views:
                st[v] = release
                if release < T.LIVE_TO_END:
                    heapq.heappush(self.dirty[v], (release, c))
        else:
            if not st:          # it was clean everywhere: the other groups may take it
                for v in self.views[1:]:
                    if v != group:
                        heapq.heappush(self.clean[v], c)
            st[group] = release
            if release < T.LIVE_TO_END:
                heapq.heappush(self.dirty[group], (release, c))
        if max(st.values()) < T.LIVE_TO_END:
            heapq.heappush(self.all_dirty, (max(st.values()), c))

    def take(self, group: int | None, birth: int, threshold: bool) -> tuple[int, int | None]:
        """A coordinate for a bit written in half `birth`, and the half of
        the neuron that clears it first (None: it holds −1 already; `birth`:
        the threshold's own copy neuron)."""
        latest = birth if threshold else birth - 1          # a read writes onto −1
        if group is None:
            return self._clear(self.all_dirty, None, birth, latest,
                               lambda c: max(self.state[c].values(), default=-2))
        heap = self.clean[group]
        while heap:
            c = heapq.heappop(heap)
            if group not in self.state[c]:
                return c, None
        return self._clear(self.dirty[group], group, birth, latest,
                           lambda c: self.state[c].get(group, -2))

    def _clear(self, heap: list[tuple[int, int]], group: int | None, birth: int, latest: int,
               release_of) -> tuple[int, int | None]:
        """The dead coordinate released first, cleared in an MLP half in
        [its release, latest] with a neuron to spare; else a fresh one."""
        while heap and heap[0][0] <= latest:
            release, c = heap[0]
            if release_of(c) != release:
                heapq.heappop(heap)                      # stale: taken or changed since
                continue
            half = self.neurons.take(release, latest)
            if half is None:
                break
            heapq.heappop(heap)
            if group is None:
                self.state[c] = {}
            else:
                del self.state[c][group]
            if half != birth:
                self.clears.setdefault((half, group), []).append(c)
            return c, half
        return self.fresh(), None

    def clear_ops(self) -> list[T.ClearOp]:
        """The clears not fused into a threshold (its own half) as ops."""
        return [T.ClearOp(half // 2, coords, group)
                for (half, group), coords in sorted(self.clears.items(),
                                                    key=lambda kv: (kv[0][0], str(kv[0][1])))]


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
        elif isinstance(op, T.MergeOp):      # on the coordinates of the read placed first
            src[op.result] = src[op.first_read().result]
        for b, half in T.read_points(op, src):
            last[b] = max(last.get(b, half), half)
    return last


def peak_live(intervals) -> int:
    """Most bits holding a coordinate at once, over [start, release) intervals
    of halves (a bit released at h frees its coordinate for a bit born at h);
    with a third field, the group: exclusive groups' bits count in their own
    view, the peak is the ungrouped bits plus the fullest group."""
    views: dict[int | None, list[tuple[int, int]]] = {}
    for start, release, *group in intervals:
        views.setdefault(group[0] if group else None, []).append((start, release))
    counts = {g: _live_counter(v) for g, v in views.items()}
    shared = counts.pop(None, lambda h: 0)
    points = {s for v in views.values() for s, _ in v}
    return max((shared(h) + max((live(h) for live in counts.values()), default=0)
                for h in points), default=0)


def _live_counter(intervals: list[tuple[int, int]]):
    """h → how many of the [start, release) intervals hold h."""
    starts = sorted(s for s, _ in intervals)
    releases = sorted(r for _, r in intervals)
    return lambda h: bisect.bisect_right(starts, h) - bisect.bisect_right(releases, h)


def _lay_out_neurons(thresholds: list[T.ThresholdOp], clears: list[T.ClearOp]) -> None:
    """Neuron ranges again, now with the copy neurons, in each half in the order
    the list scheduler packed them; then the half's clears."""
    by_half: dict[int, list[T.PlacedOp]] = {}
    for op in thresholds:
        by_half.setdefault(T.half_index(op), []).append(op)
    for ops in by_half.values():
        ops.sort(key=lambda o: o.neurons.get_values()[0])  # type: ignore[union-attr]
    for op in clears:
        by_half.setdefault(T.half_index(op), []).append(op)
    for ops in by_half.values():
        lo = 1
        for op in ops:
            need = op.neuron_count()  # type: ignore[attr-defined]
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
