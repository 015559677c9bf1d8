"""`simt-allocate-registers{regs=15 preds=8}`: virtual registers to physical ones.

Linear scan over the machine blocks in layout order. Virtual registers are
mutable locations (not SSA), so each one's live range is the hull of every
point where it is live: liveness is a backward data-flow over the blocks, and a
*guarded* write keeps the old value on the lanes whose guard is false, so it
also reads the register when an earlier write may reach it. Each op reads its
sources before it writes its destination, so a destination may take the
register of a source that dies there. Ranges are assigned the lowest free
register in order of their start, which needs exactly as many registers as
the most ranges live at once. Without spilling (the full machine's job), a
kernel that needs more is refused:
`error: kernel 'k' needs 17 registers per lane, the machine has 15 (option regs)`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import ptx, simt
from qgc.dialects.simt import RegAttr


def _uses(op: Operation) -> list[RegAttr]:
    if isinstance(op, simt.MachineOp | simt.BranchOp):
        return op.uses()
    return []


def _defs(op: Operation) -> list[RegAttr]:
    return op.defs() if isinstance(op, simt.MachineOp) else []


def _guarded(op: Operation) -> bool:
    return isinstance(op, simt.MachineOp) and op.guard is not None


@dataclass
class Interval:
    reg: RegAttr
    start: int
    end: int


def live_intervals(kernel: simt.KernelOp) -> tuple[dict[RegAttr, Interval], list[Operation]]:
    """Live ranges over the points of the linear order: op n reads at 2n and
    writes at 2n+1. Returns the ranges and the ops in order."""
    blocks = list(kernel.body.blocks)
    succs = {b: simt.successors(b) for b in blocks}
    preds: dict[Block, list[Block]] = {b: [] for b in blocks}
    for b in blocks:
        for s in succs[b]:
            preds[s].append(b)
    # which registers some write may reach (forward, union)
    written: dict[Block, set[RegAttr]] = {b: set() for b in blocks}
    reach_in: dict[Block, set[RegAttr]] = {b: set() for b in blocks}
    for b in blocks:
        for op in b.ops:
            written[b].update(_defs(op))
    changed = True
    while changed:
        changed = False
        for b in blocks:
            new = set().union(*(reach_in[p] | written[p] for p in preds[b])) if preds[b] \
                else set()
            if new != reach_in[b]:
                reach_in[b], changed = new, True
    # per op: does the op read a register it writes under a guard?
    keeps: dict[Operation, set[RegAttr]] = {}
    for b in blocks:
        reached = set(reach_in[b])
        for op in b.ops:
            if _guarded(op):
                keeps[op] = {r for r in _defs(op) if r in reached}
            reached.update(_defs(op))
    # liveness (backward)
    live_in: dict[Block, set[RegAttr]] = {b: set() for b in blocks}
    live_out: dict[Block, set[RegAttr]] = {b: set() for b in blocks}

    def transfer(b: Block, live: set[RegAttr]) -> set[RegAttr]:
        live = set(live)
        for op in reversed(list(b.ops)):
            live -= set(_defs(op)) - keeps.get(op, set())
            live |= set(_uses(op)) | keeps.get(op, set())
        return live

    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            out = set().union(*(live_in[s] for s in succs[b])) if succs[b] else set()
            new = transfer(b, out)
            if new != live_in[b] or out != live_out[b]:
                live_in[b], live_out[b], changed = new, out, True
    # hulls
    intervals: dict[RegAttr, Interval] = {}

    def extend(r: RegAttr, point: int) -> None:
        iv = intervals.get(r)
        if iv is None:
            intervals[r] = Interval(r, point, point)
        else:
            iv.start, iv.end = min(iv.start, point), max(iv.end, point)

    order: list[Operation] = []
    for b in blocks:
        first = len(order)
        ops = list(b.ops)
        order.extend(ops)
        last = len(order) - 1
        for r in live_in[b]:
            extend(r, 2 * first)
        for r in live_out[b]:
            extend(r, 2 * last + 1)
        for n, op in enumerate(ops, first):
            for r in _uses(op) + list(keeps.get(op, ())):
                extend(r, 2 * n)
            for r in _defs(op):
                extend(r, 2 * n + 1)
    return intervals, order


def linear_scan(intervals: list[Interval], kind: str) -> tuple[dict[RegAttr, RegAttr], int, int]:
    """Assign each interval the lowest free register. Returns the mapping, the
    number of registers used and a point where that many are live."""
    mapping: dict[RegAttr, RegAttr] = {}
    free: list[int] = []
    active: list[tuple[int, int]] = []  # (end, register)
    used = 0
    peak_point = 0
    for iv in sorted(intervals, key=lambda i: (i.start, i.end, i.reg.index.data)):
        while active and active[0][0] < iv.start:
            _, r = heapq.heappop(active)
            heapq.heappush(free, r)
        if free:
            r = heapq.heappop(free)
        else:
            r = used
            used += 1
            peak_point = iv.start
        heapq.heappush(active, (iv.end, r))
        mapping[iv.reg] = RegAttr(kind, r)
    return mapping, used, peak_point


def allocate(kernel: simt.KernelOp, regs: int, preds: int) -> None:
    if kernel.regs is not None:
        return  # already allocated
    intervals, order = live_intervals(kernel)
    mapping: dict[RegAttr, RegAttr] = {}
    for virtual, physical, limit, what, option in (
            ("v", "r", regs, "register", "regs"), ("vp", "p", preds, "predicate register",
                                                   "preds")):
        group = [iv for r, iv in intervals.items() if r.kind.data == virtual]
        if any(r.kind.data == physical for r in intervals):
            raise DiagnosticException(f"{ptx.location_prefix(kernel)}error: kernel "
                                      f"'{kernel.kernel_name}' mixes virtual and physical "
                                      f"{what}s")
        assigned, used, point = linear_scan(group, physical)
        if used > limit:
            where = ptx.location_prefix(order[point // 2]).rstrip(": ")
            at = f"; {used} values are live at once at {where}" if where else ""
            raise DiagnosticException(
                f"{ptx.location_prefix(kernel)}error: kernel '{kernel.kernel_name}' needs "
                f"{simt.plural(used, what)} per lane, the machine has {limit} (option {option}){at}")
        mapping.update(assigned)
    for op in order:
        if isinstance(op, simt.MachineOp):
            op.replace_regs(mapping)
        elif isinstance(op, simt.BranchOp):
            cond = op.cond
            op.properties["cond"] = simt.GuardAttr(mapping.get(cond.pred, cond.pred),
                                                   cond.is_negated)
    kernel.set_limit("regs", regs)
    kernel.set_limit("preds", preds)


@dataclass(frozen=True)
class SimtAllocateRegistersPass(ModulePass):
    name = "simt-allocate-registers"

    regs: int = simt.DEFAULT_REGS
    """32-bit registers per lane."""

    preds: int = simt.DEFAULT_PREDS
    """Predicate registers per lane."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.regs < 1 or self.preds < 1:
            raise DiagnosticException("error: simt-allocate-registers: regs and preds must be "
                                      "positive")
        for kernel in simt.kernels_of(op):
            allocate(kernel, self.regs, self.preds)
