"""The branch family: divergent if/else, bounded loops and early returns."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from ptxgen.common import (
    DEFAULT_LIMITS,
    Limits,
    Pool,
    finish,
    fold_values,
    new_kernel,
    one_in,
    pick,
    small_imm,
    thread_ids,
    unread,
)
from ptxgen.integer import int_buffers, int_op, setp32
from ptxgen.records import GeneratedProgram, Kernel, Mem, Reg

# ========================================================= family: branch


@dataclass
class _Flow:
    budget: int  # statements left to generate
    out_addr: Reg
    out_ty: str
    outputs: int


def _assign(draw, k: Kernel, pool: Pool) -> None:
    """One op into a fresh register, or into a live one (a reassignment)."""
    writable = [r for r in pool.b32 if r.name not in pool.fixed]
    dst = pick(draw, writable) if writable and one_in(draw, 3) else None
    int_op(draw, k, pool, dst)


def _store_stmt(draw, k: Kernel, pool: Pool, flow: _Flow) -> None:
    j = draw(st.integers(0, flow.outputs - 1))
    k.emit("st", "global", flow.out_ty, Mem(flow.out_addr, 4 * j), pick(draw, pool.b32))


def _if_stmt(draw, k: Kernel, pool: Pool, flow: _Flow, depth: int) -> None:
    p = setp32(draw, k, pool)
    has_else = draw(st.booleans())
    else_label, end_label = k.label(), k.label()
    k.emit("bra", (), (), else_label if has_else else end_label, guard=p,
           negate=draw(st.booleans()))
    then_returns = _branch_body(draw, k, pool, flow, depth)
    if has_else:
        if not then_returns:
            k.emit("bra", "uni", (), end_label)
        k.place(else_label)
        _branch_body(draw, k, pool, flow, depth)
    k.place(end_label)


def _scoped_block(draw, k: Kernel, outer: Pool, inner: Pool, flow: _Flow, depth: int) -> None:
    """A block whose new registers die at its end: first their unread values are
    folded into a live outer register, so what the block computed stays visible."""
    _block(draw, k, inner, flow, depth + 1)
    known = {r.name for r in outer.b32}
    local = unread(k, [r for r in inner.b32 if r.name not in known])
    writable = [r for r in outer.b32 if r.name not in inner.fixed]
    if local and writable:
        target = pick(draw, writable)
        k.emit("xor", (), "b32", target, target, fold_values(draw, k, local))


def _branch_body(draw, k: Kernel, pool: Pool, flow: _Flow, depth: int) -> bool:
    """A block in its own scope, maybe ending in `ret`; True if it does."""
    _scoped_block(draw, k, pool, pool.copy(), flow, depth)
    if one_in(draw, 5):
        k.emit("ret")
        return True
    return False


def _loop_stmt(draw, k: Kernel, pool: Pool, flow: _Flow, depth: int) -> None:
    """A loop running 0-8 times, the count taken from a live value."""
    inner = pool.copy()
    head, end = k.label(), k.label()
    src = pick(draw, pool.b32)
    counter = k.reg("b32")
    inner.fixed.add(counter.name)
    if draw(st.booleans()):  # count down to zero
        if draw(st.booleans()):
            k.emit("and", (), "b32", counter, src, small_imm(7))
        else:
            k.emit("rem", (), "u32", counter, src, small_imm(9))
        p = k.reg("pred")
        k.emit("setp", "eq", "s32", p, counter, small_imm(0))
        k.emit("bra", (), (), end, guard=p)
        k.place(head)
        inner.b32.append(counter)
        _scoped_block(draw, k, pool, inner, flow, depth)
        k.emit("add", (), "s32", counter, counter, small_imm(-1))
        q = k.reg("pred")
        k.emit("setp", "ne", "s32", q, counter, small_imm(0))
        k.emit("bra", (), (), head, guard=q)
    else:  # count up from 0 to a limit of 1-8
        limit = k.reg("b32")
        k.emit("and", (), "b32", limit, src, small_imm(7))
        k.emit("add", (), "s32", limit, limit, small_imm(1))
        k.emit("mov", (), "u32", counter, small_imm(0))
        k.place(head)
        inner.fixed.add(limit.name)
        inner.b32 += [counter, limit]
        _scoped_block(draw, k, pool, inner, flow, depth)
        k.emit("add", (), "s32", counter, counter, small_imm(1))
        q = k.reg("pred")
        k.emit("setp", draw(st.sampled_from(["lt", "lo"])), "u32", q, counter, limit)
        k.emit("bra", (), (), head, guard=q)
    k.place(end)


def _block(draw, k: Kernel, pool: Pool, flow: _Flow, depth: int) -> None:
    kinds = ["op", "op", "op", "store"] + (["if", "if", "loop"] if depth < 2 else [])
    for _ in range(draw(st.integers(1, 3))):
        if flow.budget <= 0:
            return
        flow.budget -= 1
        kind = draw(st.sampled_from(kinds))
        if kind == "op":
            _assign(draw, k, pool)
        elif kind == "store":
            _store_stmt(draw, k, pool, flow)
        elif kind == "if":
            _if_stmt(draw, k, pool, flow, depth)
        else:
            _loop_stmt(draw, k, pool, flow, depth)


@st.composite
def branch_programs(draw, limits: Limits = DEFAULT_LIMITS) -> GeneratedProgram:
    k = draw(new_kernel(limits))
    ids = thread_ids(draw, k)
    pool = Pool(b32=[ids.gtid], fixed={ids.gtid.name})
    outputs = draw(st.integers(1, 4))
    out_addr, out_ty = int_buffers(draw, k, ids, draw(st.integers(1, 3)), outputs, pool)
    budget = min(limits.ops, 10)  # loops repeat their bodies
    flow = _Flow(draw(st.integers(min(2, budget), budget)), out_addr, out_ty, outputs)
    while flow.budget > 0:
        _block(draw, k, pool, flow, 0)
    fold = fold_values(draw, k, unread(k, pool.b32) or pool.b32[-1:])
    for i, j in enumerate(sorted(draw(st.sets(st.integers(0, outputs - 1), min_size=1)))):
        r = fold if i == 0 else pick(draw, pool.b32)
        k.emit("st", "global", out_ty, Mem(out_addr, 4 * j), r)
    return finish(k, "branch")
