"""`simt-allocate-registers{regs=15 preds=8}`: virtual registers to physical ones,
spilling to the lane's own spill slots when `regs` do not suffice.

Linear scan over the machine blocks in layout order. Virtual registers are
mutable locations (not SSA), so each one's live range is the hull of every
point where it is live: liveness is a backward data-flow over the blocks, and a
*guarded* write keeps the old value on the lanes whose guard is false, so it
also reads the register when an earlier write may reach it. Each op reads its
sources before it writes its destination, so a destination may take the
register of a source that dies there. Ranges are assigned the lowest free
register in order of their start, which needs exactly as many registers as
the most ranges live at once.

**Spilling.** Where more than `regs` ranges are live at once, the scan spills
one of the live ranges, the one whose spill code costs least per point of the
range it frees (each reload or store it would get, 8 times over per loop
around it; among equals the one that ends furthest away, Poletto and Sarkar's
choice). The spilled virtual register moves to a *spill slot*, a word of the
executing thread's own spill area (`spill[K]`; docs/machine.md, "Spilling").
Every op that reads it gets a reload `simt.ld vT, spill[K]` into a fresh
short-lived virtual register just before it; every op that writes it writes vT
and gets `simt.st spill[K], vT` just after it, under the op's own guard: a
lane whose guard is false keeps the old word in the slot as it would keep the
old value in the register, so a guarded write needs no reload of the old value
(and a guarded write of a temporary keeps nothing alive). Inserted ops keep the
location of the op they serve. Liveness is then recomputed and the scan runs
again until the kernel fits. Temporaries are never spilled, so the rounds end;
a kernel in which one op reads more distinct registers than the machine has
cannot fit at all and is refused with what it needs:
`error: kernel 'k' needs 4 registers per lane at k.ptx:9:2 even after
spilling, the machine has 3 (option regs)`.

Slots are allocated like registers, over their own live ranges (a spill store
writes its slot, a reload reads it, a guarded store keeps the old word), so
spilled ranges that never overlap share a slot. After allocation a reload into
the register that still holds the slot's word (stored or reloaded earlier in
the block) is dropped. The kernel records `spill_words` (slots per thread) and
`spilled` (virtual registers spilled). Spill code lengthens blocks, so the pass
runs before `simt-form-blocks`; a kernel whose blocks were formed first and
outgrow `max-ops` is refused.

**Predicates as words.** Where more than `preds` predicates are live at once
(CUDA's powf inlines nine), the same choice demotes predicates first, before
the registers are counted: a demoted predicate lives in a 32-bit virtual
register as 0 or 1 (`Demoter`). An op that writes it writes a fresh predicate
and `simt.alu "selp" vW, 1, 0, vpT` follows under the op's guard; an op or a
branch that reads it gets `simt.setp "ne" vpT, vW, 0` just before. The words
are values like any other and spill where registers run short; the kernel
records `demoted`. An op that reads more distinct predicates than `preds` is
refused: `error: kernel 'k' needs 2 predicate registers per lane at k.ptx:7:2
even after keeping predicates as words, the machine has 1 (option preds)`.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.analysis.dataflow import (
    Access,
    Cfg,
    kept_by_guarded_writes,
    liveness,
    register_access,
    register_defs,
    register_uses,
)
from qgc.dialects import ptx, simt
from qgc.dialects.simt import RegAttr


def _is_spill(op: Operation) -> bool:
    return isinstance(op, simt.LdOp | simt.StOp) and op.space.data == "spill"


def slot_access(op: Operation) -> tuple[list[Hashable], list[Hashable]]:
    """A reload reads its slot, a spill store writes it."""
    if not _is_spill(op):
        return [], []
    assert isinstance(op, simt.LdOp | simt.StOp)
    slot = op.offset.value.data
    return ([slot], []) if isinstance(op, simt.LdOp) else ([], [slot])


@dataclass
class Interval:
    reg: Hashable        # a register (RegAttr) or a spill slot (int)
    start: int
    end: int


def live_intervals(kernel: simt.KernelOp, access: Access = register_access,
                   temps: frozenset | set = frozenset()
                   ) -> tuple[dict[Hashable, Interval], list[Operation]]:
    """Live ranges over the points of the linear order: op n reads at 2n and
    writes at 2n+1. Returns the ranges and the ops in order. A guarded write
    to one of `temps` keeps nothing: a spill temporary is read only by the
    op itself (after its reload) and by the store under the same guard, so
    even in a loop it lives from its reload or write to its store."""
    cfg = Cfg.of(kernel)
    acc = {op: access(op) for b in cfg.blocks for op in b.ops}
    keeps = kept_by_guarded_writes(cfg, acc.__getitem__, temps)
    live_in, live_out = liveness(cfg, acc.__getitem__, keeps)
    # hulls
    intervals: dict[Hashable, Interval] = {}

    def extend(r: Hashable, point: int) -> None:
        iv = intervals.get(r)
        if iv is None:
            intervals[r] = Interval(r, point, point)
        else:
            iv.start, iv.end = min(iv.start, point), max(iv.end, point)

    order: list[Operation] = []
    for b in cfg.blocks:
        first = len(order)
        ops = list(b.ops)
        order.extend(ops)
        last = len(order) - 1
        for r in live_in[b]:
            extend(r, 2 * first)
        for r in live_out[b]:
            extend(r, 2 * last + 1)
        for n, op in enumerate(ops, first):
            for r in acc[op][0] + list(keeps.get(op, ())):
                extend(r, 2 * n)
            for r in acc[op][1]:
                extend(r, 2 * n + 1)
    return intervals, order


def _rank(iv: Interval) -> tuple[int, int, int]:
    """Scan order: by start, then end, then register or slot number."""
    index = iv.reg.index.data if isinstance(iv.reg, RegAttr) else iv.reg
    assert isinstance(index, int)
    return iv.start, iv.end, index


def scan(intervals: list[Interval]) -> tuple[dict[Hashable, int], int, int]:
    """Assign each interval the lowest free number. Returns the mapping, how
    many numbers are used and a point where that many are live."""
    mapping: dict[Hashable, int] = {}
    free: list[int] = []
    active: list[tuple[int, int]] = []  # (end, number)
    used = 0
    peak_point = 0
    for iv in sorted(intervals, key=_rank):
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
        mapping[iv.reg] = r
    return mapping, used, peak_point


def linear_scan(intervals: list[Interval], kind: str) -> tuple[dict[RegAttr, RegAttr], int, int]:
    """`scan` onto physical registers of `kind` (`r` or `p`)."""
    numbers, used, point = scan(intervals)
    mapping = {r: RegAttr(kind, n) for r, n in numbers.items() if isinstance(r, RegAttr)}
    return mapping, used, point


def loop_depths(kernel: simt.KernelOp) -> dict[Block, int]:
    """How many loops enclose each block: a back edge t → h (h not after t in
    layout order) encloses the blocks from h to t."""
    blocks = list(kernel.body.blocks)
    index = {b: i for i, b in enumerate(blocks)}
    depth = dict.fromkeys(blocks, 0)
    for tail in blocks:
        for head in simt.successors(tail):
            if index[head] <= index[tail]:
                for b in blocks[index[head]:index[tail] + 1]:
                    depth[b] += 1
    return depth


def spill_weights(kernel: simt.KernelOp) -> dict[RegAttr, float]:
    """What spilling a register costs: the reloads and stores it would get, one
    inside a loop counting 8 times per loop around it."""
    depth = loop_depths(kernel)
    weight: dict[RegAttr, float] = {}
    for block in kernel.body.blocks:
        cost = 8.0 ** min(depth[block], 6)
        for op in block.ops:
            for r in [*set(register_uses(op)), *register_defs(op)]:
                weight[r] = weight.get(r, 0.0) + cost
    return weight


def choose_spills(intervals: list[Interval], limit: int, temps: set[RegAttr],
                  weight: dict[RegAttr, float]) -> list[RegAttr] | None:
    """The scan with `limit` registers: wherever one more range would be live,
    spill the live range (not a temporary) that costs least per point it
    frees (`spill_weights` over its length), the one that ends furthest away
    among equals. Returns the registers to spill (none: it fits), or None when
    only temporaries are live there (spilling cannot help)."""
    active: list[Interval] = []
    spilled: list[RegAttr] = []
    for iv in sorted(intervals, key=_rank):
        active = [a for a in active if a.end >= iv.start]
        active.append(iv)
        if len(active) <= limit:
            continue
        candidates = [a for a in active if a.reg not in temps]
        if not candidates:
            return None
        victim = min(candidates, key=lambda a: (weight.get(a.reg, 0.0) / (a.end - a.start + 1),
                                                -a.end, a.start))
        active.remove(victim)
        assert isinstance(victim.reg, RegAttr)
        spilled.append(victim.reg)
    return spilled


class Spiller:
    """Rewrites spilled virtual registers into reloads and spill stores around
    the ops that use them; each spilled register gets its own slot (`compact_slots`
    lets ranges that never overlap share one)."""

    def __init__(self, kernel: simt.KernelOp):
        self.kernel = kernel
        self.temps: set[RegAttr] = set()
        self.slots: dict[RegAttr, int] = {}
        virtual = [r.index.data for r in simt.all_registers(list(kernel.body.blocks))
                   if r.kind.data == "v"]
        self.next = max(virtual, default=-1) + 1

    def fresh(self, kind: str = "v") -> RegAttr:
        """A new virtual register (`v`) or predicate (`vp`)."""
        r = RegAttr(kind, self.next)
        self.next += 1
        return r

    def temp(self, kind: str = "v") -> RegAttr:
        """A fresh temporary: read or written next to one op, never spilled."""
        t = self.fresh(kind)
        self.temps.add(t)
        return t

    def spill(self, victims: list[RegAttr], order: list[Operation]) -> None:
        for v in victims:
            self.slots[v] = len(self.slots)
        chosen = {v: self.slots[v] for v in victims}
        for op in order:
            if isinstance(op, simt.MachineOp):
                self.rewrite(op, chosen)

    def rewrite(self, op: simt.MachineOp, chosen: dict[RegAttr, int]) -> None:
        reads = [r for r in dict.fromkeys(op.uses()) if r in chosen]
        writes = [r for r in op.defs() if r in chosen]
        if not reads and not writes:
            return
        temps = {r: self.temp() for r in dict.fromkeys(reads + writes)}
        block = op.parent_block()
        assert block is not None
        for r in reads:
            block.insert_op_before(_at(simt.LdOp(temps[r], "spill", None, chosen[r]), op), op)
        op.replace_regs(temps)
        for r in writes:
            store = simt.StOp("spill", None, chosen[r], temps[r], None, op.guard)
            block.insert_op_after(_at(store, op), op)


class Demoter:
    """Keeps chosen predicates as 0/1 words in 32-bit virtual registers: an op
    that writes one writes a fresh predicate and `selp` turns it into the word
    just after (under the op's guard, which keeps the old word where it
    fails); an op or branch that reads one gets `setp.ne` of the word into a
    fresh predicate just before. The words are ordinary values from then on,
    spilled like any other where registers run short."""

    def __init__(self, spiller: Spiller):
        self.spiller = spiller          # numbers the new registers, holds the temporaries
        self.words: dict[RegAttr, RegAttr] = {}

    def demote(self, victims: list[RegAttr], order: list[Operation]) -> None:
        chosen = {v: self.spiller.fresh() for v in victims}
        self.words.update(chosen)
        for op in order:
            if isinstance(op, simt.MachineOp | simt.BranchOp):
                self.rewrite(op, chosen)

    def rewrite(self, op: simt.MachineOp | simt.BranchOp, chosen: dict[RegAttr, RegAttr]
                ) -> None:
        """Reads take a fresh predicate set from the word before `op`, writes
        another, copied into the word after it: an op that writes its own
        guard's predicate still has its guard (the value before it) for the copy."""
        reads = {r: self.spiller.temp("vp") for r in dict.fromkeys(op.uses()) if r in chosen}
        writes = {r: self.spiller.temp("vp") for r in register_defs(op) if r in chosen}
        if not reads and not writes:
            return
        block = op.parent_block()
        assert block is not None
        for r, t in reads.items():
            block.insert_op_before(_at(simt.SetpOp("ne", t, chosen[r], 0), op), op)
        if isinstance(op, simt.BranchOp):
            op.properties["cond"] = simt.GuardAttr(reads[op.cond.pred], op.cond.is_negated)
            return
        op.replace_sources(reads)
        if op.guard is not None and op.guard.pred in reads:
            op.properties["guard"] = simt.GuardAttr(reads[op.guard.pred], op.guard.is_negated)
        for name, reg in op.def_props().items():
            if reg in writes:
                op.properties[name] = writes[reg]
        for r, t in writes.items():
            select = simt.AluOp("selp", chosen[r], [1, 0, t], op.guard)
            block.insert_op_after(_at(select, op), op)


def demote_until_it_fits(kernel: simt.KernelOp, preds: int, spiller: Spiller) -> int:
    """Demote predicates (`Demoter`) until at most `preds` are live at once, the
    cheapest first as `choose_spills` picks registers; returns how many."""
    demoter = Demoter(spiller)
    _, order, fits = rewrite_until_it_fits(kernel, "vp", preds, spiller.temps, demoter.demote)
    if not fits:
        def reads(op: Operation) -> int:
            return len({r for r in register_uses(op) if r.is_pred})
        op = max(order, key=reads)
        raise DiagnosticException(
            f"{ptx.location_prefix(kernel)}error: kernel '{kernel.kernel_name}' needs "
            f"{simt.plural(reads(op), 'predicate register')} per lane at {_where(op)} even "
            f"after keeping predicates as words, the machine has {preds} (option preds)")
    return len(demoter.words)


def rewrite_until_it_fits(kernel: simt.KernelOp, kind: str, limit: int, temps: set[RegAttr],
                          rewrite) -> tuple[dict[Hashable, Interval], list[Operation], bool]:
    """Scan the `kind` ranges (`v` or `vp`) with `limit` registers and
    `rewrite(victims, order)` the ones `choose_spills` picks, until they fit;
    returns the last live ranges, the ops in order, and whether they fit
    (not where only temporaries are live at the peak: rewriting cannot help)."""
    while True:
        intervals, order = live_intervals(kernel, temps=temps)
        group = [iv for r, iv in intervals.items()
                 if isinstance(r, RegAttr) and r.kind.data == kind]
        victims = choose_spills(group, limit, temps, spill_weights(kernel))
        if not victims:
            return intervals, order, victims is not None
        rewrite(victims, order)


def _at(new: Operation, served: Operation) -> Operation:
    """Spill code keeps the location of the op it serves."""
    new.location = served.location
    return new


def _where(op: Operation) -> str:
    return ptx.location_prefix(op).rstrip(": ") or f"'{op.name}'"


def least_registers(order: list[Operation]) -> tuple[int, Operation]:
    """The registers the kernel needs with every value spilled, and the first op
    that needs them: an op's distinct 32-bit sources are live at once, and its
    destination may take the register of one of them."""
    def need(op: Operation) -> int:
        values = [r for r in register_uses(op) + register_defs(op) if not r.is_pred]
        reads = {r for r in register_uses(op) if not r.is_pred}
        return max(len(reads), 1) if values else 0
    op = max(order, key=need)
    return need(op), op


def spill_until_it_fits(kernel: simt.KernelOp, regs: int, spiller: Spiller
                        ) -> tuple[dict[Hashable, Interval], list[Operation]]:
    """Spill and rescan until at most `regs` 32-bit ranges are live at once;
    returns the live ranges (with the ops in order) that fit."""
    intervals, order, fits = rewrite_until_it_fits(kernel, "v", regs, spiller.temps,
                                                   spiller.spill)
    if not fits:
        need, op = least_registers(order)
        raise DiagnosticException(
            f"{ptx.location_prefix(kernel)}error: kernel '{kernel.kernel_name}' needs "
            f"{simt.plural(need, 'register')} per lane at {_where(op)} even "
            f"after spilling, the machine has {regs} (option regs)")
    return intervals, order


def compact_slots(kernel: simt.KernelOp) -> int:
    """Renumber the spill slots by their live ranges; returns how many remain."""
    intervals, order = live_intervals(kernel, slot_access)
    mapping, used, _ = scan(list(intervals.values()))
    for op in order:
        if _is_spill(op):
            assert isinstance(op, simt.LdOp | simt.StOp)
            op.properties["offset"] = IntegerAttr(mapping[op.offset.value.data], i64)
    return used


def drop_redundant_reloads(kernel: simt.KernelOp) -> None:
    """A reload into the register that already holds the slot's word does
    nothing: in one block each lane runs every op, so after an unguarded
    store or reload the register and the slot agree until either is written."""
    for block in kernel.body.blocks:
        holds: dict[int, RegAttr] = {}      # slot -> the register holding its word
        for op in list(block.ops):
            if not _is_spill(op):
                written = set(register_defs(op))
                holds = {k: r for k, r in holds.items() if r not in written}
                continue
            assert isinstance(op, simt.LdOp | simt.StOp)
            slot = op.offset.value.data
            value = op.dst if isinstance(op, simt.LdOp) else op.value
            if isinstance(op, simt.LdOp) and holds.get(slot) == value:
                op.detach()
                op.erase()
                continue
            holds = {k: r for k, r in holds.items() if r != value and k != slot}
            if op.guard is None and isinstance(value, RegAttr):
                holds[slot] = value


def _check_formed_blocks(kernel: simt.KernelOp) -> None:
    """Blocks formed before allocation may outgrow max-ops with spill code."""
    max_ops = kernel.limit("max_ops")
    if max_ops is None:
        return
    for index, block in enumerate(kernel.body.blocks):
        n = len(block.ops) - 1
        if n > max_ops:
            raise DiagnosticException(
                f"{ptx.location_prefix(kernel)}error: block ^bb{index} of kernel "
                f"'{kernel.kernel_name}' needs {n} ops with its spill code, the machine runs "
                f"at most {max_ops} per block (option max-ops); run simt-allocate-registers "
                "before simt-form-blocks")


def _check_not_mixed(kernel: simt.KernelOp) -> None:
    kinds = {r.kind.data for r in simt.all_registers(list(kernel.body.blocks))}
    for virtual, physical, what in (("v", "r", "register"), ("vp", "p", "predicate register")):
        if virtual in kinds and physical in kinds:
            raise DiagnosticException(f"{ptx.location_prefix(kernel)}error: kernel "
                                      f"'{kernel.kernel_name}' mixes virtual and physical "
                                      f"{what}s")


def allocate(kernel: simt.KernelOp, regs: int, preds: int) -> None:
    if kernel.regs is not None:
        return  # already allocated
    _check_not_mixed(kernel)
    spiller = Spiller(kernel)
    demoted = demote_until_it_fits(kernel, preds, spiller)
    intervals, order = spill_until_it_fits(kernel, regs, spiller)
    mapping: dict[RegAttr, RegAttr] = {}
    for virtual, physical, limit, what, option in (
            ("v", "r", regs, "register", "regs"), ("vp", "p", preds, "predicate register",
                                                   "preds")):
        group = [iv for r, iv in intervals.items()
                 if isinstance(r, RegAttr) and r.kind.data == virtual]
        assigned, used, point = linear_scan(group, physical)
        if used > limit:  # predicates only: registers were spilled until they fit
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
    if spiller.slots:
        kernel.set_limit("spill_words", compact_slots(kernel))
        drop_redundant_reloads(kernel)
        kernel.set_limit("spilled", len(spiller.slots))
    if demoted:
        kernel.set_limit("demoted", demoted)
    if spiller.slots or demoted:
        _check_formed_blocks(kernel)
    kernel.set_limit("regs", regs)
    kernel.set_limit("preds", preds)


@dataclass(frozen=True)
class SimtAllocateRegistersPass(ModulePass):
    name = "simt-allocate-registers"

    regs: int = simt.DEFAULT_REGS
    """32-bit registers per lane (more live values are spilled)."""

    preds: int = simt.DEFAULT_PREDS
    """Predicate registers per lane (more live predicates are kept as 0/1 words)."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.regs < 1 or self.preds < 1:
            raise DiagnosticException("error: simt-allocate-registers: regs and preds must be "
                                      "positive")
        for kernel in simt.kernels_of(op):
            allocate(kernel, self.regs, self.preds)
