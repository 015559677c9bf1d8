"""Circuits built once and instantiated: the four lanes of a block (and
the same op in later blocks) run the same circuit over other bits.

A circuit's construction depends only on the *shape* of its inputs: which
bits are constants (folded) and which real bits they are, up to renaming
the values that hold them. The first build of an (operation, shape) is
recorded (the ops it appended); a later one of the same shape clones those
ops over its own values, each `tensor.threshold` meeting the same
common-subexpression table a fresh build would (`AluCore._threshold`), so
the program is the one a fresh build gives, op for op.

A build is kept as a template only when it is closed: every operand of
its ops is one of its own results, an input (or a value holding an input's
bits) or a constant, and it left the side tables (`AluCore._side_tables`:
the words a narrow multiplier keeps for a later one) as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from qgc.dialects import tensor as T

#: (the inputs' widths and bits, constants as 0/1 and real bits as (value
#: ordinal, index)), (the widths of the values holding the real bits)
Shape = tuple[tuple[tuple[int, tuple], ...], tuple[int, ...]]


@dataclass(frozen=True)
class Template:
    """A recorded build: its inputs, the values holding their real bits
    (in ordinal order), its ops and its result."""

    inputs: tuple[SSAValue, ...]
    holders: tuple[SSAValue, ...]
    ops: tuple[Operation, ...]
    result: SSAValue


def shape_of(bits: Callable[[SSAValue], list], inputs: Sequence[SSAValue]
             ) -> tuple[Shape, list[SSAValue]] | None:
    """The inputs' shape and the values holding their real bits, or None
    when a bit is neither a constant nor a plain real bit."""
    ordinal: dict[SSAValue, int] = {}
    shape = []
    for x in inputs:
        pattern = []
        for form in bits(x):
            if form.is_const:
                pattern.append(form.const)
            elif form.is_real:
                (value, index), = form.terms
                pattern.append((ordinal.setdefault(value, len(ordinal)), index))
            else:
                return None
        shape.append((T.width_of(x), tuple(pattern)))
    holders = list(ordinal)
    return (tuple(shape), tuple(T.width_of(v) for v in holders)), holders


def renaming(template: Template, inputs: Sequence[SSAValue],
             holders: Sequence[SSAValue]) -> dict[SSAValue, SSAValue] | None:
    """The template's input values → these, when that is one-to-one."""
    mapping: dict[SSAValue, SSAValue] = {}
    for old, new in zip((*template.inputs, *template.holders), (*inputs, *holders), strict=True):
        if mapping.setdefault(old, new) is not new:
            return None
    return mapping if len(set(mapping.values())) == len(mapping) else None


def is_closed(ops: Sequence[Operation], result: SSAValue, inputs: Sequence[SSAValue],
              holders: Sequence[SSAValue]) -> bool:
    """Whether the ops read only their own results, the inputs, their
    holders and constants (and the result is one of those)."""
    known = {*inputs, *holders}
    for op in ops:
        if not all(v in known or _is_constant(v) for v in op.operands):
            return False
        known.update(op.results)
    return result in known or _is_constant(result)


def _is_constant(value: SSAValue) -> bool:
    return isinstance(value.owner, T.ThresholdOp) and not value.owner.inputs


#: the recorded builds by (operation key, shape), shared by the ALUs of one
#: lowering (one per block)
Templates = dict[tuple[Hashable, Shape], Template]
