"""What the simt → tensor lowering tracks through a machine step: the level's
constants, a register's guarded value, a record, a pending write, the lanes'
control and a block's result."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue
from xdsl.utils.exceptions import DiagnosticException

from qgc import protocol as P
from qgc.diagnostics import location_prefix

WORD = 32
SLOTS = P.BANK_WORDS           # rows of a memory head (slot 127 keeps the query exact)
KEY_BITS = P.KEY_BITS
WARP_KEY_BITS = 3
END_BITS = P.BLOCK_BITS + 2            # next block, exited, barrier
MAX_WARPS = 8
PREDS = 8                              # predicate bits per lane in the `preds` word
LA = P.LaunchArea


def unsupported(op, what: str) -> DiagnosticException:
    return DiagnosticException(f"{location_prefix(op)}error: {what} is not yet supported by "
                               "the machine's tensor level")


@dataclass
class Reg:
    """A register's value in one lane during the block: `value` where `guard`
    holds (None: always), `fallback` elsewhere."""

    value: SSAValue
    guard: tuple[SSAValue, bool] | None = None
    fallback: Reg | None = None


@dataclass
class Record:
    valid: SSAValue
    address: SSAValue          # Vocabulary.address_bits bits
    value: SSAValue            # 32 bits


@dataclass
class Write:
    """A memory write of the step so far, for loads that follow it: `where`
    is what static disambiguation knows ('global N', 'shared', ('spill', lane,
    slot)); `key` the word address, `en` whether it happens."""

    where: object
    key: SSAValue
    en: SSAValue
    value: SSAValue


@dataclass
class Control:
    """Per-lane control of the executing block."""

    active: list[SSAValue]         # the lane runs this step
    pc: list[SSAValue]             # its next block before the step (BLOCK_BITS)
    exited: list[SSAValue]
    wait: list[SSAValue]           # still held at a barrier after this step
    lanes_word: SSAValue
    flags_word: SSAValue


@dataclass
class BlockResult:
    records: list[Record]
    target: list[SSAValue]         # per lane: next block bits, exit, barrier (END_BITS - 0)
    preds: SSAValue | None         # the new `preds` word, or None: unchanged
    trap: SSAValue                 # faulted, then the first fault's site and lane bits
