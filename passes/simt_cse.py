"""`simt-cse`: local value numbering of the machine's virtual registers.

Within each basic block, a pure op (`simt.alu`, `simt.setp`, `simt.special`)
that computes what an earlier op of the block computed — the same opcode,
the same sources (in either order for a commutative opcode), under the same
guard — becomes a copy of the earlier result, and the sources of later
lane-local ops read through copies (`mov d, s` under the guard they run
under: a guarded copy holds `s` only where its guard does). Pure ops whose
result nobody reads are then erased, kernel-wide.

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
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Attribute, Block, Operation
from xdsl.passes import ModulePass

from qgc.dialects import simt
from qgc.dialects.simt import GuardAttr, RegAttr

#: ALU opcodes whose two (first two, for `mad.lo`: none) sources commute.
COMMUTATIVE = frozenset({"add", "mul.lo", "mul.hi.u", "mul.hi.s", "and", "or", "xor",
                         "min.s", "min.u", "max.s", "max.u"})

_PURE = (simt.AluOp, simt.SetpOp, simt.SpecialOp)
#: Ops whose register sources are read in their own lane only (a warp op
#: reads other lanes', where the copy's guard may not hold).
_LANE_LOCAL = (simt.AluOp, simt.SetpOp, simt.PredOp, simt.MemoryOp)


def _key(op: Operation) -> Hashable | None:
    """What `op` computes, or None when it is not a pure op."""
    if isinstance(op, simt.AluOp):
        srcs = tuple(op.srcs.data)
        if op.opcode.data in COMMUTATIVE:
            srcs = tuple(sorted(srcs, key=str))
        return ("alu", op.opcode.data, srcs, op.guard)
    if isinstance(op, simt.SetpOp):
        return ("setp", op.cond.data, tuple(op.srcs.data), op.guard)
    if isinstance(op, simt.SpecialOp):
        return ("special", op.which.data, op.guard)
    return None


def _reads(key: Hashable) -> set[RegAttr]:
    """The registers a value-number key depends on (its sources and guard)."""
    found: set[RegAttr] = set()

    def walk(x) -> None:
        if isinstance(x, RegAttr):
            found.add(x)
        elif isinstance(x, GuardAttr):
            found.add(x.pred)
        elif isinstance(x, tuple):
            for y in x:
                walk(y)
    walk(key)
    return found


def _copy_source(op: Operation) -> RegAttr | None:
    if isinstance(op, simt.AluOp) and op.opcode.data == "mov":
        src = op.srcs.data[0]
        return src if isinstance(src, RegAttr) else None
    if isinstance(op, simt.PredOp) and op.opcode.data == "mov":
        src = op.srcs.data[0]
        return src if isinstance(src, RegAttr) else None
    return None


def _copy_of(op: Operation, dst: RegAttr, src: RegAttr) -> Operation:
    """`dst = src` under `op`'s guard, as `op` (which computed src's value) would."""
    if dst.is_pred:
        return simt.PredOp("mov", dst, [GuardAttr(src)], op.guard)  # type: ignore[arg-type]
    return simt.AluOp("mov", dst, [src], op.guard)  # type: ignore[arg-type]


def _read_through(op: Operation, copies: dict[RegAttr, tuple[RegAttr, Attribute | None]]) -> None:
    """Rename `op`'s sources (not its destination or guard) to what they copy."""
    mapping = {dst: src for dst, (src, guard) in copies.items() if guard == op.guard}
    if not mapping:
        return
    for name, value in list(op.properties.items()):
        if name not in ("dst", "guard"):
            op.properties[name] = simt._rename(value, mapping)


def number_block(block: Block) -> int:
    """Value-number one block; returns how many ops became copies."""
    available: dict[Hashable, RegAttr] = {}
    copies: dict[RegAttr, tuple[RegAttr, Attribute | None]] = {}
    replaced = 0
    for op in list(block.ops):
        if not isinstance(op, simt.MachineOp):
            continue
        if isinstance(op, _LANE_LOCAL):
            _read_through(op, copies)
        key = _key(op)
        dst = op.defs()[0] if op.defs() else None
        if key is not None and key in available and dst is not None:
            new = _copy_of(op, dst, available[key])
            block.insert_op_before(new, op)
            op.detach()
            op.erase()
            op, key = new, None
            replaced += 1
        if _copy_source(op) == dst and dst is not None:       # mov r, r
            op.detach()
            op.erase()
            continue
        for d in op.defs():
            copies = {k: v for k, v in copies.items() if d not in (k, v[0]) and
                      (v[1] is None or v[1].pred != d)}
            available = {k: v for k, v in available.items() if v != d and d not in _reads(k)}
        src = _copy_source(op)
        if dst is not None and src is not None and src != dst:
            copies[dst] = (src, op.guard)
        elif key is not None and dst is not None and dst not in _reads(key):
            available[key] = dst
    return replaced


def erase_dead(kernel: simt.KernelOp) -> int:
    """Erase pure ops (and copies) whose result no op reads; returns how many."""
    erased = 0
    while True:
        used: set[RegAttr] = set()
        for block in kernel.body.blocks:
            for op in block.ops:
                if isinstance(op, simt.MachineOp):
                    used.update(op.uses())
                elif isinstance(op, simt.BranchOp):
                    used.add(op.cond.pred)
        dead = [op for block in kernel.body.blocks for op in block.ops
                if isinstance(op, (*_PURE, simt.PredOp)) and op.defs()[0] not in used]
        if not dead:
            return erased
        for op in dead:
            op.detach()
            op.erase()
        erased += len(dead)


@dataclass(frozen=True)
class SimtCsePass(ModulePass):
    name = "simt-cse"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for kernel in simt.kernels_of(op):
            for block in kernel.body.blocks:
                number_block(block)
            erase_dead(kernel)
