"""`simt-expand-divrem{max-ops=16 regs=15}`: 32-bit division and remainder
as loops of machine blocks.

The tensor level has no divider (a combinational one is ~64 layers deep), so,
like a GPU's software division, every `simt.alu "div.u"/"rem.u"/"div.s"/
"rem.s"` becomes a restoring division out of ops it has (add sub and or shl
shr neg mov, setp, predicate xor), bit-exact with the machine's semantics
(x / 0 = all ones, x rem 0 = x, INT_MIN / -1 = INT_MIN, toward zero).

The block is split at the division: the ops before it and the setup, then a
loop block, then the tail and the ops after it (`^L` and `^A` come right
after the block in layout order, so min-PC keeps every other block where it
was, and the warp ops after the division see the same lanes):

    <ops before>                     ; setup: w = 0, nr = n, c = 10,
    simt.next ^L                     ;   d1 = sat(d << 1), d2 = sat(d << 2)
  ^L:                                ; one iteration: k = 3 quotient bits
    simt.alu "shr.u" t, nr, 29       ; the next k dividend bits ...
    simt.alu "shl" w, w, 3
    simt.alu "or" w, w, t            ; ... enter the partial remainder w,
    simt.alu "shl" nr, nr, 3         ; and the quotient bits nr's bottom
    simt.setp "ge.u" p, w, d2        ; for j = 2, 1, 0:
    simt.alu "sub" w, w, d2 guard p  ;   w >= d << j: subtract it,
    simt.alu "or" nr, nr, 4 guard p  ;   quotient bit j
    ...
    simt.alu "sub" c, c, 1
    simt.setp "ne" p, c, 0
    simt.branch p, ^L, ^A
  ^A:
    <the last 32 - 3 * 10 = 2 bits, compared exactly: (w >> j) >= d>
    simt.alu "mov" dst, nr guard G   ; the division's own guard
    <ops after>

An iteration is one block of at most `max-ops` ops: a bit costs a compare, a
guarded subtract and (for a quotient) a guarded or, plus 6 ops per
iteration, so at 16 a division runs 10 iterations of 3 bits and a remainder 6
of 5. The loop takes the top 31 // k * k bits, where every window stays below
2^31, so `d << j` saturated to all ones where it overflows makes one unsigned
compare per bit exact. Each `d << j` held in a register costs one; where the
allocator's live ranges (`simt-allocate-registers`, `regs`) leave none to
spare at the division, a bit shifts w and d where it is needed instead (two
ops more, fewer bits per iteration). A zero divisor needs no case: every
compare holds, the quotient is all ones and the remainder the dividend.

Signed ops divide magnitudes (|INT_MIN| is 2^31 unsigned) and fix the sign
after: a remainder takes the dividend's, a quotient is negated where the
signs differ, except for a zero divisor (all ones): the divisor's sign is
taken as `b <s (a >>u 31)`, which is the dividend's where b = 0.

The loop runs on every active lane with a trip count they share, so it never
diverges. It works in fresh virtual registers (the pass runs after
`simt-rename-webs`, before register allocation), in the registers of sources
that die at the division, and in the destination itself where no lane needs
its old value (unguarded, or no earlier write reaches it); otherwise one last
`mov` writes the destination under the division's guard, so a lane whose
guard is false keeps its old value. A divisor that is an immediate, or a
register set by an unguarded `mov` of one (earlier in the block, or as its
only write, in the entry block), is folded: a power of two is a shift or a
mask, zero is all ones or the dividend, and the leading iterations whose
quotient bits must be 0 are skipped. New ops keep the division's location.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import IntAttr, LocationAttr
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.analysis.dataflow import Cfg, kept_by_guarded_writes, register_access
from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.passes.simt_allocate_registers import live_intervals

M32 = 0xFFFF_FFFF
DIVREM = ("div.u", "rem.u", "div.s", "rem.s")
#: ops of an iteration besides its bits: shift-in (4) and counter (2)
LOOP_OVERHEAD = 6

Src = RegAttr | int
#: a per-lane condition, or one known at compile time
Cond = GuardAttr | bool


def _s32(x: int) -> int:
    return x - (1 << 32) if x & 0x8000_0000 else x


def _imm(src: Src) -> Src:
    """Immediates as the listings spell them: all ones is -1."""
    return _s32(src & M32) if isinstance(src, int) else src


def _fold(opcode: str, a: int, b: int) -> int:
    """The machine's div/rem on constants (runtime/simt_engine.py)."""
    if b == 0:
        return M32 if opcode.startswith("div") else a
    if opcode.endswith(".u"):
        return a // b if opcode == "div.u" else a % b
    q, r = abs(_s32(a)) // abs(_s32(b)), abs(_s32(a)) % abs(_s32(b))
    if opcode == "div.s":
        return (-q if (_s32(a) < 0) != (_s32(b) < 0) else q) & M32
    return (-r if _s32(a) < 0 else r) & M32


# ------------------------------------------------------------------ emission

class _Fresh:
    """New virtual registers, numbered after the kernel's."""

    def __init__(self, kernel: simt.KernelOp):
        regs = simt.all_registers(kernel.machine_blocks())
        self.next = {k: 1 + max((r.index.data for r in regs if r.kind.data == k), default=-1)
                     for k in ("v", "vp")}

    def __call__(self, kind: str = "v") -> RegAttr:
        reg = RegAttr(kind, self.next[kind])
        self.next[kind] += 1
        return reg


@dataclass
class _Ops:
    """Machine ops under construction, all at the division's location."""

    loc: LocationAttr
    ops: list[Operation] = field(default_factory=list)

    def add(self, op: Operation) -> None:
        op.location = self.loc
        self.ops.append(op)

    def alu(self, opc: str, dst: RegAttr, *srcs: Src, guard: Cond = True) -> None:
        if guard is not False:      # a write that no lane makes is none
            self.add(simt.AluOp(opc, dst, [_imm(s) for s in srcs],
                                None if guard is True else guard))

    def setp(self, cond: str, dst: RegAttr, a: Src, b: Src) -> GuardAttr:
        self.add(simt.SetpOp(cond, dst, _imm(a), _imm(b)))
        return GuardAttr(dst)


def _sat_shl(d: int, j: int) -> int:
    """d << j, or all ones where it overflows."""
    return d << j if d << j <= M32 else M32


@dataclass(frozen=True)
class _Shape:
    """How the quotient's 32 bits are cut: `skip` leading bits known to be 0,
    `trips` iterations of `k` bits, then `tail` bits; `held` shifted divisors
    d << 1 .. d << held are kept in registers, the others are shifted where
    they are needed."""

    k: int
    trips: int
    skip: int
    held: int

    @property
    def tail(self) -> int:
        return 32 - self.skip - self.trips * self.k


def _iteration_ops(k: int, held: int, quotient: bool) -> int:
    """Ops of one iteration: a bit is a compare and a guarded subtract (and a
    quotient bit); one whose shifted divisor is not held shifts twice more."""
    return LOOP_OVERHEAD + (3 if quotient else 2) * k + 2 * (k - 1 - held)


def _shape(max_ops: int, quotient: bool, divisor: int | None, spare: int) -> _Shape:
    """The most bits per iteration that fit `max_ops` holding at most `spare`
    shifted divisors (a constant's are immediates)."""
    k, held = 1, 0
    for bits in range(2, 9):
        holds = [bits - 1] if divisor is not None else range(min(bits - 1, max(spare, 0)) + 1)
        fit = [h for h in holds if _iteration_ops(bits, h, quotient) <= max_ops]
        if fit:
            k, held = bits, fit[0]
    trips = 31 // k                 # every window of the loop stays below 2^31
    # a constant divisor >= 2^s makes the top s quotient bits 0
    lead = 0 if divisor is None else min(trips, (divisor.bit_length() - 1) // k)
    return _Shape(k, trips - lead, lead * k, held)


class _Divider:
    """Unsigned restoring division of the writable register `nr` by `d`:
    leaves the quotient in `nr`, the remainder in `w`."""

    def __init__(self, fresh: _Fresh, nr: RegAttr, d: Src, w: RegAttr, quotient: bool,
                 shape: _Shape):
        self.fresh, self.nr, self.d, self.w = fresh, nr, d, w
        self.quotient, self.shape = quotient, shape
        self.t, self.p = fresh(), fresh("vp")
        self.shifted: list[Src] = [d]       # sat(d << j), the ones held

    def setup(self, e: _Ops) -> None:
        s = self.shape
        if s.skip:      # the leading bits are the remainder so far, below d
            e.alu("shr.u", self.w, self.nr, 32 - s.skip)
            e.alu("shl", self.nr, self.nr, s.skip)
        else:
            e.alu("mov", self.w, 0)
        for _ in range(s.held):
            self.shifted.append(self._saturated_shift(e, self.shifted[-1]))

    def _saturated_shift(self, e: _Ops, prev: Src) -> Src:
        if isinstance(prev, int):
            return _sat_shl(prev, 1)
        dj = self.fresh()
        e.alu("shl", dj, prev, 1)
        e.alu("mov", dj, M32, guard=e.setp("lt.s", self.p, prev, 0))
        return dj

    def shift_in(self, e: _Ops, bits: int, last: bool = False) -> None:
        """The next `bits` dividend bits, from nr's top, enter w's bottom
        (and make room for as many quotient bits in nr)."""
        e.alu("shr.u", self.t, self.nr, 32 - bits)
        e.alu("shl", self.w, self.w, bits)
        e.alu("or", self.w, self.w, self.t)
        if self.quotient or not last:
            e.alu("shl", self.nr, self.nr, bits)

    def step(self, e: _Ops, j: int, exact: bool) -> None:
        """Quotient bit j: subtract d << j where it fits. A held shifted
        divisor is compared directly in the loop (its windows stay below
        2^31); otherwise w >> j is compared with d, which is exact for any
        window, and d << j is shifted into t only then."""
        held = j < len(self.shifted)
        if held and not (exact and j):
            fits = e.setp("ge.u", self.p, self.w, self.shifted[j])
        else:
            e.alu("shr.u", self.t, self.w, j)
            fits = e.setp("ge.u", self.p, self.t, self.d)
        sub = self.shifted[j] if held else self.t
        if not held:
            e.alu("shl", self.t, self.d, j)
        e.alu("sub", self.w, self.w, sub, guard=fits)
        if self.quotient:
            e.alu("or", self.nr, self.nr, 1 << j, guard=fits)

    def iteration(self, e: _Ops) -> None:
        self.shift_in(e, self.shape.k)
        for j in reversed(range(self.shape.k)):
            self.step(e, j, exact=False)

    def tail(self, e: _Ops) -> None:
        bits = self.shape.tail
        self.shift_in(e, bits, last=True)
        for j in reversed(range(bits)):
            self.step(e, j, exact=True)


# ------------------------------------------------------------------ divisions

def _mov_immediate(op: Operation) -> int | None:
    """The value an unguarded `mov` of an immediate writes on every lane."""
    if isinstance(op, simt.AluOp) and op.opcode.data == "mov" and op.guard is None:
        src = op.srcs.data[0]
        if isinstance(src, IntAttr):
            return src.data & M32
    return None


def _constant(op: simt.AluOp, src) -> Src:
    """A source as an int where it is known: an immediate, a register that the
    block last set before `op` with an unguarded `mov` of one, or one whose
    only write in the kernel is such a `mov` in the entry block (which every
    path to a later block runs)."""
    if isinstance(src, IntAttr):
        return src.data & M32
    prev = op.prev_op
    while prev is not None:
        if isinstance(prev, simt.MachineOp) and src in prev.defs():
            value = _mov_immediate(prev)
            return src if value is None else value
        prev = prev.prev_op
    kernel = op.parent_op()
    block = op.parent_block()
    assert isinstance(kernel, simt.KernelOp) and block is not None
    entry = kernel.body.blocks.first
    writes = [o for b in kernel.body.blocks for o in b.ops
              if isinstance(o, simt.MachineOp) and src in o.defs()]
    if block is entry or len(writes) != 1 or writes[0].parent_block() is not entry:
        return src
    value = _mov_immediate(writes[0])
    return src if value is None else value


@dataclass(frozen=True)
class _Room:
    """What the kernel leaves one division. `direct`: the result can be built
    in its destination (which it does not read, and whose old value no lane
    needs: it is unguarded, or no earlier write reaches it). `dead`: sources
    that nothing reads after it, so their registers are scratch. `spare`:
    registers that the allocator's live ranges (hulls, as
    `simt-allocate-registers` sees them) and the loop's own leave for
    shifted divisors."""

    direct: bool
    dead: frozenset[RegAttr]
    spare: int


def _rooms(kernel: simt.KernelOp, regs: int) -> dict[Operation, _Room]:
    keeps = kept_by_guarded_writes(Cfg.of(kernel), register_access)
    intervals, order = live_intervals(kernel)
    rooms = {}
    for n, op in enumerate(order):
        if not _is_divrem(op):
            continue
        assert isinstance(op, simt.AluOp)
        after = {iv.reg for iv in intervals.values() if isinstance(iv.reg, RegAttr)
                 and not iv.reg.is_pred and iv.start <= 2 * n + 1 <= iv.end}
        direct = op.dst not in op.uses() and op.dst not in keeps.get(op, ())
        if direct:
            after.discard(op.dst)
        srcs = [s for s in op.srcs.data if isinstance(s, RegAttr)]
        dead = frozenset(s for s in srcs if s not in after) if len(set(srcs)) == len(srcs) \
            else frozenset()
        # the loop's registers: w, nr, the counter, t, and the divisor (or
        # its magnitude) where nothing after the division holds it already
        b = _constant(op, op.srcs.data[1])
        own = 4 + (isinstance(b, RegAttr) and (op.opcode.data.endswith(".s") or b not in after))
        rooms[op] = _Room(direct, dead, regs - len(after) - own)
    return rooms


@dataclass
class _Division:
    """One `simt.alu` div/rem: its sources (ints where known), destination and
    guard (True: none)."""

    op: simt.AluOp
    fresh: _Fresh

    def __post_init__(self) -> None:
        self.opcode = self.op.opcode.data
        self.a, self.b = (_constant(self.op, s) for s in self.op.srcs.data)
        self.dst = self.op.dst
        self.guard: Cond = self.op.guard if self.op.guard is not None else True
        self.quotient = self.opcode.startswith("div")
        self.signed = self.opcode.endswith(".s")

    def final(self, e: _Ops, opc: str, *srcs: Src) -> None:
        """The one write of the destination, under the division's guard."""
        e.alu(opc, self.dst, *srcs, guard=self.guard)

    # ------------------------------------------------ without a loop
    def straight(self, e: _Ops) -> bool:
        """Constants folded and divisors that need no loop; False otherwise."""
        a, b = self.a, self.b
        if not isinstance(b, int):
            return False
        if isinstance(a, int):
            self.final(e, "mov", _fold(self.opcode, a, b))
        elif b == 0:
            self.final(e, "mov", M32 if self.quotient else a)
        else:
            mag = abs(_s32(b)) if self.signed else b
            if mag & (mag - 1):
                return False
            s = mag.bit_length() - 1
            if not self.signed:
                self.final(e, *(("shr.u", a, s) if self.quotient else ("and", a, mag - 1)))
            elif s == 0:
                self.final(e, *(("mov", 0) if not self.quotient else
                                ("mov", a) if b == 1 else ("neg", a)))
            else:
                self._signed_power_of_two(e, a, s, negative=_s32(b) < 0)
        return True

    def _signed_power_of_two(self, e: _Ops, a: RegAttr, s: int, negative: bool) -> None:
        """a / ±2^s rounds toward zero: a negative dividend is biased by 2^s - 1
        before the arithmetic shift; the remainder is what the rounding drops."""
        t = self.fresh()
        if s == 1:
            e.alu("shr.u", t, a, 31)
        else:
            e.alu("shr.s", t, a, 31)
            e.alu("shr.u", t, t, 32 - s)
        e.alu("add", t, a, t)
        if not self.quotient:
            e.alu("and", t, t, -(1 << s) & M32)
            self.final(e, "sub", a, t)
        elif negative:
            e.alu("shr.s", t, t, s)
            self.final(e, "neg", t)
        else:
            self.final(e, "shr.s", t, s)

    # ------------------------------------------------ the loop
    def operands(self, e: _Ops, nr: RegAttr, ud: RegAttr | None) -> tuple[Src, Cond]:
        """nr = the dividend's magnitude; returns the divisor's (in `ud` for a
        signed register) and whether the result is negated."""
        a, b = self.a, self.b
        if not self.signed:
            if nr != a:
                e.alu("mov", nr, a)
            return b, False
        neg_a = _sign(e, a, self.fresh("vp"))
        neg_b: Cond = False
        if isinstance(b, int):
            d: Src = abs(_s32(b))
            neg_b = _s32(b) < 0                 # b != 0: folded
        else:
            # b <s (a >>u 31): b's sign where b != 0, the dividend's where
            # b = 0, so that x / 0 stays all ones; a remainder follows a alone
            limit: Src = 0
            if self.quotient:
                limit = int(_s32(a) < 0) if isinstance(a, int) else self.fresh()
                if isinstance(limit, RegAttr):
                    e.alu("shr.u", limit, a, 31)
            neg_b = _sign(e, b, self.fresh("vp"), limit)
            assert ud is not None
            d = ud
            _magnitude(e, b, ud, neg_b)
        _magnitude(e, a, nr, neg_a)
        return d, _xor(e, neg_a, neg_b, self.fresh("vp")) if self.quotient else neg_a


def _sign(e: _Ops, x: Src, p: RegAttr, limit: Src = 0) -> Cond:
    """x <s limit (x's sign for limit 0, and for limit 1 where x != 0)."""
    if isinstance(x, int):
        return _s32(x) < 0
    return e.setp("lt.s", p, x, limit)


def _magnitude(e: _Ops, x: Src, into: RegAttr, negative: Cond) -> None:
    """into = |x|, unsigned (|INT_MIN| = 2^31)."""
    if isinstance(x, int):
        e.alu("mov", into, abs(_s32(x)))
        return
    if into != x:
        e.alu("mov", into, x)
    e.alu("neg", into, x, guard=negative)


def _xor(e: _Ops, x: Cond, y: Cond, p: RegAttr) -> Cond:
    if isinstance(x, bool) and isinstance(y, bool):
        return x != y
    if isinstance(x, bool) or isinstance(y, bool):
        g, flip = (y, x) if isinstance(x, bool) else (x, y)
        assert isinstance(g, GuardAttr)
        return g.inverted() if flip else g
    e.add(simt.PredOp("xor", p, [x, y]))
    return GuardAttr(p)


# --------------------------------------------------------------------- blocks

def _replace(op: Operation, ops: list[Operation]) -> None:
    block = op.parent_block()
    assert block is not None
    block.insert_ops_before(ops, op)
    op.detach()
    op.erase()


def _split_after(kernel: simt.KernelOp, block: Block, op: Operation) -> Block:
    """A new block right after `block` that takes the ops after `op` and the
    terminator."""
    tail = Block()
    kernel.body.insert_block_after(tail, block)
    rest = []
    nxt = op.next_op
    while nxt is not None:
        rest.append(nxt)
        nxt = nxt.next_op
    for o in rest:
        o.detach()
        tail.add_op(o)
    return tail


def _scratch(room: _Room, src: Src, fresh: _Fresh) -> RegAttr:
    """A source's own register where it dies here, else a fresh one."""
    return src if isinstance(src, RegAttr) and src in room.dead else fresh()


def _expand(kernel: simt.KernelOp, block: Block, op: simt.AluOp, fresh: _Fresh,
            max_ops: int, room: _Room) -> Block:
    """Replace one division; returns the block where the search goes on."""
    div = _Division(op, fresh)
    e = _Ops(op.location)
    if div.straight(e):
        _replace(op, e.ops)
        return block
    divisor = div.b if isinstance(div.b, int) else None
    if divisor is not None and div.signed:
        divisor = abs(_s32(divisor))
    shape = _shape(max_ops, div.quotient, divisor, room.spare)
    if div.quotient:
        out = nr = div.dst if room.direct else _scratch(room, div.a, fresh)
        w = fresh()
    else:
        nr = _scratch(room, div.a, fresh)
        out = w = div.dst if room.direct else fresh()
    ud = _scratch(room, div.b, fresh) if div.signed and isinstance(div.b, RegAttr) else None
    d, negate = div.operands(e, nr, ud)
    core = _Divider(fresh, nr, d, w, div.quotient, shape)
    core.setup(e)
    post = _Ops(op.location)
    core.tail(post)
    post.alu("neg", out, out, guard=negate)
    if not room.direct:
        div.final(post, "mov", out)
    if shape.trips <= 1:
        for _ in range(shape.trips):
            core.iteration(e)
        _replace(op, e.ops + post.ops)
        return block
    after = _split_after(kernel, block, op)
    loop = Block()
    kernel.body.insert_block_after(loop, block)
    counter = fresh()
    e.alu("mov", counter, shape.trips)
    e.add(simt.NextOp(loop))
    _replace(op, e.ops)
    body = _Ops(op.location)
    core.iteration(body)
    body.alu("sub", counter, counter, 1)
    body.add(simt.BranchOp(body.setp("ne", core.p, counter, 0), loop, after))
    loop.add_ops(body.ops)
    if after.first_op is None:
        after.add_ops(post.ops)
    else:
        after.insert_ops_before(post.ops, after.first_op)
    return after


def _is_divrem(op: Operation) -> bool:
    return isinstance(op, simt.AluOp) and op.opcode.data in DIVREM


def expand_divrem(kernel: simt.KernelOp, max_ops: int, regs: int) -> None:
    if kernel.regs is not None:
        raise DiagnosticException(
            f"{ptx.location_prefix(kernel)}error: simt-expand-divrem runs on virtual "
            f"registers, before simt-allocate-registers (kernel '{kernel.kernel_name}')")
    fresh = _Fresh(kernel)
    rooms = _rooms(kernel, regs)
    block = kernel.body.blocks.first
    while block is not None:
        op = next((o for o in block.ops if _is_divrem(o)), None)
        if op is None:
            block = block.next_block
        else:
            assert isinstance(op, simt.AluOp)
            block = _expand(kernel, block, op, fresh, max_ops, rooms[op])


@dataclass(frozen=True)
class SimtExpandDivremPass(ModulePass):
    name = "simt-expand-divrem"

    max_ops: int = simt.DEFAULT_MAX_OPS
    """Ops per loop iteration (one machine block): sets the quotient bits per
    iteration."""

    regs: int = simt.DEFAULT_REGS
    """Registers per lane (as `simt-allocate-registers{regs}`): shifted
    divisors are held only in registers spare at the division."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.max_ops < 1 or self.regs < 1:
            raise DiagnosticException("error: simt-expand-divrem: max-ops and regs must be "
                                      "positive")
        for kernel in simt.kernels_of(op):
            expand_divrem(kernel, self.max_ops, self.regs)
