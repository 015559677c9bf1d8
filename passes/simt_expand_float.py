"""`simt-expand-float`: every f32 op as a program of the machine's integer ops.

The tensor level computes with integer circuits only. Like a GPU without a
float unit, this pass replaces each f32 `simt.alu` (add sub mul fma, neg abs
min max copysign, cvt) and each f32 `simt.setp` by the straight-line program
that `qgc.machine.float_programs` gives for its opcode (the opcode table's
`expand`): unpack, clz normalisation, sticky alignment, `mul.hi.u`/`mul.lo`
products, rounding by increment, specials by selects. The `simt` engine runs
the IR before and after alike (the programs are checked against
`softfloat`, and `softfloat` against `ref`).

    simt.alu "mul.rn.f32" v3, v1, v2 guard p0
  becomes
    simt.alu "and" v10, v1, 2147483647
    ...
    simt.alu "or" v3, v57, v12 guard p0        ; the last op writes the result

Temporaries are fresh virtual registers written without a guard (the pass
runs after `simt-rename-webs`, before register allocation); only the last op
writes the destination, under the op's guard. Constant operands fold while
the program is built. `simt-form-blocks` later cuts the long straight line
into machine blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import IntAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.machine.float_programs import IntOps
from qgc.machine.opcodes import ALU_OPCODES, PRED_OPCODES, SETP_CONDITIONS, SETP_EXPANSIONS
from qgc.passes.simt_expand_divrem import _Fresh

M32 = 0xFFFF_FFFF
Word = RegAttr | int
Pred = GuardAttr | bool


def _imm(x: int) -> int:
    """An immediate as the listings spell it (all ones is -1)."""
    x &= M32
    return x - (1 << 32) if x >> 31 else x


class Emit(IntOps[Word, Pred]):
    """Builds a program's ops in fresh registers, folding constants."""

    def __init__(self, fresh: _Fresh):
        self.fresh = fresh
        self.ops: list[Operation] = []

    def alu(self, opcode: str, *srcs: Word) -> Word:
        if all(isinstance(s, int) for s in srcs):
            return ALU_OPCODES[opcode].evaluate(*(s & M32 for s in srcs))
        dst = self.fresh()
        self.ops.append(simt.AluOp(opcode, dst, [_src(s) for s in srcs]))
        return dst

    def setp(self, cond: str, a: Word, b: Word) -> Pred:
        if isinstance(a, int) and isinstance(b, int):
            return SETP_CONDITIONS[cond](a & M32, b & M32)
        dst = self.fresh("vp")
        self.ops.append(simt.SetpOp(cond, dst, _src(a), _src(b)))
        return GuardAttr(dst)

    def pred(self, opcode: str, *srcs: Pred) -> Pred:
        if all(isinstance(s, bool) for s in srcs):
            return PRED_OPCODES[opcode][1](*srcs)
        if opcode == "not":
            (g,) = srcs
            assert isinstance(g, GuardAttr)
            return g.inverted()
        if opcode in ("and", "or"):
            known = [s for s in srcs if isinstance(s, bool)]
            if known:               # x and true = x, x or true = true, ...
                other = next(s for s in srcs if not isinstance(s, bool))
                return other if known[0] == (opcode == "and") else known[0]
        dst = self.fresh("vp")
        self.ops.append(simt.PredOp(opcode, dst, list(srcs)))
        return GuardAttr(dst)

    def select(self, a: Word, b: Word, p: Pred) -> Word:
        if isinstance(p, bool):
            return a if p else b
        if a == b:
            return a
        if p.is_negated:
            a, b = b, a
        return self.alu("selp", a, b, p.pred)


def _src(s: Word) -> RegAttr | int:
    return _imm(s) if isinstance(s, int) else s


def _sources(op: simt.AluOp | simt.SetpOp) -> list[Word]:
    return [s.data & M32 if isinstance(s, IntAttr) else s for s in op.srcs.data]


def _write(e: Emit, op: simt.AluOp | simt.SetpOp, result: Word | Pred) -> None:
    """The result into the op's destination under its guard: the last op
    retargeted where it computed the result, else a move."""
    dst, guard = op.dst, op.guard
    last = e.ops[-1] if e.ops else None
    if isinstance(result, GuardAttr) and not result.is_negated:
        result = result.pred
    if isinstance(last, simt.AluOp | simt.SetpOp | simt.PredOp) and last.dst == result:
        last.properties["dst"] = dst
        if guard is not None:
            last.properties["guard"] = guard
        return
    if isinstance(op, simt.SetpOp):
        src = int(result) if isinstance(result, bool) else result
        if isinstance(src, RegAttr):
            src = GuardAttr(src)
        e.ops.append(simt.PredOp("mov", dst, [src], guard))
    else:
        e.ops.append(simt.AluOp("mov", dst, [_src(result)], guard))


def _program(op: Operation):
    if isinstance(op, simt.AluOp):
        return ALU_OPCODES[op.opcode.data].expand
    if isinstance(op, simt.SetpOp):
        return SETP_EXPANSIONS.get(op.cond.data)
    return None


def expand_floats(kernel: simt.KernelOp) -> None:
    if kernel.regs is not None:
        raise DiagnosticException(
            f"{ptx.location_prefix(kernel)}error: simt-expand-float runs on virtual "
            f"registers, before simt-allocate-registers (kernel '{kernel.kernel_name}')")
    fresh = _Fresh(kernel)
    for block in kernel.body.blocks:
        for op in list(block.ops):
            program = _program(op)
            if program is None:
                continue
            assert isinstance(op, simt.AluOp | simt.SetpOp)
            e = Emit(fresh)
            _write(e, op, program(e, *_sources(op)))
            for new in e.ops:
                new.location = op.location
            block.insert_ops_before(e.ops, op)
            op.detach()
            op.erase()


@dataclass(frozen=True)
class SimtExpandFloatPass(ModulePass):
    name = "simt-expand-float"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for kernel in simt.kernels_of(op):
            expand_floats(kernel)
