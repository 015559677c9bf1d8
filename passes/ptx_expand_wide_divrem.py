"""`ptx-expand-wide-divrem`: 64-bit `div` and `rem` as a loop of 64-bit PTX
ops, which selection turns into register pairs like any other.

A 64-bit divider is far too deep for one machine step, and the machine
has no 64-bit divide; `size_t` and `long long` arithmetic divides all the
same. Each `div`/`rem` `.u64`/`.s64` becomes restoring division, one
quotient bit an iteration over 64 iterations:

    r = r·2 + next bit of a      (the bit shifted out of r first: r ≥ 2⁶⁴ > b)
    if r ≥ b: r −= b, the quotient bit is 1

Signed operands divide their magnitudes; the quotient is negated where
the signs differ, the remainder takes the dividend's sign. Division by
zero gives what `ref` gives: a quotient of all ones, a remainder of the
dividend.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from qgc.dialects import ptx
from qgc.passes.ptx_to_simt.common import unsupported

#: registers each function with a 64-bit division declares (prefix, type, count)
REGISTERS = (("%qgc_dw", "b64", 6), ("%qgc_dp", "pred", 6), ("%qgc_di", "b32", 1))
A, B, Q, R, T, C = (f"%qgc_dw{i}" for i in range(6))
P, CARRY, NEG_A, NEG_B, NEG, ZERO = (f"%qgc_dp{i}" for i in range(6))
TRIPS = "%qgc_di0"       # iterations left


def _is_wide_divrem(op) -> bool:
    return isinstance(op, ptx.InstOp) and op.op.base in ("div", "rem") and \
        op.op.type in ("u64", "s64")


_inst = ptx.instruction


def _magnitudes() -> list[ptx.InstOp]:
    """A and B as their absolute values, NEG_A and NEG_B their signs."""
    return [_inst("setp.lt.s64", NEG_A, A, "0"), _inst("setp.lt.s64", NEG_B, B, "0"),
            _inst("sub.s64", T, "0", A), _inst("selp.b64", A, T, A, NEG_A),
            _inst("sub.s64", T, "0", B), _inst("selp.b64", B, T, B, NEG_B)]


def _loop(label: str) -> list[ptx.Operation]:
    """Q = A / B and R = A % B, unsigned; A is consumed."""
    return [_inst("mov.b64", Q, "0"), _inst("mov.b64", R, "0"), _inst("mov.u32", TRIPS, "64"),
            ptx.LabelOp(label),
            _inst("shr.u64", C, R, "63"), _inst("setp.ne.s64", CARRY, C, "0"),
            _inst("shl.b64", R, R, "1"), _inst("shr.u64", T, A, "63"),
            _inst("or.b64", R, R, T), _inst("shl.b64", A, A, "1"),
            _inst("setp.ge.u64", P, R, B), _inst("or.pred", P, P, CARRY),
            _inst("sub.s64", T, R, B), _inst("selp.b64", R, T, R, P),
            _inst("shl.b64", Q, Q, "1"), _inst("selp.b64", T, "1", "0", P),
            _inst("or.b64", Q, Q, T),
            _inst("sub.u32", TRIPS, TRIPS, "1"), _inst("setp.ne.u32", P, TRIPS, "0"),
            _inst("bra", label, guard=P)]


def _expanded(inst: ptx.InstOp, label: str) -> list[ptx.Operation]:
    args = [a.data for a in inst.args.data]
    if inst.guard is not None or inst.op.modifiers or len(args) != 3:
        raise unsupported(inst, inst.opcode.data, "only an unguarded 64-bit div or rem")
    dst, a, b = args
    signed, quotient = inst.op.type == "s64", inst.op.base == "div"
    ops: list[ptx.Operation] = [_inst("mov.b64", A, a), _inst("mov.b64", B, b)]
    if signed:
        ops += _magnitudes()
    ops += _loop(label)
    result = Q if quotient else R
    if signed and quotient:
        ops += [_inst("xor.pred", NEG, NEG_A, NEG_B), _inst("sub.s64", T, "0", Q),
                _inst("selp.b64", Q, T, Q, NEG), _inst("setp.eq.s64", ZERO, B, "0"),
                _inst("selp.b64", Q, "-1", Q, ZERO)]
    elif signed:
        ops += [_inst("sub.s64", T, "0", R), _inst("selp.b64", R, T, R, NEG_A)]
    ops.append(_inst("mov.b64", dst, result))
    return ops


@dataclass(frozen=True)
class PtxExpandWideDivremPass(ModulePass):
    name = "ptx-expand-wide-divrem"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        ptx.expand_instructions(op, _is_wide_divrem, lambda: ptx.registers(REGISTERS),
                                lambda inst, k: _expanded(inst, f"$qgc_divide_{k}"))
