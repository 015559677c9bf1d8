"""A CTA's shared window: where its `.shared` variables are placed.

The static variables in declaration order, each at the next multiple of its
alignment, then every `extern` array at one offset after them, sized by the
launch's dynamic shared bytes: as the `ref` engine places them (and as PTX's
own layout would). `place_shared_variables` applies the rule to a kernel: the
`simt-layout-memory` pass runs it, and the `simt` engine on a copy of a kernel
it is asked to run before that pass.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from xdsl.dialects.builtin import IntegerAttr, i64

from qgc.analysis.dataflow import register_defs, register_uses
from qgc.dialects import simt
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


def place_shared_variables(kernel: simt.KernelOp) -> None:
    """Each `simt.shared_addr` becomes its variable's offset: folded into the
    shared accesses that are its register's only uses, else a `mov`; the
    kernel records `shared_words` and `dynamic_shared`."""
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
