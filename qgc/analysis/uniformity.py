"""Warp-uniform values: the registers every lane of a warp holds alike.

A forward *must* analysis per lane (each lane runs the blocks as one scalar
thread would, `dataflow`): a location holds a value number where, on every
path to the point, its last write computed that value from warp-invariant
sources only: kernel parameters, immediates, the CTA's geometry (`ntid`,
`ctaid`, `nctaid`), the warp's `warpid`/`nwarpid`, and other such values by
pure ops. Two lanes at the same point then hold the same word, whichever
paths brought them there, so an access whose address is uniform is one
memory read for the warp, not one per lane (`uniform_addresses`).

Value numbers are hash-consed (`(opcode, operand numbers)` → number), so
equal computations along different paths meet as equal. A value may be
known on the lanes where a guard holds (a guarded write of it, which the
if-converted code of a branch is made of), and it serves an op under that
same guard; writing the guard's predicate forgets it. Any other write (a
load from memory, a cross-lane op, `tid`) forgets a location's value. Spill slots
are locations too: a reload gives back the number its spill stored.
"""

from __future__ import annotations

from collections.abc import Hashable

from xdsl.ir import Block, Operation

from qgc.analysis.dataflow import Cfg
from qgc.dialects import simt
from qgc.dialects.simt import GuardAttr, RegAttr

#: Special registers with one value for a whole warp: the CTA's geometry but
#: `tid`, and the warp's own.
UNIFORM_SPECIALS = frozenset(s for s in simt.GEOMETRY_SPECIALS if not s.startswith("tid.")) \
    | frozenset(simt.WARP_SPECIALS)

#: Where a value is known: on every lane (None), or on the lanes where a
#: predicate holds, (predicate register, negated) as an op's guard.
Cond = tuple[RegAttr, bool] | None
#: A location's value number and where it holds.
Known = tuple[int, Cond]
#: Location → what is known of it at a point.
State = dict[Hashable, Known]


class _Numbers:
    """Hash-consed value numbers of warp-invariant computations."""

    def __init__(self) -> None:
        self.table: dict[tuple, int] = {}

    def of(self, key: tuple) -> int:
        return self.table.setdefault(key, len(self.table))


def _cond_of(guard: GuardAttr | None) -> Cond:
    return None if guard is None else (guard.pred, guard.is_negated)


def _one_cond(conds: list[Cond]) -> tuple[bool, Cond]:
    """(whether the values can meet, on which lanes): values known on all
    lanes and on the lanes of one guard meet on that guard's lanes."""
    named = set(c for c in conds if c is not None)
    return len(named) <= 1, next(iter(named), None)


def _source(state: State, numbers: _Numbers, src) -> Known | None:
    if isinstance(src, RegAttr):
        return state.get(src)
    if isinstance(src, GuardAttr):
        known = state.get(src.pred)
        if known is None or not src.is_negated:
            return known
        return numbers.of(("not", known[0])), known[1]
    return numbers.of(("imm", src.data)), None


def _computed(op: Operation, state: State, numbers: _Numbers) -> Known | None:
    """What `op` writes to its destination, None where it may differ between
    the lanes that run it."""
    if isinstance(op, simt.SpecialOp):
        which = op.which.data
        return (numbers.of(("special", which)), None) if which in UNIFORM_SPECIALS else None
    if isinstance(op, simt.LdOp):
        if op.space.data == "param":
            return numbers.of(("param", op.offset.value.data)), None
        if op.space.data == "spill":
            return state.get(("spill", op.offset.value.data))
        return None
    if isinstance(op, simt.AluOp | simt.SetpOp | simt.PredOp):
        kind = op.opcode.data if not isinstance(op, simt.SetpOp) else "setp." + op.cond.data
        srcs = [_source(state, numbers, s) for s in op.srcs.data]
        if any(s is None for s in srcs):
            return None
        ok, cond = _one_cond([c for _, c in srcs])   # type: ignore[misc]
        return (numbers.of((kind, *(n for n, _ in srcs))), cond) if ok else None  # type: ignore[misc]
    return None


def _write(state: State, loc: Hashable, known: Known | None, guard: Cond) -> None:
    """A write of `known` to `loc` by the lanes where `guard` holds (the
    others keep the old value)."""
    old = state.pop(loc, None)
    if known is None:
        return
    ok, cond = _one_cond([known[1], guard])
    if not ok:
        return
    if guard is not None and old is not None and old[0] == known[0]:
        ok, cond = _one_cond([old[1], known[1]])   # the same value where the guard fails
        if not ok:
            return
    state[loc] = known[0], cond


def _forget_conditions_on(state: State, pred: RegAttr) -> None:
    for loc in [loc for loc, (_, c) in state.items() if c is not None and c[0] == pred]:
        del state[loc]


def _step(op: Operation, state: State, numbers: _Numbers) -> None:
    """Advance `state` over one op."""
    if not isinstance(op, simt.MachineOp):
        return
    guard = _cond_of(op.guard)
    if isinstance(op, simt.StOp) and op.space.data == "spill":
        _write(state, ("spill", op.offset.value.data), _source(state, numbers, op.value), guard)
        return
    defs = op.defs()
    known = _computed(op, state, numbers) if len(defs) == 1 else None
    for d in defs:
        _write(state, d, known, guard)
        if d.is_pred:
            _forget_conditions_on(state, d)


def _meet(states: list[State]) -> State:
    first, *rest = states
    return {loc: k for loc, k in first.items() if all(s.get(loc) == k for s in rest)}


def uniform_registers(kernel: simt.KernelOp) -> dict[Operation, State]:
    """For each machine op, the registers (and spill slots, as ("spill", k))
    holding a warp-uniform value just before it, with their value numbers."""
    cfg = Cfg.of(kernel)
    numbers = _Numbers()
    state_in: dict[Block, State | None] = dict.fromkeys(cfg.blocks)
    state_out: dict[Block, State | None] = dict.fromkeys(cfg.blocks)
    changed = True
    while changed:
        changed = False
        for b in cfg.blocks:
            reached = [s for p in cfg.preds[b] if (s := state_out[p]) is not None]
            if b is cfg.blocks[0]:
                reached.append({})              # the kernel's start: nothing known
            new = _meet(reached) if reached else None
            if new != state_in[b]:
                assert new is not None          # states only shrink once reached
                state_in[b], state_out[b], changed = new, _through(b, new, numbers), True
    before: dict[Operation, State] = {}
    for b in cfg.blocks:
        _through(b, state_in[b] or {}, numbers, before)
    return before


def _through(block: Block, state: State, numbers: _Numbers,
             before: dict[Operation, State] | None = None) -> State:
    """The state after `block` from `state` at its entry; `before` records
    the state before each op."""
    state = dict(state)
    for op in block.ops:
        if before is not None:
            before[op] = dict(state)
        _step(op, state, numbers)
    return state


def uniform_addresses(kernel: simt.KernelOp) -> set[Operation]:
    """The global and shared loads whose address every lane at them computes
    alike (their address registers are warp-uniform)."""
    before = uniform_registers(kernel)
    loads = set()
    for op, state in before.items():
        if not isinstance(op, simt.LdOp) or op.space.data not in ("global", "shared"):
            continue
        known = [state.get(r) for r in (op.base, op.base_hi) if r is not None]
        # known where the load runs: on every lane, or where its own guard holds
        if all(k is not None and k[1] in (None, _cond_of(op.guard)) for k in known):
            loads.add(op)
    return loads
