"""`simt-if-convert`: forward branches around single-entry, single-exit regions
become predicated ops.

A predicated region costs no step of its own and no divergence: a
`simt.branch c, ^T, ^F` whose arms are blocks with that branch as their only
predecessor and which meet again right after is rewritten into straight-line
code:

- triangle `c, ^J, ^F` with `^F: ... simt.next ^J`: F's ops guarded by `!c`;
- triangle `c, ^T, ^J` with `^T: ... simt.next ^J`: T's ops guarded by `c`;
- diamond `c, ^T, ^F`, both ending `simt.next ^J`: T's ops by `c`, F's by `!c`.

The block then ends with `simt.next ^J`; a guarded op on a lane whose guard is
false does nothing (a guarded load, store or atomic does not touch memory, so
cannot trap). Regions are converted innermost first. Every other branch stays
a `simt.branch` that the machine runs per lane (min-PC, see
`runtime/simt_engine.py`): loops, regions whose ops are guarded already (a
guard is one predicate, there is no guard of guards), arms that rewrite the
branch's own predicate, regions with several entries or exits.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Block
from xdsl.passes import ModulePass

from qgc.dialects import simt


def _next_of(block: Block) -> Block | None:
    term = block.last_op
    return term.dest if isinstance(term, simt.NextOp) else None


def _arms(kernel: simt.KernelOp, block: Block, term: simt.BranchOp,
          preds: dict[Block, list[Block]]):
    """The arms (block, guard) and the join of a convertible branch, or None."""
    c, t, f = term.cond, term.then_dest, term.else_dest
    entry = kernel.body.blocks.first

    def arm_ok(arm: Block) -> bool:
        return arm is not block and arm is not entry and preds[arm] == [block]

    if t is f:
        return [], t
    if arm_ok(f) and _next_of(f) is t:
        return [(f, c.inverted())], t
    if arm_ok(t) and _next_of(t) is f:
        return [(t, c)], f
    if arm_ok(t) and arm_ok(f) and _next_of(t) is not None and _next_of(t) is _next_of(f) \
            and _next_of(t) not in (t, f, block):
        return [(t, c), (f, c.inverted())], _next_of(t)
    return None


def _convert_one(kernel: simt.KernelOp) -> bool:
    preds = simt.predecessors(kernel)
    for block in kernel.body.blocks:
        term = block.last_op
        if not isinstance(term, simt.BranchOp):
            continue
        found = _arms(kernel, block, term, preds)
        if found is None:
            continue
        arms, join = found
        if not all(_guardable(op, term) for arm, _ in arms for op in list(arm.ops)[:-1]):
            continue
        for arm, guard in arms:
            for op in list(arm.ops)[:-1]:
                op.detach()
                op.properties["guard"] = guard
                block.insert_op_before(op, term)
        nxt = simt.NextOp(join)
        nxt.location = term.location
        block.insert_op_before(nxt, term)
        term.detach()
        term.erase()
        for arm, _ in arms:
            for op in list(arm.ops):
                op.detach()
                op.erase()
            kernel.body.detach_block(arm)
            arm.erase()
        return True
    return False


def _guardable(op, term: simt.BranchOp) -> bool:
    """An unguarded op that leaves the branch's predicate alone."""
    assert isinstance(op, simt.MachineOp)
    return op.guard is None and term.cond.pred not in op.defs()


def if_convert(kernel: simt.KernelOp) -> None:
    simt.remove_unreachable(kernel)
    while _convert_one(kernel):
        pass


@dataclass(frozen=True)
class SimtIfConvertPass(ModulePass):
    name = "simt-if-convert"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for kernel in simt.kernels_of(op):
            if_convert(kernel)
