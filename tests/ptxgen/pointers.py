"""The pointer family: pointers held as values. Each thread picks a pointer
into one of two or three buffers (or null) by a selector it loads, parks it
in a `.shared` table of 64-bit slots, and after a barrier reads through a
neighbour's (a null one is skipped); with one CTA it also adds to the word
through it after a second barrier (order-independent atomics). The program
never looks at a pointer's bits: it compares them with null and dereferences
them, so the oracle's private addresses give the answer every engine must."""

from __future__ import annotations

from hypothesis import strategies as st

from ptxgen.common import (
    DEFAULT_LIMITS,
    Limits,
    Pool,
    element_address,
    finish,
    fold_values,
    new_kernel,
    one_in,
    pick,
    small_imm,
    thread_ids,
    unread,
)
from ptxgen.integer import int_op
from ptxgen.memory import shared_slot
from ptxgen.records import MAX_THREADS, GeneratedProgram, Kernel, Mem, Reg
from ptxgen.values import data, raw32


def _choose(draw, k: Kernel, selector: Reg, index: Reg, bases: list[Reg], sizes: list[int]
            ) -> Reg:
    """`p = null`, then for each buffer j, `p = &buf_j[index % size_j]`
    where `selector == j`: by `selp.b64`, or by a guarded `mov.b64`."""
    p = k.reg("b64")
    k.emit("mov", (), "u64", p, small_imm(0))
    for j, (base, size) in enumerate(zip(bases, sizes, strict=True)):
        hit, slot = k.reg("pred"), k.reg("b32")
        k.emit("setp", "eq", "u32", hit, selector, small_imm(j))
        k.emit("rem", (), "u32", slot, index, small_imm(size))
        addr = element_address(draw, k, base, slot, 4, 1)
        if draw(st.booleans()):
            chosen = k.reg("b64")
            k.emit("selp", (), "b64", chosen, addr, p, hit)
            p = chosen
        else:
            k.emit("mov", (), "b64", p, addr, guard=hit)
    return p


@st.composite
def pointer_programs(draw, limits: Limits = DEFAULT_LIMITS) -> GeneratedProgram:
    k = draw(new_kernel(limits))
    ids = thread_ids(draw, k)
    n = k.threads
    sizes = draw(st.lists(st.integers(1, 6), min_size=2, max_size=3))
    bases = [k.pointer("s32", data(draw, raw32(), size)) for size in sizes]
    sel_base = k.pointer("u32", [draw(st.integers(0, len(sizes))) for _ in range(n)])
    idx_base = k.pointer("u32", data(draw, raw32(), n))
    out_base = k.pointer("s32", [0] * n)
    selector, index = k.reg("b32"), k.reg("b32")
    k.emit("ld", "global", "u32", selector,
           Mem(element_address(draw, k, sel_base, ids.gtid, 4, 1)))
    k.emit("ld", "global", "u32", index, Mem(element_address(draw, k, idx_base, ids.gtid, 4, 1)))
    pool = Pool(b32=[ids.tid, selector, index])
    p = _choose(draw, k, selector, index, bases, sizes)
    table = k.shared_array(2 * k.block, module_scope=draw(st.booleans()),
                           typed=draw(st.booleans()))
    wide = draw(st.booleans())
    k.emit("st", "shared", "u64", Mem(shared_slot(k, table, ids.tid, wide, 8)), p)
    k.emit("bar", "sync", (), small_imm(0))
    shifted, neighbour, q = k.reg("b32"), k.reg("b32"), k.reg("b64")
    k.emit("add", (), "s32", shifted, ids.tid, small_imm(draw(st.integers(0, 2 * MAX_THREADS))))
    k.emit("rem", (), "u32", neighbour, shifted, ids.ntid)
    k.emit("ld", "shared", "u64", q, Mem(shared_slot(k, table, neighbour, wide, 8)))
    live = k.reg("pred")
    k.emit("setp", "ne", "u64", live, q, small_imm(0))
    value = k.reg("b32")
    k.emit("mov", (), "u32", value, small_imm(-1))
    k.emit("ld", "global", "u32", value, Mem(q), guard=live)
    pool.b32.append(value)
    if k.grid == 1 and one_in(draw, 2):     # CTAs are not ordered: one CTA only
        k.emit("bar", "sync", (), small_imm(0))   # every read is done
        old = k.reg("b32")
        k.emit("atom", ("global", "add"), "u32", old, Mem(q), pick(draw, pool.b32), guard=live)
    for _ in range(draw(st.integers(0, 2))):
        int_op(draw, k, pool)
    k.emit("st", "global", "s32", Mem(element_address(draw, k, out_base, ids.gtid, 4, 1)),
           fold_values(draw, k, unread(k, pool.b32) or [value]))
    return finish(k, "pointer")
