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

from collections import Counter
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.machine.float_programs import IntOps
from qgc.machine.opcodes import (
    ALU_OPCODES,
    ATOM_FLOAT_ADD,
    PRED_OPCODES,
    SETP_CONDITIONS,
    SETP_EXPANSIONS,
)
from qgc.passes.simt_expand_divrem import _Fresh, _split_after

M32 = 0xFFFF_FFFF
#: the smallest program worth a shared routine (a call costs a few moves,
#: a jump and a return dispatch)
ROUTINE_OPS = 24
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

    def loop(self, trips: int, state: tuple, body) -> tuple:
        """The body between loop markers, in carried registers: each one's
        last write in the body retargeted to it where no later op of the body
        reads its old value, else a move at the end; then the trip counter."""
        carried = [self.fresh() for _ in state]
        counter = self.fresh()
        self.ops += [simt.AluOp("mov", c, [_src(v)]) for c, v in zip(carried, state, strict=True)]
        self.ops += [simt.AluOp("mov", counter, [trips]), _LOOP]
        start = len(self.ops)
        new = body(self, *carried)
        for c, n in zip(carried, new, strict=True):
            if n != c and not _carry_in_place(self.ops[start:], c, n):
                self.ops.append(simt.AluOp("mov", c, [_src(n)]))
        self.ops.append(simt.AluOp("sub", counter, [counter, 1]))
        p = self.setp("ne", counter, 0)
        self.ops.append(_LoopEnd(p))
        return tuple(carried)

    def select(self, a: Word, b: Word, p: Pred) -> Word:
        if isinstance(p, bool):
            return a if p else b
        if a == b:
            return a
        if p.is_negated:
            a, b = b, a
        return self.alu("selp", a, b, p.pred)


class _LoopEnd:
    """Marks the end of a loop body in `Emit.ops`: branch back while `cond`."""

    def __init__(self, cond: GuardAttr):
        self.cond = cond


#: marks the start of a loop body in `Emit.ops`
_LOOP = object()


def _carry_in_place(body: list, carried: RegAttr, new: Word) -> bool:
    """Make the op of the body that computes `new` write `carried` itself
    (and its later readers read it there), where no later op reads the old
    value of `carried`."""
    at = next((i for i, op in enumerate(body) if getattr(op, "dst", None) == new), None)
    if at is None or any(carried in op.uses() for op in body[at + 1:]):
        return False
    body[at].properties["dst"] = carried
    for op in body[at + 1:]:
        if new in op.uses():
            op.properties["srcs"] = ArrayAttr([carried if x == new else x
                                               for x in op.srcs.data])
    return True


def _blocks(ops: list, first: Block, last: Block | None) -> list[Block]:
    """The emitted ops as blocks: `first` takes the ops up to the first loop,
    each loop body a block of its own that branches back to itself, the ops
    after it a new block (or the front of `last`, after the last loop).
    Returns the new blocks in layout order (without `first` and `last`)."""
    new: list[Block] = []
    current, pending = first, []
    pieces = _pieces(ops)
    for i, (straight, body, cond) in enumerate(pieces):
        pending += straight
        if body is None:
            break
        current.add_ops(pending)
        loop = Block()
        after = last if i == len(pieces) - 2 and pieces[-1][1] is None and last else Block()
        current.add_op(simt.NextOp(loop))
        loop.add_ops([*body, simt.BranchOp(cond, loop, after)])
        new.append(loop)
        if after is not last:
            new.append(after)
        current, pending = after, []
    if pending:
        if current is last and current.first_op is not None:
            current.insert_ops_before(pending, current.first_op)
        else:
            current.add_ops(pending)
    return new


def _pieces(ops: list) -> list[tuple[list, list | None, GuardAttr | None]]:
    """(straight ops, loop body or None, its branch condition) in order."""
    out, straight, body = [], [], None
    for op in ops:
        if op is _LOOP:
            body = []
        elif isinstance(op, _LoopEnd):
            out.append((straight, body, op.cond))
            straight, body = [], None
        elif body is not None:
            body.append(op)
        else:
            straight.append(op)
    out.append((straight, None, None))
    return out


def _src(s: Word) -> RegAttr | int:
    return _imm(s) if isinstance(s, int) else s


def _sources(op: simt.AluOp | simt.SetpOp) -> list[Word]:
    return [s.data & M32 if isinstance(s, IntAttr) else s for s in op.srcs.data]


def _write(e: Emit, dst: RegAttr, guard: GuardAttr | None, result: Word | Pred) -> None:
    """The result into `dst` under `guard`: the last op retargeted where it
    computed the result, else a move."""
    last = e.ops[-1] if e.ops else None
    if isinstance(result, GuardAttr) and not result.is_negated:
        result = result.pred
    if isinstance(last, simt.AluOp | simt.SetpOp | simt.PredOp) and last.dst == result:
        last.properties["dst"] = dst
        if guard is not None:
            last.properties["guard"] = guard
        return
    e.ops.append(_move(dst, result, guard))


def _move(dst: RegAttr, src: Word | Pred, guard: GuardAttr | None) -> Operation:
    if dst.kind.data == "vp":
        if isinstance(src, RegAttr):
            src = GuardAttr(src)
        return simt.PredOp("mov", dst, [int(src) if isinstance(src, bool) else src], guard)
    return simt.AluOp("mov", dst, [_src(src)], guard)


def _program(op: Operation):
    if isinstance(op, simt.AluOp):
        return ALU_OPCODES[op.opcode.data].expand
    if isinstance(op, simt.SetpOp):
        return SETP_EXPANSIONS.get(op.cond.data)
    return None


def _key(op: simt.AluOp | simt.SetpOp, partner: simt.AluOp | None = None) -> str:
    if partner is not None:
        return op.opcode.data[:-len(".lo")]
    return op.opcode.data if isinstance(op, simt.AluOp) else op.cond.data


def _partner(op: Operation) -> simt.AluOp | None:
    """The `.hi` op right after an f64 program's `.lo` op on the same
    sources: the two words of one program, computed once."""
    if not isinstance(op, simt.AluOp) or ALU_OPCODES[op.opcode.data].both_words is None:
        return None
    after = op.next_op
    if isinstance(after, simt.AluOp) and after.opcode.data == op.opcode.data[:-3] + ".hi" and \
            after.srcs == op.srcs and after.guard == op.guard and op.dst not in after.srcs.data:
        return after
    return None


def _words(op: Operation, partner: simt.AluOp | None, e: Emit, srcs: list) -> list:
    """The result words of the program an op expands into (an f64 pair: both)."""
    if partner is None:
        return [_program(op)(e, *srcs)]
    return list(ALU_OPCODES[op.opcode.data].both_words(e, *srcs))


def _replace(op: Operation, ops: list[Operation]) -> None:
    for new in ops:
        new.location = op.location
    block = op.parent_block()
    assert block is not None
    block.insert_ops_before(ops, op)
    op.detach()
    op.erase()


def _inline(kernel: simt.KernelOp, op: simt.AluOp | simt.SetpOp, fresh: _Fresh,
            partner: simt.AluOp | None = None) -> None:
    e = Emit(fresh)
    targets = [op] if partner is None else [op, partner]
    for target, word in zip(targets, _words(op, partner, e, _sources(op)), strict=True):
        _write(e, target.dst, op.guard, word)
    if partner is not None:
        partner.detach()
        partner.erase()
    if not any(isinstance(x, _LoopEnd) for x in e.ops):
        _replace(op, e.ops)
        return
    block = op.parent_block()
    assert block is not None
    tail = _split_after(kernel, block, op)
    _located(e.ops, op)
    op.detach()
    op.erase()
    after = block
    for new in _blocks(e.ops, block, tail):
        kernel.body.insert_block_after(new, after)
        after = new


def _located(ops: list, op: Operation) -> None:
    for new in _flat(ops):
        new.location = op.location


def _flat(ops: list) -> list[Operation]:
    return [x for x in ops if isinstance(x, Operation)]


@dataclass
class _Routine:
    """One copy of a program that several sites call: its arguments, its
    result, the register naming the site to return to, its first block."""

    args: list[RegAttr]
    results: list[RegAttr]
    site: RegAttr
    blocks: list[Block]
    size: int
    """ops in the program"""

    @classmethod
    def build(cls, op: simt.AluOp | simt.SetpOp, fresh: _Fresh,
              partner: simt.AluOp | None = None) -> _Routine:
        args = [fresh() for _ in op.srcs.data]
        e = Emit(fresh)
        words = _words(op, partner, e, args)
        results = [fresh("vp" if isinstance(op, simt.SetpOp) else "v") for _ in words]
        for result, word in zip(results, words, strict=True):
            _write(e, result, None, word)
        _located(e.ops, op)
        entry = Block()
        return cls(args, results, fresh(), [entry, *_blocks(e.ops, entry, None)],
                   len(_flat(e.ops)))

    def call(self, kernel: simt.KernelOp, op: simt.AluOp | simt.SetpOp, index: int,
             partner: simt.AluOp | None = None) -> Block:
        """Replace `op` (and an f64 pair's `.hi` partner) by a call: the
        arguments and the site set, a jump to the routine; the block it
        returns to takes the results under the op's guard, then the ops
        after. Returns that block."""
        block = op.parent_block()
        assert block is not None
        if partner is not None:
            partner.detach()
            partner.erase()
        back = _split_after(kernel, block, op)
        dsts = [op.dst] if partner is None else [op.dst, partner.dst]
        for dst, result in reversed(list(zip(dsts, self.results, strict=True))):
            back.insert_op_before(_move(dst, result, op.guard), back.first_op)
            back.first_op.location = op.location
        ops: list[Operation] = [simt.AluOp("mov", a, [_src(s)])
                                for a, s in zip(self.args, _sources(op), strict=True)]
        ops += [simt.AluOp("mov", self.site, [index]), simt.NextOp(self.blocks[0])]
        _replace(op, ops)
        return back

    def dispatch(self, returns: list[Block], fresh: _Fresh, loc) -> None:
        """End the routine in a binary search on the site register: one
        compare and branch per level (no level for two sites)."""
        p = fresh("vp")

        def target(lo: int, hi: int, into: Block | None = None) -> Block:
            if hi - lo == 1 and into is None:
                return returns[lo]
            mid = (lo + hi) // 2
            block = into if into is not None else Block()
            if into is None:
                self.blocks.append(block)
            test = simt.SetpOp("lt.u", p, self.site, mid)
            branch = simt.BranchOp(GuardAttr(p), target(lo, mid), target(mid, hi))
            test.location = branch.location = loc
            block.add_ops([test, branch])
            return block

        target(0, len(returns), self.blocks[-1])


def _place(kernel: simt.KernelOp, routines: list[_Routine]) -> None:
    """Routines go first in layout order, after a jump to the entry (the
    kernel's first block where it is one already): min-PC
    runs a lane inside a routine before the warp's other lanes, as if it
    were still at its call site (a routine touches no memory and no other
    lane, so nothing can tell the difference), and the lanes it returns to
    keep their order."""
    start = kernel.body.blocks.first
    assert start is not None
    if not (isinstance(start.first_op, simt.NextOp) and len(start.ops) == 1):
        entry, start = start, Block([simt.NextOp(start)])
        kernel.body.insert_block_before(start, entry)
    after = start
    for routine in routines:
        for block in routine.blocks:
            kernel.body.insert_block_after(block, after)
            after = block


def _address(op: simt.AtomOp, into: simt.LdOp | simt.AtomOp) -> simt.LdOp | simt.AtomOp:
    return into.located(op.base_hi) if op.is_located else into


def _expand_float_atomic(kernel: simt.KernelOp, fresh: _Fresh, op: simt.AtomOp) -> None:
    """`atom add.f32` as a compare-and-swap loop, as GPUs without a float
    atomic run it: load the word, add (an f32 op, expanded with the rest),
    swap where the word is still the one loaded, else again. The lanes on
    one word succeed one per iteration in lane order, so their adds apply
    in the order the atomic's own semantics give them."""
    block = op.parent_block()
    assert block is not None
    after = _split_after(kernel, block, op)
    loop = Block()
    kernel.body.insert_block_after(loop, block)
    old, new, prev, retry = fresh(), fresh(), fresh(), fresh("vp")
    space, base, offset, buffer, guard = (op.space.data, op.base, op.offset.value.data,
                                          op.buffer_index, op.guard)
    value = op.value.data if isinstance(op.value, IntAttr) else op.value
    body: list[Operation] = [
        _address(op, simt.LdOp(old, space, base, offset, buffer, guard)),
        simt.AluOp(ATOM_FLOAT_ADD, new, [old, value]),
        _address(op, simt.AtomOp("cas", prev, space, base, offset, old, buffer, guard, new)),
        simt.SetpOp("ne", retry, prev, old)]
    again = GuardAttr(retry)
    if guard is not None:
        body.append(simt.PredOp("and", retry, [again, guard]))
    body.append(simt.BranchOp(again, loop, after))
    loop.add_ops(body)
    after.insert_op_before(simt.AluOp("mov", op.dst, [prev], guard), after.first_op)
    _located([*body, after.first_op], op)
    _replace(op, [simt.NextOp(loop)])


def expand_floats(kernel: simt.KernelOp, routine_ops: int) -> None:
    if kernel.regs is not None:
        raise DiagnosticException(
            f"{ptx.location_prefix(kernel)}error: simt-expand-float runs on virtual "
            f"registers, before simt-allocate-registers (kernel '{kernel.kernel_name}')")
    fresh = _Fresh(kernel)
    for atom in [op for op in kernel.walk() if isinstance(op, simt.AtomOp) and
                 op.op.data == "add.f32"]:
        _expand_float_atomic(kernel, fresh, atom)
    for composite in (True, False):     # the f32 ops of composite routines too
        routines = _expand(kernel, fresh, routine_ops, composite)
        if routines:
            _place(kernel, routines)


def _expand(kernel: simt.KernelOp, fresh: _Fresh, routine_ops: int,
            composite: bool) -> list[_Routine]:
    """Expand the f32 ops whose programs use f32 ops (`composite`: the
    `.approx` algorithms), or the others: inline, or as calls of one
    routine per opcode. Returns the routines, to be placed."""
    sites = []
    for block in kernel.body.blocks:
        paired: set[Operation] = set()
        for op in block.ops:
            if op in paired or not _program(op) or _is_composite(op) != composite:
                continue
            partner = _partner(op)
            if partner is not None:
                paired.add(partner)
            sites.append((op, partner))
    shared = _shared_programs(sites, routine_ops, fresh)
    routines: dict[str, _Routine] = {}
    returns: dict[str, list[Block]] = {}
    for op, partner in sites:
        key = _key(op, partner)
        if key not in shared:
            _inline(kernel, op, fresh, partner)
            continue
        routine = routines.setdefault(key, shared[key])
        returns.setdefault(key, []).append(routine.call(kernel, op, len(returns[key]), partner))
    for key, routine in routines.items():
        routine.dispatch(returns[key], fresh, routine.blocks[-1].last_op.location)
    return list(routines.values())


def _is_composite(op: Operation) -> bool:
    return isinstance(op, simt.AluOp) and ALU_OPCODES[op.opcode.data].composite


def _shared_programs(sites, routine_ops: int, fresh: _Fresh) -> dict[str, _Routine]:
    """The routines: a program of at least `routine_ops` ops that two sites
    or more run (0: none)."""
    count = Counter(_key(*site) for site in sites)
    out = {}
    for op, partner in sites:
        key = _key(op, partner)
        if routine_ops and count[key] > 1 and key not in out:
            routine = _Routine.build(op, fresh, partner)
            if routine.size >= routine_ops:
                out[key] = routine
    return out


@dataclass(frozen=True)
class SimtExpandFloatPass(ModulePass):
    name = "simt-expand-float"

    routine_ops: int = ROUTINE_OPS
    """A program of at least this many ops that two sites or more run is one
    shared routine (0: every site inline)."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for kernel in simt.kernels_of(op):
            expand_floats(kernel, self.routine_ops)
