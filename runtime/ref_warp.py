"""Warp collectives in the reference engine: shfl, vote, activemask, match and
redux, each run once for the lanes of a warp that execute it together."""

from __future__ import annotations

from collections.abc import Callable

from qgc.dialects.ptx import Pair
from qgc.runtime.ref_decode import WARP, Ctx, op, signed

# ========================================================== warp collectives

def _member_mask_ok(cx: Ctx, first_extra: int) -> None:
    """The member-mask operand is read (for checking) but otherwise ignored."""
    if len(cx.ops) > first_extra:
        cx.src(cx.ops[first_extra], "b32")


@op("shfl", "shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask",
    "shfl.{up,down,bfly,idx}.b32 d[|p], a, b, c",
    desc="warp shuffle among the threads executing it together (lane fields masked to "
         "the warp size)", mods=("sync", "up", "down", "bfly", "idx"))
def _shfl(cx: Ctx):
    cx.one_type(("b32",))
    modes = [m for m in cx.code.modifiers if m in ("up", "down", "bfly", "idx")]
    if len(modes) != 1:
        raise cx.unsupported()
    mode = modes[0]
    ops = cx.operands(5 if "sync" in cx.mods else 4)
    target = ops[0]
    if isinstance(target, Pair):
        d, p = cx.dst(target.first, "b32"), cx.dst(target.second, "pred")
    else:
        d, p = cx.dst(target, "b32"), None
    a, b, c = cx.src(ops[1], "b32"), cx.src(ops[2], "b32"), cx.src(ops[3], "b32")
    source_lane = _shfl_lane(mode, cx.warp_size - 1)

    def run(group):
        results = []
        for th in group:
            j, pval = source_lane(th.lane, b(th), c(th))
            lanes = th.warp
            src = lanes[j] if j < len(lanes) else th
            results.append((th, a(src), pval))
        for th, value, pval in results:
            d(th, value)
            if p is not None:
                p(th, pval)
    return WARP, run


def _shfl_lane(mode: str, lane_mask: int) -> Callable:
    """(lane, b, c) → (source lane, in range) per the PTX ISA's shfl pseudo-code,
    with every 5-bit lane field masked to the warp size (warp_size - 1)."""
    def lane_of(lane: int, b: int, c: int) -> tuple[int, bool]:
        bval, cval, seg = b & lane_mask, c & lane_mask, (c >> 8) & lane_mask
        max_lane = (lane & seg) | (cval & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j = lane - bval
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bval
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            ok = j <= max_lane
        else:
            j = min_lane | (bval & ~seg)
            ok = j <= max_lane
        return (j, True) if ok else (lane, False)
    return lane_of


@op("vote", "vote.sync.{any,all,uni}.pred d, {!}a, membermask",
    "vote.sync.ballot.b32 d, {!}a, membermask", "vote.{any,all,uni}.pred d, {!}a",
    "vote.ballot.b32 d, {!}a",
    desc="warp vote over the threads executing it together",
    mods=("sync", "any", "all", "uni", "ballot"))
def _vote(cx: Ctx):
    modes = [m for m in cx.code.modifiers if m in ("any", "all", "uni", "ballot")]
    if len(modes) != 1:
        raise cx.unsupported()
    mode = modes[0]
    cx.one_type(("b32",) if mode == "ballot" else ("pred",))
    ops = cx.operands(3 if "sync" in cx.mods else 2)
    _member_mask_ok(cx, 2)
    a = cx.psrc(ops[1])
    if mode == "ballot":
        d = cx.dst(ops[0], "b32")

        def ballot(group):
            bits = 0
            for th in group:
                if a(th):
                    bits |= 1 << th.lane
            for th in group:
                d(th, bits)
        return WARP, ballot
    d = cx.dst(ops[0], "pred")
    reduce = {"any": any, "all": all, "uni": lambda vs: all(vs) or not any(vs)}[mode]

    def vote(group):
        result = reduce([bool(a(th)) for th in group])
        for th in group:
            d(th, result)
    return WARP, vote


@op("activemask", "activemask.b32 d",
    desc="mask of the lanes executing this instruction together")
def _activemask(cx: Ctx):
    cx.one_type(("b32",))
    d = cx.dst(cx.operands(1)[0], "b32")

    def run(group):
        bits = 0
        for th in group:
            bits |= 1 << th.lane
        for th in group:
            d(th, bits)
    return WARP, run


@op("match", "match.any.sync.{b32,b64} d, a, membermask",
    "match.all.sync.{b32,b64} d[|p], a, membermask",
    desc="lanes holding the same value (among the threads executing it together)",
    mods=("any", "all", "sync"))
def _match(cx: Ctx):
    t = cx.one_type(("b32", "b64"))
    ops = cx.operands(3)
    _member_mask_ok(cx, 2)
    a = cx.src(ops[1], t)
    target = ops[0]
    p = None
    if isinstance(target, Pair):
        d, p = cx.dst(target.first, "b32"), cx.dst(target.second, "pred")
    else:
        d = cx.dst(target, "b32")
    every = "all" in cx.mods
    if every == ("any" in cx.mods) or (p is not None and not every):
        raise cx.unsupported()

    def run(group):
        values = [(th, a(th)) for th in group]
        for th, v in values:
            same = 0
            for other, w in values:
                if w == v:
                    same |= 1 << other.lane
            if every:
                uniform = all(w == v for _, w in values)
                d(th, same if uniform else 0)
                if p is not None:
                    p(th, uniform)
            else:
                d(th, same)
    return WARP, run


@op("redux", "redux.sync.{add,min,max}.{u32,s32} d, a, membermask",
    "redux.sync.{and,or,xor}.b32 d, a, membermask",
    desc="warp reduction over the threads executing it together",
    mods=("sync", "add", "min", "max", "and", "or", "xor"))
def _redux(cx: Ctx):
    t = cx.one_type(("u32", "s32", "b32"))
    kinds = [m for m in cx.code.modifiers if m in ("add", "min", "max", "and", "or", "xor")]
    if len(kinds) != 1:
        raise cx.unsupported()
    kind = kinds[0]
    ops = cx.operands(3)
    d, a = cx.dst(ops[0], t), cx.src(ops[1], t)
    conv = (lambda x: signed(x, 32)) if t == "s32" else (lambda x: x)
    fold = {"add": sum, "min": min, "max": max,
            "and": lambda vs: _fold(vs, lambda x, y: x & y),
            "or": lambda vs: _fold(vs, lambda x, y: x | y),
            "xor": lambda vs: _fold(vs, lambda x, y: x ^ y)}[kind]

    def run(group):
        result = fold([conv(a(th)) for th in group]) & 0xFFFFFFFF
        for th in group:
            d(th, result)
    return WARP, run


def _fold(values: list[int], fn: Callable) -> int:
    out = values[0]
    for v in values[1:]:
        out = fn(out, v)
    return out
