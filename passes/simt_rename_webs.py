"""`simt-rename-webs`: SSA construction for the machine's virtual registers.

Instruction selection writes a PTX register, and every temporary, to one
virtual register however often it is redefined, so a register that PTX reuses
for unrelated values gives one long live range to the allocator. This pass
splits every virtual register into its *webs*: the definitions and uses that
reaching definitions connect (a use joins every definition that may reach it).
Each web gets a virtual register of its own, numbered in order of first
appearance. This is what SSA construction followed by coalescing each φ with
its operands gives, without φs in the IR: the machine's registers are mutable
locations, and a web is exactly the set of SSA values that one φ-free
register can hold.

A *guarded* write keeps the old value on the lanes whose guard is false, so it
does not kill the definitions before it: a later use reaches both, and they
join one web. Reads of a register no definition reaches (the kernel's entry
value) form a web of their own. The analyses are those of `qgc.analysis.dataflow`
(per lane, as each lane follows the blocks like a scalar thread).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from qgc.analysis.dataflow import (
    Cfg,
    Definition,
    reaching_definitions,
    register_access,
    step_definitions,
)
from qgc.dialects import simt
from qgc.dialects.simt import GuardAttr, RegAttr


class Webs:
    """Union-find over definitions."""

    def __init__(self) -> None:
        self.parent: dict[Definition, Definition] = {}

    def find(self, d: Definition) -> Definition:
        self.parent.setdefault(d, d)
        while self.parent[d] != d:
            self.parent[d] = self.parent[self.parent[d]]
            d = self.parent[d]
        return d

    def join(self, defs: frozenset[Definition]) -> Definition:
        first, *rest = defs
        root = self.find(first)
        for d in rest:
            self.parent[self.find(d)] = root
        return root


def _virtual(regs: list[RegAttr]) -> list[Hashable]:
    return [r for r in regs if r.is_virtual]


def virtual_access(op: Operation) -> tuple[list[Hashable], list[Hashable]]:
    uses, defs = register_access(op)
    return _virtual(uses), _virtual(defs)  # type: ignore[arg-type]


def join_webs(kernel: simt.KernelOp, webs: Webs) -> dict[tuple[Operation, Hashable], Definition]:
    """Join the definitions that reach each use; returns a definition of each
    use's web."""
    cfg = Cfg.of(kernel)
    reach = reaching_definitions(cfg, virtual_access)
    use_web: dict[tuple[Operation, Hashable], Definition] = {}
    for block in cfg.blocks:
        state = dict(reach[block])
        for op in block.ops:
            uses, defs = virtual_access(op)
            for reg in uses:
                reaching = state.get(reg) or frozenset({Definition(None, reg)})
                use_web[(op, reg)] = webs.join(reaching)
            for reg in defs:
                webs.find(Definition(op, reg))
            step_definitions(op, virtual_access, state)
    return use_web


def rename_webs(kernel: simt.KernelOp) -> None:
    webs = Webs()
    use_web = join_webs(kernel, webs)
    names: dict[Definition, RegAttr] = {}
    counters = {"v": 0, "vp": 0}

    def name_of(d: Definition, kind: str) -> RegAttr:
        root = webs.find(d)
        if root not in names:
            names[root] = RegAttr(kind, counters[kind])
            counters[kind] += 1
        return names[root]

    for block in kernel.body.blocks:
        for op in block.ops:
            uses, defs = virtual_access(op)
            use_map = {r: name_of(use_web[(op, r)], r.kind.data) for r in uses}
            def_map = {r: name_of(Definition(op, r), r.kind.data) for r in defs}
            _rename(op, use_map, def_map)


def _rename(op: Operation, use_map: dict, def_map: dict) -> None:
    if isinstance(op, simt.BranchOp):
        cond = op.cond
        op.properties["cond"] = GuardAttr(use_map.get(cond.pred, cond.pred), cond.is_negated)
    elif isinstance(op, simt.MachineOp):
        written = op.def_props()
        op.replace_regs(use_map)
        for name, reg in written.items():
            op.properties[name] = def_map[reg]


@dataclass(frozen=True)
class SimtRenameWebsPass(ModulePass):
    name = "simt-rename-webs"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for kernel in simt.kernels_of(op):
            rename_webs(kernel)
