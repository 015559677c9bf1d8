"""The shared and atomic families: a .shared array with barriers, and
order-independent global atomics."""

from __future__ import annotations

from hypothesis import strategies as st

from ptxgen.common import (
    DEFAULT_LIMITS,
    Limits,
    Pool,
    ThreadIds,
    element_address,
    finish,
    fold_values,
    int_imm,
    new_kernel,
    one_in,
    pick,
    small_imm,
    thread_ids,
    unread,
)
from ptxgen.integer import (
    i_arith,
    i_logic,
    i_minmax,
    i_mul,
    i_select,
    i_shift,
    int_buffers,
    int_op,
    src32,
)
from ptxgen.records import MAX_THREADS, GeneratedProgram, Kernel, Mem, Reg, Sym
from ptxgen.values import data, raw32

# ========================================================= family: shared


#: shared element types by size: words, halfwords and bytes (packed, so
#: neighbouring threads store into one word)
_ELEMENT = {4: "u32", 2: "u16", 1: "u8"}


def shared_slot(k: Kernel, smem: Sym, index: Reg, wide: bool, size: int = 4) -> Reg:
    """The shared address of element `index` (of `size` bytes) of smem
    (32-bit or 64-bit addressing)."""
    if wide:
        base, offset, addr = k.reg("b64"), k.reg("b64"), k.reg("b64")
        k.emit("mov", (), "u64", base, smem)
        k.emit("mul", "wide", "u32", offset, index, small_imm(size))
        k.emit("add", (), "s64", addr, base, offset)
    else:
        base, offset, addr = k.reg("b32"), k.reg("b32"), k.reg("b32")
        k.emit("mov", (), "u32", base, smem)
        k.emit("shl", (), "b32", offset, index, small_imm(size.bit_length() - 1))
        k.emit("add", (), "s32", addr, base, offset)
    return addr


def _shared_read(draw, k: Kernel, pool: Pool, ids: ThreadIds, smem: Sym, wide: bool,
                 size: int = 4) -> None:
    value = k.reg("b32")
    if one_in(draw, 4):  # a fixed slot, addressed by symbol
        slot = draw(st.integers(0, k.block - 1))
        k.emit("ld", "shared", _ELEMENT[size], value, Mem(smem, size * slot))
    else:  # the neighbour (tid + d) % ntid
        d = draw(st.integers(0, 2 * MAX_THREADS))
        t, neighbour = k.reg("b32"), k.reg("b32")
        k.emit("add", (), "s32", t, ids.tid, small_imm(d))
        k.emit("rem", (), "u32", neighbour, t, ids.ntid)
        k.emit("ld", "shared", _ELEMENT[size], value,
               Mem(shared_slot(k, smem, neighbour, wide, size)))
    pool.b32.append(value)


@st.composite
def shared_programs(draw, limits: Limits = DEFAULT_LIMITS) -> GeneratedProgram:
    k = draw(new_kernel(limits))
    ids = thread_ids(draw, k)
    pool = Pool(b32=[ids.tid])
    outputs = draw(st.integers(1, 4))
    out_addr, out_ty = int_buffers(draw, k, ids, draw(st.integers(1, 2)), outputs, pool)
    smem = k.shared_array(k.block, module_scope=draw(st.booleans()), typed=draw(st.booleans()))
    wide = draw(st.booleans())
    size = draw(st.sampled_from(sorted(_ELEMENT)))
    own = shared_slot(k, smem, ids.tid, wide, size)
    for round_ in range(draw(st.integers(1, 2))):
        for _ in range(draw(st.integers(0, 2))):
            int_op(draw, k, pool)
        if round_:
            k.emit("bar", "sync", (), small_imm(0))  # everyone has read the last round
        k.emit("st", "shared", _ELEMENT[size], Mem(own), pick(draw, pool.b32))
        k.emit("bar", "sync", (), small_imm(0))
        for _ in range(draw(st.integers(1, 2))):
            _shared_read(draw, k, pool, ids, smem, wide, size)
        for _ in range(draw(st.integers(0, 2))):
            int_op(draw, k, pool)
        j = draw(st.integers(0, outputs - 1))
        k.emit("st", "global", out_ty, Mem(out_addr, 4 * j),
               fold_values(draw, k, unread(k, pool.b32) or pool.b32[-1:]))
    return finish(k, "shared")


# ========================================================= family: local


@st.composite
def local_programs(draw, limits: Limits = DEFAULT_LIMITS) -> GeneratedProgram:
    """A per-thread array in a `.local` frame, nvcc-style (`mov.u64 %rd, depot;
    add.u64 %rd2, %rd, 0`): every slot stored first, then loads and stores at
    indices computed from data (masked to the frame)."""
    k = draw(new_kernel(limits))
    ids = thread_ids(draw, k)
    pool = Pool(b32=[ids.tid])
    outputs = draw(st.integers(1, 3))
    out_addr, out_ty = int_buffers(draw, k, ids, draw(st.integers(1, 2)), outputs, pool)
    words = draw(st.sampled_from([2, 4, 8]))
    depot, frame = k.reg("b64"), k.reg("b64")
    k.emit("mov", (), "u64", depot, k.local_frame(words))
    k.emit("add", (), "u64", frame, depot, small_imm(0))
    for j in range(words):
        k.emit("st", "local", "u32", Mem(frame, 4 * j), pick(draw, pool.b32))
    for _ in range(draw(st.integers(1, 4))):
        if one_in(draw, 2):
            int_op(draw, k, pool)
        index, offset, at = k.reg("b32"), k.reg("b64"), k.reg("b64")
        k.emit("and", (), "b32", index, pick(draw, pool.b32), small_imm(words - 1))
        k.emit("mul", "wide", "u32", offset, index, small_imm(4))
        k.emit("add", (), "s64", at, frame, offset)
        if one_in(draw, 2):
            value = k.reg("b32")
            k.emit("ld", "local", "u32", value, Mem(at))
            pool.b32.append(value)
        else:
            k.emit("st", "local", "u32", Mem(at), pick(draw, pool.b32))
    for j in range(words):          # the frame's last contents reach memory too
        value = k.reg("b32")
        k.emit("ld", "local", "u32", value, Mem(frame, 4 * j))
        pool.b32.append(value)
    for j in range(outputs):
        k.emit("st", "global", out_ty, Mem(out_addr, 4 * j),
               fold_values(draw, k, unread(k, pool.b32) or pool.b32[-1:]))
    return finish(k, "local")


# ========================================================= family: atomic

_ATOMIC_OPS = (("add", "u32"), ("add", "s32"), ("min", "s32"), ("max", "s32"),
               ("min", "u32"), ("max", "u32"), ("and", "b32"), ("or", "b32"), ("xor", "b32"))


@st.composite
def atomic_programs(draw, limits: Limits = DEFAULT_LIMITS) -> GeneratedProgram:
    k = draw(new_kernel(limits))
    ids = thread_ids(draw, k)
    n = k.threads
    rounds = draw(st.integers(1, 3))
    words = draw(st.integers(1, 4))  # words per round's region
    in_ty = draw(st.sampled_from(["u32", "s32"]))
    in_base = k.pointer(in_ty, data(draw, raw32(), n))
    acc_base = k.pointer(draw(st.sampled_from(["u32", "s32"])),
                         [draw(raw32()) for _ in range(rounds * words)])
    pool = Pool(b32=[ids.gtid])
    value = k.reg("b32")
    k.emit("ld", "global", in_ty, value, Mem(element_address(draw, k, in_base, ids.gtid, 4, 1)))
    pool.b32.append(value)
    for r in range(rounds):
        op, ty = draw(st.sampled_from(_ATOMIC_OPS))
        conflict = draw(st.integers(1, words))  # words of the region in use
        index = k.reg("b32")
        key = pick(draw, pool.b32)  # tid-based or data-dependent word
        if conflict & (conflict - 1) == 0 and draw(st.booleans()):
            k.emit("and", (), "b32", index, key, small_imm(conflict - 1))
        else:
            k.emit("rem", (), "u32", index, key, small_imm(conflict))
        if one_in(draw, 2):  # a value derived for this atomic
            operand = int_op(draw, k, pool,
                              ops=(i_arith, i_logic, i_mul, i_shift, i_minmax, i_select))
        else:
            operand = draw(int_imm(ty)) if one_in(draw, 4) else pick(draw, pool.b32)
        addr = element_address(draw, k, acc_base, index, 4, 1)
        k.emit("atom", ("global", op), ty, k.reg("b32"), Mem(addr, 4 * words * r), operand)
    if draw(st.booleans()):  # compare-and-swap, one word per thread: order-independent
        expect_raw = [draw(raw32()) for _ in range(n)]
        cas_raw = [e if draw(st.booleans()) else draw(raw32()) for e in expect_raw]
        expect_base = k.pointer("u32", expect_raw)
        cas_base = k.pointer("u32", cas_raw)
        out_base = k.pointer("u32", [draw(raw32()) for _ in range(n)])
        expected = k.reg("b32")
        k.emit("ld", "global", "u32", expected,
               Mem(element_address(draw, k, expect_base, ids.gtid, 4, 1)))
        old = k.reg("b32")
        k.emit("atom", ("global", "cas"), "b32", old,
               Mem(element_address(draw, k, cas_base, ids.gtid, 4, 1)), expected,
               src32(draw, pool, "b32"))
        k.emit("st", "global", "u32", Mem(element_address(draw, k, out_base, ids.gtid, 4, 1)),
               old)
    return finish(k, "atomic")
