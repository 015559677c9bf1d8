"""`convert-simt-to-tensor{max-warps=8}`: one machine step as one `tensor.program`.

The program is what *every* GPU token computes on its way through the
compiled layers (qgc.protocol names the tokens); the simt kernel stays in the
module beside it (the runtime lays memory out from it). Per token kind:

- records (`A`, `D`): layer 0 stages the record's address and bytes in
  one-slot memories; the record's top byte assembles the word and *commits*
  it into every copy of the state it addresses: the machine memory (one head
  per read port), the launch area (the same), or the executing warp's
  register file (one head per block, lane and register the block reads,
  keyed by warp and register; the warp is staged by the `EXEC` token);
- `EXEC(w, b)`: machine block b of warp w. The warp's `lanes` word gives each
  lane's next block (relative to b), exited and waiting bits: a lane runs if
  it waits at b (and is not held at a barrier the host has not released).
  The block's live-in registers come from the register file through its own
  read ports (read in the block's group, so a port's bits live only while
  its block uses them, and share coordinates with the other blocks'), its
  predicates from the warp's `preds` word. Ops are exact bit circuits per lane (`circuits.Alu`);
  loads read their ports and see the block's earlier stores (forwarding);
  stores, atomics, the registers the block leaves live and the changed
  control words become the step's *records*, written with the step's end
  (the warp's next block by min-PC, or a barrier wait) into the *outbox*
  (one-slot memories that later tokens of the step read). Every block's
  circuits run; the executing block's results are selected by its one-hot;
- every token then names the next token of the trace: the first record of the
  step (after `EXEC`), the record's next byte (after `A`, `D`), the next
  record or `END`/`BAR` (after a top byte).

Memory: record addresses have 10 bits (qgc.protocol): below 512 the word
memory, 512–639 the launch area (`protocol.LaunchArea`), 768–895 the
registers of the executing warp. A memory head holds 127 words; a kernel
with more (`mem_words` up to 508) keeps its memory in 2 or 4 *banks*
interleaved by the low address bits (word a in row a >> k of bank a & (2^k − 1)),
so every port is a head per bank and a read is the merge of the banks' reads,
each enabled by its bank bits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc import protocol as P
from qgc.dataflow import Cfg, kept_by_guarded_writes, liveness, register_access
from qgc.diagnostics import location_prefix
from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.passes.simt_layout_memory import check_laid_out
from qgc.passes.simt_to_tensor.circuits import Alu

WORD = 32
SLOTS = P.BANK_WORDS           # rows of a memory head (slot 127 keeps the query exact)
KEY_BITS = 7
WARP_KEY_BITS = 3
END_BITS = P.BLOCK_BITS + 2            # next block, exited, barrier
MAX_WARPS = 8
PREDS = 8                              # predicate bits per lane in the `preds` word
LA = P.LaunchArea


def unsupported(op, what: str) -> DiagnosticException:
    return DiagnosticException(f"{location_prefix(op)}error: {what} is not yet supported by "
                               "the machine's tensor level")


@dataclass
class _Reg:
    """A register's value in one lane during the block: `value` where `guard`
    holds (None: always), `fallback` elsewhere."""

    value: SSAValue
    guard: tuple[SSAValue, bool] | None = None
    fallback: _Reg | None = None


@dataclass
class _Record:
    valid: SSAValue
    address: SSAValue          # P.ADDRESS_BITS bits
    value: SSAValue            # 32 bits


@dataclass
class _Write:
    """A memory write of the step so far, for loads that follow it: `where`
    is what static disambiguation knows ('global N', 'shared', ('spill', lane,
    slot)); `key` the word address, `en` whether it happens."""

    where: object
    key: SSAValue
    en: SSAValue
    value: SSAValue


@dataclass
class _Control:
    """Per-lane control of the executing block."""

    active: list[SSAValue]         # the lane runs this step
    pc: list[SSAValue]             # its next block before the step (6 bits)
    exited: list[SSAValue]
    wait: list[SSAValue]           # still held at a barrier after this step
    lanes_word: SSAValue


@dataclass
class _BlockResult:
    records: list[_Record]
    target: list[SSAValue]         # per lane: next block bits, exit, barrier (END_BITS - 0)
    preds: SSAValue | None         # the new `preds` word, or None: unchanged
    trap: SSAValue                 # faulted, then the first fault's site and lane bits


@dataclass
class Lowering:
    kernel: simt.KernelOp
    warps: int
    b: T.ProgramBuilder = field(init=False)
    alu: Alu = field(init=False)

    def __post_init__(self) -> None:
        self.blocks = self.kernel.machine_blocks()
        self.check_fits()
        self.bank_bits = bank_bits(self.kernel.mem_words.value.data)
        self.address_bits = KEY_BITS + self.bank_bits
        cfg = Cfg.of(self.kernel)
        keeps = kept_by_guarded_writes(cfg, register_access)
        self.live_in, self.live_out = liveness(cfg, register_access, keeps)
        ports = tuple(tuple(sorted(r.index.data for r in self.live_in[bl] if not r.is_pred))
                      for bl in self.blocks)
        records = max([self._record_count(bl) for bl in self.blocks] + [1])
        self.sites = {op: i for i, op in enumerate(self.kernel.memory_sites())}
        self.vocab = P.Vocabulary(records, len(self.blocks), self.warps, ports, len(self.sites))
        self.b = T.ProgramBuilder(f"{self.kernel.kernel_name}_step")
        self.alu = self.common_alu = Alu(self.b)
        widths = {name: len(v) for name, v in self.vocab.inputs(P.Token("END")).items()}
        self.inp = {name: self.b.input(name, w) for name, w in widths.items() if w}
        self.n_ports = 0
        self.launch_reads: dict[str, SSAValue] = {}
        self.param_reads: dict[int, SSAValue] = {}

    def check_fits(self) -> None:
        k = self.kernel
        if k.mem_words.value.data > P.MAX_MEMORY_WORDS:
            raise DiagnosticException(
                f"{location_prefix(k)}error: kernel '{k.kernel_name}' has "
                f"{k.mem_words.value.data} memory words; the tensor level holds "
                f"{P.MAX_MEMORY_WORDS} ({P.MAX_MEMORY_WORDS // SLOTS} banks of {SLOTS}; "
                f"option mem-words of convert-ptx-to-simt)")
        if not 1 <= self.warps <= MAX_WARPS:
            raise DiagnosticException(f"error: convert-simt-to-tensor: max-warps must be "
                                      f"1..{MAX_WARPS}")
        if len(self.blocks) > 1 << P.BLOCK_BITS:
            raise DiagnosticException(
                f"{location_prefix(k)}error: kernel '{k.kernel_name}' has {len(self.blocks)} "
                f"blocks; the tensor level numbers at most {1 << P.BLOCK_BITS}")
        regs = k.limit("regs")
        if regs is None or regs > P.MAX_REGISTERS:
            raise DiagnosticException(
                f"{location_prefix(k)}error: the tensor level takes a kernel with at most "
                f"{P.MAX_REGISTERS} physical registers per lane (run simt-allocate-registers"
                f"{{regs={P.MAX_REGISTERS}}} first)")

    def _record_count(self, block: Block) -> int:
        writes = sum(simt.LANES for op in block.ops if isinstance(op, simt.StOp | simt.AtomOp))
        regs = len(self.written_live_out(block))
        return writes + simt.LANES * regs + 2     # + the preds and lanes words

    def written_live_out(self, block: Block) -> list[simt.RegAttr]:
        written = {d for op in block.ops if isinstance(op, simt.MachineOp) for d in op.defs()}
        return sorted((r for r in written if r in self.live_out[block] and not r.is_pred),
                      key=lambda r: r.index.data)

    # ------------------------------------------------------------ small gates
    def bit(self, name: str, i: int = 0) -> SSAValue:
        return self.b.slice(self.inp[name], i, i + 1)

    def bits_of(self, value: SSAValue) -> list[SSAValue]:
        return [self.b.slice(value, i, i + 1) for i in range(T.width_of(value))]

    def gate(self, pos: Sequence[SSAValue], neg: Sequence[SSAValue] = (), need: int | None = None
             ) -> SSAValue:
        """[Σ pos − Σ neg ≥ need] over 1-bit values (need: all of pos)."""
        vals = list(pos) + list(neg)
        terms = {i: 1 for i in range(len(pos))} | {len(pos) + i: -1 for i in range(len(neg))}
        return self.b.threshold(vals, [(terms, len(pos) if need is None else need)])

    def any_of(self, vals: Sequence[SSAValue]) -> SSAValue:
        return self.gate(vals, need=1)

    def none_of(self, vals: Sequence[SSAValue]) -> SSAValue:
        return self.gate([], vals, need=0)

    def bits_or(self, x: SSAValue, y: SSAValue) -> SSAValue:
        n = T.width_of(x)
        return self.b.threshold([x, y], [({i: 1, n + i: 1}, 1) for i in range(n)])

    def bits_and_bit(self, x: SSAValue, e: SSAValue) -> SSAValue:
        n = T.width_of(x)
        return self.b.threshold([x, e], [({i: 1, n: 1}, 2) for i in range(n)])

    def const(self, value: int, width: int) -> SSAValue:
        return self.alu.const(value, width)

    def common_const(self, value: int, width: int) -> SSAValue:
        """A constant every block may use (built outside any block's group)."""
        with self.b.ungrouped():
            return self.common_alu.const(value, width)

    def zext(self, value: SSAValue, width: int = WORD) -> SSAValue:
        n = T.width_of(value)
        return value if n == width else self.b.concat([value, self.const(0, width - n)])

    def pick(self, choices: Sequence[tuple[SSAValue, SSAValue]]) -> SSAValue:
        """Σ_i [sel_i ∧ value_i] bit by bit, at most one sel_i set: one layer."""
        n = T.width_of(choices[0][1])
        vals = [v for sel, val in choices for v in (sel, val)]
        offsets, at = [], 0
        for _, val in choices:
            offsets.append(at)
            at += 1 + T.width_of(val)
        rows = [[(1, {o: 1, o + 1 + i: 1}, 2) for o in offsets] for i in range(n)]
        return self.b.threshold(vals, rows)

    # ------------------------------------------------------------ state heads
    def stage(self) -> None:
        """Layer 0: the record's address and lower bytes, the warp of the
        step; the commit and where it goes."""
        b, R = self.b, self.vocab.records
        b.memory("stage_a", 1, R + P.ADDRESS_BITS)
        b.kv_write("stage_a", "onehot", self.bit("is_a"),
                   b.concat([self.inp["rec_k"], self.inp["rec_a"]]))
        staged = b.kv_read("stage_a", "onehot", self.bit("is_d"))
        self.staged_k = b.slice(staged, 0, R)
        addr = self.bits_of(b.slice(staged, R, R + P.ADDRESS_BITS))
        b.memory("stage_w", 1, WARP_KEY_BITS)
        b.kv_write("stage_w", "onehot", self.bit("is_exec"), self.exec_warp())
        staged_w = b.kv_read("stage_w", "onehot", self.bit("is_top"))
        own = self.inp["own_word"]
        parts = []
        for i in range(P.BYTES - 1):
            name = f"stage_b{i}"
            b.memory(name, 1, 8)
            b.kv_write(name, "onehot", self.bit("stage_byte", i), b.slice(own, 8 * i, 8 * i + 8))
            byte = b.kv_read(name, "onehot", self.bit("read_byte", i))
            parts.append(self.bits_or(b.slice(own, 8 * i, 8 * i + 8), byte))
        parts.append(b.slice(own, 8 * (P.BYTES - 1), 8 * P.BYTES))
        self.commit_word = b.concat(parts)
        top, k = self.bit("is_top"), self.bank_bits
        self.commit_key = b.concat(addr[:KEY_BITS])
        self.commit_mem_key = b.concat(addr[k:k + KEY_BITS])
        self.commit_mem = [self.gate([top] + ones, [addr[9]] + zeros)
                           for ones, zeros in (split_bits(addr[:k], bank)
                                               for bank in range(1 << k))]
        self.commit_launch = self.gate([top, addr[9]], [addr[8]])
        self.commit_reg_key = b.concat([staged_w, *addr[:4]])
        self.commit_reg = [self.gate([top, addr[9], addr[8]] + ones, zeros)
                           for ones, zeros in (split_bits(addr[5:7], ln)
                                               for ln in range(simt.LANES))]

    def exec_warp(self) -> SSAValue:
        w = self.inp["exec_w"]
        n = T.width_of(w)
        return w if n == WARP_KEY_BITS else \
            self.b.concat([w, self.common_const(0, WARP_KEY_BITS - n)])

    def port(self, kind: str, bank: int = 0) -> str:
        """A new copy of the launch area or of one bank of the word memory:
        one head, written by every commit to it."""
        banked = kind == "mem" and self.bank_bits
        name = f"{kind}_{self.n_ports}" + (f"_b{bank}" if banked else "")
        self.n_ports += 1
        self.b.memory(name, SLOTS, WORD)
        if kind == "launch":
            self.b.kv_write(name, "binary", self.commit_key, self.commit_word,
                            self.commit_launch)
        else:
            self.b.kv_write(name, "binary", self.commit_mem_key, self.commit_word,
                            self.commit_mem[bank])
        return name

    def read_launch(self, key: SSAValue) -> SSAValue:
        return self.b.kv_read(self.port("launch"), "binary", key)

    def read(self, address: SSAValue, enable: SSAValue | None = None) -> SSAValue:
        """The memory word at `address` (`address_bits` bits): every bank's
        head reads its row, enabled by the bank bits; one of them gives it."""
        k = self.bank_bits
        if not k:
            return self.b.kv_read(self.port("mem"), "binary", address, enable)
        bank_of = self.bits_of(self.b.slice(address, 0, k))
        key = self.b.slice(address, k, k + KEY_BITS)
        reads = []
        for bank in range(1 << k):
            ones, zeros = split_bits(bank_of, bank)
            en = self.gate(ones + ([enable] if enable is not None else []), zeros)
            reads.append(self.b.kv_read(self.port("mem", bank), "binary", key, en))
        return self.b.merge(reads)

    def read_word(self, address: int) -> SSAValue:
        """The memory word at a constant address: its bank's head alone."""
        k = self.bank_bits
        key = self.common_const(address >> k, KEY_BITS)
        return self.b.kv_read(self.port("mem", address & ((1 << k) - 1)), "binary", key)

    def launch_word(self, what: str) -> SSAValue:
        """A launch-area word of the executing warp (read once per step, by
        every block)."""
        if what not in self.launch_reads:
            key = self.b.concat([self.common_const(LA.FIELDS.index(what), 4), self.exec_warp()])
            with self.b.ungrouped():
                self.launch_reads[what] = self.read_launch(key)
        return self.launch_reads[what]

    def launch_byte(self, what: str, index: int) -> SSAValue:
        return self.b.slice(self.launch_word(what), 8 * index, 8 * index + 8)

    def param(self, offset: int) -> SSAValue:
        if offset not in self.param_reads:
            with self.b.ungrouped():
                self.param_reads[offset] = self.read_word(offset)
        return self.param_reads[offset]

    def register_ports(self, index: int) -> list[list[SSAValue]]:
        """ports[j][lane]: register `vocab.ports[index][j]` of the executing
        warp, read in block `index`'s group: each block reads its own live-in
        registers, so a read lives only as long as its block uses it."""
        b = self.b
        out = []
        for j, r in enumerate(self.vocab.ports[index]):
            key = b.concat([self.exec_warp(), self.common_const(r, 4)])
            per_lane = []
            for ln in range(simt.LANES):
                name = f"reg_{index}_{j}_{ln}"
                b.memory(name, SLOTS, WORD)
                b.kv_write(name, "binary", self.commit_reg_key, self.commit_word,
                           self.commit_reg[ln])
                per_lane.append(b.kv_read(name, "binary", key))
            out.append(per_lane)
        return out

    # ------------------------------------------------------------ lane control
    def control(self) -> _Control:
        """Which lanes run: waiting at the EXEC's block, not exited, not held
        at a barrier (an `EXEC` of a warp whose live lanes all wait is the
        host's release)."""
        word = self.launch_word("lanes")
        lanes = range(simt.LANES)
        rel = [self.b.slice(word, 8 * ln, 8 * ln + P.BLOCK_BITS) for ln in lanes]
        exited = [self.b.slice(word, 8 * ln + LA.EXITED, 8 * ln + LA.EXITED + 1) for ln in lanes]
        wait = [self.b.slice(word, 8 * ln + LA.WAITING, 8 * ln + LA.WAITING + 1) for ln in lanes]
        here = [self.none_of(self.bits_of(rel[ln]) + [exited[ln]]) for ln in lanes]
        all_wait = self.gate(wait + exited, need=simt.LANES)
        active = [self.b.threshold([here[ln], wait[ln], all_wait],
                                   [({0: 2, 1: -1, 2: 1}, 2)]) for ln in lanes]
        held = [self.gate([wait[ln]], [all_wait]) for ln in lanes]
        pc = [self.alu.xor(rel[ln], self.inp["exec_b_bits"]) for ln in lanes]
        return _Control(active, pc, exited, held, word)

    # ------------------------------------------------------------ blocks
    def lower_block(self, index: int, block: Block, ctl: _Control) -> _BlockResult:
        """Block `index`'s circuits, each op grouped by the block (when there
        are several): zero unless the step runs it, so blocks share residual
        coordinates. A fresh ALU keeps common subexpressions inside the block."""
        self.alu = Alu(self.b)
        try:
            with self.b.grouped(index if len(self.blocks) > 1 else None):
                return self._lower_block(index, block, self.register_ports(index), ctl)
        finally:
            self.alu = self.common_alu

    def _lower_block(self, index: int, block: Block, ports, ctl: _Control) -> _BlockResult:
        lanes = range(simt.LANES)
        regs: list[dict[simt.RegAttr, _Reg]] = [{} for _ in lanes]
        self.initial: list[dict[simt.RegAttr, SSAValue]] = [{} for _ in lanes]
        for j, r in enumerate(self.vocab.ports[index]):
            reg = simt.RegAttr("r", r)
            for ln in lanes:
                regs[ln][reg] = _Reg(ports[j][ln])
                self.initial[ln][reg] = ports[j][ln]
        pred_in = [r for r in self.live_in[block] if r.is_pred]
        for r in pred_in:
            for ln in lanes:
                v = self.b.slice(self.launch_word("preds"), 8 * ln + r.index.data,
                                 8 * ln + r.index.data + 1)
                regs[ln][r] = _Reg(v)
                self.initial[ln][r] = v
        self.active = ctl.active
        records: list[_Record] = []
        self.pending: list[_Write] = []
        self.faults: list[tuple[int, list[SSAValue]]] = []
        self.bounds_of: dict[int, tuple[SSAValue, SSAValue]] = {}
        ops = list(block.ops)
        self.high_later = high_words_later(ops)
        for op in ops[:-1]:
            self.lower_op(op, regs, records)
        records += self.register_records(block, regs)
        preds = self.preds_word(block, regs)
        return _BlockResult(records, self.terminator(ops[-1], regs), preds, self.first_fault())

    def register_records(self, block: Block, regs) -> list[_Record]:
        """The registers the block writes and leaves live, lane by lane."""
        out = []
        for r in self.written_live_out(block):
            for ln in range(simt.LANES):
                address = self.const(P.register_address(ln, r.index.data), P.ADDRESS_BITS)
                valid, value = self.record_of(regs[ln][r], ln, r)
                out.append(_Record(valid, address, value))
        return out

    def record_of(self, entry: _Reg, lane: int, r: simt.RegAttr) -> tuple[SSAValue, SSAValue]:
        """(valid, value) of a register's record. A value written under one
        guard over the register as it came in is recorded where the guard
        holds, not merged with the old value: the block then need not keep the
        register's old value to its end (a guarded early return guards every
        op of a kernel)."""
        came_in = entry.fallback is None or (entry.fallback.guard is None and
                                             entry.fallback.value is self.initial[lane].get(r))
        if entry.guard is None or not came_in:
            return self.active[lane], self.materialise(entry, None)
        p, negated = entry.guard
        valid = self.gate([self.active[lane]], [p]) if negated else \
            self.gate([self.active[lane], p])
        return valid, entry.value

    def preds_word(self, block: Block, regs) -> SSAValue | None:
        """The new `preds` word when the block writes a predicate it leaves live."""
        written = {d for op in block.ops if isinstance(op, simt.MachineOp) for d in op.defs()
                   if d.is_pred}
        if not written & self.live_out[block]:
            return None
        lanes = []
        for ln in range(simt.LANES):
            old = self.b.slice(self.launch_word("preds"), 8 * ln, 8 * ln + PREDS)
            new = self.b.concat([self.use(regs, ln, simt.RegAttr("p", i), None)
                                 if simt.RegAttr("p", i) in regs[ln]
                                 else self.b.slice(old, i, i + 1) for i in range(PREDS)])
            lanes.append(self.alu.select(self.active[ln], new, old))
        return self.b.concat(lanes)

    def terminator(self, term, regs) -> list[SSAValue]:
        """Per lane: the next block (binary), exited, waiting at a barrier."""
        def fixed(block_index: int, exits: int = 0, waits: int = 0) -> SSAValue:
            return self.const(block_index | exits << P.BLOCK_BITS | waits << (P.BLOCK_BITS + 1),
                              END_BITS)
        if isinstance(term, simt.ExitOp):
            return [fixed(0, exits=1)] * simt.LANES
        if isinstance(term, simt.NextOp | simt.BarrierOp):
            t = fixed(self.blocks.index(term.dest), waits=isinstance(term, simt.BarrierOp))
            return [t] * simt.LANES
        assert isinstance(term, simt.BranchOp)
        then_, else_ = self.blocks.index(term.then_dest), self.blocks.index(term.else_dest)
        out = []
        for ln in range(simt.LANES):
            p = self.use(regs, ln, term.cond.pred, None)
            if term.cond.is_negated:
                p = self.alu.not_(p)
            out.append(self.alu.select(p, fixed(then_), fixed(else_)))
        return out

    def guard_of(self, op, regs, lane: int) -> tuple[SSAValue, bool] | None:
        if op.guard is None:
            return None
        g = op.guard
        return (self.use(regs, lane, g.pred, None), g.is_negated)

    def use(self, regs, lane: int, r: simt.RegAttr, guard) -> SSAValue:
        """The register's value where `guard` holds."""
        entry = regs[lane].get(r)
        if entry is None:
            return self.const(0, 1 if r.is_pred else WORD)   # never written: undefined
        return self.materialise(entry, guard)

    def materialise(self, entry: _Reg, guard) -> SSAValue:
        if entry.guard is None or entry.guard == guard:
            return entry.value
        p, negated = entry.guard
        old = self.materialise(entry.fallback, guard) if entry.fallback is not None else \
            self.const(0, T.width_of(entry.value))
        on, off = (old, entry.value) if negated else (entry.value, old)
        return self.alu.select(p, on, off)

    def src(self, regs, lane: int, s, guard, width: int = WORD) -> SSAValue:
        if isinstance(s, builtin.IntAttr):
            return self.const(s.data & ((1 << width) - 1), width)
        return self.use(regs, lane, s, guard)

    def cond(self, regs, lane: int, s, guard) -> SSAValue:
        """A predicate source: a register, a negated one, or 0/1."""
        if isinstance(s, int):
            return self.const(s, 1)
        if isinstance(s, builtin.IntAttr):
            return self.const(s.data & 1, 1)
        if isinstance(s, simt.GuardAttr):
            v = self.use(regs, lane, s.pred, guard)
            return self.alu.not_(v) if s.is_negated else v
        return self.use(regs, lane, s, guard)

    def define(self, regs, lane: int, r: simt.RegAttr, value: SSAValue, guard) -> None:
        old = regs[lane].get(r)
        regs[lane][r] = _Reg(value, guard, old) if guard is not None else _Reg(value)

    def runs(self, lane: int, guard) -> SSAValue:
        """The lane executes the op: active and its guard holds."""
        if guard is None:
            return self.active[lane]
        pos, neg = [self.active[lane]], []
        (neg if guard[1] else pos).append(guard[0])
        return self.gate(pos, neg, need=len(pos))

    def lower_op(self, op, regs, records) -> None:
        lanes = range(simt.LANES)
        if isinstance(op, simt.LdOp) and op.space.data == "param":
            value = self.param(op.offset.value.data)
            for ln in lanes:
                self.define(regs, ln, op.dst, value, self.guard_of(op, regs, ln))
            return
        if isinstance(op, simt.LdOp | simt.StOp | simt.AtomOp):
            self.lower_memory(op, regs, records)
            return
        if isinstance(op, simt.WarpOp):
            self.lower_warp(op, regs)
            return
        for ln in lanes:
            g = self.guard_of(op, regs, ln)
            if isinstance(op, simt.SpecialOp):
                value = self.special(op.which.data, ln)
            elif isinstance(op, simt.SetpOp):
                a, c = (self.src(regs, ln, s, g) for s in op.srcs.data)
                value = self.alu.setp(op.cond.data, a, c)
            elif isinstance(op, simt.PredOp):
                value = self.lower_pred(op, regs, ln, g)
            elif isinstance(op, simt.AluOp):
                value = self.lower_alu(op, regs, ln, g)
            else:
                raise unsupported(op, f"'{op.name}'")
            self.define(regs, ln, op.dst, value, g)

    def special(self, what: str, lane: int) -> SSAValue:
        reg, axis = what.split(".")
        index = "xyz".index(axis)
        if reg == "tid":
            return self.zext(self.launch_byte(what, lane))
        return self.zext(self.launch_byte(reg, index))

    def lower_pred(self, op: simt.PredOp, regs, ln: int, g) -> SSAValue:
        x = [self.cond(regs, ln, s, g) for s in op.sources()]
        opc = op.opcode.data
        if opc == "mov":
            return x[0]
        if opc == "not":
            return self.alu.not_(x[0])
        return {"and": self.alu.and_, "or": self.alu.or_, "xor": self.alu.xor}[opc](x[0], x[1])

    def lower_alu(self, op: simt.AluOp, regs, ln: int, g) -> SSAValue:
        opc, alu = op.opcode.data, self.alu
        srcs = op.srcs.data
        if opc == "selp":
            a, c = (self.src(regs, ln, s, g) for s in srcs[:2])
            return alu.select(self.use(regs, ln, srcs[2], g), a, c)
        x = [self.src(regs, ln, s, g) for s in srcs]
        table: dict[str, Callable[[], SSAValue]] = {
            "mov": lambda: x[0], "not": lambda: alu.not_(x[0]), "neg": lambda: alu.neg(x[0]),
            "add": lambda: alu.add(x[0], x[1]), "sub": lambda: alu.sub(x[0], x[1]),
            "mul.lo": lambda: alu.mul_lo(x[0], x[1], high_later=self.high_later.get(op)),
            "mad.lo": lambda: alu.mad_lo(x[0], x[1], x[2]),
            "and": lambda: alu.and_(x[0], x[1]), "or": lambda: alu.or_(x[0], x[1]),
            "xor": lambda: alu.xor(x[0], x[1]),
            "shl": lambda: alu.shl(x[0], x[1]), "shr.u": lambda: alu.shr(x[0], x[1], False),
            "shr.s": lambda: alu.shr(x[0], x[1], True),
            "min.s": lambda: alu.min(x[0], x[1], True), "min.u": lambda: alu.min(x[0], x[1], False),
            "max.s": lambda: alu.max(x[0], x[1], True), "max.u": lambda: alu.max(x[0], x[1], False),
            "mul.hi.u": lambda: alu.mul_hi(x[0], x[1], False),
            "mul.hi.s": lambda: alu.mul_hi(x[0], x[1], True),
            "abs": lambda: alu.abs(x[0]), "popc": lambda: alu.popc(x[0]),
            "clz": lambda: alu.clz(x[0]), "brev": lambda: alu.brev(x[0]),
            "bfe.u": lambda: alu.bfe(x[0], x[1], x[2], False),
            "bfe.s": lambda: alu.bfe(x[0], x[1], x[2], True),
            "bfi": lambda: alu.bfi(x[0], x[1], x[2], x[3]),
        }
        parts = opc.split(".")
        if parts[0] == "bfind":
            return alu.bfind(x[0], opc.endswith(".s"), "shiftamt" in parts)
        if parts[0] == "shf":
            return alu.shf(x[0], x[1], x[2], parts[1] == "l", parts[2] == "clamp")
        if opc not in table:
            raise unsupported(op, f"'{opc}'")
        return table[opc]()

    # ------------------------------------------------------------ warp ops
    def lower_warp(self, op: simt.WarpOp, regs) -> None:
        """Cross-lane ops over the lanes that execute them; every lane reads
        the others' values as they are before the op."""
        opc = op.opcode.data
        lanes = range(simt.LANES)
        guards = [self.guard_of(op, regs, ln) for ln in lanes]
        runs = [self.runs(ln, guards[ln]) for ln in lanes]
        if opc.startswith("shfl."):
            self.lower_shfl(op, regs, guards, runs)
            return
        if opc == "activemask":
            mask = self.zext(self.b.concat(runs))
            for ln in lanes:
                self.define(regs, ln, op.dst, mask, guards[ln])
            return
        votes = [self.gate([runs[ln], self.cond(regs, ln, op.conditions()[0], None)])
                 for ln in lanes]
        if opc == "ballot":
            value = self.zext(self.b.concat(votes))
        elif opc == "any":
            value = self.any_of(votes)
        elif opc == "all":
            value = self.gate(votes + [self.alu.not_(r) for r in runs], need=simt.LANES)
        else:   # uni: all or none of the executing lanes
            all_ = self.gate(votes + [self.alu.not_(r) for r in runs], need=simt.LANES)
            value = self.any_of([all_, self.none_of(votes)])
        for ln in lanes:
            self.define(regs, ln, op.dst, value, guards[ln])

    def current(self, regs, lane: int, r) -> SSAValue:
        """Lane `lane`'s register as the machine holds it now: the block's
        value where the lane is active, its value from before the step elsewhere."""
        if isinstance(r, builtin.IntAttr):
            return self.const(r.data & 0xFFFF_FFFF, WORD)
        now = self.use(regs, lane, r, None)
        before = self.initial[lane].get(r)
        if before is None or before is now:
            return now
        return self.alu.select(self.active[lane], now, before)

    def lower_shfl(self, op: simt.WarpOp, regs, guards, runs) -> None:
        """shfl: lane l reads lane j = f(l, b, c) (masked to 4 lanes), or
        itself when j is out of range; `.p` gives whether j was in range.
        The source lane's value is read even when it does not run; a lane
        without a thread gives the reader its own value."""
        mode = op.opcode.data.split(".")[1]
        srcs = op.srcs.data
        lanes = range(simt.LANES)
        pred_form = op.opcode.data.endswith(".p")
        b_src, c_src = (srcs[0], srcs[1]) if pred_form else (srcs[1], srcs[2])
        for ln in lanes:
            g = guards[ln]
            bv = self.src(regs, ln, b_src, g)
            cv = self.src(regs, ln, c_src, g)
            choices = self.shfl_sources(mode, ln, bv, cv)
            if pred_form:
                ok = self.any_of([sel for sel, j in choices if j is not None])
                self.define(regs, ln, op.dst, ok, g)
                continue
            own = self.current(regs, ln, srcs[0])
            values = []
            for sel, j in choices:
                if j is None or j == ln:
                    values.append((sel, own))
                    continue
                absent = self.b.slice(self.launch_word("absent"), j, j + 1)
                values.append((self.gate([sel], [absent]), self.current(regs, j, srcs[0])))
                values.append((self.gate([sel, absent]), own))
            self.define(regs, ln, op.dst, self.pick(values), g)

    def shfl_sources(self, mode: str, lane: int, bv: SSAValue, cv: SSAValue
                     ) -> list[tuple[SSAValue, int | None]]:
        """(selector bit, source lane or None: out of range) over every value
        of the 2-bit lane fields b, c and the 2-bit segment mask: the PTX
        pseudo-code evaluated at compile time per case, one threshold each."""
        from qgc.runtime.simt_engine import _shfl_source
        source = _shfl_source(mode)
        fields = [self.b.slice(bv, 0, 2), self.b.slice(cv, 0, 2), self.b.slice(cv, 8, 10)]
        flat = self.b.concat(fields)
        by_source: dict[int | None, list[dict[int, int]]] = {}
        for bval in range(4):
            for cval in range(4):
                for seg in range(4):
                    j, ok = source(lane, bval, cval | seg << 8)
                    pattern = bval | cval << 2 | seg << 4
                    row = {i: (1 if pattern >> i & 1 else -1) for i in range(6)}
                    by_source.setdefault(j if ok else None, []).append(row)
        out = []
        for j, rows in by_source.items():
            hits = self.b.threshold([flat], [(r, sum(1 for w in r.values() if w > 0))
                                             for r in rows])
            out.append((self.any_of(self.bits_of(hits)), j))
        return out

    # ------------------------------------------------------------ memory
    def word_address(self, op, regs, ln: int, g) -> tuple[SSAValue, list[SSAValue], object]:
        """(word address, `address_bits` bits; the checks it passes when all
        bits are set, the first that it is inside the word memory; where) of a
        memory op's word: a global word inside its buffer's bounds, a shared
        word aligned and inside the CTA's window, a spill slot inside the word
        memory (by construction)."""
        space, off, n = op.space.data, op.offset.value.data, self.address_bits
        if space == "spill":
            slot = ln * self.kernel.spill_size + off
            word = self.alu.add(self.launch_word("spill"), self.const(slot, WORD))
            inside = self.none_of(self.bits_of(self.b.slice(word, n, WORD)))
            return self.b.slice(word, 0, n), [inside], ("spill", ln, off)
        if space == "shared":
            byte = self.const(off & 0xFFFF_FFFF, WORD) if op.base is None else \
                self.alu.add(self.use(regs, ln, op.base, g), self.const(off & 0xFFFF_FFFF, WORD)) \
                if off else self.use(regs, ln, op.base, g)
            word = self.alu.add(self.b.slice(byte, 2, n + 3),
                                self.b.slice(self.launch_word("shared"), 0, n + 1))
            aligned = self.none_of(self.bits_of(self.b.slice(byte, 0, 2)))
            in_window = self.alu.setp("lt.u", self.b.slice(byte, 2, n + 2),
                                      self.b.slice(self.launch_word("window"), 0, n))
            inside = self.none_of(self.bits_of(self.b.slice(byte, n + 2, WORD)) +
                                  [self.b.slice(word, n, n + 1)])
            return self.b.slice(word, 0, n), [inside, aligned, in_window], "shared"
        base = self.use(regs, ln, op.base, g)
        addr = self.alu.add(base, self.const(off & 0xFFFF_FFFF, WORD)) if off else base
        inside = self.none_of(self.bits_of(self.b.slice(addr, n, WORD)))
        word = self.b.slice(addr, 0, n)
        lo, end = self.bounds(op.buffer_index)
        checks = [inside, self.alu.setp("ge.u", word, lo), self.alu.setp("lt.u", word, end)]
        return word, checks, f"global {op.buffer_index}"

    def bounds(self, buffer: int) -> tuple[SSAValue, SSAValue]:
        """The first word of buffer `buffer` and the word after it, from its
        bounds pair, read in the block's group (once per block that accesses
        the buffer): they live only while the block checks its accesses."""
        if buffer not in self.bounds_of:
            n, bw = self.address_bits, self.kernel.bounds_word(buffer)
            lo, size = (self.b.slice(self.read_word(a), 0, n) for a in (bw, bw + 1))
            self.bounds_of[buffer] = lo, self.alu.add(lo, size)
        return self.bounds_of[buffer]

    def first_fault(self) -> SSAValue:
        """The block's trap bits: whether an access faults, then the site
        and lane of the first fault (program order, then lane order)."""
        width = 1 + self.vocab.site_bits + P.LANE_BITS
        flat = [(site, ln, f) for site, lanes in self.faults for ln, f in enumerate(lanes)]
        if not flat:
            return self.const(0, width)
        faults = [f for _, _, f in flat]
        first = self.b.threshold(faults, [({i: 1} | {j: -1 for j in range(i)}, 1)
                                          for i in range(len(flat))])
        codes = [site | ln << self.vocab.site_bits for site, ln, _ in flat]
        rows = [({i: 1 for i, c in enumerate(codes) if c >> bit & 1}, 1)
                for bit in range(width - 1)]
        return self.b.concat([self.any_of(faults), self.b.threshold([first], rows)])

    def load(self, key: SSAValue, en: SSAValue, where: object) -> SSAValue:
        """The word, as the step's earlier writes left it (the last one to the
        same word wins; the ports hold the word from before the step)."""
        mem = self.read(key, en)
        earlier = [w for w in self.pending if w.where == where]   # disjoint buffers never alias
        if not earlier:
            return mem
        hits = [w.en if isinstance(where, tuple) else
                self.gate([w.en, self.alu.eq(w.key, key)]) for w in earlier]
        winners = [self.gate([h], hits[i + 1:], need=1) for i, h in enumerate(hits)]
        choices = list(zip(winners, [w.value for w in earlier], strict=True))
        return self.pick(choices + [(self.none_of(hits), mem)])

    def lower_memory(self, op, regs, records) -> None:
        lanes = range(simt.LANES)
        guards = [self.guard_of(op, regs, ln) for ln in lanes]
        where = [self.word_address(op, regs, ln, guards[ln]) for ln in lanes]
        runs = [self.runs(ln, guards[ln]) for ln in lanes]
        # an access inside the word memory goes ahead even if it faults: a
        # fault names TRAP in place of the step's records, so nothing it
        # reads or writes is kept (and the load waits for no compare)
        ens = [self.gate([runs[ln], where[ln][1][0]]) for ln in lanes]
        if op in self.sites:      # runs, and fails a check
            self.faults.append((self.sites[op], [
                self.b.threshold([runs[ln], *where[ln][1]],
                                 [({0: len(where[ln][1])} | {1 + i: -1 for i in
                                                             range(len(where[ln][1]))}, 1)])
                for ln in lanes]))
        keys = [w[0] for w in where]
        rec_addr = [self.zext(keys[ln], P.ADDRESS_BITS) for ln in lanes]
        if isinstance(op, simt.LdOp):
            values = [self.load(keys[ln], ens[ln], where[ln][2]) for ln in lanes]
            for ln in lanes:
                self.define(regs, ln, op.dst, values[ln], guards[ln])
            return
        values = [self.src(regs, ln, op.value, guards[ln]) for ln in lanes]
        if isinstance(op, simt.StOp):
            for ln in lanes:
                records.append(_Record(ens[ln], rec_addr[ln], values[ln]))
                self.pending.append(_Write(where[ln][2], keys[ln], ens[ln], values[ln]))
            return
        self.lower_atom(op, regs, records, guards, where, ens, values, rec_addr)

    def lower_atom(self, op, regs, records, guards, where, ens, values, rec_addr) -> None:
        """Lanes apply in lane order: each lane's old value sees the earlier
        lanes' new values (through the forwarding of `load`)."""
        lanes = range(simt.LANES)
        swaps = [self.src(regs, ln, op.swap, guards[ln]) if op.swap is not None else None
                 for ln in lanes]
        kind = op.op.data
        if kind == "add":
            self.lower_atom_add(op, regs, records, guards, where, ens, values, rec_addr)
            return
        for ln in lanes:
            old = self.load(where[ln][0], ens[ln], where[ln][2])
            new = self.atom_result(op, kind, old, values[ln], swaps[ln])
            records.append(_Record(ens[ln], rec_addr[ln], new))
            self.pending.append(_Write(where[ln][2], where[ln][0], ens[ln], new))
            self.define(regs, ln, op.dst, old, guards[ln])

    def atom_result(self, op, kind: str, old, v, swap) -> SSAValue:
        alu = self.alu
        if kind == "cas":
            return alu.select(alu.eq(old, v), swap, old)
        if kind == "exch":
            return v
        if kind in ("and", "or", "xor"):
            return {"and": alu.and_, "or": alu.or_, "xor": alu.xor}[kind](old, v)
        if kind.startswith(("min", "max")):
            signed = kind.endswith(".s")
            return (alu.min if kind.startswith("min") else alu.max)(old, v, signed)
        if kind == "inc":
            return alu.select(alu.setp("ge.u", old, v), self.const(0, WORD),
                              alu.add(old, self.const(1, WORD)))
        if kind == "dec":
            wrap = self.any_of([alu.eq(old, self.const(0, WORD)), alu.setp("gt.u", old, v)])
            return alu.select(wrap, v, alu.sub(old, self.const(1, WORD)))
        raise unsupported(op, f"atom.{kind}")

    def lower_atom_add(self, op, regs, records, guards, where, ens, values, rec_addr) -> None:
        """atom.add in parallel: lane l's old value is the word plus the values
        of the earlier enabled lanes on the same word."""
        lanes = range(simt.LANES)
        keys = [w[0] for w in where]
        hits = {(m, ln): self.gate([self.alu.eq(keys[m], keys[ln]), ens[m]])
                for ln in lanes for m in lanes if m != ln}
        bases = [self.load(keys[ln], ens[ln], where[ln][2]) for ln in lanes]
        olds = []
        for ln in lanes:
            terms = [bases[ln]] + [self.alu.mask(values[m], hits[(m, ln)]) for m in range(ln)]
            olds.append(self.alu.sum(terms) if len(terms) > 1 else terms[0])
        for ln in lanes:
            new = self.alu.add(olds[ln], values[ln])
            later = [hits[(m, ln)] for m in lanes if m > ln]
            valid = self.gate([ens[ln]], later, need=1)
            records.append(_Record(valid, rec_addr[ln], new))
            self.pending.append(_Write(where[ln][2], keys[ln], valid, new))
            self.define(regs, ln, op.dst, olds[ln], guards[ln])

    # ------------------------------------------------------------ the step
    def by_block(self, per_block: list[SSAValue]) -> SSAValue:
        """The executing block's value (blocks' circuits all run; pick one)."""
        if len(per_block) == 1:
            return per_block[0]
        return self.pick([(self.bit("exec_b", i), v) for i, v in enumerate(per_block)])

    def next_state(self, ctl: _Control, results: list[_BlockResult]) -> list[_Record]:
        """Each lane's next block; the warp's next block by min-PC (or a
        barrier wait when every live lane waits); the new `lanes` word and,
        if the executing block changed them, the `preds` word."""
        b, N, lanes = self.b, len(self.blocks), range(simt.LANES)
        targets = [self.by_block([r.target[ln] for r in results]) for ln in lanes]
        new_pc, new_exit, new_wait = [], [], []
        for ln in lanes:
            t = targets[ln]
            act = ctl.active[ln]
            new_pc.append(self.alu.select(act, b.slice(t, 0, P.BLOCK_BITS), ctl.pc[ln]))
            new_exit.append(self.alu.select(act, b.slice(t, P.BLOCK_BITS, P.BLOCK_BITS + 1),
                                            ctl.exited[ln]))
            new_wait.append(self.alu.select(act, b.slice(t, P.BLOCK_BITS + 1, END_BITS),
                                            ctl.wait[ln]))
        ready = [self.none_of([new_exit[ln], new_wait[ln]]) for ln in lanes]

        def first_block(state: list[SSAValue]) -> tuple[list[SSAValue], SSAValue]:
            """One-hot of the lowest block any lane in `state` waits at, and
            whether there is one."""
            hits = []
            for ln in lanes:
                pcb = self.bits_of(new_pc[ln])
                hits.append(b.threshold(pcb + [state[ln]], [
                    ({i: (1 if n >> i & 1 else -1) for i in range(P.BLOCK_BITS)}
                     | {P.BLOCK_BITS: 1}, n.bit_count() + 1) for n in range(N)]))
            any_n = b.threshold(hits, [({ln * N + n: 1 for ln in lanes}, 1) for n in range(N)])
            first = b.threshold([any_n], [({n: 1} | {m: -1 for m in range(n)}, 1)
                                          for n in range(N)])
            return self.bits_of(first), self.any_of(self.bits_of(any_n))

        first_ready, some_ready = first_block(ready)
        waiting = [self.gate([new_wait[ln]], [new_exit[ln]]) for ln in lanes]
        first_wait, _ = first_block(waiting)
        barrier = self.none_of([some_ready])
        exited_all = self.gate(new_exit, need=simt.LANES)
        bar = self.gate([barrier], [exited_all])
        sel = [self.any_of([first_ready[n], self.gate([first_wait[n], barrier])])
               for n in range(N)]
        nb = b.threshold(sel, [({n: 1 for n in range(N) if n >> i & 1}, 1)
                               for i in range(P.BLOCK_BITS)])
        self.end_row = b.concat([nb, exited_all, bar])
        words = [b.concat([self.alu.xor(new_pc[ln], nb), new_exit[ln], waiting[ln]])
                 for ln in lanes]
        lanes_word = b.concat(words)
        changed = self.any_of(self.bits_of(self.alu.xor(lanes_word, ctl.lanes_word)))
        out = [_Record(self.gate([changed], [exited_all]), self.warp_slot("lanes"), lanes_word)]
        preds = [r.preds for r in results]
        if any(p is not None for p in preds):
            old = self.launch_word("preds")
            word = self.by_block([p if p is not None else old for p in preds])
            valid = self.by_block([self.const(int(p is not None), 1) for p in preds])
            out.insert(0, _Record(valid, self.warp_slot("preds"), word))
        return out

    def warp_slot(self, what: str) -> SSAValue:
        """The record address of the executing warp's launch-area word:
        LAUNCH_AREA + 16·w + field, a view of the warp bits."""
        return self.b.concat([self.const(LA.FIELDS.index(what), 4), self.exec_warp(),
                              self.const(P.LAUNCH_AREA >> 7, P.ADDRESS_BITS - 7)])

    def outbox(self, step_records: list[list[_Record]], control: list[_Record]) -> None:
        """The step's records, which an `EXEC` token writes and the tokens after
        it read: per record a one-slot memory of its value and one of its
        address, their valid bits side by side in `outbox_valid`. Reads give
        only what a token needs, each the merge (`tensor.merge`, one set of
        coordinates) of R reads: the current record's value on `A` and lower
        `D` tokens (its next byte), the address of the first valid record
        after it on `EXEC` and top `D` tokens. Values, addresses and valid
        bits are kept apart because they are known at different depths (a
        control word's valid bit last), and a memory's read waits for its key
        and its write for its value: the values, read by an early key, are
        written as soon as they are known rather than held for the rest."""
        b, R = self.b, self.vocab.records
        invalid = _Record(self.const(0, 1), self.const(0, P.ADDRESS_BITS), self.const(0, WORD))
        chosen = [[(recs + control)[k] if k < len(recs + control) else invalid
                   for recs in step_records] for k in range(R)]
        valid_now = [self.by_block([r.valid for r in rs]) for rs in chosen]
        valid = []
        width = T.MAX_MEMORY_WIDTH
        for lo in range(0, R, width):
            name = f"outbox_valid{lo // width}" if R > width else "outbox_valid"
            b.memory(name, 1, min(width, R - lo))
            b.kv_write(name, "onehot", self.bit("is_exec"), b.concat(valid_now[lo:lo + width]))
            valid.append(b.kv_read(name, "onehot", self.bit("reads_outbox")))
        self.pick_record(b.concat(valid))
        values, addresses = [], []
        for k, rs in enumerate(chosen):
            for name, part, key, out in ((f"outbox_{k}", "value", self.cur, values),
                                         (f"outbox_a{k}", "address", self.first, addresses)):
                per_block = [getattr(r, part) for r in rs]
                b.memory(name, 1, T.width_of(per_block[0]))
                b.kv_write(name, "onehot", self.bit("is_exec"), self.by_block(per_block))
                out.append(b.kv_read(name, "onehot", b.slice(key, k, k + 1)))
        self.rec_value, self.rec_addr = b.merge(values), b.merge(addresses)
        b.memory("outbox_end", 1, END_BITS)
        b.kv_write("outbox_end", "onehot", self.bit("is_exec"), self.end_row)
        self.end = b.kv_read("outbox_end", "onehot", self.bit("reads_outbox"))

    def pick_record(self, valid: SSAValue) -> None:
        """`cur`: the record this token belongs to (one-hot; zero on `EXEC`);
        `first`: the first valid record after it on `EXEC` (all) and top `D`
        tokens, zero on others."""
        b, R = self.b, self.vocab.records
        is_exec, is_top = self.bit("is_exec"), self.bit("is_top")
        cur_in = b.concat([self.inp["rec_k"], self.staged_k])
        self.cur = b.threshold([cur_in], [({k: 1, R + k: 1}, 1) for k in range(R)])
        after = b.threshold([is_exec, is_top, self.cur],
                            [({0: 2, 1: 1} | {2 + m: 1 for m in range(k)}, 2) for k in range(R)])
        cand = b.threshold([after, valid], [({k: 1, R + k: 1}, 2) for k in range(R)])
        self.first = b.threshold([cand], [({k: 1} | {m: -1 for m in range(k)}, 1)
                                          for k in range(R)])
        self.found = self.any_of([b.slice(cand, k, k + 1) for k in range(R)])

    def next_token(self, trap: SSAValue) -> None:
        """`trap`: the executing block's trap bits (zero but on `EXEC`): a
        fault names `TRAP` in place of the step's first record."""
        b, N = self.b, len(self.blocks)
        is_exec, is_top = self.bit("is_exec"), self.bit("is_top")
        trapped = b.slice(trap, 0, 1)
        out_a = self.gate([is_exec, is_top, self.found], [trapped], need=2)
        out_d = self.gate([self.bit("is_a"), self.bit("is_d")], [is_top], need=1)
        out_end = self.gate([], [out_a, out_d, trapped], need=0)
        b.output("next_kind", b.concat([out_a, out_d, self.const(0, 1), out_end, trapped]))
        if self.vocab.sites:
            site_bits = self.vocab.site_bits
            b.output("next_site", b.slice(trap, 1, 1 + site_bits))
            b.output("next_lane", b.slice(trap, 1 + site_bits, 1 + site_bits + P.LANE_BITS))
        b.output("next_k", self.bits_and_bit(self.first, out_a))
        b.output("next_a", self.bits_and_bit(self.rec_addr, out_a))
        b.output("next_j", self.inp["next_j"])
        # the next byte of the current record, and whether it is the top one
        nj = self.inp["next_j"]
        value = self.rec_value
        b.output("next_v", self.pick([(self.bit("next_j", j), b.slice(value, 8 * j, 8 * j + 8))
                                      for j in range(P.BYTES)]))
        tops = b.threshold([nj, value], [({j: 1} | {P.BYTES + i: -1
                                                     for i in range(8 * (j + 1), WORD)}, 1)
                                         for j in range(P.BYTES)])
        b.output("next_top", self.any_of(self.bits_of(tops)))
        # END(n): the stored block bits decoded, or the exit
        block_bits = self.bits_of(b.slice(self.end, 0, P.BLOCK_BITS))
        exit_bit = b.slice(self.end, P.BLOCK_BITS, P.BLOCK_BITS + 1)
        rows = [({i: (1 if n >> i & 1 else -1) for i in range(P.BLOCK_BITS)}
                 | {P.BLOCK_BITS: -1, P.BLOCK_BITS + 1: 1}, n.bit_count() + 1) for n in range(N)]
        rows.append(({P.BLOCK_BITS: 1, P.BLOCK_BITS + 1: 1}, 2))
        b.output("next_end", b.threshold(block_bits + [exit_bit, out_end], rows))
        b.output("next_bar", self.gate([b.slice(self.end, P.BLOCK_BITS + 1, END_BITS),
                                        out_end]))

    def lower(self) -> T.ProgramOp:
        self.stage()
        ctl = self.control()
        results = [self.lower_block(i, bl, ctl) for i, bl in enumerate(self.blocks)]
        control = self.next_state(ctl, results)
        self.outbox([r.records for r in results], control)
        self.next_token(self.by_block([r.trap for r in results]))
        program = self.b.program
        if len(self.blocks) > 1:
            program.properties["groups"] = builtin.StringAttr("exec_b")
        remove_dead_ops(program)
        program.attributes["qgc.vocab"] = self.vocab.to_attr()
        return program


def bank_bits(mem_words: int) -> int:
    """log2 of the banks `mem_words` words of memory take (127 per bank)."""
    return max(0, (-(-mem_words // SLOTS) - 1).bit_length())


def banked_words(words: int) -> int:
    """The memory of whole banks that holds `words` words."""
    return SLOTS << bank_bits(words)


def split_bits(bits: Sequence[SSAValue], value: int) -> tuple[list[SSAValue], list[SSAValue]]:
    """`bits` split into those `value` sets and those it clears (to match it)."""
    return ([x for i, x in enumerate(bits) if value >> i & 1],
            [x for i, x in enumerate(bits) if not value >> i & 1])


def high_words_later(ops: Sequence[Operation]) -> dict[simt.AluOp, bool]:
    """The `mul.lo` ops whose factors a later `mul.hi` under the same guard
    multiplies again, neither factor redefined in between (PTX `mul.wide`
    selected as the pair), with that `mul.hi`'s signedness: one circuit then
    gives both words."""
    found: dict[simt.AluOp, bool] = {}
    open_lo: dict[tuple, simt.AluOp] = {}        # (guard, factors) → a mul.lo of them
    for op in ops:
        if isinstance(op, simt.AluOp) and op.opcode.data.startswith(("mul.lo", "mul.hi")):
            key = (op.guard, frozenset(op.srcs.data))
            if op.opcode.data == "mul.lo":
                open_lo.setdefault(key, op)
            elif key in open_lo:
                found.setdefault(open_lo[key], op.opcode.data == "mul.hi.s")
        defined = set(op.defs()) if isinstance(op, simt.MachineOp) else set()
        open_lo = {k: v for k, v in open_lo.items() if not defined & k[1]}
    return found


def vocabulary_of(program: T.ProgramOp) -> P.Vocabulary:
    attr = program.attributes.get("qgc.vocab")
    if not isinstance(attr, builtin.DictionaryAttr):
        raise DiagnosticException(f"error: tensor program '{program.program_name}' carries no "
                                  "GPU vocabulary (run convert-simt-to-tensor)")
    return P.Vocabulary.from_attr(attr)


def remove_dead_ops(program: T.ProgramOp) -> None:
    """Erase thresholds and reads nobody uses, and memories nobody reads."""
    changed = True
    while changed:
        changed = False
        for op in reversed(program.ops()):
            if isinstance(op, T.ThresholdOp | T.SliceOp | T.ConcatOp | T.MergeOp |
                          T.KvReadOp) and \
                    not op.results[0].uses:
                op.detach()
                op.erase()
                changed = True
        read = {op.memory_name for op in program.ops() if isinstance(op, T.KvReadOp)}
        for op in program.ops():
            if isinstance(op, T.KvWriteOp | T.MemoryOp) and op.memory_name not in read:
                op.detach()
                op.erase()
                changed = True


@dataclass(frozen=True)
class ConvertSimtToTensorPass(ModulePass):
    name = "convert-simt-to-tensor"

    max_warps: int = 8
    """Warps a launch may have (the EXEC tokens' warp field)."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for kernel in simt.kernels_of(op):
            if any(isinstance(o, T.ProgramOp) for o in op.body.block.ops):
                raise DiagnosticException("error: the module already holds a tensor program")
            check_laid_out(kernel, "convert-simt-to-tensor")
            op.body.block.add_op(Lowering(kernel, self.max_warps).lower())
