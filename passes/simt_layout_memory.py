"""`simt-layout-memory`: place each CTA's `.shared` variables in its window.

Instruction selection declares the kernel's `.shared` variables
(`shared_vars (tile: 64 align 4, s: extern align 16)`) and names them by
`simt.shared_addr vN, "tile"`. This pass lays the window out as the `ref`
engine does (and as PTX's own layout would): the static variables in
declaration order, each at the next multiple of its alignment, then every
`extern` array at one offset after them, sized by the launch's dynamic shared
bytes. The kernel then records `shared_words` (static words) and
`dynamic_shared` (the word where the extern arrays start).

Each `simt.shared_addr` becomes a constant: when its register has no other
definition and every use is the base of a shared access, the offset is folded
into those accesses (`shared[v3 + 8]` → `shared[136]`) and the op is dropped;
otherwise it becomes `simt.alu "mov" vN, OFFSET` under its guard.

The rest of the machine's memory map is fixed, not chosen: the parameter area
(parameters, bounds pairs, high words of 64-bit scalars; `simt.KernelOp`)
leads, the launch places the buffers, the shared windows and the spill area
after it (docs/machine.md, "Memory").
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.dataflow import register_defs, register_uses
from qgc.dialects import ptx, simt
from qgc.dialects.simt import RegAttr


def window_offsets(shared: list[simt.SharedVar]) -> tuple[dict[str, int], int, int | None]:
    """Byte offset of each variable, the static bytes, and the byte offset of
    the extern arrays (None: there are none)."""
    offsets: dict[str, int] = {}
    end = 0
    for name, size, align in shared:
        if size:
            offsets[name] = -(-end // align) * align
            end = offsets[name] + size
    externs = [(name, align) for name, size, align in shared if not size]
    dynamic = None
    if externs:
        align = max(a for _, a in externs)
        dynamic = -(-end // align) * align
        offsets.update((name, dynamic) for name, _ in externs)
    return offsets, end, dynamic


def _foldable(op: simt.SharedAddrOp, defs: Counter, users: dict[RegAttr, list]
              ) -> list[simt.MemoryOp]:
    """The shared accesses whose base is the op's register, when those are
    its only uses and the op its only definition; else []."""
    reg = op.dst
    if defs[reg] != 1:
        return []
    uses = users.get(reg, [])
    if all(isinstance(u, simt.MemoryOp) and u.space.data == "shared" and u.base == reg and
           register_uses(u).count(reg) == 1 for u in uses):
        return uses
    return []


def layout_memory(kernel: simt.KernelOp) -> None:
    if kernel.shared_vars is None:
        return
    offsets, static_bytes, dynamic = window_offsets(simt.shared_vars_of(kernel.shared_vars))
    ops = [op for block in kernel.body.blocks for op in block.ops]
    defs = Counter(r for op in ops for r in register_defs(op))
    users: dict[RegAttr, list] = defaultdict(list)
    for op in ops:
        for r in dict.fromkeys(register_uses(op)):
            users[r].append(op)
    for op in ops:
        if not isinstance(op, simt.SharedAddrOp):
            continue
        offset = offsets[op.var.data]
        folded = _foldable(op, defs, users)
        for user in folded:
            del user.properties["base"]
            user.properties["offset"] = IntegerAttr(user.offset.value.data + offset, i64)
        if not folded:
            mov = simt.AluOp("mov", op.dst, [offset], op.guard)
            mov.location = op.location
            op.parent_block().insert_op_before(mov, op)
        op.detach()
        op.erase()
    del kernel.properties["shared_vars"]
    if static_bytes:
        kernel.set_limit("shared_words", (static_bytes + 3) // 4)
    if dynamic is not None:
        kernel.set_limit("dynamic_shared", dynamic // 4)


def check_laid_out(kernel: simt.KernelOp, what: str) -> None:
    """Passes and engines after this one need placed shared variables."""
    if kernel.shared_vars is not None:
        raise DiagnosticException(f"{ptx.location_prefix(kernel)}error: kernel "
                                  f"'{kernel.kernel_name}' has .shared variables without a "
                                  f"layout; run simt-layout-memory before {what}")


@dataclass(frozen=True)
class SimtLayoutMemoryPass(ModulePass):
    name = "simt-layout-memory"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for kernel in simt.kernels_of(op):
            layout_memory(kernel)

