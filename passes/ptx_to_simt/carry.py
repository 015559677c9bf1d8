"""Extended-precision arithmetic on 32-bit words: `add.cc`/`addc`,
`sub.cc`/`subc` and `mad.cc`/`madc`, as multi-word integer code and CUDA's
own headers write them in inline asm (the `sinf` argument reduction clang
compiles). PTX's carry flag CC.CF is a 0/1 word of each thread, the register
`%cc.cf`: the `.cc` forms write it, the `c` forms read it."""

from __future__ import annotations

from xdsl.ir import Operation

from qgc.dialects import ptx
from qgc.dialects.simt import GuardAttr
from qgc.passes.ptx_to_simt.common import INT32, unsupported
from qgc.passes.ptx_to_simt.legalize import Emitter, Src

CARRY_FLAG = "%cc.cf"
_WITH_CARRY_IN = ("addc", "subc", "madc")


def is_carry_op(inst: ptx.InstOp) -> bool:
    base = inst.op.base
    return base in _WITH_CARRY_IN or base in ("add", "sub", "mad") and "cc" in inst.op.modifiers


class CarryOps:
    """The carry-flag instructions, each its sum (difference) and carry-out."""

    def carry_op(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        opc, args = inst.op, inst.operands_decoded
        base, mods, t = opc.base, opc.modifiers, opc.type
        if t not in INT32:
            raise unsupported(inst, inst.opcode.data, "carry arithmetic on 64-bit registers")
        self.reg_types.setdefault(CARRY_FLAG, "u32")
        flag = self.vreg(CARRY_FLAG)
        d = self.dst32(inst, args[0])
        e = Emitter(self.fresh, guard, (d, flag))
        srcs = [self.src32(inst, a, e.ops) for a in args[1:]]
        carry_in: Src = flag if base in _WITH_CARRY_IN else 0
        if base.startswith("mad"):
            if ("lo" in mods) == ("hi" in mods):
                raise unsupported(inst, inst.opcode.data)
            half = "mul.lo" if "lo" in mods else "mul.hi.s" if t == "s32" else "mul.hi.u"
            srcs = [e.alu(half, srcs[:2]), srcs[2]]
        value, carry_out = (_subtract if base.startswith("sub") else _add)(e, *srcs, carry_in)
        e.assign(d, value)
        if "cc" in mods:
            e.assign(flag, carry_out)
        return e.ops


def _add(e: Emitter, a: Src, b: Src, carry_in: Src) -> tuple[Src, Src]:
    """`a + b + carry_in` and its carry-out (the two adds never both carry)."""
    total, carry = e.add_carry(a, b)
    if carry_in == 0:
        return total, carry
    total, second = e.add_carry(total, carry_in)
    return total, e.alu("or", [carry, second])


def _subtract(e: Emitter, a: Src, b: Src, borrow_in: Src) -> tuple[Src, Src]:
    """`a - b - borrow_in` and its borrow-out (the two subtractions never both
    borrow)."""
    def borrow(x: Src, y: Src) -> Src:
        return e.alu("selp", [1, 0, e.setp("lt.u", x, y)])
    difference, first = e.alu("sub", [a, b]), borrow(a, b)
    if borrow_in == 0:
        return difference, first
    return e.alu("sub", [difference, borrow_in]), e.alu("or", [first,
                                                              borrow(difference, borrow_in)])
