"""`tensor-schedule-layers{hidden=2048 intermediate=6144 heads=16}`: place a
`tensor.program` on a stack of Qwen3.5 linear-attention decoder layers.

The layer stack is a sequence of halves `attn 0, mlp 0, attn 1, mlp 1, ...`;
every value is ready after the half that produces it (program inputs before
the first). Three steps, each about the residual width (every bit alive at
once takes a coordinate, and there are `hidden`):

1. list scheduling half by half (`_Placement`): the units whose operands are
   ready (a `tensor.threshold`; a `tensor.memory` with its `kv_write` and
   `kv_read`), highest first, while the half has neurons (each threshold
   with one per output bit in reserve for its copy neurons, a share kept for
   clears) or a head, and while the bits live across the half stay within
   the budget in every view; a read's bits are ready for the MLP of the same
   layer;
2. sinking (`_Sinking`): units move later where that frees coordinates;
3. coordinates along lifetimes (`Coordinates`): coordinate 0 is the flag,
   then the inputs, then the reads and thresholds in time order, each bit on
   a coordinate that holds −1 where it is written in every view it appears in
   (never used there, or its dead bit reset by a clear neuron in time: a
   `tensor.clear` op, or the threshold's own copy neuron, `overwrites`), else
   a fresh one, which the embedding sets to −1, so that no write changes a
   token's energy; a grouped bit best fit (the coordinate whose busy time
   in any view it extends least), so that many stay free in every view.
   Last the constant pads (`tensor.pad`) fill `sum(h²)` up to `64·hidden`
   (one unit per bit coordinate is used) so every RMSNorm scale is exactly
   1/8.

A view is the tokens on which one group runs (they see the ungrouped bits
and that group's) or none does. Running out of coordinates (the message
counts the peak of live bits in the fullest view), neurons or heads is an
error that names the limit and the amount."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import tensor as T
from qgc.passes.tensor_schedule.coordinates import Coordinates, Neurons
from qgc.passes.tensor_schedule.dataflow import (
    Dataflow,
    ScheduleError,
    Unit,
    bit_keys,
    fail,
    group_of,
)
from qgc.progress import progress

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
class _Resources:
    intermediate: int
    neurons: dict[int, int] = field(default_factory=dict)   # mlp half -> next free neuron
    reserved: dict[int, int] = field(default_factory=dict)  # mlp half -> kept for copies
    heads: dict[int, int] = field(default_factory=dict)     # attn half -> next free head
    #: threshold → `_needs` (asked for every candidate in every half)
    needs: dict[Operation, tuple[int, int]] = field(default_factory=dict)

    def _needs(self, op: Operation) -> tuple[int, int]:
        """A threshold's gadget neurons, and one per output bit kept in reserve
        for its copy neurons (while it fits with them)."""
        needs = self.needs.get(op)
        if needs is None:
            need = op.gadget_neuron_count()  # type: ignore[attr-defined]
            needs = self.needs[op] = (need, min(T.width_of(op.results[0]),
                                                self.intermediate - 1 - need))
        return needs

    def fits(self, op: Operation, half: int) -> bool:
        """Whether threshold `op` fits MLP half `half` with its reserve, the
        half keeping a share of its neurons for clears."""
        need, spare = self._needs(op)
        room = self.intermediate - min(self.intermediate // _CLEAR_SHARE,
                                       self.intermediate - 1 - need - spare)
        return self.neurons.get(half, 1) + self.reserved.get(half, 0) + need + spare <= room

    def has_room(self, unit: Unit, half: int, heads: int) -> bool:
        """Whether `unit` fits half `half`: one of `heads` heads free for a
        memory, neurons with their reserve for a threshold (`fits`)."""
        if unit.memory is not None:
            return self.heads.get(half, 0) < heads
        return self.fits(unit.ops[0], half)

    def add(self, op: Operation, half: int, sign: int = 1) -> int:
        """Count threshold `op` in (sign −1: out of) MLP half `half`; its first
        neuron there."""
        need, spare = self._needs(op)
        lo = self.neurons.get(half, 1)
        self.neurons[half] = lo + sign * need
        self.reserved[half] = self.reserved.get(half, 0) + sign * spare
        return lo


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


class _Overflow(ScheduleError):
    def __init__(self, message: str, need: int):
        super().__init__(message)
        self.need = need


class _TooLong(ScheduleError):
    """A placement reached the layer count it had to stay under."""


def schedule(program: T.ProgramOp, hidden: int, intermediate: int, heads: int,
             fewer_than: int = 0) -> None:
    """Place every op, then allocate coordinates, trying the margins of
    `_BUDGETS` in turn: the first schedule that fits within
    `LAYER_GOAL` layers stays, else the fitting one with the fewest layers;
    when none fits, the error of the one that came closest. Only schedules of
    fewer than `fewer_than` layers are wanted (0: any), and, once one fits,
    fewer than its: a placement stops as soon as it cannot be, which leaves
    the choice as it was and saves the long tail of placements that stall."""
    fits: list[tuple[int, int]] = []            # (layers, index of the budget)
    closest: _Overflow | None = None
    held = None                                 # the budget of the schedule in place
    exposed = T.exposed_bits(program, bit_keys)   # the same for every budget
    strip_schedule(program)
    flow = Dataflow(program)
    _check_fits(program, flow, intermediate, heads)
    with progress(desc=f"scheduling {program.program_name}", total=len(_BUDGETS),
                  unit="try") as tries:
        for n, budget in enumerate(_BUDGETS):
            tries.update()
            # the best fit so far (under `fewer_than` itself), else `fewer_than`
            bound = min(fits)[0] if fits else fewer_than or None
            try:
                _schedule(program, hidden, intermediate, heads, budget, exposed, flow, bound)
            except _TooLong:                  # an earlier one is at least as good
                held = None
                continue
            except _Overflow as err:
                closest = err if closest is None or err.need < closest.need else closest
                held = None
                continue
            if program.limit("layers") <= LAYER_GOAL:
                return
            fits.append((program.limit("layers"), n))
            held = n
    if not fits:
        strip_schedule(program)
        if closest is None:
            raise fail(program, f"has no schedule of fewer than {fewer_than} layers "
                                "(option fewer-than)")
        raise closest
    _, n = min(fits)
    if n != held:
        _schedule(program, hidden, intermediate, heads, _BUDGETS[n], exposed, flow)


def _check_fits(program: T.ProgramOp, flow: Dataflow, intermediate: int, heads: int) -> None:
    """Every threshold fits one MLP half, and there is a head for a memory."""
    for unit in flow.units:
        if unit.memory is None:
            need = unit.ops[0].gadget_neuron_count()  # type: ignore[attr-defined]
            if need + 1 > intermediate:
                raise fail(program, f"has a tensor.threshold of {need} neurons; an MLP half "
                                    f"has {intermediate} including the constant neuron "
                                    "(option intermediate)")
        elif heads < 1:
            raise fail(program, "needs a linear-attention head for memory "
                                f"@{unit.memory.memory_name}; the layers have none "
                                "(option heads)")


def _schedule(program: T.ProgramOp, hidden: int, intermediate: int, heads: int,
              budget: _Budget, exposed: set, flow: Dataflow,
              fewer_than: int | None = None) -> None:
    """One schedule with `budget`; `exposed`: `T.exposed_bits` of the program,
    `flow` its `Dataflow` (the same for every budget); `_TooLong` once it
    cannot take fewer than `fewer_than` layers."""
    strip_schedule(program)
    res = _Resources(intermediate)
    placer = _Placement(flow, res, heads, hidden - budget.margin, budget.strict,
                        budget.in_order, hidden - _BURST_SLACK if budget.burst else None,
                        fewer_than)
    last_half = placer.run()
    sinking = _Sinking(flow, res, heads, last_half)
    sinking.run()
    sinking.renumber_heads()

    # ---------------------------------------------------------------- coordinates
    n_layers = last_half // 2 + 1
    spare = Neurons(res.neurons, intermediate)
    coords = Coordinates(program.group_bits(), spare)
    last = _last_reads(program)
    intervals: list[tuple[int, int, int | None]] = []     # [birth, release), group of every bit
    for op in program.ops():
        if isinstance(op, T.InputOp):
            taken = [coords.fresh() for _ in range(T.width_of(op.result))]
            op.properties["coords"] = T.i64_array(T.ranges_of(taken))
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
        birth, group = T.half_index(op), op.group_index
        # bits alike (view, release) take their coordinates at once
        alike: dict[tuple[int | None, int], list[int]] = {}
        for i in range(T.width_of(op.result)):
            g = None if (op.result, i) in exposed else group    # read as it is: every view
            alike.setdefault((g, _release(last, op, i)), []).append(i)
        taken = [0] * T.width_of(op.result)
        over = []
        for (g, release), bits in alike.items():
            got = coords.take(g, birth, release, isinstance(op, T.ThresholdOp), len(bits))
            for i, (c, clear_half) in zip(bits, got, strict=True):
                if clear_half == birth and g is None and group is not None:
                    # the copy neurons of a grouped op are gated: an ungrouped clear
                    coords.clears.setdefault((birth, None), []).append(c)
                elif clear_half == birth:
                    over.append(c)            # the threshold's own copy neuron
                intervals.append((birth, release, g))
                taken[i] = c
        for holder in merge.reads() if merge is not None else [op]:
            holder.properties["coords"] = T.i64_array(T.ranges_of(taken))
        if over:
            op.properties["overwrites"] = T.i64_array(T.ranges_of(sorted(over)))
    thresholds = [op for op in bits_ops if isinstance(op, T.ThresholdOp)]
    energy = 64 + coords.next - 1    # the flag (8²), then one unit per bit coordinate
    clears = coords.clear_ops()
    _lay_out_neurons(thresholds, clears)
    pads: list[T.PadOp] = []
    budget = 64 * hidden - energy
    if budget < 0:
        raise fail(program, f"needs sum(h²) = {energy} before its first layer, more than "
                            f"64·hidden = {64 * hidden} (option hidden)")
    for p in filler_pads(budget):
        pads.append(T.PadOp(coords.fresh(), p))
    next_coord = coords.next
    if next_coord > hidden:
        n_data = next_coord - len(pads)
        raise _Overflow(f"error: tensor program '{program.program_name}' needs {next_coord} "
                        f"residual coordinates ({n_data} for the flag and bits, of which at "
                        f"most {peak_live(intervals)} bits live at once, {len(pads)} pads), "
                        f"the layers have hidden {hidden} (option hidden)", next_coord)
    block = program.body.block
    for op in [*clears, *pads]:
        block.add_op(op)
    program.set_limit("layers", n_layers)
    program.set_limit("hidden", hidden)
    program.set_limit("intermediate", intermediate)
    program.set_limit("heads", heads)


@dataclass(frozen=True)
class _Budget:
    """How the list scheduler keeps the live bits under the hidden size.

    `margin`: the coordinates it leaves to the flag, the pads and the
    allocator's slack; `strict`: it also counts each later read of a merge as
    bits of its own (which tightens the budget as the outbox fills);
    `in_order`: units go in program order rather than longest chain first,
    and a unit that does not fit holds back the later ones of its view, so
    one circuit finishes before the next starts (the lowering emits each op's
    circuit whole), where side by side they would not fit (several
    multipliers in one block) — more layers, far fewer live bits; `burst`:
    a half where no unit fits the budget takes the units that add the fewest
    bits at once, while the live bits stay within hidden − `_BURST_SLACK`,
    rather than one unit every few halves (a schedule that stalls with the
    live bits at the budget, each unit adding a few, out of that regime in a
    few halves instead of dozens)."""

    margin: int
    strict: bool = False
    in_order: bool = False
    burst: bool = False


#: The budgets the list scheduler tries in turn. A wider margin holds more
#: units back (fewer coordinates, often more layers); how much slack the
#: allocator needs (coordinates that one view frees and another cannot take
#: yet) depends on the program, so no one budget suits every kernel.
_BUDGETS = (_Budget(40), _Budget(150), _Budget(300), _Budget(40, strict=True), _Budget(600),
            _Budget(150, in_order=True), _Budget(300, in_order=True), _Budget(150, burst=True),
            _Budget(300, burst=True))
#: The coordinates a burst leaves to the flag, the pads and the allocator.
_BURST_SLACK = 68
#: The layer count a schedule should stay within (the published design's).
LAYER_GOAL = 45

#: An MLP half keeps 1/16 of its neurons from the list scheduler, for the
#: clears that let a later read (which writes onto −1) take a dead coordinate.
_CLEAR_SHARE = 16


class _Placement:
    """List scheduling half by half (`attn 0, mlp 0, attn 1, ...`): in each
    half, the units whose operands are ready, highest first (the longest chain
    of units still to come after them, then program order), while the half
    has neurons (each threshold with one per output bit in reserve for its
    copies) or heads, and while the bits live across the half stay within the
    budget of coordinates in every view (the ungrouped bits plus the fullest
    group's). A unit that frees as many bits as it makes is always welcome;
    when nothing could go for two halves running, the best candidate goes
    anyway (the allocator then names the overflow)."""

    def __init__(self, flow: Dataflow, res: _Resources, heads: int, budget: int,
                 strict: bool = False, in_order: bool = False, burst: int | None = None,
                 fewer_than: int | None = None) -> None:
        self.units, self.res = flow.units, res
        #: the layer count the placement must stay under (None: any)
        self.fewer_than = fewer_than
        self.in_order = in_order
        #: the live bits a burst stays within (None: no bursts)
        self.burst = burst
        #: halves without a placement before the best candidate goes anyway
        self.patience = 1 if in_order else 2
        self.heads, self.budget = heads, budget
        # bits nobody reads hold no coordinate: a merge's later reads write onto
        # its first read's bits, which its readers read (strict: count them)
        self.out_count = flow.out_count if strict else flow.out_count_read
        self.in_bits, self.bit_group = flow.in_bits, flow.bit_group
        self.bit_readers = flow.bit_readers
        self.preds, self.succs, self.height = flow.preds, flow.succs, flow.height
        self.view = flow.view
        #: unit → its delta while no unit is placed (placing one changes `left`)
        self._deltas: dict[int, dict[int | None, int]] = {}
        #: (live bits, group) of every group, fullest first (None: live changed)
        self._ranked: list[tuple[int, int]] | None = None

    def run(self) -> int:
        n = len(self.units)
        half_of: list[int | None] = [None] * n
        waiting = [len(p) for p in self.preds]
        ready = {i for i in range(n) if waiting[i] == 0}
        ready_at = {i: 0 for i in ready}
        live: dict[int | None, int] = {None: 0}
        left = list(self.bit_readers)     # bit number → its readers not yet placed
        placed, h, stall, last = 0, 0, 0, 0
        while placed < n:
            if self.fewer_than is not None and h // 2 + 1 >= self.fewer_than:
                raise _TooLong          # units left: half h at least; `schedule` says why
            is_mlp = h % 2 == 1
            cands = sorted((i for i in ready if ready_at[i] <= h
                            and (self.units[i].memory is None) == is_mlp),
                           key=lambda i: i if self.in_order else (-self.height[i], i))
            went = []
            # units that free as many bits as they make first, then the others
            deltas = {i: self._delta(i, left) for i in cands}
            cands.sort(key=lambda i: sum(deltas[i].values()) > 0)
            forced = min(cands, key=lambda i: (sum(deltas[i].values()), -self.height[i]),
                         default=None) if stall >= self.patience else None
            held: set[int | None] = set()      # in order: views whose next unit waits
            for i in cands:
                if not self._fits(i, h):
                    continue
                delta = self._delta(i, left)
                view = self.view[i]
                if held & {view, None} and i != forced and sum(delta.values()) > 0:
                    continue
                if not (self._within(live, delta) or sum(delta.values()) <= 0 or i == forced):
                    if self.in_order:
                        held.add(view)
                    continue
                self._take(i, h, delta, live, left)
                went.append(i)
            if not went and self.burst is not None:
                went = self._burst(cands, h, live, left, self.burst)
            for i in went:
                half_of[i] = h
                ready.discard(i)
                placed += 1
                last = h
                for c in self.succs[i]:
                    waiting[c] -= 1
                    if waiting[c] == 0:
                        ready.add(c)
                        ready_at[c] = max(half_of[p] for p in self.preds[c]) + 1  # type: ignore[type-var]
            stall = 0 if went else stall + 1
            if stall > 6:            # even an empty half takes none of them
                raise ScheduleError(f"error: tensor-schedule-layers: {len(ready)} units cannot "
                                    f"be placed in half {h} (neurons or heads)")
            h += 1
        return last

    def _take(self, i: int, h: int, delta: dict[int | None, int], live: dict,
              left: list[int]) -> None:
        """Place unit i in half h, counting its bits in and its last reads out."""
        self._place(i, h)
        for g, d in delta.items():
            live[g] = live.get(g, 0) + d
        for k in self.in_bits[i]:
            left[k] -= 1
        self._deltas.clear()
        self._ranked = None

    def _burst(self, cands: list[int], h: int, live: dict, left: list[int],
               limit: int) -> list[int]:
        """A stalled half: the candidates that add the fewest bits first (the
        first whatever it adds), while the live bits stay within `limit`."""
        went: list[int] = []
        for i in sorted(cands, key=lambda i: (sum(self._delta(i, left).values()),
                                              -self.height[i])):
            if not self._fits(i, h):
                continue
            delta = self._delta(i, left)
            if went and not self._within(live, delta, limit):
                break
            self._take(i, h, delta, live, left)
            went.append(i)
        return went

    def _fits(self, i: int, h: int) -> bool:
        return self.res.has_room(self.units[i], h, self.heads)

    def _delta(self, i: int, left: list[int]) -> dict[int | None, int]:
        """Bits live across the half after placing unit i, per view: its
        outputs more, the inputs it reads last fewer (an MLP writes over them in
        the same half; a read only in the next, counted there as well)."""
        delta = self._deltas.get(i)
        if delta is None:
            delta = dict(self.out_count[i])
            for k in self.in_bits[i]:
                if left[k] == 1:
                    g = self.bit_group[k]
                    delta[g] = delta.get(g, 0) - 1
            self._deltas[i] = delta
        return delta

    def _within(self, live: dict[int | None, int], delta: dict[int | None, int],
                limit: int | None = None) -> bool:
        """Whether the live bits with `delta` stay within `limit` (the budget)
        in every view."""
        shared = live.get(None, 0) + delta.get(None, 0)
        if self._ranked is None:      # groups by live bits, fullest first, until a take
            self._ranked = sorted(((n, g) for g, n in live.items() if g is not None),
                                  reverse=True)
        totals = [live.get(g, 0) + d for g, d in delta.items() if g is not None]
        totals += next(([n] for n, g in self._ranked if g not in delta), [])
        worst = max(totals, default=0)
        return shared + worst <= (self.budget if limit is None else limit)

    def _place(self, i: int, h: int) -> None:
        unit = self.units[i]
        if unit.memory is None:
            op = unit.ops[0]
            lo = self.res.add(op, h)
            op.place(h // 2, "mlp")  # type: ignore[attr-defined]
            op.properties["neurons"] = T.i64_array([lo, lo + op.gadget_neuron_count()])
        else:
            head = self.res.heads.get(h, 0)
            self.res.heads[h] = head + 1
            for op in unit.ops:
                op.place(h // 2, "attn")  # type: ignore[attr-defined]
                op.properties["head"] = T.i64_attr(head)


class _Sinking:
    """After list scheduling (every unit as early as it can go), move units
    later where that frees coordinates: a unit placed early holds its output
    bits from its half to their last read, while its inputs may live on for
    other readers anyway (a block's record values, read again by the pick of
    the executing block's record; a register read long before its use). A
    unit moves to the latest half before its first consumer (with room for
    its neurons or a head) when, in every view, the output bits it stops
    holding are at least the input bits it keeps alive longer (the inputs
    nobody else reads that late), and in some view more. Consumers move
    first (latest units first), so chains sink together. The layer count
    stays."""

    def __init__(self, flow: Dataflow, res: _Resources, heads: int, last_half: int) -> None:
        self.units, self.res = flow.units, res
        self.heads = heads
        self.end = 2 * (last_half // 2) + 1          # the last MLP half of the stack
        self.half = [T.half_index(u.memory if u.memory is not None else u.ops[0])
                     for u in self.units]
        self.readers, self.to_end, self.reads = flow.readers, flow.to_end, flow.reads
        #: bit → its two latest readers as (half, unit), latest first: the
        #: latest read but one unit's, without a scan of every reader
        self.latest = {b: sorted(((self.half[u], u) for u in us), reverse=True)[:2]
                       for b, us in self.readers.items()}

    def run(self) -> None:
        for i in sorted(range(len(self.units)), key=lambda i: -self.half[i]):
            self._sink(i)

    def _outputs(self, i: int) -> list[SSAValue]:
        return [op.result for op in self.units[i].ops if isinstance(op, T.ThresholdOp | T.KvReadOp)]

    def _sink(self, i: int) -> None:
        unit, now = self.units[i], self.half[i]
        outs = self._outputs(i)
        if not outs or any(T.merge_of(v.owner) for v in outs if isinstance(v.owner, T.KvReadOp)):
            return
        bits = [(v, k) for v in outs for k in range(T.width_of(v))]
        users = {u for b in bits for u in self.readers.get(b, ())}
        if not users and not any(b in self.to_end for b in bits):
            return
        latest = min((self.half[u] - 1 for u in users), default=self.end)
        parity = 0 if unit.memory is not None else 1
        if latest % 2 != parity:
            latest -= 1
        new = latest
        while new > now and not self.res.has_room(unit, new, self.heads):
            new -= 2
        if new <= now or not self._worth(i, outs, new):
            return
        self._move(i, new)

    def _worth(self, i: int, outs: list[SSAValue], new: int) -> bool:
        """Per view: the output bits freed ≥ the input bits kept alive longer."""
        kept: dict[int | None, int] = {}
        for b in self.reads[i]:
            if b in self.to_end:
                continue
            if self._read_after(b, i) >= new:
                continue
            g = group_of(b[0])
            kept[g] = kept.get(g, 0) + 1
        freed: dict[int | None, int] = {}
        for v in outs:
            g = group_of(v)
            freed[g] = freed.get(g, 0) + T.width_of(v)
        shared_kept, shared_freed = kept.pop(None, 0), freed.pop(None, 0)
        groups = set(kept) | set(freed)
        worst = [shared_freed + freed.get(g, 0) - shared_kept - kept.get(g, 0) for g in groups]
        worst.append(shared_freed - shared_kept)
        return min(worst) >= 0 and max(worst) > 0

    def _read_after(self, b, i: int) -> int:
        """The latest half a unit other than i reads bit b in (−2: none)."""
        return next((h for h, u in self.latest[b] if u != i), -2)

    def _move(self, i: int, new: int) -> None:
        unit, old = self.units[i], self.half[i]
        if unit.memory is None:
            op = unit.ops[0]
            self.res.add(op, old, -1)
            self.res.add(op, new)
            op.place(new // 2, "mlp")
        else:
            self.res.heads[old] -= 1
            self.res.heads[new] = self.res.heads.get(new, 0) + 1
            for op in unit.ops:
                op.place(new // 2, "attn")
        self.half[i] = new
        for b in self.reads[i]:     # a unit only moves later: the two latest stay two
            self.latest[b] = sorted([*(e for e in self.latest[b] if e[1] != i), (new, i)],
                                    reverse=True)[:2]

    def renumber_heads(self) -> None:
        """Heads 0, 1, ... in each attention half, in program order."""
        count: dict[int, int] = {}
        for u in self.units:
            if u.memory is not None:
                h = T.half_index(u.memory)
                for op in u.ops:
                    op.properties["head"] = T.i64_attr(count.get(h, 0))
                count[h] = count.get(h, 0) + 1


def _release(last: dict[tuple[SSAValue, int], int], op: Operation, i: int) -> int:
    """The half after which bit i of op's result is dead (read at its input)."""
    birth = T.birth_half(op)
    return max(last.get((op.results[0], i), birth), birth + 1)


def _last_reads(program: T.ProgramOp) -> dict[tuple[SSAValue, int], int]:
    """The last half that reads each bit (value, index) (`T.last_reads`)."""
    return T.last_reads(program, bit_keys)


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
            op.properties["neurons"] = T.i64_array([lo, lo + need])
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

    fewer_than: int = 0
    """Only schedules of fewer layers than this (0: any): a caller that holds
    one of this many already (the driver's `fit_layers`) is spared the
    placements that cannot beat it."""

    @staticmethod
    def options_of(config: Any) -> dict[str, Any]:
        """The pass's options for a base text config."""
        return {"hidden": config.hidden_size, "intermediate": config.intermediate_size,
                "heads": config.linear_num_value_heads}

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.hidden < 2 or self.intermediate < 2 or self.heads < 0:
            raise DiagnosticException("error: tensor-schedule-layers: hidden and intermediate "
                                      "must be at least 2, heads non-negative")
        if self.fewer_than < 0:
            raise DiagnosticException("error: tensor-schedule-layers: fewer-than must be "
                                      "non-negative (0: any layer count)")
        for program in T.programs_of(op):
            schedule(program, self.hidden, self.intermediate, self.heads, self.fewer_than)
