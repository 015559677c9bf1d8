"""Legalization for `convert-ptx-to-simt`: 64-bit and sub-word integers on a 32-bit machine.

A 64-bit PTX register holds a `Wide` value. Pointers and shared addresses are
narrowed to 32-bit word and byte addresses (see the pass). A 64-bit *integer*
is `x · scale` (mod 2^64), where `x` is either

- `ext(lo)`: one 32-bit register zero- or sign-extended (`hi` is "zext" or
  "sext") — what `cvt`, `mul.wide` by a constant and shifts by a constant
  give, at no cost; an address is `pointer + lo · scale / unit` words; or
- a register pair `hi:lo` (`hi` a register or a constant): what 64-bit
  arithmetic gives (add/sub with carry, mul.lo, mul.wide of two registers,
  mul.hi.u64, shifts, logic, compares, loads, stores and atom.add.u64 as two
  words, low word first).

Materializing a pair computes every high word; the selector's dead-code
sweep removes those that nothing reads (an index's high word used only in an
address), so a narrow index costs what it did in 32 bits.

Sub-word (8- and 16-bit) registers live in 32-bit registers zero-extended to
their width; each op that could carry out of the width masks its result.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.ir import Operation

from qgc.dialects import simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.machine.opcodes import ALU_OPCODES

Src = RegAttr | int
M32 = 0xFFFF_FFFF


def to_i32(value: int) -> int:
    value &= M32
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclass
class Wide:
    """What a 64-bit PTX register holds, narrowed: a pointer (word address in
    `vreg`, into the buffer of pointer parameter `prov`), a shared-window byte
    address, or an integer `x · scale` with `x = ext(vreg)` (`hi` "zext" or
    "sext") or `x = hi:vreg`. `stable`: `vreg` is written at one place only,
    so another register may alias it."""

    kind: str
    vreg: RegAttr
    prov: int | None = None
    scale: int = 1
    stable: bool = False
    hi: Src | str = "zext"

    @property
    def is_pair(self) -> bool:
        return self.kind == "int" and not isinstance(self.hi, str)

    def same_shape(self, other: Wide) -> bool:
        return (self.kind, self.prov, self.scale, self.is_pair) == \
            (other.kind, other.prov, other.scale, other.is_pair) and \
            (self.is_pair or self.hi == other.hi)


def valid_scale(scale: int) -> bool:
    """Scales the machine multiplies by: a 31-bit constant or a power of two."""
    return 0 < scale < 1 << 31 or (scale & (scale - 1) == 0 and scale < 1 << 64)


class Emitter:
    """Machine ops of one PTX instruction, with constant folding of the
    trivial cases (`x | 0`, `x + 0`, `x * 1`) so pair halves that are known
    constants cost nothing."""

    def __init__(self, fresh, guard: GuardAttr | None, avoid: tuple[RegAttr, ...] = ()):
        self.fresh = fresh
        self.guard = guard
        self.avoid = set(avoid)     # registers the sequence ends up writing
        self.ops: list[Operation] = []
        self.temps: set[RegAttr] = set()
        self.renamed: dict[RegAttr, RegAttr] = {}   # temporaries assign() computed in place

    def temp(self, kind: str = "v") -> RegAttr:
        reg = self.fresh(kind)
        self.temps.add(reg)
        return reg

    def assign(self, dst: RegAttr, value: Src) -> None:
        """`dst = value` under the instruction's guard. A value the last ops
        computed into a temporary is computed into `dst` instead (no mov)
        when no later op of the sequence reads `dst`'s old value."""
        value = self.renamed.get(value, value)
        if value == dst:
            return
        for i in range(len(self.ops) - 1, -1, -1):
            op = self.ops[i]
            if isinstance(op, simt.MachineOp) and value in op.defs():
                later = self.ops[i + 1:]
                if isinstance(op, simt.AluOp | simt.LdOp) and \
                        op.guard in (None, self.guard) and value in self.temps and \
                        not any(dst in o.uses() or dst in o.defs() for o in later) and \
                        not any(value in o.defs() for o in later):
                    for o in self.ops[i:]:
                        o.replace_regs({value: dst})
                    if self.guard is not None:
                        op.properties["guard"] = self.guard
                    self.renamed[value] = dst
                    return
                break
        self.ops.append(simt.AluOp("mov", dst, [value], self.guard))

    def alu(self, opc: str, srcs: list[Src], dst: RegAttr | None = None,
            guard: GuardAttr | None = None) -> Src:
        srcs = [self.renamed.get(s, s) if isinstance(s, RegAttr) else s for s in srcs]
        folded = _fold(opc, srcs)
        if folded is not None and dst is None:
            return folded
        out = dst if dst is not None else self.temp()
        self.ops.append(simt.AluOp(opc, out, srcs, guard) if folded is None else
                        simt.AluOp("mov", out, [folded], guard))
        return out

    def setp(self, cond: str, a: Src, b: Src) -> RegAttr:
        p = self.temp("vp")
        self.ops.append(simt.SetpOp(cond, p, a, b))
        return p

    def pred(self, opc: str, srcs: list, dst: RegAttr | None = None) -> RegAttr:
        p = dst if dst is not None else self.temp("vp")
        self.ops.append(simt.PredOp(opc, p, srcs, None if dst is None else self.guard))
        return p

    def add_carry(self, a: Src, b: Src) -> tuple[Src, Src]:
        """`a + b` and its carry out (0 or 1) as a value."""
        total = self.alu("add", [a, b])
        if isinstance(a, int) and isinstance(b, int):
            return total, int((a & M32) + (b & M32) > M32)
        if a == 0 or b == 0:
            return total, 0
        # the carry is out iff the sum is below either addend: test the one
        # the sequence does not overwrite
        carry = self.setp("lt.u", total, a if b in self.avoid else b)
        return total, self.alu("selp", [1, 0, carry])


def _fold(opc: str, srcs: list[Src]) -> Src | None:
    """The result when it needs no op, or None (the opcode table says which
    opcodes fold constants and which have an identity or absorbing value)."""
    if opc == "mov":
        return srcs[0] if isinstance(srcs[0], int) else None
    code = ALU_OPCODES[opc]
    if all(isinstance(s, int) for s in srcs) and code.folds:
        return to_i32(code.evaluate(*[s & M32 for s in srcs]))
    if len(srcs) != 2:
        return None
    a, b = srcs
    if code.identity is not None:
        if b == code.identity:
            return a
        if code.commutative and a == code.identity:
            return b
    if code.absorbing is not None and code.absorbing in (a, b):
        return code.absorbing
    return None


# ---------------------------------------------------------------- pairs

def materialize(e: Emitter, w: Wide) -> tuple[Src, Src]:
    """The 64-bit integer `w` as a pair (low word, high word), scale applied."""
    lo = w.vreg
    scale = w.scale
    if scale & (scale - 1) == 0:
        k = scale.bit_length() - 1
        hi = _high_of(e, w)
        if k == 0:
            return lo, hi
        if k >= 32:
            return 0, e.alu("shl", [lo, k - 32])
        if w.is_pair:
            return e.alu("shl", [lo, k]), e.alu("shf.l.clamp", [lo, hi, k])
        shift = "shr.s" if w.hi == "sext" else "shr.u"
        return e.alu("shl", [lo, k]), e.alu(shift, [lo, 32 - k])
    assert scale < 1 << 31, scale      # valid_scale: a signed 32-bit multiplier
    low = e.alu("mul.lo", [lo, scale])
    if w.is_pair:
        carry = e.alu("mul.hi.u", [lo, scale])
        return low, e.alu("mad.lo", [_high_of(e, w), scale, carry])
    return low, e.alu("mul.hi.s" if w.hi == "sext" else "mul.hi.u", [lo, scale])


def _high_of(e: Emitter, w: Wide) -> Src:
    if w.hi == "zext":
        return 0
    if w.hi == "sext":
        return e.alu("shr.s", [w.vreg, 31])
    assert not isinstance(w.hi, str)
    return w.hi


def unscaled(e: Emitter, w: Wide, scale: int) -> tuple[Src, Src]:
    """`w / scale` as a pair, for a `w` whose scale is a multiple of `scale`."""
    return materialize(e, replace(w, scale=w.scale // scale))


def add_pairs(e: Emitter, a: tuple[Src, Src], b: tuple[Src, Src],
              sub: bool = False) -> tuple[Src, Src]:
    """64-bit `a ± b`: the low words with their carry (borrow) into the high."""
    if sub:
        lo = e.alu("sub", [a[0], b[0]])
        if isinstance(a[0], int) and isinstance(b[0], int):
            borrow: Src = int(a[0] & M32 < b[0] & M32)
        else:
            borrow = 0 if b[0] == 0 else e.alu("selp", [1, 0, e.setp("lt.u", a[0], b[0])])
        return lo, e.alu("sub", [e.alu("sub", [a[1], b[1]]), borrow])
    lo, carry = e.add_carry(a[0], b[0])
    return lo, e.alu("add", [e.alu("add", [a[1], b[1]]), carry])


def mul_pairs(e: Emitter, a: tuple[Src, Src], b: tuple[Src, Src]) -> tuple[Src, Src]:
    """The low 64 bits of `a · b`."""
    lo = e.alu("mul.lo", [a[0], b[0]])
    hi = e.alu("mul.hi.u", [a[0], b[0]])
    hi = e.alu("mad.lo", [a[0], b[1], hi]) if b[1] != 0 else hi
    hi = e.alu("mad.lo", [a[1], b[0], hi]) if a[1] != 0 else hi
    return lo, hi


def mul_hi_pairs(e: Emitter, a: tuple[Src, Src], b: tuple[Src, Src]) -> tuple[Src, Src]:
    """The high 64 bits of the unsigned 128-bit product `a · b`, by columns
    of 32-bit partial products with their carries."""
    (a0, a1), (b0, b1) = a, b
    lo01, hi01 = e.alu("mul.lo", [a0, b1]), e.alu("mul.hi.u", [a0, b1])
    lo10, hi10 = e.alu("mul.lo", [a1, b0]), e.alu("mul.hi.u", [a1, b0])
    lo11, hi11 = e.alu("mul.lo", [a1, b1]), e.alu("mul.hi.u", [a1, b1])
    hi00 = e.alu("mul.hi.u", [a0, b0])
    s, c1 = e.add_carry(hi00, lo01)
    _, c2 = e.add_carry(s, lo10)
    s2, c3 = e.add_carry(hi01, hi10)
    s2, c4 = e.add_carry(s2, lo11)
    s2, c5 = e.add_carry(s2, e.alu("add", [c1, c2]))
    top = e.alu("add", [hi11, e.alu("add", [c3, c4])])
    return s2, e.alu("add", [top, c5])


def compare_pairs(e: Emitter, cond: str, a: tuple[Src, Src], b: tuple[Src, Src],
                  dst: RegAttr) -> None:
    """A 64-bit `setp` into `dst`: the high words decide unless equal."""
    if cond in ("eq", "ne"):
        lo, hi = e.setp(cond, a[0], b[0]), e.setp(cond, a[1], b[1])
        e.pred("and" if cond == "eq" else "or", [GuardAttr(lo), GuardAttr(hi)], dst)
        return
    strict = cond.replace("le", "lt").replace("ge", "gt")
    high = e.setp(strict, a[1], b[1])
    same = e.setp("eq", a[1], b[1])
    low = e.setp(cond[:2] + ".u", a[0], b[0])
    both = e.pred("and", [GuardAttr(same), GuardAttr(low)])
    e.pred("or", [GuardAttr(high), GuardAttr(both)], dst)


def shift_pair(e: Emitter, opc: str, a: tuple[Src, Src], k: int) -> tuple[Src, Src]:
    """`shr.u`/`shr.s` of a pair by a constant (shl keeps a scale instead)."""
    lo, hi = a
    if k == 0:
        return a
    fill = e.alu("shr.s", [hi, 31]) if opc == "shr.s" else 0
    if k >= 64:
        return fill, fill
    if k >= 32:
        return e.alu(opc, [hi, k - 32]), fill
    return e.alu("shf.r.clamp", [lo, hi, k]), e.alu(opc, [hi, k])


def const_pair(value: int) -> tuple[int, int]:
    return to_i32(value), to_i32(value >> 32)


def select_pair(e: Emitter, a: tuple[Src, Src], b: tuple[Src, Src],
                p: RegAttr) -> tuple[Src, Src]:
    return e.alu("selp", [a[0], b[0], p]), e.alu("selp", [a[1], b[1], p])


def minmax_pairs(e: Emitter, opc: str, a: tuple[Src, Src],
                 b: tuple[Src, Src]) -> tuple[Src, Src]:
    """`min`/`max` (`.s`/`.u`) of pairs: a compare, then a select per word."""
    kind, sign = opc.split(".")
    first = e.temp("vp")
    compare_pairs(e, f"{'lt' if kind == 'min' else 'gt'}.{sign}", a, b, first)
    return select_pair(e, a, b, first)


def negative(e: Emitter, a: tuple[Src, Src]) -> RegAttr:
    return e.setp("lt.s", a[1], 0)


def abs_pair(e: Emitter, a: tuple[Src, Src]) -> tuple[Src, Src]:
    return select_pair(e, add_pairs(e, (0, 0), a, sub=True), a, negative(e, a))


def mul_hi_signed(e: Emitter, a: tuple[Src, Src], b: tuple[Src, Src]) -> tuple[Src, Src]:
    """Signed high half: the unsigned one less b where a < 0 and a where b < 0."""
    hi = mul_hi_pairs(e, a, b)
    hi = add_pairs(e, hi, select_pair(e, b, (0, 0), negative(e, a)), sub=True)
    return add_pairs(e, hi, select_pair(e, a, (0, 0), negative(e, b)), sub=True)


def shift_pair_by(e: Emitter, opc: str, a: tuple[Src, Src], n: Src) -> tuple[Src, Src]:
    """A pair shifted by a register amount (PTX clamps amounts past 64): the
    word-crossing funnel shift below 32, the other word shifted past it."""
    lo, hi = a
    n = e.alu("min.u", [n, 64])
    small = e.setp("lt.u", n, 32)
    past = e.alu("sub", [n, 32])
    if opc == "shl":
        near = (e.alu("shl", [lo, n]), e.alu("shf.l.clamp", [lo, hi, n]))
        far = (0, e.alu("shl", [lo, past]))
    else:
        fill = e.alu("shr.s", [hi, 31]) if opc == "shr.s" else 0
        near = (e.alu("shf.r.clamp", [lo, hi, n]), e.alu(opc, [hi, n]))
        far = (e.alu(opc, [hi, e.alu("min.u", [past, 32 if opc == "shr.s" else 64])]), fill)
    return select_pair(e, near, far, small)


def count_pair(e: Emitter, opc: str, a: tuple[Src, Src]) -> Src:
    """`popc`/`clz` of a pair as one 32-bit count."""
    if opc == "popc":
        return e.alu("add", [e.alu("popc", [a[0]]), e.alu("popc", [a[1]])])
    high_zero = e.setp("eq", a[1], 0)
    return e.alu("selp", [e.alu("add", [e.alu("clz", [a[0]]), 32]), e.alu("clz", [a[1]]),
                          high_zero])
