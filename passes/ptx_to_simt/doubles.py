"""f64 on the machine: a double lives in a register pair (`legalize`'s 64-bit
integers), and each f64 op becomes the program of
`qgc.machine.float64_programs` on its words, emitted in place. (An f32 op
stays one `simt.alu` until `simt-expand-float`; an f64 op has two result
words, which one `simt.alu` cannot name.) Loads and stores of `.f64` move
the two words as `.b64` does."""

from __future__ import annotations

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.machine import float64_programs as f64
from qgc.passes.ptx_to_simt import legalize as lg
from qgc.passes.ptx_to_simt.common import unsupported
from qgc.passes.simt_expand_float import Emit, _move

ROUNDINGS = ("rn", "rz", "rm", "rp")
INT_ROUNDINGS = ("rni", "rzi", "rmi", "rpi")
INTEGERS = ("s32", "u32", "s64", "u64")
ARITHMETIC = {"add": 2, "sub": 2, "mul": 2, "fma": 3, "mad": 3}


def as_bits(inst: ptx.InstOp) -> ptx.InstOp:
    """`ld`/`st`/`mov` of `.f64` as the same of `.b64` (the words move as they are)."""
    name = inst.opcode.data
    bits = ptx.InstOp(name[:name.rindex(".f64")] + ".b64" + name[name.rindex(".f64") + 4:],
                      [a.data for a in inst.args.data])
    bits.location = inst.location
    return bits


class DoubleOps:
    """f64 arithmetic, compares, selects and conversions on register pairs."""

    def float64(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        opc, args = inst.op, inst.operands_decoded
        base, mods = opc.base, set(opc.modifiers)
        if base == "cvt":
            return self.cvt64(inst, guard)
        if base == "setp":
            return self.setp_f64(inst, guard)
        if base == "selp" and not mods:
            e = self.emitter(guard, args[0].name)
            p = args[3]
            if not isinstance(p, ptx.Reg) or p.negated or self.bits(p.name) != 1:
                raise unsupported(inst, inst.opcode.data)
            a, b = self.double_of(inst, e, args[1]), self.double_of(inst, e, args[2])
            return self.set_int(inst, e, lg.select_pair(e, a, b, self.vreg(p.name)))
        if base == "mov" and not mods:
            e = self.emitter(guard, args[0].name)
            return self.set_int(inst, e, self.double_of(inst, e, args[1]))
        if base in ("neg", "abs", "min", "max", "copysign") and not mods:
            return self.program64(inst, guard, {"neg": f64.neg, "abs": f64.abs_,
                                                "copysign": f64.copysign,
                                                "min": lambda o, a, b: f64.minmax(o, a, b, False),
                                                "max": lambda o, a, b: f64.minmax(o, a, b, True)
                                                }[base])
        if base in ("div", "rcp", "sqrt"):
            mode = [m for m in mods if m in ROUNDINGS]
            if len(mode) != 1 or mods != set(mode) or len(args) != (3 if base == "div" else 2):
                raise unsupported(inst, inst.opcode.data)
            e = self.emitter(guard, args[0].name)
            x = [self.double_of(inst, e, a) for a in args[1:]]
            x = [f64.ONE, *x] if base == "rcp" else x
            name = f"{'sqrt' if base == 'sqrt' else 'div'}.{mode[0]}.f64"
            return self.set_int(inst, e, self.word_pair(e, name, [w for p in x for w in p]))
        if base in ARITHMETIC:
            mode = [m for m in mods if m in ROUNDINGS]
            arity = ARITHMETIC[base]
            if mods - set(mode) or len(mode) > 1 or (arity == 3 and not mode) or \
                    len(args) != arity + 1:
                raise unsupported(inst, inst.opcode.data)
            return self.arithmetic64(inst, guard, base, mode[0] if mode else "rn")
        raise unsupported(inst, inst.opcode.data)

    def arithmetic64(self, inst: ptx.InstOp, guard: GuardAttr | None, base: str,
                     mode: str) -> list[Operation]:
        """add, sub, mul, fma: one fma program (`fma.MODE.f64.lo`/`.hi`, which
        simt-expand-float shares between sites): a + b = fma(a, 1, b),
        a − b = fma(a, 1, −b), a · b = fma(a, b, −0) (exact but in rm, where
        +0 + −0 is −0: there mul's own program, in place)."""
        args = inst.operands_decoded
        e = self.emitter(guard, args[0].name)
        x = [self.double_of(inst, e, a) for a in args[1:]]
        if base == "mul" and mode == "rm":
            o = Emit(self.fresh)
            result = f64.mul(o, x[0], x[1], "rm")
            e.ops += o.ops
            return self.set_int(inst, e, result)
        if base in ("add", "sub"):
            c = x[1] if base == "add" else (x[1][0], e.alu("xor", [x[1][1], lg.to_i32(f64.SIGN)]))
            x = [x[0], f64.ONE, c]
        elif base == "mul":
            x = [*x, (0, lg.to_i32(f64.SIGN))]
        return self.set_int(inst, e, self.word_pair(e, f"fma.{mode}.f64", [w for p in x for w in p]))

    def word_pair(self, e: lg.Emitter, name: str, sources: list) -> tuple[RegAttr, RegAttr]:
        """An f64 program's two result words: `NAME.lo` and `NAME.hi` side by side."""
        lo, hi = e.temp(), e.temp()
        e.ops += [simt.AluOp(f"{name}.lo", lo, sources), simt.AluOp(f"{name}.hi", hi, sources)]
        return lo, hi

    def program64(self, inst: ptx.InstOp, guard: GuardAttr | None, program) -> list[Operation]:
        """dst = program(sources) for an op whose every operand is a double."""
        args = inst.operands_decoded
        e = self.emitter(guard, args[0].name)
        sources = [self.double_of(inst, e, a) for a in args[1:]]
        o = Emit(self.fresh)
        result = program(o, *sources)
        e.ops += o.ops
        return self.set_int(inst, e, result)

    def double_of(self, inst: ptx.InstOp, e: lg.Emitter, operand: ptx.Operand) -> tuple:
        """A double operand's words (an immediate `0d…` as its bits)."""
        if isinstance(operand, ptx.Imm) and operand.is_float and operand.bits == 64:
            return lg.const_pair(operand.value)
        return self.pair_of(inst, e, operand)

    def setp_f64(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        args, mods = inst.operands_decoded, inst.op.modifiers
        p = args[0]
        if len(args) != 3 or len(mods) != 1 or mods[0] not in f64.fp.COMPARES or \
                not isinstance(p, ptx.Reg) or self.bits(p.name) != 1:
            raise unsupported(inst, inst.opcode.data)
        e = lg.Emitter(self.fresh, guard)
        a, b = self.double_of(inst, e, args[1]), self.double_of(inst, e, args[2])
        o = Emit(self.fresh)
        result = f64.compare(o, mods[0], a, b)
        return e.ops + o.ops + [_move(self.vreg(p.name), result, guard)]

    def cvt64(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """cvt between f64 and f32 or a 32- or 64-bit integer, and f64 to an
        integral f64."""
        (dt, at), mods = inst.op.types, set(inst.op.modifiers)
        dst, src = inst.operands_decoded
        o = Emit(self.fresh)
        integral = [m for m in mods if m in INT_ROUNDINGS]
        if dt == "f64" and at == "f64" and len(integral) == 1 and mods == set(integral):
            e = self.emitter(guard, dst.name)
            a = list(self.double_of(inst, e, src))
            return self.set_int(inst, e, self.word_pair(e, f"cvt.{integral[0]}.f64.f64", a))
        if dt == "f64" and at == "f32" and mods <= {"ftz"}:
            pre: list[Operation] = []
            a = self.src32(inst, src, pre)
            e = self.emitter(guard, dst.name)
            e.ops += pre
            result = f64.from_f32(o, a, "ftz" in mods)
            e.ops += o.ops
            return self.set_int(inst, e, result)
        mode = [m for m in mods if m in ROUNDINGS]
        if dt == "f32" and at == "f64" and len(mode) == 1 and mods - set(mode) <= {"ftz", "sat"}:
            e = lg.Emitter(self.fresh, guard)
            a = self.double_of(inst, e, src)
            value = f64.to_f32(o, a, mode[0], "ftz" in mods, "sat" in mods)
            e.ops += o.ops
            e.assign(self.dst32(inst, dst), value)
            return e.ops
        if dt == "f64" and at in INTEGERS and len(mode) == 1 and mods == set(mode):
            e = self.emitter(guard, dst.name)
            if at in ("s64", "u64"):
                n = self.pair_of(inst, e, src)
            else:
                pre = []
                word = self.src32(inst, src, pre)
                e.ops += pre
                n = (word, e.alu("shr.s", [word, 31]) if at == "s32" else 0)
            name = f"cvt.{mode[0]}.f64.{'s64' if at in ('s32', 's64') else 'u64'}"
            return self.set_int(inst, e, self.word_pair(e, name, list(n)))
        if at == "f64" and dt in INTEGERS and len(integral) == 1 and \
                mods - set(integral) <= {"sat"}:         # float → integer saturates anyway
            e = self.emitter(guard, dst.name)
            a = list(self.double_of(inst, e, src))
            name = f"cvt.{integral[0]}.{dt}.f64"
            if dt in ("s64", "u64"):
                return self.set_int(inst, e, self.word_pair(e, name, a))
            e.assign(self.dst32(inst, dst), e.alu(name, a))
            return e.ops
        raise unsupported(inst, inst.opcode.data)

