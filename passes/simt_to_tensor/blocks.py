"""A machine block's circuits, op by op and lane by lane, and its terminator."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Block, Operation, SSAValue

from qgc import protocol as P
from qgc.dialects import simt
from qgc.machine.opcodes import ALU_OPCODES, SETP_EXPANSIONS, LowerHints
from qgc.passes.simt_to_tensor.circuits import Alu
from qgc.passes.simt_to_tensor.step_values import (
    END_BITS,
    BlockResult,
    Control,
    Record,
    Reg,
    Write,
    unsupported,
)

#: the machine ops a block's lowering has circuits for (`lower_op` refuses any
#: other), and its terminators (`terminator`): the coverage doc's tensor
#: column checks a kernel's ops against the same table
LOWERED_OPS = (simt.LdOp, simt.StOp, simt.AtomOp, simt.WarpOp, simt.SpecialOp, simt.SetpOp,
               simt.PredOp, simt.AluOp, *simt.TERMINATORS)


class Blocks:
    """The block's ops (scalar ones here; memory, warp ops and atomics in
    their mixins)."""

    def lower_block(self, index: int, block: Block, ctl: Control) -> BlockResult:
        """Block `index`'s circuits, each op grouped by the block (when there
        are several): zero unless the step runs it, so blocks share residual
        coordinates. A fresh ALU keeps common subexpressions inside the block."""
        self.alu = Alu(self.b, templates=self.common_alu.templates)
        try:
            with self.b.grouped(index if len(self.blocks) > 1 else None):
                return self._lower_block(index, block, self.register_ports(index), ctl)
        finally:
            self.alu = self.common_alu

    def _lower_block(self, index: int, block: Block, ports, ctl: Control) -> BlockResult:
        lanes = range(simt.LANES)
        regs: list[dict[simt.RegAttr, Reg]] = [{} for _ in lanes]
        self.initial: list[dict[simt.RegAttr, SSAValue]] = [{} for _ in lanes]
        for j, r in enumerate(self.vocab.ports[index]):
            reg = simt.RegAttr("r", r)
            for ln in lanes:
                regs[ln][reg] = Reg(ports[j][ln])
                self.initial[ln][reg] = ports[j][ln]
        pred_in = [r for r in self.live_in[block] if r.is_pred]
        for r in pred_in:
            for ln in lanes:
                v = self.b.slice(self.launch_word("preds"), 8 * ln + r.index.data,
                                 8 * ln + r.index.data + 1)
                regs[ln][r] = Reg(v)
                self.initial[ln][r] = v
        self.active = ctl.active
        records: list[Record] = []
        self.pending: list[Write] = []
        self.faults: list[tuple[int, list[SSAValue]]] = []
        self.bounds_of: dict[int, tuple[SSAValue, SSAValue]] = {}
        self.byte_bounds_of: dict[int, tuple[SSAValue, SSAValue, SSAValue]] = {}
        ops = list(block.ops)
        self.high_later = high_words_later(ops)
        for op in ops[:-1]:
            self.lower_op(op, regs, records)
        records += self.register_records(block, regs)
        preds = self.preds_word(block, regs)
        return BlockResult(records, self.terminator(ops[-1], regs), preds, self.first_fault())

    def lower_op(self, op, regs, records) -> None:
        if not isinstance(op, LOWERED_OPS):
            raise unsupported(op, f"'{op.name}'")
        lanes = range(simt.LANES)
        if isinstance(op, simt.LdOp) and op.space.data == "param":
            value = self.param(op.offset.value.data)
            for ln in lanes:
                self.define(regs, ln, op.dst, value, self.guard_of(op, regs, ln))
            return
        if isinstance(op, simt.LdOp | simt.StOp | simt.AtomOp):
            self.lower_memory(op, regs, records)
            return
        if isinstance(op, simt.WarpOp):
            self.lower_warp(op, regs)
            return
        for ln in lanes:
            g = self.guard_of(op, regs, ln)
            if isinstance(op, simt.SpecialOp):
                value = self.special(op.which.data, ln)
            elif isinstance(op, simt.SetpOp):
                if op.cond.data in SETP_EXPANSIONS:
                    raise unsupported(op, f"'{op.cond.data}' (simt-expand-float expands it)")
                a, c = (self.src(regs, ln, s, g) for s in op.srcs.data)
                value = self.alu.setp(op.cond.data, a, c)
            elif isinstance(op, simt.PredOp):
                value = self.lower_pred(op, regs, ln, g)
            else:
                value = self.lower_alu(op, regs, ln, g)
            self.define(regs, ln, op.dst, value, g)

    def special(self, what: str, lane: int) -> SSAValue:
        if what in simt.LANE_SPECIALS:
            return self.const(simt.lane_special(what, lane), 32)
        if what in simt.WARP_SPECIALS:
            return self.zext(self.launch_byte("warp", simt.WARP_SPECIALS.index(what)))
        reg, axis = what.split(".")
        index = "xyz".index(axis)
        if reg == "tid":
            return self.zext(self.launch_byte(what, lane))
        return self.zext(self.launch_byte(reg, index))

    def lower_pred(self, op: simt.PredOp, regs, ln: int, g) -> SSAValue:
        x = [self.cond(regs, ln, s, g) for s in op.sources()]
        opc = op.opcode.data
        if opc == "mov":
            return x[0]
        if opc == "not":
            return self.alu.not_(x[0])
        return {"and": self.alu.and_, "or": self.alu.or_, "xor": self.alu.xor}[opc](x[0], x[1])

    def lower_alu(self, op: simt.AluOp, regs, ln: int, g) -> SSAValue:
        """The opcode's circuit (`qgc.machine.opcodes`) for lane `ln`."""
        code = ALU_OPCODES[op.opcode.data]
        if code.lower is None:
            expander = "simt-expand-float" if code.expand else "simt-expand-divrem"
            raise unsupported(op, f"'{code.name}' ({expander} expands it)")
        x = [self.use(regs, ln, s, g) if kind == "pred" else self.src(regs, ln, s, g)
             for s, kind in zip(op.srcs.data, code.sources, strict=True)]
        hints = LowerHints(high_later=self.high_later.get(op))
        return self.alu.instantiated((op.opcode.data, hints), x,
                                     lambda: code.lower(self.alu, x, hints))

    def terminator(self, term, regs) -> list[SSAValue]:
        """Per lane: the next block (binary), exited, waiting at a barrier."""
        def fixed(block_index: int, exits: int = 0, waits: int = 0) -> SSAValue:
            return self.const(block_index | exits << P.BLOCK_BITS | waits << (P.BLOCK_BITS + 1),
                              END_BITS)
        if isinstance(term, simt.ExitOp):
            return [fixed(0, exits=1)] * simt.LANES
        if isinstance(term, simt.NextOp | simt.BarrierOp):
            t = fixed(self.blocks.index(term.dest), waits=isinstance(term, simt.BarrierOp))
            return [t] * simt.LANES
        assert isinstance(term, simt.BranchOp)
        then_, else_ = self.blocks.index(term.then_dest), self.blocks.index(term.else_dest)
        out = []
        for ln in range(simt.LANES):
            p = self.use(regs, ln, term.cond.pred, None)
            if term.cond.is_negated:
                p = self.alu.not_(p)
            out.append(self.alu.select(p, fixed(then_), fixed(else_)))
        return out


def high_words_later(ops: Sequence[Operation]) -> dict[simt.AluOp, bool]:
    """The `mul.lo` ops whose factors a later `mul.hi` under the same guard
    multiplies again, neither factor redefined in between (PTX `mul.wide`
    selected as the pair), with that `mul.hi`'s signedness: one circuit then
    gives both words."""
    found: dict[simt.AluOp, bool] = {}
    open_lo: dict[tuple, simt.AluOp] = {}        # (guard, factors) → a mul.lo of them
    for op in ops:
        if isinstance(op, simt.AluOp) and op.opcode.data.startswith(("mul.lo", "mul.hi")):
            key = (op.guard, frozenset(op.srcs.data))
            if op.opcode.data == "mul.lo":
                open_lo.setdefault(key, op)
            elif key in open_lo:
                found.setdefault(open_lo[key], op.opcode.data == "mul.hi.s")
        defined = set(op.defs()) if isinstance(op, simt.MachineOp) else set()
        open_lo = {k: v for k, v in open_lo.items() if not defined & k[1]}
    return found
