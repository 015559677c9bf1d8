"""The `simt` engine (`--engine simt`): the machine's ops with their ideal semantics.

`run_simt(module, launch)` runs a `simt.kernel` the way the machine inside the
model will:

- memory is one map of 32-bit words (`mem_words` of them), laid out per launch
  by the machine's ABI (`qgc.machine.abi.memory_layout`): the parameter area at
  word 0 (one word per kernel parameter: a pointer's word is its buffer's word
  address plus the launch's element offset, a scalar its value), then one
  bounds pair (base word, size in words) per pointer parameter, then the
  buffers packed one after another;
- every CTA's threads form warps of 4 lanes (consecutive linear thread ids); a
  lane without a thread is inactive from the start (`qgc.machine.warps`);
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
  the launch has `spill_words` words (`qgc.machine.abi.SpillArea`).

The engine also runs kernels before register allocation and block formation
(virtual registers, long blocks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from xdsl.dialects.builtin import FileLineColLoc, IntAttr
from xdsl.ir import Block, Operation

from qgc.dialects import simt
from qgc.machine.abi import Layout, memory_layout, pick_kernel, read_buffers, shfl_source
from qgc.machine.opcodes import (
    ALU_OPCODES,
    ATOM_OPERATIONS,
    ATOM_PAIR_OPERATIONS,
    PRED_OPCODES,
    SETP_CONDITIONS,
)
from qgc.machine.shared_window import place_shared_variables
from qgc.machine.warps import Residency, Warp, iter_warps
from qgc.runtime.launch import STEP_LIMITS, Launch, check_steps, step_limit_trap
from qgc.runtime.memory import Trap

__all__ = ["SimtResult", "Trap", "run_simt"]

M32 = 0xFFFF_FFFF
M64 = (1 << 64) - 1
STEP, DEFAULT_MAX_STEPS = STEP_LIMITS["simt"]
#: Warp slots, as an SM's occupancy: a launch of more warps runs its CTAs as
#: slots free (every CTA fits: 1024 threads are 256 warps), so memory does not
#: grow with the grid.
DEFAULT_RESIDENT_WARPS = 1024
WORD_TYPES = ("u32", "s32", "f32")


@dataclass
class SimtResult:
    """Final buffer contents (per argument; None for scalars) and run statistics:
    `exec_steps` (blocks run, over all warps), `per_warp_steps`, `warps`,
    `ctas`, `ops` (machine ops run, per warp), `memory` (words by region)."""

    buffers: list[list | None]
    stats: dict[str, object] = field(default_factory=dict)


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
            source = shfl_source(opc.split(".")[1])

            def in_range(w: Warp) -> None:
                for lane in lanes(w):
                    w.p[lane][d] = source(lane, delta(w, lane), clamp(w, lane))[1]
            return in_range
        if opc.startswith("shfl."):
            value, delta, clamp = (self.reader(s) for s in op.srcs.data)
            source = shfl_source(opc.split(".")[1])

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
            fn = ALU_OPCODES[op.opcode.data].evaluate
            reads = [self.reader(s) for s in op.srcs.data]
            d = self.slot(op.dst)

            def alu(w: Warp) -> None:
                for lane in lanes(w):
                    w.r[lane][d] = fn(*[rd(w, lane) for rd in reads])
            return alu
        if isinstance(op, simt.WarpOp):
            return self.warp_op(op, lanes)
        if isinstance(op, simt.PredOp):
            fn = PRED_OPCODES[op.opcode.data][1]
            reads = [self.condition(s) for s in op.sources()]
            d = self.slot(op.dst)

            def pred(w: Warp) -> None:
                for lane in lanes(w):
                    w.p[lane][d] = fn(*[rd(w, lane) for rd in reads])
            return pred
        if isinstance(op, simt.SetpOp):
            cmp = SETP_CONDITIONS[op.cond.data]
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
        addressing = {"shared": self.shared_address, "local": self.local_address,
                      "spill": self.spill_address}.get(
            op.space.data, self.global_address)
        address = addressing(op)
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
        if isinstance(op, simt.AtomOp) and op.is_pair:    # global or shared (verified)
            return self.atom_pair(op, lanes, address, addressing(op, 1), value)
        return self.atom(op, lanes, address, value)

    def spill_address(self, op: simt.MemoryOp) -> Callable[[Warp, int], int]:
        """A reload or spill: slot `offset` of each executing lane's own thread
        (the verifier keeps the slot inside the kernel's spill_words)."""
        area, slot = self.layout.spill, op.offset.value.data
        assert area is not None and 0 <= slot < area.words

        def word(w: Warp, lane: int) -> int:
            return area.word(w.cta, w.index * simt.LANES + lane, slot)
        return word

    def local_address(self, op: simt.MemoryOp, extra: int = 0) -> Callable[[Warp, int], int]:
        """Byte address in the executing thread's `.local` frame → the machine
        word (after the thread's spill slots)."""
        area, first = self.layout.spill, self.kernel.spill_size

        def word(w: Warp, lane: int, k: int) -> int:
            assert area is not None
            return area.word(w.cta, w.index * simt.LANES + lane, first + k)
        return self.window_address(op, extra, "local", "thread", self.kernel.local_size, word)

    def shared_address(self, op: simt.MemoryOp, extra: int = 0) -> Callable[[Warp, int], int]:
        """Byte address in the CTA's shared window → the machine word."""
        first, size = self.layout.shared_base, self.layout.shared_words
        return self.window_address(op, extra, "shared", "CTA", size,
                                   lambda w, lane, k: first + w.cta * size + k)

    def window_address(self, op: simt.MemoryOp, extra: int, space: str, owner: str, words: int,
                       word: Callable[[Warp, int, int], int]) -> Callable[[Warp, int], int]:
        """A byte address in a window of `words` words (the CTA's shared
        memory, the thread's local frame) → `word(warp, lane, k)` of its word
        k; misaligned or past the window traps (`extra`: words past the op's,
        a pair's high word)."""
        offset, what = op.offset.value.data + 4 * extra, describe(op)
        base = self.slot(op.base) if op.base is not None else None

        def address(w: Warp, lane: int) -> int:
            a = ((w.r[lane][base] if base is not None else 0) + offset) & M32
            if a % 4:
                raise Trap(f"trap: misaligned {what} by {w.who(lane)}: {space} byte address "
                           f"{a} is not a multiple of 4")
            if a >= 4 * words:
                raise Trap(f"trap: out-of-bounds {what} by {w.who(lane)}: {space} byte "
                           f"address {a} is outside the {owner}'s {4 * words} bytes of "
                           f"{space} memory")
            return word(w, lane, a // 4)
        return address

    def global_address(self, op: simt.MemoryOp, extra: int = 0) -> Callable[[Warp, int], int]:
        if op.is_located:
            return self.located_address(op, extra)
        mem, offset = self.mem, op.offset.value.data + extra
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

    def located_address(self, op: simt.MemoryOp, extra: int = 0) -> Callable[[Warp, int], int]:
        """A 64-bit byte address (the reference engine's) → the word of the
        buffer that holds it; outside every word buffer, or misaligned, traps."""
        mem, kernel, what = self.mem, self.kernel, describe(op)
        offset = op.offset.value.data + 4 * extra
        assert op.base is not None and op.base_hi is not None
        lo, hi = self.slot(op.base), self.slot(op.base_hi)
        buffers = [(i, kernel.params[i][0], simt.POINTER_TYPES[kernel.params[i][1]],
                    kernel.bounds_word(i), kernel.ref_word(i)) for i in kernel.pointer_params()]

        def address(w: Warp, lane: int) -> int:
            a = ((w.r[lane][hi] & M32) << 32 | w.r[lane][lo] & M32) + offset & M64
            for i, name, unit, bw, rw in buffers:
                base, size = mem[bw], mem[bw + 1]
                start = unit * base + mem[rw] & M32
                if not start <= a < start + unit * size:
                    continue
                why = f"{unit}-byte elements, one per word" if unit != 4 else \
                    "not a multiple of 4" if (a - start) % 4 else None
                if why is None:
                    return base + (a - start) // 4
                raise Trap(f"trap: {'misaligned' if unit == 4 else 'out-of-bounds'} {what} by "
                           f"{w.who(lane)}: address 0x{a:x} is in buffer {i} '{name}' "
                           f"({why})")
            raise Trap(f"trap: out-of-bounds {what} by {w.who(lane)}: address 0x{a:x}"
                       f"{' (null)' if a == 0 else ''} is outside every buffer")
        return address

    def atom(self, op, lanes, address, value) -> Callable[[Warp], None]:
        assert isinstance(op, simt.AtomOp)
        mem = self.mem
        d = self.slot(op.dst)
        apply = ATOM_OPERATIONS[op.op.data]
        swap = self.reader(op.swap) if op.swap is not None else (lambda w, lane: 0)

        def atom(w: Warp) -> None:
            for lane in lanes(w):  # lane order: exact for lanes that hit the same word
                a = address(w, lane)
                old = mem[a]
                mem[a] = apply(old, value(w, lane) & M32, swap(w, lane) & M32) & M32
                w.r[lane][d] = old
        return atom

    def atom_pair(self, op, lanes, address, high, value) -> Callable[[Warp], None]:
        """A pair atomic: the 64-bit value in a word and the next, lane by lane."""
        mem = self.mem
        d, d_hi = self.slot(op.dst), self.slot(op.dst_hi)
        apply = ATOM_PAIR_OPERATIONS[op.op.data]
        v_hi = self.reader(op.value_hi)
        s_lo, s_hi = ((self.reader(op.swap), self.reader(op.swap_hi)) if op.swap is not None
                      else (_zero, _zero))

        def pair(read_lo, read_hi, w, lane) -> int:
            return (read_lo(w, lane) & M32) | (read_hi(w, lane) & M32) << 32

        def atom(w: Warp) -> None:
            for lane in lanes(w):  # lane order: exact for lanes that hit the same pair
                a, b = address(w, lane), high(w, lane)
                old = mem[a] | mem[b] << 32
                new = apply(old, pair(value, v_hi, w, lane), pair(s_lo, s_hi, w, lane))
                mem[a], mem[b] = new & M32, new >> 32 & M32
                w.r[lane][d], w.r[lane][d_hi] = old & M32, old >> 32
        return atom


def _zero(w: Warp, lane: int) -> int:
    return 0


# ------------------------------------------------------------------------- run

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


def run_simt(module: Operation, launch: Launch, max_steps: int = DEFAULT_MAX_STEPS,
             resident_warps: int | None = DEFAULT_RESIDENT_WARPS) -> SimtResult:
    """Run `launch` on the `simt.kernel` in `module`; see the module docstring.
    `resident_warps`: the warp slots (`Residency`; all warps at once if None);
    each CTA's warps are made when it enters them."""
    check_steps(launch, max_steps, STEP, simt.LANES)
    kernel = pick_kernel(module, launch.kernel)
    if kernel.shared_vars is not None:     # selected, not yet laid out: lay out a copy
        kernel = kernel.clone()
        place_shared_variables(kernel)
    layout = memory_layout(kernel, launch)
    mem = layout.words
    comp = _Compiler(kernel, layout, mem)
    blocks = [comp.block(b) for b in kernel.body.blocks]
    nregs, npreds = comp.sizes()
    per_cta = launch.warps_per_cta(simt.LANES)
    per_warp_steps = [0] * launch.warps(simt.LANES)
    steps = ops = 0
    residency = Residency(iter_warps(launch, nregs, npreds), resident_warps)
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
            per_warp_steps[w.cta * per_cta + w.index] += 1
            ops += len(body)
            steps += 1
        if steps > max_steps:
            raise step_limit_trap(max_steps, STEP)
        # an exited thread counts as arrived, so a CTA whose warps all wait is
        # released here: some warp always runs (no deadlock with one barrier)
        released = _release_barriers(live)
        assert ran or released
        residency.admit(_exited)
    buffers = read_buffers(launch, layout, mem.__getitem__)
    stats = {
        "exec_steps": steps,
        "per_warp_steps": per_warp_steps,
        "warps": len(per_warp_steps),
        "ctas": launch.ctas,
        "ops": ops,
        "memory": layout.regions(kernel),
        "memory_words": layout.total,
    }
    return SimtResult(buffers, stats)
