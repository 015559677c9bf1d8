"""Warp ops: `shfl.sync`, `vote.sync` and `activemask` on the machine's lanes."""

from __future__ import annotations

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr
from qgc.passes.ptx_to_simt.common import unsupported


class WarpOps:
    """Warp-level ops: shuffles, votes and the active mask."""

    def warp_op(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """shfl.sync.{up,down,bfly,idx}.b32, vote.sync.{any,all,uni,ballot},
        activemask.b32 on the 4 lanes; the member mask is not modelled (as `ref`)."""
        opc, args = inst.op, inst.operands_decoded
        mode = [m for m in opc.modifiers if m not in ("sync",)]
        sync = "sync" in opc.modifiers
        if opc.base == "activemask" and not opc.modifiers and len(args) == 1:
            return [simt.WarpOp("activemask", self.dst32(inst, args[0]), [], guard)]
        if len(mode) != 1 or len(args) != (2 if opc.base == "vote" else 4) + sync:
            raise unsupported(inst, inst.opcode.data)
        if opc.base == "shfl":
            pre: list[Operation] = []
            srcs = [self.src32(inst, a, pre) for a in args[1:4]]
            dst = args[0]
            if isinstance(dst, ptx.Pair):       # d|p: p says the source lane was in range
                p = dst.second
                if not isinstance(p, ptx.Reg) or self.bits(p.name) != 1:
                    raise unsupported(inst, inst.opcode.data)
                pre.append(simt.WarpOp(f"shfl.{mode[0]}.p", self.vreg(p.name), srcs[1:],
                                       guard))
                dst = dst.first
            return pre + [simt.WarpOp(f"shfl.{mode[0]}", self.dst32(inst, dst), srcs, guard)]
        vote = args[1]
        if not isinstance(vote, ptx.Reg) or self.bits(vote.name) != 1:
            raise unsupported(inst, inst.opcode.data, "a non-predicate vote")
        cond = GuardAttr(self.vreg(vote.name), vote.negated)
        if mode[0] == "ballot":
            return [simt.WarpOp("ballot", self.dst32(inst, args[0]), [cond], guard)]
        dst = args[0]
        if not isinstance(dst, ptx.Reg) or self.bits(dst.name) != 1:
            raise unsupported(inst, inst.opcode.data)
        return [simt.WarpOp(mode[0], self.vreg(dst.name), [cond], guard)]
