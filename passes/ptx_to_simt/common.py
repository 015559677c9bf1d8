"""What the selector's parts share: PTX type classes, the refusal diagnostic and
why an operand is not a 32-bit value."""

from __future__ import annotations

from typing import Protocol

from xdsl.ir import Operation
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import ptx, simt

#: PTX type classes: 32-bit integers, 32-bit words, 64-bit and sub-word integers.
INT32 = ("s32", "u32", "b32")
WORD32 = ("s32", "u32", "b32", "f32")
WIDE = ("s64", "u64", "b64")
SUBWORD = ("s8", "u8", "b8", "s16", "u16", "b16")
SPECIAL_NAMES = {f"%{s}": s for s in simt.SPECIALS}

#: PTX comparisons → `simt.setp` conditions, for signed and unsigned operands.
SETP_SIGNED = {"eq": "eq", "ne": "ne", "lt": "lt.s", "le": "le.s", "gt": "gt.s", "ge": "ge.s",
               "lo": "lt.u", "ls": "le.u", "hi": "gt.u", "hs": "ge.u"}
SETP_UNSIGNED = {"eq": "eq", "ne": "ne", "lt": "lt.u", "le": "le.u", "gt": "gt.u",
                 "ge": "ge.u", "lo": "lt.u", "ls": "le.u", "hi": "gt.u", "hs": "ge.u"}


def unsupported(op: Operation, what: str, reason: str = "") -> DiagnosticException:
    """The diagnostic for anything the machine cannot run yet."""
    tail = f" ({reason})" if reason else ""
    return DiagnosticException(f"{ptx.location_prefix(op)}error: '{what}' is not yet "
                               f"supported by the machine{tail}")


class RegisterWidths(Protocol):
    """What `why_not_32` asks of the selector: a PTX register's width in bits."""

    def bits(self, name: str) -> int: ...


def why_not_32(operand: ptx.Operand, sel: RegisterWidths) -> str:
    if isinstance(operand, ptx.Reg):
        if operand.name in ptx.SPECIAL_REGISTERS:
            return f"special register {operand.name}"
        bits = sel.bits(operand.name)
        if bits == 1:
            return f"predicate '{operand.name}' as a value"
        if bits:
            return f"{bits}-bit register '{operand.name}'"
    if isinstance(operand, ptx.Sym):
        return f"the address of '{operand.name}'"
    if isinstance(operand, ptx.Vec):
        return "vector operands"
    return ""
