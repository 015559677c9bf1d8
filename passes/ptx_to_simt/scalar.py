"""32-bit scalar values: operands, `mov`, predicate logic and `setp`."""

from __future__ import annotations

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.passes.ptx_to_simt.common import (
    INT32,
    SETP_SIGNED,
    SETP_UNSIGNED,
    SPECIAL_NAMES,
    WIDE,
    WORD32,
    unsupported,
    why_not_32,
)
from qgc.passes.ptx_to_simt.legalize import to_i32


class ScalarOps:
    """32-bit operands, moves, predicate logic and 32-bit compares."""

    def dst32(self, inst: ptx.InstOp, operand: ptx.Operand) -> RegAttr:
        if not isinstance(operand, ptx.Reg) or self.bits(operand.name) != 32:
            raise unsupported(inst, inst.opcode.data, why_not_32(operand, self))
        return self.vreg(operand.name)

    def src32(self, inst: ptx.InstOp, operand: ptx.Operand,
              pre: list[Operation]) -> RegAttr | int:
        if isinstance(operand, ptx.Imm):
            if operand.is_float and operand.bits != 32:
                raise unsupported(inst, inst.opcode.data, "a 64-bit float immediate")
            return to_i32(operand.value)
        if isinstance(operand, ptx.Sym) and operand.name == "WARP_SZ":
            return simt.LANES
        if isinstance(operand, ptx.Reg) and not operand.negated:
            if operand.name in SPECIAL_NAMES:
                tmp = self.fresh()
                op = simt.SpecialOp(tmp, SPECIAL_NAMES[operand.name])
                op.location = inst.location
                pre.append(op)
                return tmp
            if self.bits(operand.name) == 32:
                return self.vreg(operand.name)
        raise unsupported(inst, inst.opcode.data, why_not_32(operand, self))

    def mov(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        t = inst.op.type
        dst, src = inst.operands_decoded
        if t not in WORD32 or inst.op.modifiers:
            raise unsupported(inst, inst.opcode.data)
        d = self.dst32(inst, dst)
        if isinstance(src, ptx.Reg) and src.name in SPECIAL_NAMES:
            return [simt.SpecialOp(d, SPECIAL_NAMES[src.name], guard)]
        if isinstance(src, ptx.Sym) and src.name in self.shared:
            return [simt.SharedAddrOp(d, src.name, guard)]
        if isinstance(src, ptx.Sym) and src.name in self.locals:
            return [simt.AluOp("mov", d, [self.locals[src.name]], guard)]
        pre: list[Operation] = []
        return pre + [simt.AluOp("mov", d, [self.src32(inst, src, pre)], guard)]

    def pred_logic(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """and/or/xor/not/mov on predicates (`and.pred %p3, %p1, %p2`)."""
        args = inst.operands_decoded
        if inst.op.modifiers or len(args) != simt.PRED_ARITY[inst.op.base] + 1:
            raise unsupported(inst, inst.opcode.data)
        dst = args[0]
        if not isinstance(dst, ptx.Reg) or dst.negated or self.bits(dst.name) != 1:
            raise unsupported(inst, inst.opcode.data, "a non-predicate destination")
        srcs: list[GuardAttr | int] = []
        for a in args[1:]:
            if isinstance(a, ptx.Imm) and not a.is_float:   # nvcc writes true as -1
                srcs.append(int(a.value != 0))
            elif isinstance(a, ptx.Reg) and self.bits(a.name) == 1:
                srcs.append(GuardAttr(self.vreg(a.name), a.negated))
            else:
                raise unsupported(inst, inst.opcode.data, "a non-predicate source")
        return [simt.PredOp(inst.op.base, self.vreg(dst.name), srcs, guard)]

    def setp(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        opc = inst.op
        args = inst.operands_decoded
        if opc.type in WIDE:
            return self.setp64(inst, guard)
        cond = self.float_cond(inst) if opc.type == "f32" else _int_cond(inst)
        p = args[0]
        if len(args) != 3 or not isinstance(p, ptx.Reg) or self.bits(p.name) != 1:
            raise unsupported(inst, inst.opcode.data, "a dual or non-predicate destination")
        pre: list[Operation] = []
        a, b = self.src32(inst, args[1], pre), self.src32(inst, args[2], pre)
        return pre + [simt.SetpOp(cond, self.vreg(p.name), a, b, guard)]


def _int_cond(inst: ptx.InstOp) -> str:
    """The `simt.setp` condition of `setp.CMP.{s,u,b}32`."""
    opc = inst.op
    table = SETP_SIGNED if opc.type == "s32" else SETP_UNSIGNED
    if opc.type not in INT32 or len(opc.modifiers) != 1 or opc.modifiers[0] not in table or \
            (opc.type == "b32" and opc.modifiers[0] not in ("eq", "ne")):
        raise unsupported(inst, inst.opcode.data)
    return table[opc.modifiers[0]]
