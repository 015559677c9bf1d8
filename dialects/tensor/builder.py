"""`ProgramBuilder`: a `tensor.program` built op by op."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from fractions import Fraction

from xdsl.ir import Operation, SSAValue

from qgc.dialects.tensor.attributes import RowAttr, SumAttr, i64_attr, row_attrs
from qgc.dialects.tensor.ops import (
    ConcatOp,
    InputOp,
    KvReadOp,
    KvWriteOp,
    MemoryOp,
    MergeOp,
    OutputOp,
    SliceOp,
    ThresholdOp,
)
from qgc.dialects.tensor.program import ProgramOp


class ProgramBuilder:
    """Builds a `tensor.program` op by op (what lowerings and tests use):

        b = ProgramBuilder("add4")
        a, c = b.input("a", 4), b.input("cin", 1)
        s = b.threshold([a, c], [({0: 1, 4: 1}, 1)])
        b.output("s", s)
        program = b.program

    Inside `with b.grouped(k):` thresholds and reads get `group k` (see
    `ProgramOp`); `with b.ungrouped():` builds what every group shares.
    """

    def __init__(self, name: str):
        self.program = ProgramOp(name)
        self.block = self.program.body.block
        self._memories: dict[str, MemoryOp] = {}
        self._group: int | None = None

    def _add(self, op: Operation) -> Operation:
        if self._group is not None and isinstance(op, ThresholdOp | KvReadOp):
            op.properties["group"] = i64_attr(self._group)
        self.block.add_op(op)
        return op

    @contextlib.contextmanager
    def grouped(self, group: int | None):
        outer, self._group = self._group, group
        try:
            yield
        finally:
            self._group = outer

    def ungrouped(self):
        return self.grouped(None)

    def input(self, name: str, width: int) -> SSAValue:
        return self._add(InputOp(name, width)).results[0]

    def output(self, name: str, value: SSAValue) -> None:
        self._add(OutputOp(name, value))

    def threshold(self, inputs: Sequence[SSAValue],
                  rows: Sequence[tuple[dict[int, int], Fraction | int | float]
                                 | Sequence[tuple[int, dict[int, int], Fraction | int]]]
                  ) -> SSAValue:
        """Rows over the concatenated inputs: ({input bit index: weight},
        threshold), or a sum row as a list of (coefficient, {index: weight},
        threshold) parts."""
        return self.threshold_rows(inputs, row_attrs(rows))

    def threshold_rows(self, inputs: Sequence[SSAValue],
                       rows: Sequence[RowAttr | SumAttr]) -> SSAValue:
        """`threshold` with its rows already attributes."""
        return self._add(ThresholdOp(list(inputs), list(rows))).results[0]

    def slice(self, value: SSAValue, lo: int, hi: int) -> SSAValue:
        return self._add(SliceOp(value, lo, hi)).results[0]

    def concat(self, values: Sequence[SSAValue]) -> SSAValue:
        return self._add(ConcatOp(list(values))).results[0]

    def merge(self, reads: Sequence[SSAValue]) -> SSAValue:
        return self._add(MergeOp(list(reads))).results[0]

    def memory(self, name: str, slots: int, width: int) -> str:
        self._memories[name] = self._add(MemoryOp(name, slots, width))  # type: ignore[assignment]
        return name

    def kv_write(self, memory: str, kind: str, key: SSAValue, value: SSAValue,
                 enable: SSAValue | None = None) -> None:
        self._add(KvWriteOp(memory, kind, key, value, enable))

    def kv_read(self, memory: str, kind: str, key: SSAValue,
                enable: SSAValue | None = None) -> SSAValue:
        mem = self._memories.get(memory)
        if mem is None or mem.parent is not self.block:   # added or moved behind our back
            mem = self.program.memories()[memory]
        return self._add(KvReadOp(memory, kind, key, mem.n_width, enable)).results[0]


def programs_of(root: Operation) -> list[ProgramOp]:
    return [op for op in root.walk() if isinstance(op, ProgramOp)]
