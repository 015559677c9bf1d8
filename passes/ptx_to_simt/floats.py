"""f32 compares and conversions: `setp.CMP{.ftz}.f32` and `cvt` between f32
and 32-bit integers (the arithmetic selects through the opcode table)."""

from __future__ import annotations

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr
from qgc.machine import softfloat
from qgc.machine.opcodes import ALU_OPCODES
from qgc.passes.ptx_to_simt.common import unsupported

ROUNDINGS = softfloat.MODES
INT_ROUNDINGS = tuple(m + "i" for m in ROUNDINGS)


class FloatOps:
    """Selection of f32 compares and conversions."""

    def float_cond(self, inst: ptx.InstOp) -> str:
        """The `simt.setp` condition of `setp.CMP{.ftz}.f32`."""
        mods = inst.op.modifiers
        if not mods or mods[0] not in softfloat.COMPARES or set(mods[1:]) - {"ftz"}:
            raise unsupported(inst, inst.opcode.data)
        return ".".join((*mods, "f32"))

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
