"""Sub-word (8- and 16-bit) values: zero-extended in 32-bit registers, each op
that could carry out of the width masks its result (see `legalize`)."""

from __future__ import annotations

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr
from qgc.machine.opcodes import ALU_OPCODES
from qgc.passes.ptx_to_simt import legalize as lg
from qgc.passes.ptx_to_simt.common import (
    SETP_SIGNED,
    SETP_UNSIGNED,
    SPECIAL_NAMES,
    unsupported,
    why_not_32,
)
from qgc.passes.ptx_to_simt.legalize import Emitter, to_i32

#: sub-word ops by how they read their sources: as the low bits (the result's
#: low bits do not depend on the rest) or sign-extended
_SUB_PLAIN = {"add": "add", "sub": "sub", "mul": "mul.lo", "and": "and", "or": "or",
              "xor": "xor", "not": "not", "shl": "shl", "mov": "mov", "selp": "selp"}
_SUB_BY_SIGN = {"shr": "shr", "min": "min", "max": "max", "div": "div", "rem": "rem"}
#: results that stay within the width of their sources
_FITS = {"and", "or", "xor", "shr.u", "selp", "mov", "min.u", "max.u", "div.u", "rem.u"}


class SubwordOps:
    """8- and 16-bit values in 32-bit registers."""

    def subword(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """8- and 16-bit arithmetic, compares, conversions, widening and
        high-half multiplies on registers that hold their value zero-extended (a signed
        value written to a wider register is sign-extended first, as PTX does)."""
        opc, args = inst.op, inst.operands_decoded
        base, mods, t = opc.base, opc.modifiers, opc.type or ""
        e = Emitter(self.fresh, guard)
        if base == "cvt" and len(opc.types) == 2 and not mods:
            dt, at = opc.types
            signed = at[0] == "s"
            self.put_sub(inst, e, args[0], dt, self.get_sub(inst, e, args[1], at, signed),
                         None if signed else at)
            return e.ops
        if base == "mul" and mods in (("wide",), ("hi",)):
            a, b = (self.get_sub(inst, e, x, t, t[0] == "s") for x in args[1:])
            product = e.alu("mul.lo", [a, b])       # exact: 16 × 16 bits fit in 32
            if mods == ("wide",):
                self.put_sub(inst, e, args[0], "s32", product, "s32")
            else:   # the high half (clang's division of a 16-bit value by a constant)
                high = e.alu("shr.u", [product, ptx.TYPE_BITS[t]])
                self.put_sub(inst, e, args[0], t, high, None)
            return e.ops
        if base == "setp" and len(mods) == 1 and len(args) == 3:
            table = SETP_SIGNED if t[0] == "s" else SETP_UNSIGNED
            p = args[0]
            if mods[0] not in table or not isinstance(p, ptx.Reg) or self.bits(p.name) != 1:
                raise unsupported(inst, inst.opcode.data)
            a, b = (self.get_sub(inst, e, x, t, t[0] == "s") for x in args[1:])
            e.ops.append(simt.SetpOp(table[mods[0]], self.vreg(p.name), a, b, guard))
            return e.ops
        sign = ("s" if t[0] == "s" else "u") if base in _SUB_BY_SIGN else None
        machine = _SUB_PLAIN.get(base) or (f"{_SUB_BY_SIGN[base]}.{sign}" if sign else None)
        if machine is None or mods not in ((), ("lo",)) or (mods and base != "mul") or \
                machine not in ALU_OPCODES or \
                len(args) != ALU_OPCODES[machine].arity + 1:
            raise unsupported(inst, inst.opcode.data)
        srcs = [self.vreg(a.name) if machine == "selp" and i == 2 and isinstance(a, ptx.Reg)
                else self.get_sub(inst, e, a, t, sign == "s" and i < 1 + (base != "shr"))
                for i, a in enumerate(args[1:])]
        value = e.alu(machine, srcs)
        self.put_sub(inst, e, args[0], t, value, t if machine in _FITS else None)
        return e.ops

    def vector_mov(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """`mov.b32 d, {a, b}` / `mov.b32 {a, b}, s`: halves or bytes, low
        first, packed by shifts and ors, unpacked by shifts and masks; `_`
        skips an element (`mov.b64`'s halves: `WideOps.halves`)."""
        dst, src = inst.operands_decoded
        vec = src if isinstance(src, ptx.Vec) else dst
        if inst.op.modifiers or inst.op.type != "b32" or not isinstance(vec, ptx.Vec) or \
                isinstance(src, ptx.Vec) == isinstance(dst, ptx.Vec) or \
                len(vec.items) not in (2, 4):
            raise unsupported(inst, inst.opcode.data)
        width = 32 // len(vec.items)
        e = Emitter(self.fresh, guard)
        items = [(i, x) for i, x in enumerate(vec.items) if not isinstance(x, ptx.Sym)]
        if vec is src:
            value: lg.Src = 0
            for i, x in items:
                part = self.get_sub(inst, e, x, f"b{width}", False)
                value = e.alu("or", [value, e.alu("shl", [part, width * i])])
            e.assign(self.dst32(inst, dst), value)
            return e.ops
        word = self.src32(inst, src, e.ops)
        for i, x in items:
            self.put_sub(inst, e, x, f"b{width}", e.alu("shr.u", [word, width * i]), None)
        return e.ops

    def get_sub(self, inst: ptx.InstOp, e: Emitter, operand: ptx.Operand, t: str,
                signed: bool) -> lg.Src:
        """A source read as a `t`-wide value, sign-extended to 32 bits if asked."""
        bits = ptx.TYPE_BITS[t]
        if isinstance(operand, ptx.Imm) and not operand.is_float:
            value = operand.value & ((1 << bits) - 1)
            return to_i32(value - (1 << bits) if signed and value >> (bits - 1) else value)
        if not isinstance(operand, ptx.Reg) or operand.negated or \
                self.bits(operand.name) not in (8, 16, 32, 64):
            raise unsupported(inst, inst.opcode.data, why_not_32(operand, self))
        if operand.name in SPECIAL_NAMES:
            raise unsupported(inst, inst.opcode.data, f"special register {operand.name}")
        width = self.bits(operand.name)
        # a 64-bit register (a store of its low bits) reads as its low word
        reg = self.pair_of(inst, e, operand)[0] if width == 64 else self.vreg(operand.name)
        if bits >= 32:
            return reg
        if signed:
            return e.alu("bfe.s", [reg, 0, bits])
        return reg if width <= bits else e.alu("and", [reg, (1 << bits) - 1])

    def put_sub(self, inst: ptx.InstOp, e: Emitter, operand: ptx.Operand, t: str,
                value: lg.Src, fits: str | None) -> None:
        """Write a `t`-wide result (computed in 32 bits; `fits`: already within
        that type's width) to a register of its width or wider."""
        if not isinstance(operand, ptx.Reg) or self.bits(operand.name) not in (8, 16, 32):
            raise unsupported(inst, inst.opcode.data, why_not_32(operand, self))
        width, bits = self.bits(operand.name), ptx.TYPE_BITS[t]
        if bits < width and t[0] == "s":
            value = e.alu("bfe.s", [value, 0, bits])
            bits = 32
        keep = min(width, bits)
        if keep < 32 and (fits is None or ptx.TYPE_BITS[fits] > keep):
            value = e.alu("and", [value, (1 << keep) - 1])
        e.assign(self.vreg(operand.name), value)
