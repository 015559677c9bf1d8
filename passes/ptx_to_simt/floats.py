"""f32 compares, classes and conversions: `setp.CMP{.ftz}.f32`, `testp` and
`cvt` between f32 and 32- or 64-bit integers or f16 (the arithmetic selects through the opcode table)."""

from __future__ import annotations

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr
from qgc.machine import softfloat
from qgc.machine.float_programs import INF
from qgc.machine.float_programs import MAG as ABS_MASK
from qgc.machine.opcodes import ALU_OPCODES
from qgc.passes.ptx_to_simt import legalize as lg
from qgc.passes.ptx_to_simt.common import unsupported
from qgc.passes.ptx_to_simt.legalize import Emitter, Src

ROUNDINGS = softfloat.MODES
INT_ROUNDINGS = tuple(m + "i" for m in ROUNDINGS)
#: testp's classes as one unsigned compare of |a|'s bits minus an offset:
#: class -> (offset, condition, bound)
TESTP = {"finite": (0, "lt.u", INF), "infinite": (0, "eq", INF), "number": (0, "le.u", INF),
         "notanumber": (0, "gt.u", INF), "normal": (0x00800000, "lt.u", INF - 0x00800000),
         "subnormal": (1, "lt.u", 0x007FFFFF)}


class FloatOps:
    """Selection of f32 compares and conversions."""

    def float_cond(self, inst: ptx.InstOp) -> str:
        """The `simt.setp` condition of `setp.CMP{.ftz}.f32`."""
        mods = inst.op.modifiers
        if not mods or mods[0] not in softfloat.COMPARES or set(mods[1:]) - {"ftz"}:
            raise unsupported(inst, inst.opcode.data)
        return ".".join((*mods, "f32"))

    def testp(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """`testp.CLASS.f32 p, a`: an unsigned range check of |a|'s bits."""
        mods, args = inst.op.modifiers, inst.operands_decoded
        if inst.op.type != "f32" or len(mods) != 1 or mods[0] not in TESTP or len(args) != 2 \
                or not isinstance(args[0], ptx.Reg) or self.bits(args[0].name) != 1:
            raise unsupported(inst, inst.opcode.data)
        offset, cond, bound = TESTP[mods[0]]
        pre: list[Operation] = []
        magnitude = self.fresh()
        pre.append(simt.AluOp("and", magnitude, [self.src32(inst, args[1], pre), ABS_MASK], guard))
        if offset:
            shifted = self.fresh()
            pre.append(simt.AluOp("sub", shifted, [magnitude, offset], guard))
            magnitude = shifted
        return pre + [simt.SetpOp(cond, self.vreg(args[0].name), magnitude, bound, guard)]

    def cvt_f32(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """cvt.RND{.sat}.f32.{s,u}32, cvt.RNDi{.ftz}{.sat}.{s,u}32.f32 (a
        float's conversion saturates anyway), cvt{.RNDi}{.ftz}{.sat}.f32.f32."""
        dt, at = inst.op.types
        mods = inst.op.modifiers
        rounding = [m for m in mods if m in ROUNDINGS + INT_ROUNDINGS]
        flags = tuple(m for m in mods if m not in rounding)
        if len(rounding) > 1 or set(flags) - {"ftz", "sat"}:
            raise unsupported(inst, inst.opcode.data)
        mode = rounding[0] if rounding else None
        if dt == at == "f32" and mode in (None, *ROUNDINGS):
            return self._float_copy(inst, guard, flags)
        if dt == "f32" and at in ("s32", "u32") and mode in ROUNDINGS and "ftz" not in flags:
            name = ".".join(("cvt", mode, *flags, dt, at))
        elif at == "f32" and dt in ("s32", "u32") and mode in INT_ROUNDINGS:
            name = ".".join(("cvt", mode, *(f for f in flags if f == "ftz"), dt, at))
        elif dt == at == "f32" and mode in INT_ROUNDINGS:
            name = ".".join(("cvt", mode, *flags, dt, at))
        else:
            raise unsupported(inst, inst.opcode.data)
        return self._alu1(inst, guard, name)

    def cvt_f32_narrow(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """cvt between f32 and 8- or 16-bit integers: the 32-bit conversion
        of the value extended to 32 bits, or the 32-bit conversion clamped to
        the narrow type's range (PTX saturates float-to-integer conversions)."""
        dt, at = inst.op.types
        mods = inst.op.modifiers
        rounding = [m for m in mods if m in ROUNDINGS + INT_ROUNDINGS]
        flags = tuple(m for m in mods if m not in rounding)
        dst, src = inst.operands_decoded
        e = Emitter(self.fresh, guard)
        if len(rounding) != 1:
            raise unsupported(inst, inst.opcode.data)
        if dt == "f32" and rounding[0] in ROUNDINGS and set(flags) <= {"sat"}:
            wide = "s32" if at[0] == "s" else "u32"
            value = self.get_sub(inst, e, src, at, at[0] == "s")
            e.assign(self.dst32(inst, dst), e.alu(".".join(("cvt", rounding[0], *flags, "f32",
                                                            wide)), [value]))
            return e.ops
        if at == "f32" and rounding[0] in INT_ROUNDINGS and set(flags) <= {"ftz", "sat"}:
            bits, signed = ptx.TYPE_BITS[dt], dt[0] == "s"
            name = ".".join(("cvt", rounding[0], *(("ftz",) if "ftz" in flags else ()),
                             "s32" if signed else "u32", "f32"))
            value = e.alu(name, [self.src32(inst, src, e.ops)])
            if signed:
                value = e.alu("max.s", [e.alu("min.s", [value, (1 << bits - 1) - 1]),
                                        -(1 << bits - 1)])
            else:
                value = e.alu("min.u", [value, (1 << bits) - 1])
            self.put_sub(inst, e, dst, dt, value, dt)
            return e.ops
        raise unsupported(inst, inst.opcode.data)

    def cvt_f32_wide(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """cvt.RND{.sat}.f32.{s,u}64 and cvt.RNDi{.ftz}{.sat}.{s,u}64.f32 as
        pair arithmetic around a 32-bit f32 conversion."""
        dt, at = inst.op.types
        mods = inst.op.modifiers
        rounding = [m for m in mods if m in ROUNDINGS + INT_ROUNDINGS]
        flags = set(mods) - set(rounding)
        dst, src = inst.operands_decoded
        if len(rounding) != 1 or not isinstance(dst, ptx.Reg):
            raise unsupported(inst, inst.opcode.data)
        mode = rounding[0]
        if dt == "f32" and mode in ROUNDINGS and flags <= {"sat"}:
            e = self.emitter(guard)
            value = pair_to_f32(e, self.pair_of(inst, e, src), at == "s64", mode, "sat" in flags)
            e.assign(self.dst32(inst, dst), value)
            return e.ops
        if at == "f32" and mode in INT_ROUNDINGS and flags <= {"ftz", "sat"}:
            pre: list[Operation] = []
            a = self.src32(inst, src, pre)
            e = self.emitter(guard, dst.name)
            return pre + self.set_int(inst, e, f32_to_pair(e, a, mode, dt == "s64", "ftz" in flags))
        raise unsupported(inst, inst.opcode.data)

    def cvt_f16(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """`cvt{.ftz}.f32.f16` and `cvt.rn{.ftz}.f16.f32`; a half lives in the
        low 16 bits of its register."""
        (dt, at), mods, args = inst.op.types, set(inst.op.modifiers), inst.operands_decoded
        e = Emitter(self.fresh, guard)
        if dt == "f32" and at == "f16" and mods <= {"ftz"}:
            half = self.get_sub(inst, e, args[1], "b16", False)
            e.assign(self.dst32(inst, args[0]), e.alu("cvt.f32.f16", [half]))
            return e.ops
        if dt == "f16" and at == "f32" and "rn" in mods and mods <= {"rn", "ftz"}:
            a = self.src32(inst, args[1], e.ops)
            name = ".".join(("cvt", "rn", *(("ftz",) if "ftz" in mods else ()), "f16", "f32"))
            self.put_sub(inst, e, args[0], "b16", e.alu(name, [a]), "b16")
            return e.ops
        raise unsupported(inst, inst.opcode.data)

    def _float_copy(self, inst: ptx.InstOp, guard: GuardAttr | None,
                    flags: tuple[str, ...]) -> list[Operation]:
        """A same-type cvt rounds nothing: a move, flushed or clamped."""
        return self._alu1(inst, guard, ".".join(("cvt", *flags, "f32", "f32")) if flags
                          else "mov")

    def _alu1(self, inst: ptx.InstOp, guard: GuardAttr | None, name: str) -> list[Operation]:
        assert name in ALU_OPCODES, name
        args = inst.operands_decoded
        if len(args) != 2:
            raise unsupported(inst, inst.opcode.data)
        d = self.dst32(inst, args[0])
        pre: list[Operation] = []
        return pre + [simt.AluOp(name, d, [self.src32(inst, args[1], pre)], guard)]


def pair_to_f32(e: Emitter, pair: tuple[Src, Src], signed: bool, mode: str, sat: bool) -> Src:
    """A 64-bit integer rounded to f32: its magnitude normalised (clz of the
    pair), the top 31 bits with a sticky bit converted as an s32 with the
    integer's sign (so the directed modes round the right way), the
    exponent then raised by the shift."""
    negative = lg.negative(e, pair) if signed else None
    mag = lg.abs_pair(e, pair) if signed else pair
    lead = lg.count_pair(e, "clz", mag)
    low, top = lg.shift_pair_by(e, "shl", mag, lead)
    sticky = e.alu("selp", [1, 0, e.setp("ne", low, 0)])
    word = e.alu("or", [e.alu("or", [e.alu("shr.u", [top, 1]), e.alu("and", [top, 1])]), sticky])
    if negative is not None:
        word = e.alu("selp", [e.alu("neg", [word]), word, negative])
    rounded = e.alu(f"cvt.{mode}.f32.s32", [word])
    # |word| < 2^31 stands for mag / 2^(33 - lead): scale the float back up
    scaled = e.alu("add", [rounded, e.alu("shl", [e.alu("sub", [33, lead]), 23])])
    out = e.alu("selp", [0, scaled, e.setp("eq", lead, 64)])
    return e.alu("cvt.sat.f32.f32", [out]) if sat else out


def f32_to_pair(e: Emitter, a: Src, mode: str, signed: bool, ftz: bool) -> tuple[Src, Src]:
    """An f32 rounded to a 64-bit integer: rounded to an integral float
    first, whose significand is then shifted into place exactly; saturated
    at ±2^63 or [0, 2^64), NaN to 0."""
    r = e.alu(".".join(("cvt", mode, *(("ftz",) if ftz else ()), "f32", "f32")), [a])
    mag = e.alu("and", [r, ABS_MASK])
    exp = e.alu("shr.u", [mag, 23])
    sig = e.alu("or", [e.alu("and", [mag, 0x7FFFFF]), 0x800000])
    # below 2^24 a right shift (amounts past 31 give 0), else a pair shift
    small = e.alu("shr.u", [sig, e.alu("sub", [150, exp])])
    big = lg.shift_pair_by(e, "shl", (sig, 0), e.alu("max.s", [e.alu("sub", [exp, 150]), 0]))
    value = lg.select_pair(e, big, (small, 0), e.setp("ge.u", exp, 150))
    below = e.setp("lt.s", r, 0)
    if signed:
        value = lg.select_pair(e, lg.add_pairs(e, (0, 0), value, sub=True), value, below)
        limit = lg.select_pair(e, lg.const_pair(-1 << 63), lg.const_pair((1 << 63) - 1), below)
        value = lg.select_pair(e, limit, value, e.setp("ge.u", mag, 0x5F00_0000))
    else:
        value = lg.select_pair(e, lg.const_pair(-1), value, e.setp("ge.u", mag, 0x5F80_0000))
        value = lg.select_pair(e, (0, 0), value, below)
    return lg.select_pair(e, (0, 0), value, e.setp("gt.u", mag, INF))
