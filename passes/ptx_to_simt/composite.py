"""32-bit PTX instructions the machine runs as a few of its ALU ops:
`sad` (sum of absolute differences) and `dp4a` (a dot product of four bytes
each, as int8 inference code calls `__dp4a`)."""

from __future__ import annotations

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.passes.ptx_to_simt.common import unsupported


class CompositeOps:
    """`sad.{s32,u32}` and `dp4a.{s32,u32}.{s32,u32}`."""

    def sad(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """d = c + |a − b|: max(a, b) − min(a, b) (the difference's bits are
        the same signed or not), plus c."""
        sign = {"s32": "s", "u32": "u"}.get(inst.op.type or "")
        args = inst.operands_decoded
        if sign is None or inst.op.modifiers or len(args) != 4:
            raise unsupported(inst, inst.opcode.data)
        pre: list[Operation] = []
        a, b, c = (self.src32(inst, x, pre) for x in args[1:])
        high, low = self.fresh(), self.fresh()
        return pre + [simt.AluOp(f"max.{sign}", high, [a, b], guard),
                      simt.AluOp(f"min.{sign}", low, [a, b], guard),
                      simt.AluOp("sub", high, [high, low], guard),
                      simt.AluOp("add", self.dst32(inst, args[0]), [high, c], guard)]

    def dp4a(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """d = c + Σ a.byte[i] · b.byte[i], each byte sign- or zero-extended
        as its operand's type says (`bfe`), in 32-bit arithmetic."""
        types = inst.op.types
        args = inst.operands_decoded
        if inst.op.modifiers or len(types) != 2 or not set(types) <= {"s32", "u32"} or \
                len(args) != 4:
            raise unsupported(inst, inst.opcode.data)
        pre: list[Operation] = []
        a, b, c = (self.src32(inst, x, pre) for x in args[1:])
        total: RegAttr | int = c
        ops: list[Operation] = []
        for byte in range(4):
            x, y, t = self.fresh(), self.fresh(), self.fresh()
            ops += [simt.AluOp(f"bfe.{types[0][0]}", x, [a, 8 * byte, 8], guard),
                    simt.AluOp(f"bfe.{types[1][0]}", y, [b, 8 * byte, 8], guard),
                    simt.AluOp("mad.lo", t, [x, y, total], guard)]
            total = t
        return pre + ops + [simt.AluOp("mov", self.dst32(inst, args[0]), [total], guard)]
