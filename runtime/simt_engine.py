"""The `simt` engine (`--engine simt`): the machine's ops with their ideal semantics.

`run_simt(module, launch)` runs a `simt.kernel` the way the machine inside the
model will:

- memory is one map of 32-bit words (`mem_words` of them), laid out per launch:
  the parameter area at word 0 (one word per kernel parameter: a pointer's word
  is its buffer's word address plus the launch's element offset, a scalar its
  value), then one bounds pair (base word, size in words) per pointer
  parameter, then the buffers packed one after another;
- every CTA's threads form warps of 4 lanes (consecutive linear thread ids); a
  lane without a thread is inactive from the start;
- the host scheduler only picks the next unfinished warp, round-robin over the
  resident warps (`Residency`: all of them unless the machine holds fewer
  warp slots, as an SM holds the CTAs its occupancy allows), and counts EXEC
  steps; one step runs one whole machine
  block of the picked warp: its ops in order, each on every active lane whose
  guard holds, then the terminator on those lanes (`simt.next` jumps,
  `simt.branch` sends each lane its own way, `simt.exit` retires the lanes);
- divergence is min-PC scheduling over the machine blocks: every lane has its
  own next block, a step runs the lowest-numbered one among the warp's live
  lanes, on exactly the lanes that wait there (the active lanes), so diverged
  paths reconverge at the first block in layout order they share — the
  discipline of the `ref` engine, one block instead of one instruction at a
  time; the warp is done when every lane has exited;
- a global access is checked against the bounds pair of the buffer it derives
  from: outside it, the machine traps (status 3) naming the warp, lane, ctaid,
  tid, the op with its PTX location and the word address; an inactive or
  guarded-off lane does not touch memory;
- atomics from several lanes on one word apply in lane order;
- `spill[K]` (register allocation's reloads and spills) is slot K of the
  executing lane's own thread: after the CTAs' shared windows every thread of
  the launch has `spill_words` words (`SpillArea`).

The engine also runs kernels before register allocation and block formation
(virtual registers, long blocks).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from xdsl.dialects.builtin import FileLineColLoc, IntAttr
from xdsl.ir import Block, Operation

from qgc.dialects import ptx, simt
from qgc.runtime.launch import ELEMENT_TYPES, TYPE_SIZES, Launch, LaunchError, select_kernel
from qgc.runtime.memory import Trap

__all__ = ["SimtResult", "Trap", "memory_layout", "run_simt"]

M32 = 0xFFFF_FFFF
DEFAULT_MAX_STEPS = 1_000_000
WORD_TYPES = ("u32", "s32", "f32")


@dataclass
class SimtResult:
    """Final buffer contents (per argument; None for scalars) and run statistics:
    `exec_steps` (blocks run, over all warps), `per_warp_steps`, `warps`,
    `ctas`, `ops` (machine ops run, per warp), `memory` (words by region)."""

    buffers: list[list | None]
    stats: dict[str, object] = field(default_factory=dict)


# ---------------------------------------------------------------------- layout

@dataclass
class Layout:
    """Where a launch's data lives in the machine's memory."""

    words: list[int]
    bases: dict[int, int]         # pointer parameter index -> first word of its buffer
    sizes: dict[int, int]         # pointer parameter index -> buffer size in words
    param_area: int
    bounds: int
    total: int
    shared_base: int = 0          # first word of CTA 0's shared memory
    shared_words: int = 0         # words of shared memory per CTA
    spill: SpillArea | None = None  # the threads' spill slots, after the shared windows

    def regions(self, kernel: simt.KernelOp) -> dict[str, int]:
        out = {"params": len(kernel.params), "bounds": self.bounds}
        if kernel.wide_params():
            out["high words"] = len(kernel.wide_params())
        for i, size in self.sizes.items():
            out[f"buffer {i} ({kernel.params[i][0]})"] = size
        if self.shared_words:
            out["shared"] = (self.spill.base if self.spill else self.total) - self.shared_base
        if self.spill:
            out["spill"] = self.spill.total
        return out


@dataclass(frozen=True)
class SpillArea:
    """Every thread of the launch (all CTAs) has `words` spill slots: thread
    t = cta * `threads` + linear tid keeps slot k at word base + t * words + k."""

    base: int
    words: int
    threads: int                  # threads per CTA
    ctas: int

    @property
    def total(self) -> int:
        return self.words * self.threads * self.ctas

    def word(self, cta: int, tid: int, slot: int) -> int:
        return self.base + (cta * self.threads + tid) * self.words + slot

    def describe(self) -> str:
        """The diagnostic's part for the spill area."""
        return (f", {self.words} spill words for each of {self.threads * self.ctas} "
                "threads")


def spill_area(kernel: simt.KernelOp, launch: Launch, base: int) -> SpillArea | None:
    """The spill area of a kernel that `simt-allocate-registers` spilled, at `base`."""
    if not kernel.spill_size:
        return None
    ctas = launch.grid[0] * launch.grid[1] * launch.grid[2]
    return SpillArea(base, kernel.spill_size, launch.threads_per_block, ctas)


def pick_kernel(root: Operation, name: str | None) -> simt.KernelOp:
    kernels = [root] if isinstance(root, simt.KernelOp) else simt.kernels_of(root)
    if not kernels:
        raise LaunchError("the module holds no simt kernel (run the simt pipeline first)")
    return select_kernel(kernels, name, "module")


def encode_element(elem: str, value) -> list[int]:
    """The machine words of one element: a 64-bit one takes two (low word
    first), a sub-word one takes a word of its own (zero-extended)."""
    if elem == "f32":
        return [struct.unpack("<I", struct.pack("<f", value))[0]]
    size = TYPE_SIZES[elem]
    bits = int(value) & ((1 << (8 * size)) - 1)
    return [bits & M32, bits >> 32] if size == 8 else [bits]


def decode_element(elem: str, words: list[int]):
    if elem == "f32":
        return struct.unpack("<f", struct.pack("<I", words[0]))[0]
    size = TYPE_SIZES[elem]
    bits = (words[0] | words[1] << 32) if size == 8 else words[0] & ((1 << (8 * size)) - 1)
    if elem[0] == "s" and bits >> (8 * size - 1):
        bits -= 1 << (8 * size)
    return bits


def words_per_element(elem: str) -> int:
    return 2 if TYPE_SIZES[elem] == 8 else 1


def _check_arg(i: int, arg, pname: str, ptype: str) -> None:
    unit = simt.POINTER_TYPES.get(ptype)
    if unit is not None:
        if not arg.pointer:
            raise LaunchError(f"args[{i}]: parameter '{pname}' is a pointer on the machine; "
                              f"a scalar ({arg.type}) cannot be passed to it")
        if arg.type not in ELEMENT_TYPES:
            raise LaunchError(f"args[{i}]: {arg.type} buffers are not yet supported by the "
                              "machine")
        size = TYPE_SIZES[arg.type]
        if (unit == 4) != (size >= 4) or unit < 4 and size != unit:
            access = "in 32-bit words" if unit == 4 else f"in {8 * unit}-bit elements"
            raise LaunchError(f"args[{i}]: a {arg.spelled} buffer cannot be passed to "
                              f"parameter '{pname}', which the kernel accesses {access}")
        return
    if arg.pointer:
        raise LaunchError(f"args[{i}]: a pointer ({arg.spelled}) cannot be passed to "
                          f"parameter '{pname}' of type .{ptype}")
    bits = ptx.TYPE_BITS[ptype]
    if TYPE_SIZES[arg.type] * 8 != bits or \
            ((arg.type == "f32") != (ptype[0] == "f") and ptype[0] != "b"):
        raise LaunchError(f"args[{i}]: a {arg.type} value cannot be passed to "
                          f"parameter '{pname}' of type .{ptype}")


def memory_layout(kernel: simt.KernelOp, launch: Launch) -> Layout:
    """Check the launch's arguments against the kernel and lay memory out."""
    params = kernel.params
    if len(launch.args) != len(params):
        raise LaunchError(f"kernel '{kernel.kernel_name}' takes {len(params)} argument"
                          f"{'s' if len(params) != 1 else ''}, the launch gives "
                          f"{len(launch.args)}")
    for i, (arg, (pname, ptype)) in enumerate(zip(launch.args, params, strict=True)):
        _check_arg(i, arg, pname, ptype)
    pointers = kernel.pointer_params()
    area = kernel.param_area_words
    bases: dict[int, int] = {}
    sizes: dict[int, int] = {}
    cursor = area
    for i in pointers:
        bases[i] = cursor
        sizes[i] = len(launch.args[i].data or []) * words_per_element(launch.args[i].type)
        cursor += sizes[i]
    shared_base, shared = cursor, kernel.shared_window(launch.dynamic_shared_bytes)
    ctas = launch.grid[0] * launch.grid[1] * launch.grid[2]
    total = cursor + shared * ctas
    spill = spill_area(kernel, launch, total)
    total += spill.total if spill else 0
    capacity = kernel.mem_words.value.data
    if total > capacity:
        buffers = ", ".join(f"{sizes[i]} for '{params[i][0]}'" for i in pointers)
        shared_part = f", {shared} of shared memory for each of {ctas} CTAs" if shared else ""
        shared_part += spill.describe() if spill else ""
        highs = len(kernel.wide_params())
        high_part = f", {highs} for 64-bit parameters' high words" if highs else ""
        raise LaunchError(f"the launch needs {total} words of machine memory ({len(params)} "
                          f"for parameters, {2 * len(pointers)} for bounds{high_part}, {buffers}"
                          f"{shared_part}), the machine has {capacity} (option mem-words)")
    words = [0] * capacity
    for i, arg in enumerate(launch.args):
        if i in bases:
            per = words_per_element(arg.type)
            words[i] = (bases[i] + arg.offset * per) & M32
            for k, v in enumerate(arg.data or []):
                words[bases[i] + per * k:bases[i] + per * (k + 1)] = encode_element(arg.type, v)
            bw = kernel.bounds_word(i)
            words[bw], words[bw + 1] = bases[i], sizes[i]
        else:
            value = encode_element(arg.type, arg.value)
            words[i] = value[0]
            if len(value) == 2:
                words[kernel.high_word(i)] = value[1]
    return Layout(words, bases, sizes, len(params), 2 * len(pointers), total, shared_base,
                  shared, spill)


# ---------------------------------------------------------------------- warps

class Warp:
    """One warp: per-lane registers `r`, predicates `p`, the active lanes, the
    current block, and the machine-provided values of its lanes."""

    __slots__ = ("index", "ctaid", "cta", "tids", "active", "r", "p", "block", "pc",
                 "waiting", "done", "steps", "ops", "special")

    def __init__(self, index: int, ctaid: tuple[int, int, int],
                 tids: list[tuple[int, int, int] | None], nregs: int, npreds: int,
                 ntid: tuple[int, int, int], nctaid: tuple[int, int, int], cta: int = 0):
        self.index, self.ctaid, self.tids, self.cta = index, ctaid, tids, cta
        self.waiting: set[int] = set()      # lanes arrived at a barrier, not yet released
        self.active = [lane for lane, t in enumerate(tids) if t is not None]
        self.r = [[0] * nregs for _ in tids]
        self.p = [[False] * npreds for _ in tids]
        self.block, self.done, self.steps, self.ops = 0, not self.active, 0, 0
        # each live lane's next block (a lane without a thread never runs)
        self.pc: dict[int, int] = {lane: 0 for lane in self.active}
        self.special: dict[str, list[int]] = {}
        for axis, d in enumerate("xyz"):
            self.special[f"tid.{d}"] = [t[axis] if t else 0 for t in tids]
            self.special[f"ntid.{d}"] = [ntid[axis]] * len(tids)
            self.special[f"ctaid.{d}"] = [ctaid[axis]] * len(tids)
            self.special[f"nctaid.{d}"] = [nctaid[axis]] * len(tids)

    def select(self) -> bool:
        """The next step's block and active lanes: min-PC over the live lanes
        that do not wait at a barrier; False when every live lane waits."""
        ready = [b for lane, b in self.pc.items() if lane not in self.waiting]
        if not ready:
            return False
        self.block = min(ready)
        self.active = [lane for lane, b in self.pc.items()
                       if b == self.block and lane not in self.waiting]
        return True

    def retire(self, lanes: list[int]) -> None:
        for lane in lanes:
            del self.pc[lane]
        self.done = not self.pc

    @property
    def at_barrier(self) -> bool:
        """Every live lane has arrived at a barrier (an exited lane counts)."""
        return set(self.pc) <= self.waiting

    def who(self, lane: int) -> str:
        return (f"warp {self.index} lane {lane} (ctaid {_xyz(self.ctaid)} "
                f"tid {_xyz(self.tids[lane] or (0, 0, 0))})")


def _xyz(v: tuple[int, int, int]) -> str:
    return f"({v[0]},{v[1]},{v[2]})"


# ------------------------------------------------------------------- semantics

def _s(x: int) -> int:
    return x - (1 << 32) if x & 0x8000_0000 else x


def _shl(a: int, b: int) -> int:
    return (a << b) & M32 if b < 32 else 0


def _shr_u(a: int, b: int) -> int:
    return a >> b if b < 32 else 0


def _shr_s(a: int, b: int) -> int:
    return (_s(a) >> min(b, 31)) & M32


def _div_s(a: int, b: int) -> int:
    """Toward zero; x / 0 = all ones, INT_MIN / −1 = INT_MIN (as `ref`)."""
    if b == 0:
        return M32
    q = abs(_s(a)) // abs(_s(b))
    return (-q if (_s(a) < 0) != (_s(b) < 0) else q) & M32


def _rem_s(a: int, b: int) -> int:
    """The sign of the dividend; x rem 0 = x."""
    if b == 0:
        return a
    r = abs(_s(a)) % abs(_s(b))
    return (-r if _s(a) < 0 else r) & M32


def _bfe(signed: bool) -> Callable[[int, int, int], int]:
    """Bit field extract: len bits from pos (sign-extended for `.s`)."""
    def bfe(a: int, b: int, c: int) -> int:
        pos, length = b & 0xFF, c & 0xFF
        sbit = (a >> min(pos + length - 1, 31)) & 1 if signed and length else 0
        taken = max(0, min(length, 32 - pos))
        field = (a >> pos) & ((1 << taken) - 1) if pos <= 31 else 0
        return field | (M32 & ~((1 << taken) - 1) if sbit else 0)
    return bfe


def _bfi(a: int, b: int, c: int, d: int) -> int:
    """Bit field insert: a's low len bits into b at pos."""
    pos, length = c & 0xFF, d & 0xFF
    if pos >= 32:
        return b
    field = ((1 << min(length, 32 - pos)) - 1) << pos
    return (b & ~field | (a << pos) & field) & M32


def _shf(left: bool, clamp: bool) -> Callable[[int, int, int], int]:
    """Funnel shift of the 64-bit pair {b, a}."""
    def shf(a: int, b: int, c: int) -> int:
        n = min(c, 32) if clamp else c & 31
        pair = (b << 32) | a
        return ((pair << n) >> 32) & M32 if left else (pair >> n) & M32
    return shf


def _bfind(signed: bool, shiftamt: bool) -> Callable[[int], int]:
    """The most significant non-sign bit (0xFFFFFFFF if none; `shiftamt`:
    counted from the top)."""
    def find(a: int) -> int:
        if signed and a >> 31:
            a = ~a & M32
        if a == 0:
            return M32
        pos = a.bit_length() - 1
        return 31 - pos if shiftamt else pos
    return find


ALU: dict[str, Callable[..., int]] = {
    "mov": lambda a: a,
    "not": lambda a: ~a & M32,
    "neg": lambda a: -a & M32,
    "add": lambda a, b: (a + b) & M32,
    "sub": lambda a, b: (a - b) & M32,
    "mul.lo": lambda a, b: (a * b) & M32,
    "mul.hi.s": lambda a, b: ((_s(a) * _s(b)) >> 32) & M32,
    "mul.hi.u": lambda a, b: (a * b) >> 32,
    "div.s": _div_s,
    "div.u": lambda a, b: a // b if b else M32,
    "rem.s": _rem_s,
    "rem.u": lambda a, b: a % b if b else a,
    "abs": lambda a: abs(_s(a)) & M32,
    "popc": lambda a: bin(a).count("1"),
    "clz": lambda a: 32 - a.bit_length(),
    "brev": lambda a: int(f"{a:032b}"[::-1], 2),
    "bfind.u": _bfind(False, False), "bfind.s": _bfind(True, False),
    "bfind.shiftamt.u": _bfind(False, True), "bfind.shiftamt.s": _bfind(True, True),
    "bfe.u": _bfe(False), "bfe.s": _bfe(True), "bfi": _bfi,
    "shf.l.wrap": _shf(True, False), "shf.l.clamp": _shf(True, True),
    "shf.r.wrap": _shf(False, False), "shf.r.clamp": _shf(False, True),
    "mad.lo": lambda a, b, c: (a * b + c) & M32,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "shl": _shl,
    "shr.u": _shr_u,
    "shr.s": _shr_s,
    "min.s": lambda a, b: a if _s(a) <= _s(b) else b,
    "max.s": lambda a, b: a if _s(a) >= _s(b) else b,
    "min.u": min,
    "max.u": max,
    "selp": lambda a, b, p: a if p else b,
}

SETP: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lt.s": lambda a, b: _s(a) < _s(b), "le.s": lambda a, b: _s(a) <= _s(b),
    "gt.s": lambda a, b: _s(a) > _s(b), "ge.s": lambda a, b: _s(a) >= _s(b),
    "lt.u": lambda a, b: a < b, "le.u": lambda a, b: a <= b,
    "gt.u": lambda a, b: a > b, "ge.u": lambda a, b: a >= b,
}

def _shfl_source(mode: str) -> Callable[[int, int, int], tuple[int, bool]]:
    """(lane, b, c) → (the lane to read, in range), per the PTX ISA's shfl
    pseudo-code with every lane field masked to the 4 lanes (out of range: the
    lane itself)."""
    m = simt.LANES - 1

    def source(lane: int, b: int, c: int) -> tuple[int, bool]:
        bval, cval, seg = b & m, c & m, (c >> 8) & m
        max_lane = (lane & seg) | (cval & ~seg)
        if mode == "up":
            j, ok = lane - bval, lane - bval >= max_lane
        elif mode == "down":
            j, ok = lane + bval, lane + bval <= max_lane
        elif mode == "bfly":
            j, ok = lane ^ bval, (lane ^ bval) <= max_lane
        else:
            j = (lane & seg) | (bval & ~seg)
            ok = j <= max_lane
        return (j, True) if ok else (lane, False)
    return source


#: old, value, swap → the new word (PTX semantics of `atom`).
ATOM: dict[str, Callable[[int, int, int], int]] = {
    "add": lambda o, v, _: o + v,
    "min.s": lambda o, v, _: o if _s(o) <= _s(v) else v,
    "min.u": lambda o, v, _: min(o, v),
    "max.s": lambda o, v, _: o if _s(o) >= _s(v) else v,
    "max.u": lambda o, v, _: max(o, v),
    "and": lambda o, v, _: o & v,
    "or": lambda o, v, _: o | v,
    "xor": lambda o, v, _: o ^ v,
    "exch": lambda o, v, _: v,
    "inc": lambda o, v, _: 0 if o >= v else o + 1,
    "dec": lambda o, v, _: v if o == 0 or o > v else o - 1,
    "cas": lambda o, v, s: s if o == v else o,
}

PRED: dict[str, Callable[..., bool]] = {
    "mov": lambda a: a, "not": lambda a: not a,
    "and": lambda a, b: a and b, "or": lambda a, b: a or b, "xor": lambda a, b: a != b,
}

assert set(ALU) == set(simt.ALU_ARITY) and set(SETP) == set(simt.SETP_CONDS)
assert set(PRED) == set(simt.PRED_ARITY) and set(ATOM) == set(simt.ATOM_OPS)


@lru_cache(maxsize=64)
def _source_lines(filename: str) -> tuple[str, ...]:
    try:
        return tuple(Path(filename).read_text(errors="replace").splitlines())
    except OSError:
        return ()


def describe(op: Operation) -> str:
    """`simt.ld at dot.ptx:40:2 (ld.global.u32 %r6, [%rd8];)`."""
    loc = op.location
    if not isinstance(loc, FileLineColLoc):
        return op.name
    line = loc.line.data
    text = f"{op.name} at {loc.filename.data}:{line}:{loc.column.data}"
    lines = _source_lines(loc.filename.data)
    if 1 <= line <= len(lines):
        text += f" ({' '.join(lines[line - 1].split())})"
    return text


class _Compiler:
    """Turns blocks into closures over a warp; registers into slot indices."""

    def __init__(self, kernel: simt.KernelOp, layout: Layout, mem: list[int]):
        self.kernel, self.layout, self.mem = kernel, layout, mem
        self.slots: dict[simt.RegAttr, int] = {}
        self.pslots: dict[simt.RegAttr, int] = {}
        self.index = {b: i for i, b in enumerate(kernel.body.blocks)}

    def slot(self, r: simt.RegAttr) -> int:
        table = self.pslots if r.is_pred else self.slots
        if r.kind.data in ("r", "p"):
            return r.index.data
        if r not in table:
            table[r] = 1000 + len(table)
        return table[r]

    def sizes(self) -> tuple[int, int]:
        regs = [self.slot(r) for r in simt.all_registers(list(self.kernel.body.blocks))
                if not r.is_pred]
        preds = [self.slot(r) for r in simt.all_registers(list(self.kernel.body.blocks))
                 if r.is_pred]
        return max(regs, default=-1) + 1, max(preds, default=-1) + 1

    def lanes(self, guard: simt.GuardAttr | None) -> Callable[[Warp], list[int]]:
        if guard is None:
            return lambda w: w.active
        gi, neg = self.slot(guard.pred), guard.is_negated
        return lambda w: [lane for lane in w.active if w.p[lane][gi] != neg]

    def warp_op(self, op: simt.WarpOp, lanes) -> Callable[[Warp], None]:
        """Cross-lane: every executing lane reads first, then all write."""
        opc, d = op.opcode.data, self.slot(op.dst)
        conds = [self.condition(c) for c in op.conditions()]
        if opc.startswith("shfl.") and opc.endswith(".p"):
            delta, clamp = (self.reader(s) for s in op.srcs.data)
            source = _shfl_source(opc.split(".")[1])

            def in_range(w: Warp) -> None:
                for lane in lanes(w):
                    w.p[lane][d] = source(lane, delta(w, lane), clamp(w, lane))[1]
            return in_range
        if opc.startswith("shfl."):
            value, delta, clamp = (self.reader(s) for s in op.srcs.data)
            source = _shfl_source(opc.split(".")[1])

            def shfl(w: Warp) -> None:
                got = {}
                for lane in lanes(w):
                    j = source(lane, delta(w, lane), clamp(w, lane))[0]
                    got[lane] = value(w, j if w.tids[j] is not None else lane)
                for lane, v in got.items():
                    w.r[lane][d] = v
            return shfl

        pred_dst = simt.WARP_OPS[opc][1]

        def collective(w: Warp) -> None:
            group = lanes(w)
            votes = [conds[0](w, lane) for lane in group] if conds else []
            if opc == "activemask":
                result = sum(1 << lane for lane in group)
            elif opc == "ballot":
                result = sum(1 << lane for lane, v in zip(group, votes, strict=False) if v)
            else:
                result = {"any": any(votes), "all": all(votes),
                          "uni": all(votes) or not any(votes)}[opc]
            dst = w.p if pred_dst else w.r
            for lane in group:
                dst[lane][d] = result
        return collective

    def condition(self, src: simt.GuardAttr | int) -> Callable[[Warp, int], bool]:
        if isinstance(src, int):
            return lambda w, lane: bool(src)
        s, neg = self.slot(src.pred), src.is_negated
        return lambda w, lane: w.p[lane][s] != neg

    def reader(self, src) -> Callable[[Warp, int], int]:
        if isinstance(src, IntAttr):
            value = src.data & M32
            return lambda w, lane: value
        s = self.slot(src)
        if src.is_pred:
            return lambda w, lane: w.p[lane][s]
        return lambda w, lane: w.r[lane][s]

    def block(self, block: Block) -> tuple[list[Callable[[Warp], None]], Callable[[Warp], None]]:
        ops = list(block.ops)
        return [self.op(op) for op in ops[:-1]], self.terminator(ops[-1])

    def terminator(self, op: Operation) -> Callable[[Warp], None]:
        if isinstance(op, simt.ExitOp):
            def exit_(w: Warp) -> None:
                w.retire(w.active)
            return exit_
        if isinstance(op, simt.NextOp | simt.BarrierOp):
            target = self.index[op.dest]
            arrive = isinstance(op, simt.BarrierOp)

            def next_(w: Warp) -> None:
                for lane in w.active:
                    w.pc[lane] = target
                    if arrive:
                        w.waiting.add(lane)
            return next_
        assert isinstance(op, simt.BranchOp)
        then_, else_ = self.index[op.then_dest], self.index[op.else_dest]
        gi, neg = self.slot(op.cond.pred), op.cond.is_negated

        def branch(w: Warp) -> None:
            for lane in w.active:
                w.pc[lane] = then_ if w.p[lane][gi] != neg else else_
        return branch

    def op(self, op: Operation) -> Callable[[Warp], None]:
        assert isinstance(op, simt.MachineOp)
        lanes = self.lanes(op.guard)
        if isinstance(op, simt.AluOp):
            fn = ALU[op.opcode.data]
            reads = [self.reader(s) for s in op.srcs.data]
            d = self.slot(op.dst)

            def alu(w: Warp) -> None:
                for lane in lanes(w):
                    w.r[lane][d] = fn(*[rd(w, lane) for rd in reads])
            return alu
        if isinstance(op, simt.WarpOp):
            return self.warp_op(op, lanes)
        if isinstance(op, simt.PredOp):
            fn = PRED[op.opcode.data]
            reads = [self.condition(s) for s in op.sources()]
            d = self.slot(op.dst)

            def pred(w: Warp) -> None:
                for lane in lanes(w):
                    w.p[lane][d] = fn(*[rd(w, lane) for rd in reads])
            return pred
        if isinstance(op, simt.SetpOp):
            cmp = SETP[op.cond.data]
            ra, rb = (self.reader(s) for s in op.srcs.data)
            d = self.slot(op.dst)

            def setp(w: Warp) -> None:
                for lane in lanes(w):
                    w.p[lane][d] = cmp(ra(w, lane), rb(w, lane))
            return setp
        if isinstance(op, simt.SpecialOp):
            which, d = op.which.data, self.slot(op.dst)

            def special(w: Warp) -> None:
                for lane in lanes(w):
                    w.r[lane][d] = w.special[which][lane]
            return special
        assert isinstance(op, simt.MemoryOp)
        return self.memory(op, lanes)

    def memory(self, op: simt.MemoryOp, lanes) -> Callable[[Warp], None]:
        mem, offset = self.mem, op.offset.value.data
        if op.space.data == "param":
            assert isinstance(op, simt.LdOp)
            d = self.slot(op.dst)

            def ld_param(w: Warp) -> None:
                for lane in lanes(w):
                    w.r[lane][d] = mem[offset]
            return ld_param
        address = {"shared": self.shared_address, "spill": self.spill_address}.get(
            op.space.data, self.global_address)(op)
        if isinstance(op, simt.LdOp):
            d = self.slot(op.dst)

            def ld(w: Warp) -> None:
                for lane in lanes(w):
                    w.r[lane][d] = mem[address(w, lane)]
            return ld
        value = self.reader(op.value)
        if isinstance(op, simt.StOp):
            def st(w: Warp) -> None:
                for lane in lanes(w):
                    mem[address(w, lane)] = value(w, lane) & M32
            return st
        return self.atom(op, lanes, address, value)

    def spill_address(self, op: simt.MemoryOp) -> Callable[[Warp, int], int]:
        """A reload or spill: slot `offset` of each executing lane's own thread
        (the verifier keeps the slot inside the kernel's spill_words)."""
        area, slot = self.layout.spill, op.offset.value.data
        assert area is not None and 0 <= slot < area.words

        def word(w: Warp, lane: int) -> int:
            return area.word(w.cta, w.index * simt.LANES + lane, slot)
        return word

    def shared_address(self, op: simt.MemoryOp) -> Callable[[Warp, int], int]:
        """Byte address in the CTA's shared window → the machine word."""
        offset, what = op.offset.value.data, describe(op)
        base = self.slot(op.base) if op.base is not None else None
        first, size = self.layout.shared_base, self.layout.shared_words

        def address(w: Warp, lane: int) -> int:
            a = ((w.r[lane][base] if base is not None else 0) + offset) & M32
            if a % 4:
                raise Trap(f"trap: misaligned {what} by {w.who(lane)}: shared byte address "
                           f"{a} is not a multiple of 4")
            if a >= 4 * size:
                raise Trap(f"trap: out-of-bounds {what} by {w.who(lane)}: shared byte "
                           f"address {a} is outside the CTA's {4 * size} bytes of shared "
                           "memory")
            return first + w.cta * size + a // 4
        return address

    def global_address(self, op: simt.MemoryOp) -> Callable[[Warp, int], int]:
        mem, offset = self.mem, op.offset.value.data
        assert op.base is not None and op.buffer_index is not None
        base = self.slot(op.base)
        buf = op.buffer_index
        bw = self.kernel.bounds_word(buf)
        pname = self.kernel.params[buf][0]
        what = describe(op)

        def address(w: Warp, lane: int) -> int:
            a = (w.r[lane][base] + offset) & M32
            lo, size = mem[bw], mem[bw + 1]
            if not lo <= a < lo + size:
                where = f"words {lo}..{lo + size - 1}" if size else "empty"
                raise Trap(f"trap: out-of-bounds {what} by {w.who(lane)}: word address {a} "
                           f"is outside buffer {buf} '{pname}' ({where})")
            return a
        return address

    def atom(self, op, lanes, address, value) -> Callable[[Warp], None]:
        assert isinstance(op, simt.AtomOp)
        mem = self.mem
        d = self.slot(op.dst)
        apply = ATOM[op.op.data]
        swap = self.reader(op.swap) if op.swap is not None else (lambda w, lane: 0)

        def atom(w: Warp) -> None:
            for lane in lanes(w):  # lane order: exact for lanes that hit the same word
                a = address(w, lane)
                old = mem[a]
                mem[a] = apply(old, value(w, lane) & M32, swap(w, lane) & M32) & M32
                w.r[lane][d] = old
        return atom


# ------------------------------------------------------------------------- run

def _grid(grid: tuple[int, int, int]):
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                yield (x, y, z)


def make_warps(launch: Launch, nregs: int, npreds: int) -> list[Warp]:
    warps: list[Warp] = []
    bx, by, _ = launch.block
    n = launch.threads_per_block
    for cta, ctaid in enumerate(_grid(launch.grid)):
        tids = [(i % bx, (i // bx) % by, i // (bx * by)) for i in range(n)]
        for w in range(0, n, simt.LANES):
            lanes: list[tuple[int, int, int] | None] = list(tids[w:w + simt.LANES])
            lanes += [None] * (simt.LANES - len(lanes))
            warps.append(Warp(w // simt.LANES, ctaid, lanes, nregs, npreds, launch.block,
                              launch.grid, cta))
    return warps


def _release_barriers(warps: list[Warp]) -> bool:
    """The host's barrier: a CTA whose every live thread waits goes on."""
    ctas: dict[int, list[Warp]] = {}
    for w in warps:
        ctas.setdefault(w.cta, []).append(w)
    released = False
    for group in ctas.values():
        if any(w.waiting for w in group) and all(w.at_barrier for w in group):
            for w in group:
                w.waiting.clear()
            released = True
    return released


def _exited(w: Warp) -> bool:
    return w.done


class Residency:
    """Which warps hold the machine's warp slots, as an SM's occupancy: CTAs
    enter in grid order, each taking the lowest free slots, as soon as enough
    slots are free; a CTA's slots free once all its warps have exited. The
    `simt` engine and the host of the token protocol both schedule by it, so
    their warp orders, and so the orders of atomics, agree."""

    def __init__(self, warps: list[Warp], slots: int | None):
        ctas: dict[int, list[Warp]] = {}
        for w in warps:
            if not w.done:
                ctas.setdefault(w.cta, []).append(w)
        self.pending = list(ctas.values())
        largest = max((len(c) for c in self.pending), default=0)
        if slots is not None and largest > slots:
            raise LaunchError(f"a CTA of the launch has {largest} warps; the machine holds "
                              f"{slots} warps (option max-warps)")
        self.held: list[Warp | None] = [None] * (slots or sum(map(len, self.pending)))

    def admit(self, done: Callable[[Warp], bool]) -> list[tuple[int, Warp]]:
        """Free the slots of CTAs whose warps have all exited, then let in
        the next CTAs that fit; the (slot, warp) pairs that entered."""
        ctas: dict[int, list[int]] = {}
        for slot, w in enumerate(self.held):
            if w is not None:
                ctas.setdefault(w.cta, []).append(slot)
        for slots in ctas.values():
            if all(done(self.held[s]) for s in slots):
                for s in slots:
                    self.held[s] = None
        entered: list[tuple[int, Warp]] = []
        while self.pending and len(self.pending[0]) <= self.held.count(None):
            for w in self.pending.pop(0):
                slot = self.held.index(None)
                self.held[slot] = w
                entered.append((slot, w))
        return entered

    def resident(self) -> list[tuple[int, Warp]]:
        return [(slot, w) for slot, w in enumerate(self.held) if w is not None]


def run_simt(module: Operation, launch: Launch, max_steps: int = DEFAULT_MAX_STEPS,
             resident_warps: int | None = None) -> SimtResult:
    """Run `launch` on the `simt.kernel` in `module`; see the module docstring.
    `resident_warps`: the warp slots (`Residency`; all warps at once if None)."""
    kernel = pick_kernel(module, launch.kernel)
    if kernel.shared_vars is not None:     # selected, not yet laid out: lay out a copy
        from qgc.passes.simt_layout_memory import layout_memory
        kernel = kernel.clone()
        layout_memory(kernel)
    layout = memory_layout(kernel, launch)
    mem = layout.words
    comp = _Compiler(kernel, layout, mem)
    blocks = [comp.block(b) for b in kernel.body.blocks]
    nregs, npreds = comp.sizes()
    warps = make_warps(launch, nregs, npreds)
    steps = 0
    residency = Residency(warps, resident_warps)
    residency.admit(_exited)
    while live := [w for _, w in residency.resident() if not w.done]:
        ran = False
        for w in live:
            if not w.select():
                continue            # every live lane waits at a barrier
            ran = True
            body, term = blocks[w.block]
            for run in body:
                run(w)
            term(w)
            w.steps += 1
            w.ops += len(body)
            steps += 1
        if steps > max_steps:
            raise Trap(f"trap: the launch ran past the limit of {max_steps} EXEC steps "
                       "(an endless loop?)")
        # an exited thread counts as arrived, so a CTA whose warps all wait is
        # released here: some warp always runs (no deadlock with one barrier)
        released = _release_barriers(warps)
        assert ran or released
        residency.admit(_exited)
    buffers: list[list | None] = []
    for i, arg in enumerate(launch.args):
        if i not in layout.bases:
            buffers.append(None)
            continue
        b = layout.bases[i]
        per = words_per_element(arg.type)
        buffers.append([decode_element(arg.type, mem[b + k:b + k + per])
                        for k in range(0, layout.sizes[i], per)])
    stats = {
        "exec_steps": steps,
        "per_warp_steps": [w.steps for w in warps],
        "warps": len(warps),
        "ctas": launch.grid[0] * launch.grid[1] * launch.grid[2],
        "ops": sum(w.ops for w in warps),
        "memory": layout.regions(kernel),
        "memory_words": layout.total,
    }
    return SimtResult(buffers, stats)
