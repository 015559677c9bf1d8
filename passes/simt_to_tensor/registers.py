"""Registers in a block: each lane's guarded values, the predicates, and
the records of what the block leaves live."""

from __future__ import annotations

from xdsl.dialects import builtin
from xdsl.ir import Block, SSAValue

from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.passes.simt_to_tensor.step_values import PREDS, WORD, Record, Reg


class Registers:
    """Each lane's registers as guarded values (`Reg`), and their records."""

    def guard_of(self, op, regs, lane: int) -> tuple[SSAValue, bool] | None:
        if op.guard is None:
            return None
        g = op.guard
        return (self.use(regs, lane, g.pred, None), g.is_negated)

    def use(self, regs, lane: int, r: simt.RegAttr, guard) -> SSAValue:
        """The register's value where `guard` holds."""
        entry = regs[lane].get(r)
        if entry is None:
            return self.const(0, 1 if r.is_pred else WORD)   # never written: undefined
        return self.materialise(entry, guard)

    def materialise(self, entry: Reg, guard) -> SSAValue:
        if entry.guard is None or entry.guard == guard:
            return entry.value
        p, negated = entry.guard
        old = self.materialise(entry.fallback, guard) if entry.fallback is not None else \
            self.const(0, T.width_of(entry.value))
        on, off = (old, entry.value) if negated else (entry.value, old)
        return self.alu.select(p, on, off)

    def src(self, regs, lane: int, s, guard, width: int = WORD) -> SSAValue:
        if isinstance(s, builtin.IntAttr):
            return self.const(s.data & ((1 << width) - 1), width)
        return self.use(regs, lane, s, guard)

    def cond(self, regs, lane: int, s, guard) -> SSAValue:
        """A predicate source: a register, a negated one, or 0/1."""
        if isinstance(s, int):
            return self.const(s, 1)
        if isinstance(s, builtin.IntAttr):
            return self.const(s.data & 1, 1)
        if isinstance(s, simt.GuardAttr):
            v = self.use(regs, lane, s.pred, guard)
            return self.alu.not_(v) if s.is_negated else v
        return self.use(regs, lane, s, guard)

    def define(self, regs, lane: int, r: simt.RegAttr, value: SSAValue, guard) -> None:
        old = regs[lane].get(r)
        regs[lane][r] = Reg(value, guard, old) if guard is not None else Reg(value)

    def runs(self, lane: int, guard) -> SSAValue:
        """The lane executes the op: active and its guard holds."""
        if guard is None:
            return self.active[lane]
        pos, neg = [self.active[lane]], []
        (neg if guard[1] else pos).append(guard[0])
        return self.gate(pos, neg, need=len(pos))

    def current(self, regs, lane: int, r) -> SSAValue:
        """Lane `lane`'s register as the machine holds it now: the block's
        value where the lane is active, its value from before the step elsewhere."""
        if isinstance(r, builtin.IntAttr):
            return self.const(r.data & 0xFFFF_FFFF, WORD)
        now = self.use(regs, lane, r, None)
        before = self.initial[lane].get(r)
        if before is None or before is now:
            return now
        return self.alu.select(self.active[lane], now, before)

    def register_records(self, block: Block, regs) -> list[Record]:
        """The registers the block writes and leaves live, lane by lane."""
        out = []
        for r in self.written_live_out(block):
            for ln in range(simt.LANES):
                address = self.const(self.vocab.register_address(ln, r.index.data),
                                     self.vocab.address_bits)
                valid, value = self.record_of(regs[ln][r], ln, r)
                out.append(Record(valid, address, value))
        return out

    def record_of(self, entry: Reg, lane: int, r: simt.RegAttr) -> tuple[SSAValue, SSAValue]:
        """(valid, value) of a register's record. A value written under one
        guard over the register as it came in is recorded where the guard
        holds, not merged with the old value: the block then need not keep the
        register's old value to its end (a guarded early return guards every
        op of a kernel)."""
        came_in = entry.fallback is None or (entry.fallback.guard is None and
                                             entry.fallback.value is self.initial[lane].get(r))
        if entry.guard is None or not came_in:
            return self.active[lane], self.materialise(entry, None)
        p, negated = entry.guard
        valid = self.gate([self.active[lane]], [p]) if negated else \
            self.gate([self.active[lane], p])
        return valid, entry.value

    def preds_word(self, block: Block, regs) -> SSAValue | None:
        """The new `preds` word when the block writes a predicate it leaves live."""
        written = {d for op in block.ops if isinstance(op, simt.MachineOp) for d in op.defs()
                   if d.is_pred}
        if not written & self.live_out[block]:
            return None
        lanes = []
        for ln in range(simt.LANES):
            old = self.b.slice(self.launch_word("preds"), 8 * ln, 8 * ln + PREDS)
            new = self.b.concat([self.use(regs, ln, simt.RegAttr("p", i), None)
                                 if simt.RegAttr("p", i) in regs[ln]
                                 else self.b.slice(old, i, i + 1) for i in range(PREDS)])
            lanes.append(self.alu.select(self.active[ln], new, old))
        return self.b.concat(lanes)
