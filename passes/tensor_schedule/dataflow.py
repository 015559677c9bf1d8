"""The dataflow of a `tensor.program` as `tensor-schedule-layers` places it
(`Dataflow`, built once per program and read by every budget's placement
and sinking): the units it places at once, their dependences and the bits
they make and read."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import tensor as T


@dataclass
class Unit:
    """What the scheduler places at once: a threshold op, or a memory with its accesses."""

    ops: list[Operation]
    deps: list[SSAValue]
    memory: T.MemoryOp | None = None


class ScheduleError(DiagnosticException):
    pass


def fail(program: T.ProgramOp, message: str) -> ScheduleError:
    return ScheduleError(f"error: tensor program '{program.program_name}' {message}")


def units_of(program: T.ProgramOp) -> list[Unit]:
    units: list[Unit] = []
    by_memory: dict[str, Unit] = {}
    for op in program.ops():
        if isinstance(op, T.ThresholdOp):
            units.append(Unit([op], list(op.inputs)))
        elif isinstance(op, T.MemoryOp):
            unit = Unit([op], [], memory=op)
            by_memory[op.memory_name] = unit
            units.append(unit)
    for op in program.ops():
        if isinstance(op, T.KvWriteOp | T.KvReadOp):
            unit = by_memory.get(op.memory_name)
            if unit is None:
                raise fail(program, f"accesses memory @{op.memory_name}, which it does not "
                                     "declare")
            unit.ops.append(op)
            unit.deps += list(op.operands)
    return units


def _producers(program: T.ProgramOp, units: list[Unit]) -> dict[SSAValue, frozenset[int]]:
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


def in_dependency_order(program: T.ProgramOp, units: list[Unit]):
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
        raise fail(program, "has a dataflow cycle through its memories")


def bit_keys(op: Operation) -> list[tuple[SSAValue, int]]:
    return [(op.results[0], i) for i in range(T.width_of(op.results[0]))]


def roots(program: T.ProgramOp) -> dict[SSAValue, list[tuple[SSAValue, int]]]:
    """Each value's bits as (producing result, index) (`T.bit_sources`; a
    merge's bits are its first read's: its coordinates)."""
    src: dict = {}
    for _op, seen in T.bit_sources(program, bit_keys):
        src = seen                       # one dict, filled as the walk goes
    return src


def bits_read(op: Operation, src) -> list[tuple[SSAValue, int]]:
    if isinstance(op, T.ThresholdOp):
        flat = [b for v in op.inputs for b in src[v]]
        return [flat[i] for i in op.read_bits() if i < len(flat)]
    return [b for v in op.operands for b in src[v]]


def group_of(value: SSAValue) -> int | None:
    """The group whose view a value's bits are in (None: every view)."""
    return getattr(value.owner, "group_index", None)


def view_of(unit: Unit) -> int | None:
    """The view a unit's bits are in (a memory's: its reads')."""
    groups = {group_of(op.results[0]) for op in unit.ops
              if isinstance(op, T.ThresholdOp | T.KvReadOp)}
    return groups.pop() if len(groups) == 1 else None


class Dataflow:
    """What the placement and sinking of every budget read of a program,
    built once: the units in dependency order; the bits each makes (`outs`;
    `outs_read`: those something reads) and reads (`ins`), how many units
    read each bit (`reader_count`) and the bits outputs read (`to_end`); the
    dependences, a merge's readers waiting for all its reads, and each
    unit's height (the longest chain of units from it); each bit's view and
    each unit's. For sinking, each unit's bits read with a merge's later
    reads behind its first's (`reads`), and each bit's readers."""

    def __init__(self, program: T.ProgramOp) -> None:
        self.units = units = list(in_dependency_order(program, units_of(program)))
        unit_of = {op: i for i, u in enumerate(units) for op in u.ops}
        src = roots(program)
        self.outs: list[list[tuple[SSAValue, int]]] = [[] for _ in units]
        self.ins: list[set[tuple[SSAValue, int]]] = [set() for _ in units]
        self.reader_count: dict[tuple[SSAValue, int], int] = {}
        self.to_end: set[tuple[SSAValue, int]] = set()
        producer: dict[SSAValue, int] = {}
        for op in program.ops():
            if isinstance(op, T.OutputOp):
                self.to_end.update(src[op.value])
            if op not in unit_of:
                continue
            i = unit_of[op]
            if isinstance(op, T.ThresholdOp | T.KvReadOp):
                producer[op.result] = i
                self.outs[i] += [(op.result, k) for k in range(T.width_of(op.result))]
            self.ins[i].update(bits_read(op, src))
        self.preds: list[set[int]] = [set() for _ in units]
        self.succs: list[set[int]] = [set() for _ in units]
        for i, bits in enumerate(self.ins):
            for v, _ in bits:
                p = producer.get(v)
                if p is not None and p != i:
                    self.preds[i].add(p)
                    self.succs[p].add(i)
            for b in bits:
                self.reader_count[b] = self.reader_count.get(b, 0) + 1
        self.outs_read = [[b for b in bits if b in self.reader_count or b in self.to_end]
                          for bits in self.outs]
        self._wait_for_merges(unit_of)
        self.height = [0] * len(units)
        for i in reversed(range(len(units))):   # units are in dependency order
            self.height[i] = 1 + max((self.height[c] for c in self.succs[i]), default=0)
        self.group = {b: group_of(b[0]) for bits in self.outs for b in bits}
        self.view = [view_of(u) for u in units]
        self._numbered_reads()
        self._sinking_reads(program)

    def _numbered_reads(self) -> None:
        """The bits units read that do not live to the end anyway, numbered
        (`in_bits` per unit; `bit_group`, `bit_readers` per number), and each
        unit's output bits counted per view (`out_count`; `out_count_read`:
        those something reads): what the placement's live-bit deltas add up,
        as list lookups rather than hashes of SSA values."""
        number: dict[tuple[SSAValue, int], int] = {}
        self.in_bits = [[number.setdefault(b, len(number)) for b in bits if b not in self.to_end]
                        for bits in self.ins]
        self.bit_group: list[int | None] = [None] * len(number)
        self.bit_readers = [0] * len(number)
        for b, k in number.items():
            self.bit_group[k] = group_of(b[0])
            self.bit_readers[k] = self.reader_count[b]
        self.out_count = [self._per_view(bits) for bits in self.outs]
        self.out_count_read = [self._per_view(bits) for bits in self.outs_read]

    def _per_view(self, bits: list[tuple[SSAValue, int]]) -> dict[int | None, int]:
        count: dict[int | None, int] = {}
        for b in bits:
            count[self.group[b]] = count.get(self.group[b], 0) + 1
        return count

    def _wait_for_merges(self, unit_of: dict[Operation, int]) -> None:
        """A merge's readers wait for all its reads."""
        for u in self.units:
            for op in u.ops:
                merge = T.merge_of(op) if isinstance(op, T.KvReadOp) else None
                if merge is not None:
                    for r in merge.reads():
                        j = unit_of[r.memory_op()]
                        for c in self.succs[unit_of[merge.first_read().memory_op()]]:
                            if c != j:
                                self.preds[c].add(j)
                                self.succs[j].add(c)

    def _sinking_reads(self, program: T.ProgramOp) -> None:
        """`reads` and `readers`: a unit's bits read (`ins`), and since a
        merge's bits are its first read's, reading them reads every read's."""
        also: dict[tuple[SSAValue, int], list[tuple[SSAValue, int]]] = {}
        for op in program.ops():
            if isinstance(op, T.MergeOp):
                first = op.first_read()
                for r in op.reads():
                    for k in range(T.width_of(r.result) if r is not first else 0):
                        also.setdefault((first.result, k), []).append((r.result, k))
        self.reads = [bits | {b for x in bits for b in also.get(x, ())} for bits in self.ins]
        self.readers: dict[tuple[SSAValue, int], set[int]] = {}   # bit → reading units
        for i, bits in enumerate(self.reads):
            for b in bits:
                self.readers.setdefault(b, set()).add(i)
