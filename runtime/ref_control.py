"""Control flow in the reference engine: branches, exit and trap, the no-effect
instructions (fences, prefetches), and CTA barriers (bar, barrier)."""

from __future__ import annotations

from collections.abc import Callable

from qgc.dialects.ptx import Sym
from qgc.runtime.ref_decode import BARRIER, BRANCH, EXIT, NOP, TRAP, BarrierSpec, Ctx, op

# ============================================================== control flow

@op("bra", "bra{.uni} label", desc="branch (predicated with @p / @!p)", mods=("uni",))
def _bra(cx: Ctx):
    ops = cx.operands(1)
    if not isinstance(ops[0], Sym) or ops[0].name not in cx.labels:
        raise cx.unsupported("branch targets must be labels of the kernel")
    return BRANCH, cx.labels[ops[0].name]


@op("ret", "ret{.uni}", desc="return from the kernel (the thread exits)", mods=("uni",))
def _ret(cx: Ctx):
    cx.operands(0)
    return EXIT, None


@op("exit", "exit", desc="the thread exits")
def _exit(cx: Ctx):
    cx.operands(0)
    return EXIT, None


@op("trap", "trap", desc="abort the kernel (a Trap)")
def _trap(cx: Ctx):
    return TRAP, "trap instruction executed"


def _nop(cx: Ctx):
    return NOP, None


for _name, _forms, _desc, _mods in (
    ("membar", ("membar.{cta,gl,sys}",), "memory barrier (no effect: memory is "
     "sequentially consistent)", ("cta", "gl", "sys")),
    ("fence", ("fence{.sc,.acq_rel}.{cta,gpu,sys}",), "memory fence (no effect)",
     ("sc", "acq_rel", "cta", "gpu", "sys", "cluster", "proxy", "async")),
    ("nanosleep", ("nanosleep.u32 t",), "sleep (no effect)", ()),
    ("pmevent", ("pmevent a",), "performance-monitor event (no effect)", ("mask",)),
    ("prefetch", ("prefetch{.global,.local}.{L1,L2} [a]",), "prefetch (no effect)",
     ("global", "local", "L1", "L2")),
    ("prefetchu", ("prefetchu.L1 [a]",), "prefetch (no effect)", ("L1",)),
):
    op(_name, *_forms, desc=_desc, mods=_mods)(_nop)


def _barrier_operands(cx: Ctx, first: int) -> tuple[Callable, Callable | None]:
    ops = cx.ops
    bid = cx.src(ops[first], "u32")
    count = cx.src(ops[first + 1], "u32") if len(ops) > first + 1 else None
    return bid, count


@op("bar", "bar{.cta}.sync a{, b}", "bar{.cta}.arrive a, b",
    "bar{.cta}.red.popc.u32 d, a{, b}, {!}c", "bar{.cta}.red.{and,or}.pred p, a{, b}, {!}c",
    "bar.warp.sync mask",
    desc="CTA barrier: waits until all non-exited threads of the CTA (or b threads) arrive",
    mods=("cta", "sync", "arrive", "red", "popc", "and", "or", "warp", "aligned"))
def _bar(cx: Ctx):
    if "warp" in cx.mods:
        cx.operands(1)
        return NOP, None
    if "red" in cx.mods:
        return _bar_red(cx)
    if "arrive" in cx.mods:
        cx.operands(2)
        bid, count = _barrier_operands(cx, 0)
        return BARRIER, BarrierSpec("arrive", bid, count)
    cx.operands(1, 2)
    bid, count = _barrier_operands(cx, 0)
    return BARRIER, BarrierSpec("sync", bid, count)


@op("barrier", "barrier{.cta}.sync{.aligned} a{, b}", "barrier{.cta}.arrive{.aligned} a, b",
    "barrier{.cta}.red.{popc,and,or}{.aligned}.type d, a{, b}, {!}c",
    desc="CTA barrier (as bar)",
    mods=("cta", "sync", "arrive", "red", "popc", "and", "or", "aligned"))
def _barrier(cx: Ctx):
    return _bar(cx)


def _bar_red(cx: Ctx):
    reds = [m for m in cx.code.modifiers if m in ("popc", "and", "or")]
    if len(reds) != 1:
        raise cx.unsupported()
    ops = cx.operands(3, 4)
    t = "u32" if reds[0] == "popc" else "pred"
    bid = cx.src(ops[1], "u32")
    count = cx.src(ops[2], "u32") if len(ops) == 4 else None
    pred = cx.psrc(ops[-1])
    return BARRIER, BarrierSpec("red", bid, count, pred, cx.dst(ops[0], t), reds[0])
