"""Address arithmetic: a pointer plus a byte offset in words of its buffer, a
shared address plus an offset in 32 bits, and 64-bit integer add/sub."""

from __future__ import annotations

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.passes.ptx_to_simt import legalize as lg
from qgc.passes.ptx_to_simt.common import unsupported
from qgc.passes.ptx_to_simt.legalize import Emitter, Wide, to_i32
from qgc.passes.ptx_to_simt.wide import HoldsPointerValues


class AddressArithmetic:
    """64-bit add/sub on pointers and shared addresses, narrowed to 32 bits."""

    def shared_add(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """A shared-window (or local-frame) byte address plus (or minus) a byte
        offset, in 32 bits."""
        base = inst.op.base
        dst, a_op, b_op = inst.operands_decoded
        a = self.wide_src(inst, a_op)
        pre: list[Operation] = []
        if isinstance(b_op, ptx.Imm) and not b_op.is_float:
            offset: RegAttr | int = to_i32(b_op.value)
            if offset == 0:
                return self.view(inst, guard, a)
        else:
            b = self.wide_src(inst, b_op)
            if base == "add" and b.kind in ("shared", "local"):
                a, b = b, a
            if a.kind not in ("shared", "local") or b.kind != "int":
                raise unsupported(inst, inst.opcode.data, f"64-bit arithmetic on two {a.kind} "
                                  "addresses")
            offset = b.vreg
            if b.scale != 1:
                offset = self.fresh()
                pre.append(simt.AluOp("mul.lo", offset, [b.vreg, b.scale], guard))
        own = self.own_vreg(dst.name)
        self.define_wide(inst, dst.name, Wide(a.kind, own,
                                              stable=self.def_count[dst.name] == 1))
        return pre + [simt.AluOp(base, own, [a.vreg, offset], guard)]

    def wide_add(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        base = inst.op.base
        dst, a_op, b_op = inst.operands_decoded
        if not isinstance(dst, ptx.Reg) or self.bits(dst.name) != 64:
            raise unsupported(inst, inst.opcode.data)
        if isinstance(a_op, ptx.Imm):       # a constant minuend: integers only
            return self.add_values(inst, self.emitter(guard, dst.name))
        a = self.wide_src(inst, a_op)
        b_wide = self.wide.get(b_op.name) if isinstance(b_op, ptx.Reg) else None
        if {"shared", "local"} & {a.kind, b_wide and b_wide.kind}:
            return self.shared_add(inst, guard)
        if base == "add" and a.kind == "int" and b_wide is not None and b_wide.kind == "ptr":
            a, b_wide = b_wide, a
        e = self.emitter(guard, dst.name)
        sub = base == "sub"
        if a.kind == "ptr" and b_wide is not None and b_wide.kind == "ptr" and sub and \
                a.prov == b_wide.prov:      # words apart in one buffer
            apart = e.alu("sub", [a.vreg, b_wide.vreg])
            return self.set_int(inst, e, Wide("int", apart, scale=self.units[a.prov], hi="sext"))
        if a.kind == "ptr" and (b_wide is None or b_wide.kind == "int"):
            return self.pointer_add(inst, guard, a, b_op if b_wide is None else b_wide)
        if "ptr" in (a.kind, b_wide and b_wide.kind):   # pointers as values
            return self.add_values(inst, e)
        if b_wide is not None and a.scale == b_wide.scale and a.scale < 1 << 31:
            pa, pb = lg.unscaled(e, a, a.scale), lg.unscaled(e, b_wide, a.scale)
            return self.set_int(inst, e, lg.add_pairs(e, pa, pb, sub), a.scale)
        if isinstance(b_op, ptx.Imm) and not b_op.is_float and 1 < a.scale < 1 << 31 and \
                b_op.value % a.scale == 0:   # i·4 + 8 = (i + 2)·4: still a scaled index
            pa = lg.unscaled(e, a, a.scale)
            pb = lg.const_pair(b_op.value // a.scale)
            return self.set_int(inst, e, lg.add_pairs(e, pa, pb, sub), a.scale)
        pa = lg.materialize(e, a)
        pb = self.pair_of(inst, e, b_op)
        return self.set_int(inst, e, lg.add_pairs(e, pa, pb, sub))

    def pointer_add(self, inst: ptx.InstOp, guard: GuardAttr | None, ptr: Wide,
                    offset: ptx.Operand | Wide) -> list[Operation]:
        """A pointer plus (or minus) a constant or an integer byte offset, in
        words of the pointer's buffer."""
        base = inst.op.base
        dst = inst.operands_decoded[0]
        assert ptr.prov is not None
        unit = self.units.get(ptr.prov, 4)
        own = self.own_vreg(dst.name)
        single = self.def_count[dst.name] == 1
        if isinstance(offset, ptx.Imm) and not offset.is_float:
            if offset.value % unit:
                return self.bytes_past(inst, guard, offset, f"a 64-bit constant offset that "
                                       f"is not a multiple of {unit} bytes from a pointer")
            words = offset.value // unit * (1 if base == "add" else -1)
            if words == 0:
                return self.view(inst, guard, ptr)
            self.define_wide(inst, dst.name, Wide("ptr", own, ptr.prov, stable=single))
            return [simt.AluOp("add", own, [ptr.vreg, to_i32(words)], guard)]
        if not isinstance(offset, Wide) or offset.kind != "int":
            raise unsupported(inst, inst.opcode.data, "64-bit arithmetic other than a pointer "
                              "plus an offset")
        e = Emitter(self.fresh, guard, (own,))
        if offset.scale % unit:
            return self.bytes_past(inst, guard, offset, _not_words(offset.scale, unit))
        words = lg.materialize(e, lg.replace(offset, scale=offset.scale // unit))[0]
        self.define_wide(inst, dst.name, Wide("ptr", own, ptr.prov, stable=single))
        e.ops.append(simt.AluOp(base, own, [ptr.vreg, words], guard))
        return e.ops


    def bytes_past(self, inst: ptx.InstOp, guard: GuardAttr | None, offset: ptx.Operand | Wide,
                   why: str) -> list[Operation]:
        """A pointer plus a byte offset that is not a whole number of its
        buffer's words: a value (located where it is used), so its register
        holds pointers as values."""
        dst = inst.operands_decoded[0]
        if not isinstance(dst, ptx.Reg) or isinstance(offset, Wide) and offset.kind != "int":
            raise unsupported(inst, inst.opcode.data, why)
        if dst.name not in self.values:
            raise HoldsPointerValues(dst.name)
        return self.add_values(inst, self.emitter(guard, dst.name))


def _not_words(scale: int, unit: int = 4) -> str:
    size = "1 byte" if scale == 1 else f"{scale} bytes"
    return f"a byte offset that is not a multiple of {unit}: an index times {size}"
