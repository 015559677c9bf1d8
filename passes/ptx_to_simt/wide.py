"""64-bit values: a 64-bit PTX register as a view of a 32-bit one or as a
register pair (see `legalize`), and the 64-bit integer ops on them."""

from __future__ import annotations

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr
from qgc.passes.ptx_to_simt import legalize as lg
from qgc.passes.ptx_to_simt.common import SETP_SIGNED, SETP_UNSIGNED, WIDE, unsupported, why_not_32
from qgc.passes.ptx_to_simt.legalize import Emitter, Wide


class HoldsPointerValues(Exception):
    """Register `name` holds both pointers and 64-bit integers, or a pointer
    plus bytes that are not whole words: select the kernel again with its
    pointers as values (`WideOps.as_value`)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class WideOps:
    """64-bit registers: views, integer pairs and their arithmetic."""

    def wide_src(self, inst: ptx.InstOp, operand: ptx.Operand) -> Wide:
        if isinstance(operand, ptx.Reg) and operand.name in self.wide:
            return self.wide[operand.name]
        raise unsupported(inst, inst.opcode.data, "a 64-bit value that is not a pointer "
                          "parameter or an offset computed from 32-bit values")

    def define_wide(self, inst: ptx.InstOp, name: str, value: Wide) -> None:
        old = self.wide.get(name)
        if name in self.values:         # `as_value` makes a pointer an integer
            self.wide[name] = value
            return
        if old is not None and {old.kind, value.kind} == {"ptr", "int"}:
            raise HoldsPointerValues(name)
        if old is not None and not old.same_shape(value):
            raise unsupported(inst, inst.opcode.data, f"'{name}' holds different kinds of "
                              "64-bit values")
        self.wide[name] = value

    def view(self, inst: ptx.InstOp, guard: GuardAttr | None, src: Wide,
             scale: int | None = None) -> list[Operation]:
        """An identity-like 64-bit def: the destination is `src` seen with a new scale."""
        dst = inst.operands_decoded[0]
        if not isinstance(dst, ptx.Reg) or self.bits(dst.name) != 64:
            raise unsupported(inst, inst.opcode.data)
        new = lg.replace(src, scale=src.scale if scale is None else scale)
        if new.kind == "int":
            e = self.emitter(guard, dst.name)
            if not lg.valid_scale(new.scale):   # multiply out: x·s·f as pairs
                factor = lg.const_pair(new.scale // src.scale)
                return self.set_int(inst, e, lg.mul_pairs(e, lg.materialize(e, src), factor))
            return self.set_int(inst, e, new)
        name = dst.name
        if self.may_alias and guard is None and src.stable and self.def_count[name] == 1:
            self.define_wide(inst, name, new)
            return []
        own = self.own_vreg(name)
        self.define_wide(inst, name, lg.replace(new, vreg=own,
                                                 stable=self.def_count[name] == 1))
        return [simt.AluOp("mov", own, [new.vreg], guard)]

    def set_int(self, inst: ptx.InstOp, e: Emitter, value: Wide | tuple[lg.Src, lg.Src],
                pair_scale: int = 1) -> list[Operation]:
        """Define a 64-bit integer register from a view or a pair. A view of
        a register written once costs no op; otherwise the value goes to the
        register's own two words (a register written at several places keeps
        the scale of its first definition, so all of them agree)."""
        dst = inst.operands_decoded[0]
        assert isinstance(dst, ptx.Reg)
        name, single = dst.name, self.def_count[dst.name] == 1
        if isinstance(value, Wide) and single and (not value.is_pair or value.stable):
            if self.may_alias and e.guard is None and value.stable:
                self.define_wide(inst, name, value)
                return e.ops
            if not value.is_pair:
                own = self.own_vreg(name)
                e.assign(own, value.vreg)
                self.define_wide(inst, name, lg.replace(value, vreg=own, stable=True))
                return e.ops
        if not isinstance(value, Wide):     # x = hi:lo, the value x * pair_scale
            lo, hi = value
            if isinstance(lo, int):
                lo = e.alu("mov", [lo], e.temp())
            value = Wide("int", lo, scale=pair_scale, hi=hi)
        old = self.wide.get(name)
        scale = old.scale if old is not None and old.kind == "int" else \
            value.scale if value.scale < 1 << 31 else 1
        if value.scale % scale:
            raise unsupported(inst, inst.opcode.data, f"'{name}' holds 64-bit values of "
                              "different scales")
        lo, hi = lg.unscaled(e, value, scale)
        own_lo, own_hi = self.own_vreg(name), self.own_hi(name)
        e.assign(own_lo, lo)
        e.assign(own_hi, hi)
        self.define_wide(inst, name, Wide("int", own_lo, scale=scale, stable=single, hi=own_hi))
        return e.ops

    def int_view_of32(self, inst: ptx.InstOp, operand: ptx.Operand,
                      signed: bool = False) -> Wide:
        if not isinstance(operand, ptx.Reg) or self.bits(operand.name) != 32:
            raise unsupported(inst, inst.opcode.data, why_not_32(operand, self))
        return Wide("int", self.vreg(operand.name), scale=1,
                    stable=self.def_count[operand.name] == 1,
                    hi="sext" if signed else "zext")

    def pair_of(self, inst: ptx.InstOp, e: Emitter, operand: ptx.Operand) -> tuple[lg.Src,
                                                                                   lg.Src]:
        """A 64-bit integer operand as (low, high) words."""
        if isinstance(operand, ptx.Imm) and not operand.is_float:
            return lg.const_pair(operand.value)
        return self.value_pair(inst, e, self.wide_src(inst, operand))

    def value_pair(self, inst: ptx.InstOp, e: Emitter, w: Wide) -> tuple[lg.Src, lg.Src]:
        """A 64-bit register's value as (low, high) words: an integer's, or a
        pointer's (`pointer_value`)."""
        if w.kind == "ptr":
            return self.pointer_value(e, w)
        if w.kind != "int":
            raise unsupported(inst, inst.opcode.data, f"a {w.kind} address as a 64-bit integer")
        return lg.materialize(e, w)

    def add_values(self, inst: ptx.InstOp, e: Emitter) -> list[Operation]:
        """64-bit `add`/`sub` of the instruction's two sources as values."""
        _, a_op, b_op = inst.operands_decoded
        pa, pb = self.pair_of(inst, e, a_op), self.pair_of(inst, e, b_op)
        return self.set_int(inst, e, lg.add_pairs(e, pa, pb, inst.op.base == "sub"))

    def pointer_value(self, e: Emitter, w: Wide) -> tuple[lg.Src, lg.Src]:
        """A pointer as the 64-bit value the reference engine gives it: its
        word address in bytes of its buffer plus the buffer's translation
        word (`simt.KernelOp.ref_word`); buffers lie below 2^32."""
        assert w.prov is not None
        self.pointer_values = True
        ref = e.temp()
        e.ops.append(simt.LdOp(ref, "param", None, self.ref_words[w.prov]))
        bytes_ = e.alu("shl", [w.vreg, self.units[w.prov].bit_length() - 1])
        return e.alu("add", [bytes_, ref]), 0

    def as_value(self, inst: ptx.InstOp, guard: GuardAttr | None, name: str
                 ) -> list[Operation]:
        """A register that holds pointers and other 64-bit values (a pointer
        loaded from memory, or null) holds them all as values: a pointer
        definition is followed by its value."""
        e = self.emitter(guard, name)
        pair = self.pointer_value(e, self.wide.pop(name))
        return self.set_int(inst, e, pair)

    def wide_op(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        opc = inst.op
        base, mods, t = opc.base, opc.modifiers, opc.type
        args = inst.operands_decoded
        if base == "mov" and not mods and (isinstance(args[0], ptx.Vec) or
                                           isinstance(args[1], ptx.Vec)):
            return self.halves(inst, guard)
        if base == "mov" and not mods and isinstance(args[1], ptx.Reg):
            return self.view(inst, guard, self.wide_src(inst, args[1]))
        if base == "mov" and not mods and isinstance(args[1], ptx.Sym) and \
                args[1].name in self.shared and isinstance(args[0], ptx.Reg):
            own = self.own_vreg(args[0].name)
            self.define_wide(inst, args[0].name, Wide("shared", own,
                                                      stable=self.def_count[args[0].name] == 1))
            return [simt.SharedAddrOp(own, args[1].name, guard)]
        if base == "mov" and not mods and isinstance(args[1], ptx.Sym) and \
                args[1].name in self.locals and isinstance(args[0], ptx.Reg):
            own = self.own_vreg(args[0].name)
            self.define_wide(inst, args[0].name, Wide("local", own,
                                                      stable=self.def_count[args[0].name] == 1))
            return [simt.AluOp("mov", own, [self.locals[args[1].name]], guard)]
        if base == "mov" and not mods and isinstance(args[1], ptx.Sym) and \
                self.is_module_var(args[1].name) and isinstance(args[0], ptx.Reg):
            return self.pointer_param(inst, guard, args[0].name,
                                       self.param_index[args[1].name])
        if base == "mul" and mods == ("wide",) and t in ("s32", "u32"):
            return self.mul_wide(inst, guard)
        if base == "mad" and mods == ("wide",) and t in ("s32", "u32"):
            return self.mad_wide(inst, guard)
        if base == "cvt" and len(opc.types) == 2 and opc.types[1] in ("s32", "u32") and \
                not mods:
            return self.view(inst, guard, self.int_view_of32(inst, args[1],
                                                             opc.types[1] == "s32"), 1)
        if base in ("shl", "mul") and mods in ((), ("lo",)) and (base == "shl") == (not mods) \
                and isinstance(args[2], ptx.Imm) and args[2].value >= (base == "mul"):
            src = self.wide_src(inst, args[1])
            if src.kind == "int":
                factor = 1 << args[2].value if base == "shl" else args[2].value
                return self.view(inst, guard, src, src.scale * factor)
        if base in ("add", "sub") and not mods:
            return self.wide_add(inst, guard)
        if t in WIDE and isinstance(args[0], ptx.Reg) and self.bits(args[0].name) == 64:
            return self.int64(inst, guard)
        if base in ("popc", "clz") and not mods and t == "b64":
            d = self.dst32(inst, args[0])
            e = Emitter(self.fresh, guard, (d,))
            e.assign(d, lg.count_pair(e, base, self.pair_of(inst, e, args[1])))
            return e.ops
        syms = [a.name for a in args if isinstance(a, ptx.Sym)]
        raise unsupported(inst, inst.opcode.data, f"the address of '{syms[0]}'" if syms else "")

    def halves(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """`mov.b64 {lo, hi}, %rd` (a `_` half unread) and `mov.b64 %rd, {lo, hi}`:
        a 64-bit register's two words, apart or together."""
        dst, src = inst.operands_decoded
        if isinstance(dst, ptx.Vec) and len(dst.items) == 2 and not isinstance(src, ptx.Vec):
            words = [None if isinstance(r, ptx.Sym) and r.name == "_" else self.dst32(inst, r)
                     for r in dst.items]
            e = Emitter(self.fresh, guard, tuple(w for w in words if w is not None))
            for word, half in zip(words, self.pair_of(inst, e, src), strict=True):
                if word is not None:
                    e.assign(word, half)
            return e.ops
        if isinstance(src, ptx.Vec) and len(src.items) == 2 and isinstance(dst, ptx.Reg):
            e = self.emitter(guard, dst.name)
            pre: list[Operation] = []
            lo, hi = (self.src32(inst, r, pre) for r in src.items)
            e.ops += pre
            return self.set_int(inst, e, (lo, hi))
        raise unsupported(inst, inst.opcode.data)

    def mul_wide(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """`mul.wide.{s,u}32`: by a constant a view, of two registers a pair."""
        args, signed = inst.operands_decoded, inst.op.type == "s32"
        reg, imm = (args[1], args[2]) if isinstance(args[2], ptx.Imm) else (args[2], args[1])
        if isinstance(imm, ptx.Imm) and not imm.is_float and 0 < imm.value < 1 << 31:
            return self.view(inst, guard, self.int_view_of32(inst, reg, signed), imm.value)
        e = self.emitter(guard, args[0].name)
        pre: list[Operation] = []
        a, b = self.src32(inst, args[1], pre), self.src32(inst, args[2], pre)
        e.ops += pre
        lo = e.alu("mul.lo", [a, b])
        return self.set_int(inst, e, (lo, e.alu("mul.hi.s" if signed else "mul.hi.u", [a, b])))

    def mad_wide(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """`mad.wide.{s,u}32 d, a, b, c`: the 64-bit product plus the pair `c`."""
        args, signed = inst.operands_decoded, inst.op.type == "s32"
        e = self.emitter(guard, args[0].name)
        pre: list[Operation] = []
        a, b = self.src32(inst, args[1], pre), self.src32(inst, args[2], pre)
        e.ops += pre
        product = (e.alu("mul.lo", [a, b]), e.alu("mul.hi.s" if signed else "mul.hi.u", [a, b]))
        return self.set_int(inst, e, lg.add_pairs(e, product, self.pair_of(inst, e, args[3])))

    def int64(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """Integer 64-bit arithmetic and logic on register pairs."""
        opc, args = inst.op, inst.operands_decoded
        base, mods = opc.base, opc.modifiers
        e = self.emitter(guard, args[0].name)
        srcs = args[1:]
        if base == "mov" and not mods and len(srcs) == 1:
            return self.set_int(inst, e, self.pair_of(inst, e, srcs[0]))
        if base == "mul" and mods == ("lo",):
            a, b = (self.pair_of(inst, e, x) for x in srcs)
            return self.set_int(inst, e, lg.mul_pairs(e, a, b))
        if base == "mul" and mods == ("hi",):
            a, b = (self.pair_of(inst, e, x) for x in srcs)
            high = lg.mul_hi_pairs if opc.type != "s64" else lg.mul_hi_signed
            return self.set_int(inst, e, high(e, a, b))
        if base in ("min", "max") and not mods and opc.type in ("s64", "u64"):
            a, b = (self.pair_of(inst, e, x) for x in srcs)
            return self.set_int(inst, e, lg.minmax_pairs(e, f"{base}.{opc.type[0]}", a, b))
        if base == "abs" and not mods and opc.type == "s64":
            return self.set_int(inst, e, lg.abs_pair(e, self.pair_of(inst, e, srcs[0])))
        if base == "brev" and not mods:
            lo, hi = self.pair_of(inst, e, srcs[0])
            return self.set_int(inst, e, (e.alu("brev", [hi]), e.alu("brev", [lo])))
        if base in ("shl", "shr") and not mods and len(srcs) == 2 and \
                not isinstance(srcs[1], ptx.Imm):
            pre: list[Operation] = []
            amount = self.src32(inst, srcs[1], pre)
            e.ops += pre
            how = "shl" if base == "shl" else "shr.s" if opc.type == "s64" else "shr.u"
            return self.set_int(inst, e, lg.shift_pair_by(e, how, self.pair_of(inst, e, srcs[0]),
                                                          amount))
        if base in ("and", "or", "xor") and not mods and len(srcs) == 2:
            a, b = (self.pair_of(inst, e, x) for x in srcs)
            return self.set_int(inst, e, (e.alu(base, [a[0], b[0]]), e.alu(base, [a[1], b[1]])))
        if base == "not" and not mods:
            a = self.pair_of(inst, e, srcs[0])
            return self.set_int(inst, e, (e.alu("not", [a[0]]), e.alu("not", [a[1]])))
        if base == "neg" and not mods:
            return self.set_int(inst, e, lg.add_pairs(e, (0, 0), self.pair_of(inst, e, srcs[0]),
                                                      sub=True))
        if base == "shr" and not mods and isinstance(srcs[1], ptx.Imm):
            a = self.pair_of(inst, e, srcs[0])
            return self.set_int(inst, e, lg.shift_pair(
                e, "shr.s" if opc.type == "s64" else "shr.u", a, srcs[1].value))
        if base == "bfi" and not mods and all(isinstance(x, ptx.Imm) for x in srcs[2:]):
            return self.bfi64(inst, e)
        if base == "selp" and not mods and isinstance(srcs[2], ptx.Reg) and \
                self.bits(srcs[2].name) == 1:
            a, b = (self.pair_of(inst, e, x) for x in srcs[:2])
            p = self.vreg(srcs[2].name)
            return self.set_int(inst, e, (e.alu("selp", [a[0], b[0], p]),
                                          e.alu("selp", [a[1], b[1], p])))
        raise unsupported(inst, inst.opcode.data)

    def bfi64(self, inst: ptx.InstOp, e: Emitter) -> list[Operation]:
        """`bfi.b64 d, a, b, pos, len` with a constant field inside one word."""
        _, a_op, b_op, pos_op, len_op = inst.operands_decoded
        pos, length = pos_op.value, len_op.value
        a, b = self.pair_of(inst, e, a_op), self.pair_of(inst, e, b_op)
        word, at = divmod(pos, 32)
        if word > 1 or at + length > 32 or length == 0:
            raise unsupported(inst, inst.opcode.data, "a field that crosses a word")
        field = a[0] if length == 32 else e.alu("bfi", [a[0], b[word], at, length])
        return self.set_int(inst, e, (field, b[1]) if word == 0 else (b[0], field))

    def narrow(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """`cvt.u32.u64 d, x`: the low word of the 64-bit integer x."""
        dst, src = inst.operands_decoded
        d = self.dst32(inst, dst)
        e = Emitter(self.fresh, guard, (d,))
        e.assign(d, self.pair_of(inst, e, src)[0])
        return e.ops

    def setp64(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """A 64-bit compare of integers (by words), or of two pointers into
        one buffer (by word addresses)."""
        opc, args = inst.op, inst.operands_decoded
        table = SETP_SIGNED if opc.type == "s64" else SETP_UNSIGNED
        p = args[0]
        if len(opc.modifiers) != 1 or opc.modifiers[0] not in table or len(args) != 3 or \
                not isinstance(p, ptx.Reg) or self.bits(p.name) != 1:
            raise unsupported(inst, inst.opcode.data)
        cond, dst = table[opc.modifiers[0]], self.vreg(p.name)
        kinds = {self.wide[a.name].kind for a in args[1:]
                 if isinstance(a, ptx.Reg) and a.name in self.wide}
        e = Emitter(self.fresh, guard)
        if kinds == {"ptr"} and all(isinstance(a, ptx.Reg) for a in args[1:]):
            a, b = (self.wide_src(inst, x) for x in args[1:])
            if a.prov != b.prov:
                raise unsupported(inst, inst.opcode.data, "a compare of pointers into "
                                  "different buffers")
            return [simt.SetpOp(cond.replace(".s", ".u"), dst, a.vreg, b.vreg, guard)]
        a, b = (self.pair_of(inst, e, x) for x in args[1:])
        lg.compare_pairs(e, cond, a, b, dst)
        return e.ops
