"""`tensor-split-thresholds{intermediate=6144}`: a `tensor.threshold` too
wide for one MLP half, split into thresholds that fit and one that ORs them.

A step picks each block's value by its block bit, `Σ_k [exec_k ∧ v_k]`
(`Gates.pick`): one neuron per block and bit, so a kernel of 237 blocks that
all read one register port needs 237 × 32 = 7,584 neurons in one half, more
than the 2B shape's 6,144. Where every row of an op is a sum of threshold
parts with positive coefficients (the program promises each row is 0 or 1),
any subset of a row's parts also sums to 0 or 1, and at most one subset's
sum is 1: the row is the OR of its subsets' sums. So the op's distinct parts
are cut, in order, into groups whose neurons fit a half (with the constant
neuron), one threshold a group over the operands it reads, and one more
threshold ORs the groups row by row: the same bits, one MLP half later.
Other ops stay as they are, and the scheduler says which does not fit
(`tensor-schedule-layers`). Runs before the schedule (placed ops are left
alone)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import tensor as T
from qgc.dialects.tensor.attributes import ThresholdRow, row_attr, sum_attr


def splittable(op: T.ThresholdOp) -> bool:
    """Every row a sum of parts with positive coefficients."""
    return all(c > 0 for row in op.row_list() for c, _ in row.parts)


def part_groups(op: T.ThresholdOp, capacity: int) -> list[list[ThresholdRow]] | None:
    """The op's distinct parts by the first bit they read (a pick's parts
    choice by choice, so a group reads only its choices' operands), cut into
    groups of at most `capacity` gadget neurons (less a grouped op's
    constant neuron); None where one part alone is wider."""
    room = capacity - int(op.group is not None)
    groups: list[list[ThresholdRow]] = [[]]
    used = 0
    for part in sorted(op.distinct_parts(), key=lambda part: part.index_span()[0]):
        need = part.gadget().count
        if need > room:
            return None
        if used + need > room:
            groups.append([])
            used = 0
        groups[-1].append(part)
        used += need
    return groups


def _operand_bits(op: T.ThresholdOp) -> list[tuple[int, int]]:
    """(first bit, width) of each operand in the concatenated input."""
    spans, at = [], 0
    for value in op.inputs:
        width = T.width_of(value)
        spans.append((at, width))
        at += width
    return spans


def _group_op(op: T.ThresholdOp, group: set[ThresholdRow]) -> T.ThresholdOp:
    """The rows of `op` with only the parts in `group` (a row with none is
    constant 0), over the operands those parts read."""
    rows = [[(c, part) for c, part in row.parts if part in group] for row in op.row_list()]
    read = {i for parts in rows for _, part in parts for i, _ in part.terms}
    inputs, where = [], {}
    at = 0
    for value, (first, width) in zip(op.inputs, _operand_bits(op), strict=True):
        if any(first + k in read for k in range(width)):
            inputs.append(value)
            where.update({first + k: at + k for k in range(width)})
            at += width
    attrs = []
    for parts in rows:
        renamed = [(c, {where[i]: w for i, w in part.terms}, part.threshold)
                   for c, part in parts]
        attrs.append(sum_attr(renamed) if renamed else row_attr({}, 1))
    return _grouped_like(op, T.ThresholdOp(inputs, attrs))


def _or_op(op: T.ThresholdOp, pieces: list[T.ThresholdOp],
           groups: list[set[ThresholdRow]]) -> T.ThresholdOp:
    """Bit j: whether bit j of any piece whose row j has parts is set."""
    n = len(op.row_list())
    rows = [row_attr({p * n + j: 1 for p, group in enumerate(groups)
                      if any(part in group for _, part in row.parts)}, 1)
            for j, row in enumerate(op.row_list())]
    return _grouped_like(op, T.ThresholdOp([p.result for p in pieces], rows))


def _grouped_like(op: T.ThresholdOp, new: T.ThresholdOp) -> T.ThresholdOp:
    """`new` in `op`'s group (zero unless that block runs), if it has one."""
    if op.group is not None:
        new.properties["group"] = op.group
    return new


def split(op: T.ThresholdOp, capacity: int) -> bool:
    """Split `op` where it is wider than `capacity` neurons and can be;
    whether it was."""
    if op.gadget_neuron_count() <= capacity or not splittable(op):
        return False
    groups = part_groups(op, capacity)     # two or more: the op is wider than a group
    if groups is None:
        return False
    sets = [set(group) for group in groups]
    pieces = [_group_op(op, group) for group in sets]
    joined = _or_op(op, pieces, sets)
    block = op.parent_block()
    assert block is not None
    block.insert_ops_before([*pieces, joined], op)
    op.result.replace_all_uses_with(joined.result)
    op.detach()
    op.erase()
    return True


@dataclass(frozen=True)
class TensorSplitThresholdsPass(ModulePass):
    name = "tensor-split-thresholds"

    intermediate: int = T.DEFAULT_INTERMEDIATE
    """MLP neurons per layer (the config's intermediate_size); one is the
    constant neuron."""

    @staticmethod
    def options_of(config: Any) -> dict[str, Any]:
        """The pass's options for a base text config."""
        return {"intermediate": config.intermediate_size}

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.intermediate < 2:
            raise DiagnosticException("error: tensor-split-thresholds: intermediate must be "
                                      "at least 2")
        for program in T.programs_of(op):
            for inner in program.ops():
                if isinstance(inner, T.ThresholdOp) and inner.placed_layer is None:
                    split(inner, self.intermediate - 1)
