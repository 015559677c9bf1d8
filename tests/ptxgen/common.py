"""Pieces every family uses: immediates, register pools, program limits, the launch
shape, thread ids, element addresses, folding dead values, and finishing a program."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from ptxgen.oracle import OracleError, run_oracle
from ptxgen.records import (
    ELEM_BYTES,
    MAX_THREADS,
    GeneratedProgram,
    Imm,
    Inst,
    Kernel,
    Mem,
    Reg,
    Special,
)
from ptxgen.values import bit_mask, raw32, raw64, to_signed, type_bits

# ============================================================== immediates


@st.composite
def int_imm(draw, ty: str, values: st.SearchStrategy[int] | None = None) -> Imm:
    """An immediate for an op of type ty, spelled the ways PTX allows: decimal,
    hex, negative decimal (signed and untyped-bits types only)."""
    bits = type_bits(ty)
    raw = draw(values if values is not None else raw32() if bits == 32 else raw64()) & bit_mask(bits)
    signed = to_signed(raw, bits)
    hex_text = draw(st.booleans())
    if ty[0] == "s":
        text = f"0x{raw:X}" if hex_text and signed >= 0 else str(signed)
    elif ty[0] == "u":
        text = f"0x{raw:X}" if hex_text else str(raw)
    else:
        text = f"0x{raw:X}" if hex_text else str(signed)
    return Imm(raw, text)


def small_imm(value: int, bits: int = 32) -> Imm:
    return Imm(value & bit_mask(bits), str(value))


# ======================================================== register pools


@dataclass
class Pool:
    """Registers a generator may read, by kind; `dirty` f32 registers may hold a NaN;
    `fixed` registers are never overwritten (loop counters, indices)."""
    b32: list[Reg] = field(default_factory=list)
    b64: list[Reg] = field(default_factory=list)
    f32: list[Reg] = field(default_factory=list)
    pred: list[Reg] = field(default_factory=list)
    dirty: set[str] = field(default_factory=set)
    fixed: set[str] = field(default_factory=set)

    def copy(self) -> Pool:
        return Pool(list(self.b32), list(self.b64), list(self.f32), list(self.pred),
                    set(self.dirty), set(self.fixed))


def pick(draw, regs: list[Reg]) -> Reg:
    """A register, biased toward the most recent ones (deeper DAGs)."""
    n = len(regs)
    if n > 1 and draw(st.booleans()):
        return regs[n - 1 - draw(st.integers(0, min(2, n - 1)))]
    return regs[draw(st.integers(0, n - 1))]


def one_in(draw, n: int) -> bool:
    return draw(st.integers(0, n - 1)) == 0


# ================================================== common kernel pieces


@dataclass(frozen=True)
class Limits:
    """Size of the generated programs: threads per launch (1-2 CTAs), and the
    instructions (DAG ops, or statements for `branch`) drawn besides the fixed parts."""
    threads: int = MAX_THREADS
    ops: int = 16


DEFAULT_LIMITS = Limits()


@st.composite
def new_kernel(draw, limits: Limits) -> Kernel:
    grid = draw(st.integers(1, min(2, limits.threads)))
    return Kernel(grid, draw(st.integers(1, limits.threads // grid)))


@dataclass
class ThreadIds:
    tid: Reg
    ntid: Reg
    gtid: Reg


def thread_ids(draw, k: Kernel) -> ThreadIds:
    """`%ctaid.x * %ntid.x + %tid.x`, as nvcc writes it."""
    ctaid, ntid, tid, gtid = (k.reg("b32") for _ in range(4))
    k.emit("mov", (), "u32", ctaid, Special("%ctaid.x"))
    k.emit("mov", (), "u32", ntid, Special("%ntid.x"))
    k.emit("mov", (), "u32", tid, Special("%tid.x"))
    if draw(st.booleans()):
        k.emit("mad", "lo", "s32", gtid, ctaid, ntid, tid)
    else:
        t = k.reg("b32")
        k.emit("mul", "lo", "s32", t, ctaid, ntid)
        k.emit("add", (), "s32", gtid, t, tid)
    return ThreadIds(tid, ntid, gtid)


def element_address(draw, k: Kernel, base: Reg, index: Reg, size: int, stride: int) -> Reg:
    """base + index * stride * size bytes, by one of nvcc's idioms."""
    scale = size * stride
    offset = k.reg("b64")
    style = draw(st.integers(0, 2))
    if style == 0:
        k.emit("mul", "wide", draw(st.sampled_from(["u32", "s32"])), offset, index,
               small_imm(scale))
    elif style == 1 and scale & (scale - 1) == 0:
        wide = k.reg("b64")
        k.emit("cvt", (), ("u64", "u32"), wide, index)
        k.emit("shl", (), "b64", offset, wide, small_imm(scale.bit_length() - 1))
    else:
        scaled = index
        if stride != 1:
            scaled = k.reg("b32")
            k.emit("mul", "lo", "s32", scaled, index, small_imm(stride))
        k.emit("mul", "wide", "u32", offset, scaled, small_imm(size))
    addr = k.reg("b64")
    k.emit("add", (), "s64", addr, base, offset)
    return addr


def unread(k: Kernel, regs: list[Reg]) -> list[Reg]:
    """The registers of regs that no instruction reads (yet)."""
    reads = set()
    for x in k.code:
        if not isinstance(x, Inst):
            continue
        if x.guard is not None:
            reads.add(x.guard.name)
        for a in x.args if x.op in ("st", "bra", "bar") else x.args[1:]:
            base = a.base if isinstance(a, Mem) else a
            if isinstance(base, Reg):
                reads.add(base.name)
    return [r for r in regs if r.name not in reads]


def fold_values(draw, k: Kernel, regs: list[Reg]) -> Reg:
    """xor/add of regs (all .b32 or all .b64), each step a bijection in each operand:
    a wrong bit in any of them reaches memory. Folding the unread registers before
    the stores leaves no dead instruction."""
    acc = regs[0]
    signed = "s32" if acc.kind == "b32" else "s64"
    for r in regs[1:]:
        t = k.reg(acc.kind)
        if draw(st.booleans()):
            k.emit("xor", (), acc.kind, t, acc, r)
        else:
            k.emit("add", (), signed, t, acc, r)
        acc = t
    return acc


def load_row(k: Kernel, addr: Reg, ty: str, count: int, kind: str) -> list[Reg]:
    regs = []
    for j in range(count):
        r = k.reg(kind)
        k.emit("ld", "global", ty, r, Mem(addr, j * ELEM_BYTES[ty]))
        regs.append(r)
    return regs


def check_no_contraction(k: Kernel) -> None:
    """ptxas may fuse `mul.f32` and `add/sub.f32` without rounding modifiers into an fma
    (PTX ISA), so such a pair would have no unique answer: never generate one."""
    defs: dict[str, Inst] = {}
    for x in k.code:
        if not isinstance(x, Inst):
            continue
        if x.op in ("add", "sub") and x.types == ("f32",) and not x.mods:
            for a in x.args[1:]:
                d = defs.get(a.name) if isinstance(a, Reg) else None
                if d is not None and d.op == "mul" and not d.mods and d.types == ("f32",):
                    raise OracleError(f"contractible pair: {d.opcode} then {x.opcode}")
        if x.args and isinstance(x.args[0], Reg) and x.op not in ("st", "bra"):
            defs[x.args[0].name] = x


def finish(k: Kernel, family: str) -> GeneratedProgram:
    check_no_contraction(k)
    k.emit("ret")
    launch = k.launch()
    return GeneratedProgram(k.ptx(), launch, run_oracle(k, k.launch()), family)
