"""Data-flow analyses over a `simt` kernel's machine blocks.

Each lane runs the machine blocks as one scalar thread would: min-PC only
decides which lanes run a block together, never what a lane computes, so the
classic per-thread analyses hold per lane. One machine rule shapes them: a
*guarded* write leaves the location as it was on the lanes whose guard is
false, so it does not kill the definitions before it, and where one of them
may reach it, it reads the old value as well.

The analyses are generic over the locations an op reads and writes (an
`Access`): registers for `simt-rename-webs` and `simt-allocate-registers`,
spill slots for the latter's slot compaction.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from xdsl.ir import Block, Operation

from qgc.dialects import simt
from qgc.dialects.simt import RegAttr

#: What an op reads and writes: (uses, defs), as locations.
Access = Callable[[Operation], tuple[list[Hashable], list[Hashable]]]


def register_uses(op: Operation) -> list[RegAttr]:
    """Registers `op` reads: its sources and guard, a branch's condition."""
    if isinstance(op, simt.MachineOp | simt.BranchOp):
        return op.uses()
    return []


def register_defs(op: Operation) -> list[RegAttr]:
    return op.defs() if isinstance(op, simt.MachineOp) else []


def register_access(op: Operation) -> tuple[list[Hashable], list[Hashable]]:
    return list(register_uses(op)), list(register_defs(op))


def guarded(op: Operation) -> bool:
    return isinstance(op, simt.MachineOp) and op.guard is not None


@dataclass
class Cfg:
    """The machine blocks in layout order with their edges."""

    blocks: list[Block]
    succs: dict[Block, list[Block]]
    preds: dict[Block, list[Block]]

    @classmethod
    def of(cls, kernel: simt.KernelOp) -> Cfg:
        blocks = list(kernel.body.blocks)
        return cls(blocks, {b: simt.successors(b) for b in blocks}, simt.predecessors(kernel))


def _forward(cfg: Cfg, transfer: Callable[[Block, dict], dict],
             entry: dict) -> dict[Block, dict]:
    """A forward may-analysis over `location → set` maps, joined by union;
    returns the map at each block's entry."""
    state_in: dict[Block, dict] = {b: {} for b in cfg.blocks}
    if cfg.blocks:
        state_in[cfg.blocks[0]] = dict(entry)
    changed = True
    while changed:
        changed = False
        for b in cfg.blocks:
            new = dict(entry) if b is cfg.blocks[0] else {}
            for p in cfg.preds[b]:
                for loc, items in transfer(p, state_in[p]).items():
                    new[loc] = new.get(loc, frozenset()) | items
            if new != state_in[b]:
                state_in[b], changed = new, True
    return state_in


def may_be_written(cfg: Cfg, access: Access) -> dict[Block, set[Hashable]]:
    """The locations some write may have reached at each block's entry."""
    written = {b: frozenset(loc for op in b.ops for loc in access(op)[1]) for b in cfg.blocks}

    def transfer(b: Block, state: dict) -> dict:
        return {"written": state.get("written", frozenset()) | written[b]}

    return {b: set(s.get("written", ())) for b, s in _forward(cfg, transfer, {}).items()}


def kept_by_guarded_writes(cfg: Cfg, access: Access,
                           fresh: frozenset | set = frozenset()) -> dict[Operation, set]:
    """For each guarded op, the locations it writes that an earlier write may
    reach: the lanes whose guard is false keep them, so the op reads them.
    `fresh` locations never count (spill temporaries, live only in one op)."""
    reached_in = may_be_written(cfg, access)
    keeps: dict[Operation, set] = {}
    for b in cfg.blocks:
        reached = set(reached_in[b])
        for op in b.ops:
            writes = access(op)[1]
            if guarded(op):
                keeps[op] = {loc for loc in writes if loc in reached and loc not in fresh}
            reached.update(writes)
    return keeps


def liveness(cfg: Cfg, access: Access, keeps: dict[Operation, set]
             ) -> tuple[dict[Block, set], dict[Block, set]]:
    """Backward liveness: the locations live at each block's entry and exit.
    An op reads before it writes; a guarded op also reads what it keeps."""
    live_in: dict[Block, set] = {b: set() for b in cfg.blocks}
    live_out: dict[Block, set] = {b: set() for b in cfg.blocks}

    def transfer(b: Block, live: set) -> set:
        live = set(live)
        for op in reversed(list(b.ops)):
            uses, defs = access(op)
            kept = keeps.get(op, set())
            live -= set(defs) - kept
            live |= set(uses) | kept
        return live

    changed = True
    while changed:
        changed = False
        for b in reversed(cfg.blocks):
            out = set().union(*(live_in[s] for s in cfg.succs[b]))
            new = transfer(b, out)
            if new != live_in[b] or out != live_out[b]:
                live_in[b], live_out[b], changed = new, out, True
    return live_in, live_out


@dataclass(frozen=True)
class Definition:
    """A write of `loc` by `op`; `op` None is the value the location holds
    when the kernel starts."""

    op: Operation | None
    loc: Hashable


def reaching_definitions(cfg: Cfg, access: Access) -> dict[Block, dict[Hashable, frozenset]]:
    """The definitions of each location that may reach each block's entry.
    A guarded write adds itself to the ones before it instead of killing them."""
    locations = {loc for b in cfg.blocks for op in b.ops for part in access(op) for loc in part}
    entry = {loc: frozenset({Definition(None, loc)}) for loc in locations}

    def transfer(b: Block, state: dict) -> dict:
        out = dict(state)
        for op in b.ops:
            step_definitions(op, access, out)
        return out

    return _forward(cfg, transfer, entry)


def step_definitions(op: Operation, access: Access, state: dict) -> None:
    """Advance a `reaching_definitions` state over one op."""
    for loc in access(op)[1]:
        mine = frozenset({Definition(op, loc)})
        state[loc] = state.get(loc, frozenset()) | mine if guarded(op) else mine


#: Ops without an effect beyond their destination (a load may trap, so it stays).
PURE_OPS = (simt.AluOp, simt.SetpOp, simt.PredOp, simt.SpecialOp, simt.WarpOp)


def sweep_dead_ops(blocks: list[Block]) -> None:
    """Remove the pure ops whose results nothing effective reads: a
    flow-insensitive mark from memory ops and branch conditions (a register
    read anywhere keeps every op that writes it), so the high words of a
    64-bit index used only in addresses cost nothing, loops included."""
    writers: dict[RegAttr, list[Operation]] = {}
    work: list[Operation] = []
    for block in blocks:
        for op in block.ops:
            if isinstance(op, simt.MachineOp):
                for r in op.defs():
                    writers.setdefault(r, []).append(op)
            if not isinstance(op, PURE_OPS):
                work.append(op)
    live_ops: set[Operation] = set(work)
    live_regs: set[RegAttr] = set()
    while work:
        op = work.pop()
        uses = op.uses() if isinstance(op, simt.MachineOp | simt.BranchOp) else []
        for r in uses:
            if r not in live_regs:
                live_regs.add(r)
                for w in writers.get(r, []):
                    if w not in live_ops:
                        live_ops.add(w)
                        work.append(w)
    for block in blocks:
        for op in list(block.ops):
            if isinstance(op, PURE_OPS) and op not in live_ops:
                op.detach()
                op.erase()
