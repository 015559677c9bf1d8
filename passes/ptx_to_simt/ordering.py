"""Memory fences and warp syncs: `membar`, `fence`, `bar.warp.sync`.

On the machine one warp runs a step at a time, its lanes together, and a
step's stores and atomics are memory before the next step starts (in lane
order within an atomic): every access is ordered as the program and the
schedule run it, so a fence has nothing left to order and selects to no
op. `bar.warp.sync` (`__syncwarp`) neither: a warp's lanes reconverge by
min-PC, so no lane runs past the sync while a lane of the warp still has
earlier code to run (docs/machine.md, "Memory order").
"""

from __future__ import annotations

from xdsl.ir import Operation

from qgc.dialects import ptx
from qgc.passes.ptx_to_simt.common import unsupported

#: Fence modifiers the machine's order already satisfies (not the proxy fences
#: of asynchronous copies and tensor memory, which the machine lacks).
_SEMANTICS = {"sc", "acq_rel"}
_SCOPES = {"cta", "cluster", "gl", "gpu", "sys"}


class Ordering:
    """Fences and warp syncs: no machine ops."""

    def ordering(self, inst: ptx.InstOp) -> list[Operation]:
        opc = inst.op
        mods = set(opc.modifiers)
        if opc.base == "bar":                # bar.warp.sync mask
            if mods - {"warp", "sync"} or len(inst.operands_decoded) != 1:
                raise unsupported(inst, inst.opcode.data)
            return []
        scopes = mods & _SCOPES
        if len(scopes) != 1 or mods - _SCOPES - (_SEMANTICS if opc.base == "fence" else set()) \
                or inst.operands_decoded:
            raise unsupported(inst, inst.opcode.data,
                              "a fence other than membar.{cta,gl,sys} or "
                              "fence{.sc,.acq_rel}.{cta,cluster,gpu,sys}")
        return []
