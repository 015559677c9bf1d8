"""Small circuits the lowering builds everywhere: bits, threshold gates,
constants, one-of-many picks."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from qgc.dialects import tensor as T
from qgc.passes.simt_to_tensor.step_values import WORD


class Gates:
    """Gates over 1-bit values and words, on the program builder `b` (and the
    block's `alu`)."""

    def bit(self, name: str, i: int = 0) -> SSAValue:
        return self.b.slice(self.inp[name], i, i + 1)

    def bits_of(self, value: SSAValue) -> list[SSAValue]:
        return [self.b.slice(value, i, i + 1) for i in range(T.width_of(value))]

    def gate(self, pos: Sequence[SSAValue], neg: Sequence[SSAValue] = (), need: int | None = None
             ) -> SSAValue:
        """[Σ pos − Σ neg ≥ need] over 1-bit values (need: all of pos)."""
        vals = list(pos) + list(neg)
        terms = {i: 1 for i in range(len(pos))} | {len(pos) + i: -1 for i in range(len(neg))}
        return self.b.threshold(vals, [(terms, len(pos) if need is None else need)])

    def any_of(self, vals: Sequence[SSAValue]) -> SSAValue:
        return self.gate(vals, need=1)

    def none_of(self, vals: Sequence[SSAValue]) -> SSAValue:
        return self.gate([], vals, need=0)

    def bits_or(self, x: SSAValue, y: SSAValue) -> SSAValue:
        n = T.width_of(x)
        return self.b.threshold([x, y], [({i: 1, n + i: 1}, 1) for i in range(n)])

    def bits_and_bit(self, x: SSAValue, e: SSAValue) -> SSAValue:
        n = T.width_of(x)
        return self.b.threshold([x, e], [({i: 1, n: 1}, 2) for i in range(n)])

    def const(self, value: int, width: int) -> SSAValue:
        return self.alu.const(value, width)

    def common_const(self, value: int, width: int) -> SSAValue:
        """A constant every block may use (built outside any block's group)."""
        with self.b.ungrouped():
            return self.common_alu.const(value, width)

    def zext(self, value: SSAValue, width: int = WORD) -> SSAValue:
        n = T.width_of(value)
        return value if n == width else self.b.concat([value, self.const(0, width - n)])

    def pick(self, choices: Sequence[tuple[SSAValue, SSAValue]]) -> SSAValue:
        """Σ_i [sel_i ∧ value_i] bit by bit, at most one sel_i set: one layer."""
        n = T.width_of(choices[0][1])
        vals = [v for sel, val in choices for v in (sel, val)]
        offsets, at = [], 0
        for _, val in choices:
            offsets.append(at)
            at += 1 + T.width_of(val)
        rows = [[(1, {o: 1, o + 1 + i: 1}, 2) for o in offsets] for i in range(n)]
        return self.b.threshold(vals, rows)

    def by_block(self, per_block: list[SSAValue]) -> SSAValue:
        """The executing block's value (blocks' circuits all run; pick one)."""
        if len(per_block) == 1:
            return per_block[0]
        return self.pick([(self.bit("exec_b", i), v) for i, v in enumerate(per_block)])


def split_bits(bits: Sequence[SSAValue], value: int) -> tuple[list[SSAValue], list[SSAValue]]:
    """`bits` split into those `value` sets and those it clears (to match it)."""
    return ([x for i, x in enumerate(bits) if value >> i & 1],
            [x for i, x in enumerate(bits) if not value >> i & 1])
