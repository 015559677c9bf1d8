"""PTX basic blocks and the terminators that end machine blocks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import Block, Operation

from qgc.dialects import ptx, simt
from qgc.passes.ptx_to_simt.common import unsupported

NO_DEST = {"st", "red", "bra", "brx", "ret", "exit", "bar", "barrier", "membar", "fence",
           "trap", "brkpt", "prefetch", "prefetchu", "call", "nanosleep", "pmevent"}


@dataclass
class PtxBlock:
    labels: list[str] = field(default_factory=list)
    insts: list[ptx.InstOp] = field(default_factory=list)


class ControlFlow:
    """Terminators: branches, returns and barriers (`Selector.run` builds the blocks)."""

    def terminator(self, inst: ptx.InstOp, by_label: dict[str, Block], fallthrough) -> Operation:
        base = inst.op.base
        guard = self.guard(inst)
        if base in ("bar", "barrier"):
            args = inst.operands_decoded
            if inst.opcode.data not in ("bar.sync", "barrier.sync", "bar.sync.aligned",
                                        "barrier.sync.aligned") or guard is not None or \
                    len(args) != 1 or not isinstance(args[0], ptx.Imm) or args[0].value != 0:
                raise unsupported(inst, inst.opcode.data, "only `bar.sync 0` (every thread "
                                  "of the CTA, barrier 0)")
            term: Operation = simt.BarrierOp(fallthrough())
        elif base in ("ret", "exit"):
            # a guarded return sends its lanes to an exit block, the rest on
            term = simt.ExitOp() if guard is None else \
                simt.BranchOp(guard, self.exit_target(), fallthrough())
        else:
            if inst.opcode.data not in ("bra", "bra.uni"):
                raise unsupported(inst, inst.opcode.data)
            target = inst.operands_decoded[0] if inst.args.data else None
            if not isinstance(target, ptx.Sym) or target.name not in by_label:
                raise unsupported(inst, inst.opcode.data, "an indirect branch")
            dest = by_label[target.name]
            term = simt.NextOp(dest) if guard is None else \
                simt.BranchOp(guard, dest, fallthrough())
        term.location = inst.location
        return term


def dests(inst: ptx.InstOp) -> list[str]:
    if inst.op.base in NO_DEST or not inst.args.data:
        return []
    first = inst.operands_decoded[0]
    if isinstance(first, ptx.Reg):
        return [first.name]
    if isinstance(first, ptx.Pair):
        return [first.first.name, first.second.name]
    if isinstance(first, ptx.Vec):
        return [r.name for r in first.items if isinstance(r, ptx.Reg)]
    return []


def ends_block(inst: ptx.InstOp) -> bool:
    """Branches, returns and CTA barriers end a block; `bar.warp.sync` does
    not (the warp's lanes run in step: `ordering`)."""
    return inst.op.base in ("bra", "ret", "exit", "brx", "bar", "barrier") and \
        not is_warp_sync(inst)


def is_warp_sync(inst: ptx.InstOp) -> bool:
    return inst.op.base == "bar" and "warp" in inst.op.modifiers


def has_backward_branch(items: Sequence[ptx.LabelOp | ptx.InstOp]) -> bool:
    seen: set[str] = set()
    for op in items:
        if isinstance(op, ptx.LabelOp):
            seen.add(op.label.data)
        elif op.op.base in ("bra", "brx"):
            if any(isinstance(a, ptx.Sym) and a.name in seen for a in op.operands_decoded):
                return True
    return False


def basic_blocks(items: Sequence[ptx.LabelOp | ptx.InstOp]) -> list[PtxBlock]:
    blocks = [PtxBlock()]
    for op in items:
        cur = blocks[-1]
        if isinstance(op, ptx.LabelOp):
            if cur.insts:
                cur = PtxBlock()
                blocks.append(cur)
            cur.labels.append(op.label.data)
        else:
            cur.insts.append(op)
            if ends_block(op):
                blocks.append(PtxBlock())
    if not blocks[-1].insts and not blocks[-1].labels:
        blocks.pop()
    return blocks
