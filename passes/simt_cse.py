"""`simt-cse`: local value numbering of the machine's virtual registers.

Within each basic block, a pure op (`simt.alu`, `simt.setp`, `simt.special`)
that computes what an earlier op of the block computed — the same opcode,
the same sources (the first two in either order for a commutative opcode:
fma's addend keeps its place), under the same guard — becomes a copy of the
earlier result, and the sources of later lane-local ops read through
copies (`mov d, s` under the guard they run under: a guarded copy holds `s`
only where its guard does). Pure ops whose result nothing effective reads
are then swept, kernel-wide
(`qgc.analysis.dataflow.sweep_dead_ops`, as instruction selection does).

Instruction selection splits 64-bit arithmetic into 32-bit words with copies
between them (`bfi.b64` of two words, `mul.hi.u64` of two word pairs), and a
kernel that asks for several products of the same factors (`__umulhi`,
`__mulhi` and `(long long)p * q` of one pair) selects each on its own; at the
`tensor` level each product is a multiplier circuit, the widest the machine
has. Runs after `simt-rename-webs` (each web one register, so a value stays
in its register until the register's next definition) and before memory
layout and register allocation.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from qgc.analysis.dataflow import sweep_dead_ops
from qgc.dialects import simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.machine.opcodes import ALU_OPCODES

#: Ops whose register sources are read in their own lane only (a warp op
#: reads other lanes', where the copy's guard may not hold).
_LANE_LOCAL = (simt.AluOp, simt.SetpOp, simt.PredOp, simt.MemoryOp)


def _key(op: Operation) -> Hashable | None:
    """What `op` computes, or None when it is not a pure op."""
    if isinstance(op, simt.AluOp):
        srcs = tuple(op.srcs.data)
        if ALU_OPCODES[op.opcode.data].commutative:   # the first two: fma's addend stays
            srcs = tuple(sorted(srcs[:2], key=str)) + srcs[2:]
        return ("alu", op.opcode.data, srcs, op.guard)
    if isinstance(op, simt.SetpOp):
        return ("setp", op.cond.data, tuple(op.srcs.data), op.guard)
    if isinstance(op, simt.SpecialOp):
        return ("special", op.which.data, op.guard)
    return None


def _copy_source(op: Operation) -> RegAttr | None:
    """The register a `mov` (of a value or a predicate) copies."""
    if isinstance(op, simt.AluOp | simt.PredOp) and op.opcode.data == "mov":
        src = op.srcs.data[0]
        return src if isinstance(src, RegAttr) else None
    return None


def _copy_of(op: Operation, dst: RegAttr, src: RegAttr) -> Operation:
    """`dst = src` under `op`'s guard, as `op` (which computed src's value) would."""
    if dst.is_pred:
        copy = simt.PredOp("mov", dst, [GuardAttr(src)], op.guard)  # type: ignore[arg-type]
    else:
        copy = simt.AluOp("mov", dst, [src], op.guard)  # type: ignore[arg-type]
    copy.location = op.location       # diagnostics and spill code point at the PTX
    return copy


@dataclass
class _Numbering:
    """What one block has computed so far: each value's register (with the
    registers it was computed from, guard included), and the live copies
    (`dst → (src, guard)`, and by guard `dst → src`). `naming` finds what a
    write makes stale without a walk over everything known (a walk per write
    was quadratic in the block): each register's list of the values and
    copies made naming it, some since dropped, which `forget` skips."""

    available: dict[Hashable, tuple[RegAttr, frozenset[RegAttr]]] = field(default_factory=dict)
    copies: dict[RegAttr, tuple[RegAttr, GuardAttr | None]] = field(default_factory=dict)
    guarded: dict[GuardAttr | None, dict[RegAttr, RegAttr]] = field(default_factory=dict)
    naming: dict[RegAttr, list[tuple[bool, Hashable]]] = field(default_factory=dict)

    def read_through(self, op: simt.MachineOp) -> None:
        """Rename `op`'s sources to what they copy under `op`'s own guard."""
        if mapping := self.guarded.get(op.guard):
            op.replace_sources(dict(mapping))

    def add_copy(self, dst: RegAttr, src: RegAttr, guard: GuardAttr | None) -> None:
        self.copies[dst] = (src, guard)
        self.guarded.setdefault(guard, {})[dst] = src
        for reg in {dst, src} | ({guard.pred} if guard is not None else set()):
            self.naming.setdefault(reg, []).append((False, dst))

    def add_value(self, key: Hashable, dst: RegAttr, sources: frozenset[RegAttr]) -> None:
        self.available[key] = (dst, sources)
        for reg in sources | {dst}:
            self.naming.setdefault(reg, []).append((True, key))

    def forget(self, d: RegAttr) -> None:
        """`d` is written: what it held, or was computed from, is gone."""
        for is_value, name in self.naming.pop(d, ()):
            if is_value:
                value = self.available.get(name)
                if value is not None and (value[0] == d or d in value[1]):
                    del self.available[name]
            elif (copy := self.copies.get(name)) is not None and (
                    d in (name, copy[0]) or copy[1] is not None and copy[1].pred == d):
                del self.copies[name]
                del self.guarded[copy[1]][name]


def number_block(block: Block) -> None:
    """Value-number one block."""
    known = _Numbering()
    for op in list(block.ops):
        if not isinstance(op, simt.MachineOp):
            continue
        if isinstance(op, _LANE_LOCAL):
            known.read_through(op)
        key = _key(op)
        dst = op.defs()[0] if op.defs() else None
        if key is not None and key in known.available and dst is not None:
            new = _copy_of(op, dst, known.available[key][0])
            block.insert_op_before(new, op)
            op.detach()
            op.erase()
            op, key = new, None
        src = _copy_source(op)
        if dst is not None and src == dst:                   # mov r, r
            op.detach()
            op.erase()
            continue
        for d in op.defs():
            known.forget(d)
        if dst is not None and src is not None:
            known.add_copy(dst, src, op.guard)
        elif key is not None and dst is not None and dst not in op.uses():
            known.add_value(key, dst, frozenset(op.uses()))


@dataclass(frozen=True)
class SimtCsePass(ModulePass):
    name = "simt-cse"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for kernel in simt.kernels_of(op):
            for block in kernel.body.blocks:
                number_block(block)
            sweep_dead_ops(list(kernel.body.blocks))
