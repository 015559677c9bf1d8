"""`convert-simt-to-tensor{max-warps=8}`: one machine step as one `tensor.program`.

The program is what *every* GPU token computes on its way through the compiled
layers (qgc.protocol names the tokens); the simt kernel stays in the module
beside it (the runtime lays memory out from it). Per token kind:

- records (`A`, `D`): layer 0 stages the record's address and bytes in
  one-slot memories; the record's top byte assembles the word and *commits*
  it into every copy of the machine memory (one head per read port, all
  written by the same commit);
- `EXEC(w, b)`: machine block b of warp w, its ops per lane as exact bit
  circuits (`qgc.alu`), each op's lanes gated by the lane's activity and the
  op's guard; loads read their ports, stores and atomics become the step's
  records, written with the block's next block into the *outbox* (one-slot
  memories that later tokens of the step read);
- every token then names the next token of the trace: the first record of the
  step (after `EXEC`), the record's next byte (after `A`, `D`), the next
  record or `END` (after a top byte).

Memory: record addresses have 8 bits; addresses below 128 are the word memory
(`simt.kernel` `mem_words` ≤ 127), those from 128 the launch area (launch
constants `ntid`/`nctaid` at slots 0–5; per warp w at 64 + 8w: `ctaid.x/y/z`,
the lane-0 `tid.x`, the mask of lanes without a thread).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc import protocol as P
from qgc.alu import Alu
from qgc.diagnostics import location_prefix
from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.passes.simt_layout_memory import check_laid_out

WORD = 32
SLOTS = 127                    # rows of a memory head (slot 127 keeps the query exact)
KEY_BITS = 7
REC_BITS = 1 + P.ADDRESS_BITS + WORD   # valid, address, value
#: launch-area slots (qgc.protocol.LAUNCH_AREA + slot)
LAUNCH_CONSTANTS = {"ntid.x": 0, "ntid.y": 1, "ntid.z": 2,
                    "nctaid.x": 3, "nctaid.y": 4, "nctaid.z": 5}
WARP_FIELDS = {"ctaid.x": 0, "ctaid.y": 1, "ctaid.z": 2, "tid.x": 3, "inactive": 4}
WARP_AREA = 64
WARP_STRIDE = 8


def launch_slot_of_warp(warp: int, field_name: str) -> int:
    return WARP_AREA + WARP_STRIDE * warp + WARP_FIELDS[field_name]


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
    address: SSAValue          # 8 bits
    value: SSAValue            # 32 bits


@dataclass
class Lowering:
    kernel: simt.KernelOp
    warps: int
    b: T.ProgramBuilder = field(init=False)
    alu: Alu = field(init=False)

    def __post_init__(self) -> None:
        self.blocks = self.kernel.machine_blocks()
        if self.kernel.mem_words.value.data > SLOTS:
            raise DiagnosticException(
                f"{location_prefix(self.kernel)}error: kernel '{self.kernel.kernel_name}' has "
                f"{self.kernel.mem_words.value.data} memory words; a memory head of the tensor "
                f"level holds {SLOTS} (option mem-words of convert-ptx-to-simt)")
        if not 1 <= self.warps <= 8:
            raise DiagnosticException("error: convert-simt-to-tensor: max-warps must be 1..8")
        for name, ptype in self.kernel.params:
            if ptype in simt.WIDE_SCALARS or ptype in ("ptr8", "ptr16"):
                what = "a 64-bit scalar" if ptype in simt.WIDE_SCALARS else "a sub-word buffer"
                raise unsupported(self.kernel, f"{what} parameter ('{name}', {ptype})")
        if self.kernel.dynamic_shared is not None:
            raise unsupported(self.kernel, "dynamic shared memory")
        records = max([self._record_count(bl) for bl in self.blocks] + [1])
        self.vocab = P.Vocabulary(records, len(self.blocks), self.warps)
        self.b = T.ProgramBuilder(f"{self.kernel.kernel_name}_step")
        self.alu = Alu(self.b)
        widths = {name: len(v) for name, v in self.vocab.inputs(P.Token("END")).items()}
        self.inp = {name: self.b.input(name, w) for name, w in widths.items()}
        self.word_ports: list[str] = []
        self.launch_reads: dict[str, SSAValue] = {}

    @staticmethod
    def _record_count(block: Block) -> int:
        return sum(simt.LANES for op in block.ops if isinstance(op, simt.StOp | simt.AtomOp))

    # ------------------------------------------------------------ small gates
    def bit(self, name: str, i: int = 0) -> SSAValue:
        return self.b.slice(self.inp[name], i, i + 1)

    def gate(self, pos: Sequence[SSAValue], neg: Sequence[SSAValue] = (), need: int | None = None
             ) -> SSAValue:
        """[Σ pos − Σ neg ≥ need] over 1-bit values (need: all of pos)."""
        vals = list(pos) + list(neg)
        terms = {i: 1 for i in range(len(pos))} | {len(pos) + i: -1 for i in range(len(neg))}
        return self.b.threshold(vals, [(terms, len(pos) if need is None else need)])

    def any_of(self, vals: Sequence[SSAValue]) -> SSAValue:
        return self.gate(vals, need=1)

    def bits_or(self, x: SSAValue, y: SSAValue) -> SSAValue:
        n = T.width_of(x)
        return self.b.threshold([x, y], [({i: 1, n + i: 1}, 1) for i in range(n)])

    def bits_and_bit(self, x: SSAValue, e: SSAValue) -> SSAValue:
        n = T.width_of(x)
        return self.b.threshold([x, e], [({i: 1, n: 1}, 2) for i in range(n)])

    def const(self, value: int, width: int) -> SSAValue:
        return self.alu.const(value, width)

    # ------------------------------------------------------------ memories
    def stage(self) -> None:
        """Layer 0: the record's address and lower bytes, the commit."""
        b, R = self.b, self.vocab.records
        b.memory("stage_a", 1, R + P.ADDRESS_BITS)
        b.kv_write("stage_a", "onehot", self.bit("is_a"),
                   b.concat([self.inp["rec_k"], self.inp["rec_a"]]))
        staged = b.kv_read("stage_a", "onehot", self.bit("is_d"))
        self.staged_k = b.slice(staged, 0, R)
        staged_a = b.slice(staged, R, R + P.ADDRESS_BITS)
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
        self.commit_key = b.slice(staged_a, 0, KEY_BITS)
        high = b.slice(staged_a, KEY_BITS, KEY_BITS + 1)
        self.commit_mem = self.gate([self.bit("is_top")], [high])
        self.commit_launch = self.gate([self.bit("is_top"), high])

    def port(self, launch: bool) -> str:
        """A new copy of the word memory (or of the launch area): one head,
        written by every commit."""
        name = f"{'launch' if launch else 'mem'}_{len(self.word_ports)}"
        self.word_ports.append(name)
        self.b.memory(name, SLOTS, WORD)
        self.b.kv_write(name, "binary", self.commit_key, self.commit_word,
                        self.commit_launch if launch else self.commit_mem)
        return name

    def read(self, key: SSAValue, enable: SSAValue | None = None, launch: bool = False
             ) -> SSAValue:
        return self.b.kv_read(self.port(launch), "binary", key, enable)

    def launch_value(self, what: str) -> SSAValue:
        """A launch-area word for the executing warp (read once per step)."""
        if what not in self.launch_reads:
            if what in LAUNCH_CONSTANTS:
                key = self.const(LAUNCH_CONSTANTS[what], KEY_BITS)
            else:
                w = self.inp["exec_w"]
                pad = 3 - T.width_of(w)
                parts = [self.const(WARP_FIELDS[what], 3), w]
                if pad:
                    parts.append(self.const(0, pad))
                parts.append(self.const(1, 1))    # WARP_AREA = 64: bit 6
                key = self.b.concat(parts)
            self.launch_reads[what] = self.read(key, launch=True)
        return self.launch_reads[what]

    # ------------------------------------------------------------ blocks
    def lower_block(self, index: int, block: Block) -> tuple[list[_Record], int]:
        inactive = self.b.slice(self.launch_value("inactive"), 0, simt.LANES)
        lanes = range(simt.LANES)
        active = [self.alu.not_(self.b.slice(inactive, ln, ln + 1)) for ln in lanes]
        regs: list[dict[simt.RegAttr, _Reg]] = [{} for _ in lanes]
        records: list[_Record] = []
        ops = list(block.ops)
        for op in ops[:-1]:
            self.lower_op(op, regs, active, records)
        return records, self.next_block(ops[-1])

    def next_block(self, term) -> int:
        if isinstance(term, simt.ExitOp):
            return len(self.blocks)
        if isinstance(term, simt.NextOp):
            return self.blocks.index(term.dest)
        raise unsupported(term, "a barrier" if isinstance(term, simt.BarrierOp)
                          else "a branch between machine blocks")

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

    def define(self, regs, lane: int, r: simt.RegAttr, value: SSAValue, guard) -> None:
        old = regs[lane].get(r)
        regs[lane][r] = _Reg(value, guard, old) if guard is not None else _Reg(value)

    def enable(self, active: SSAValue, guard, address: SSAValue | None = None) -> SSAValue:
        """The lane runs the op: active, guard holds, address inside the memory."""
        pos, neg = [active], []
        if guard is not None:
            (neg if guard[1] else pos).append(guard[0])
        if address is not None:
            neg += [self.b.slice(address, i, i + 1) for i in range(KEY_BITS, WORD)]
        return self.gate(pos, neg, need=len(pos))

    def lower_op(self, op, regs, active, records) -> None:
        alu = self.alu
        lanes = range(simt.LANES)
        if isinstance(op, simt.LdOp) and op.space.data == "param":
            value = self.read(self.const(op.offset.value.data, KEY_BITS))
            for ln in lanes:
                self.define(regs, ln, op.dst, value, self.guard_of(op, regs, ln))
            return
        if isinstance(op, simt.SpecialOp):
            what = op.which.data
            if what in LAUNCH_CONSTANTS or what.startswith("ctaid"):
                values = [self.launch_value(what)] * simt.LANES
            elif what == "tid.x":
                base = self.b.slice(self.launch_value("tid.x"), 2, WORD)
                values = [self.b.concat([self.const(ln, 2), base]) for ln in lanes]
            else:  # tid.y, tid.z: the machine runs 1-D thread blocks
                values = [self.const(0, WORD)] * simt.LANES
            for ln in lanes:
                self.define(regs, ln, op.dst, values[ln], self.guard_of(op, regs, ln))
            return
        if isinstance(op, simt.LdOp | simt.StOp) and op.space.data == "spill":
            raise unsupported(op, f"a register spill ('{op.name} spill[{op.offset.value.data}]')")
        if isinstance(op, simt.LdOp | simt.StOp | simt.AtomOp):
            self.lower_memory(op, regs, active, records)
            return
        for ln in lanes:
            g = self.guard_of(op, regs, ln)
            if isinstance(op, simt.SetpOp):
                a, c = (self.src(regs, ln, s, g) for s in op.srcs.data)
                value = alu.setp(op.cond.data, a, c)
            elif isinstance(op, simt.AluOp):
                value = self.lower_alu(op, regs, ln, g)
            else:
                raise unsupported(op, f"'{op.name}'")
            self.define(regs, ln, op.dst, value, g)

    def lower_alu(self, op: simt.AluOp, regs, ln: int, g) -> SSAValue:
        opc, alu = op.opcode.data, self.alu
        srcs = op.srcs.data
        if opc == "selp":
            a, c = (self.src(regs, ln, s, g) for s in srcs[:2])
            return alu.select(self.use(regs, ln, srcs[2], g), a, c)
        x = [self.src(regs, ln, s, g) for s in srcs]
        table = {
            "mov": lambda: x[0], "not": lambda: alu.not_(x[0]), "neg": lambda: alu.neg(x[0]),
            "add": lambda: alu.add(x[0], x[1]), "sub": lambda: alu.sub(x[0], x[1]),
            "mul.lo": lambda: alu.mul_lo(x[0], x[1]),
            "mad.lo": lambda: alu.mad_lo(x[0], x[1], x[2]),
            "and": lambda: alu.and_(x[0], x[1]), "or": lambda: alu.or_(x[0], x[1]),
            "xor": lambda: alu.xor(x[0], x[1]),
            "shl": lambda: alu.shl(x[0], x[1]), "shr.u": lambda: alu.shr(x[0], x[1], False),
            "shr.s": lambda: alu.shr(x[0], x[1], True),
            "min.s": lambda: alu.min(x[0], x[1], True), "min.u": lambda: alu.min(x[0], x[1], False),
            "max.s": lambda: alu.max(x[0], x[1], True), "max.u": lambda: alu.max(x[0], x[1], False),
        }
        if opc not in table:
            raise unsupported(op, f"'{opc}'")
        return table[opc]()

    def address(self, op, regs, ln: int, g) -> SSAValue:
        base = self.use(regs, ln, op.base, g)
        off = op.offset.value.data
        return self.alu.add(base, self.const(off & 0xFFFF_FFFF, WORD)) if off else base

    def lower_memory(self, op, regs, active, records) -> None:
        lanes = range(simt.LANES)
        guards = [self.guard_of(op, regs, ln) for ln in lanes]
        addrs = [self.address(op, regs, ln, guards[ln]) for ln in lanes]
        ens = [self.enable(active[ln], guards[ln], addrs[ln]) for ln in lanes]
        keys = [self.b.slice(a, 0, KEY_BITS) for a in addrs]
        rec_addr = [self.b.concat([keys[ln], self.const(0, 1)]) for ln in lanes]
        if isinstance(op, simt.LdOp):
            for ln in lanes:
                self.define(regs, ln, op.dst, self.read(keys[ln], ens[ln]), guards[ln])
            return
        values = [self.src(regs, ln, op.value, guards[ln]) for ln in lanes]
        if isinstance(op, simt.StOp):
            records += [_Record(ens[ln], rec_addr[ln], values[ln]) for ln in lanes]
            return
        if op.op.data != "add":
            raise unsupported(op, f"atom.{op.op.data}")
        # lanes apply in order: lane l sees the memory word plus the values of
        # the earlier enabled lanes on the same word
        hits = {(m, ln): self.gate([self.alu.eq(keys[m], keys[ln]), ens[m]])
                for ln in lanes for m in lanes if m != ln}
        olds = []
        for ln in lanes:
            terms = [self.read(keys[ln], ens[ln])]
            terms += [self.alu.mask(values[m], hits[(m, ln)]) for m in range(ln)]
            olds.append(self.alu.sum(terms) if len(terms) > 1 else terms[0])
        for ln in lanes:
            new = self.alu.add(olds[ln], values[ln])
            later = [hits[(m, ln)] for m in lanes if m > ln]
            valid = self.gate([ens[ln]], later, need=1)
            records.append(_Record(valid, rec_addr[ln], new))
            self.define(regs, ln, op.dst, olds[ln], guards[ln])

    # ------------------------------------------------------------ the step
    def by_block(self, per_block: list[SSAValue]) -> SSAValue:
        """The executing block's value (blocks' circuits all run; pick one)."""
        if len(per_block) == 1:
            return per_block[0]
        masked = [self.bits_and_bit(v, self.bit("exec_b", i)) for i, v in enumerate(per_block)]
        n = T.width_of(per_block[0])
        m = len(masked)
        return self.b.threshold(masked, [({k * n + i: 1 for k in range(m)}, 1)
                                         for i in range(n)])

    def outbox(self, step_records: list[list[_Record]], ends: list[int]) -> None:
        b, R, N = self.b, self.vocab.records, len(self.blocks)
        invalid = _Record(self.const(0, 1), self.const(0, P.ADDRESS_BITS), self.const(0, WORD))
        self.rec_valid, self.rec_addr, self.rec_value = [], [], []
        for k in range(R):
            per_block = [b.concat([(recs[k] if k < len(recs) else invalid).valid,
                                   (recs[k] if k < len(recs) else invalid).address,
                                   (recs[k] if k < len(recs) else invalid).value])
                         for recs in step_records]
            name = f"outbox_{k}"
            b.memory(name, 1, REC_BITS)
            b.kv_write(name, "onehot", self.bit("is_exec"), self.by_block(per_block))
            row = b.kv_read(name, "onehot", self.bit("reads_outbox"))
            self.rec_valid.append(b.slice(row, 0, 1))
            self.rec_addr.append(b.slice(row, 1, 1 + P.ADDRESS_BITS))
            self.rec_value.append(b.slice(row, 1 + P.ADDRESS_BITS, REC_BITS))
        rows = []
        for n in range(N + 1):
            terms = {i: 1 for i, e in enumerate(ends) if e == n}
            rows.append((terms, 1 if terms else 1))
        end = b.threshold([self.inp["exec_b"]], rows)
        b.memory("outbox_end", 1, N + 1)
        b.kv_write("outbox_end", "onehot", self.bit("is_exec"), end)
        self.end = b.kv_read("outbox_end", "onehot", self.bit("reads_outbox"))

    def next_token(self) -> None:
        b, R = self.b, self.vocab.records
        is_exec, is_top = self.bit("is_exec"), self.bit("is_top")
        cur_in = b.concat([self.inp["rec_k"], self.staged_k])
        cur = b.threshold([cur_in], [({k: 1, R + k: 1}, 1) for k in range(R)])
        after = b.threshold([is_exec, is_top, cur],
                            [({0: 2, 1: 1} | {2 + m: 1 for m in range(k)}, 2) for k in range(R)])
        cand = b.threshold([after, b.concat(self.rec_valid)],
                           [({k: 1, R + k: 1}, 2) for k in range(R)])
        first = b.threshold([cand], [({k: max(k, 1)} | {m: -1 for m in range(k)}, max(k, 1))
                                     for k in range(R)])
        found = self.any_of([b.slice(cand, k, k + 1) for k in range(R)])
        out_a = self.gate([is_exec, is_top, found], need=2)
        out_d = self.gate([self.bit("is_a"), self.bit("is_d")], [is_top], need=1)
        out_end = self.gate([], [out_a, out_d], need=0)
        b.output("next_kind", b.concat([out_a, out_d, self.const(0, 1), out_end]))
        b.output("next_k", self.bits_and_bit(first, out_a))
        addr_rows = [({R + k * P.ADDRESS_BITS + i: 1, k: 1, R + R * P.ADDRESS_BITS: 1}, 3)
                     for i in range(P.ADDRESS_BITS) for k in range(R)]
        picked = b.threshold([first, *self.rec_addr, out_a], addr_rows)
        b.output("next_a", b.threshold([picked], [
            ({i * R + k: 1 for k in range(R)}, 1) for i in range(P.ADDRESS_BITS)]))
        b.output("next_j", self.inp["next_j"])
        # the next byte and whether it is the top one: one AND per (record, byte)
        nj = self.inp["next_j"]
        ins = [cur, nj, *self.rec_value]
        val0 = R + P.BYTES
        rows_v, rows_t = [], []
        for t in range(8):
            for k in range(R):
                for j in range(P.BYTES):
                    rows_v.append(({k: 1, R + j: 1, val0 + k * WORD + 8 * j + t: 1}, 3))
        for k in range(R):
            for j in range(P.BYTES):
                above = {val0 + k * WORD + i: -1 for i in range(8 * (j + 1), WORD)}
                rows_t.append(({k: 1, R + j: 1} | above, 2))
        pv = b.threshold(ins, rows_v)
        per = R * P.BYTES
        b.output("next_v", b.threshold([pv], [({t * per + i: 1 for i in range(per)}, 1)
                                              for t in range(8)]))
        pt = b.threshold(ins, rows_t)
        b.output("next_top", self.any_of([b.slice(pt, i, i + 1) for i in range(per)]))
        N1 = T.width_of(self.end)
        b.output("next_end", b.threshold([self.end, out_end],
                                         [({i: 1, N1: 1}, 2) for i in range(N1)]))

    def lower(self) -> T.ProgramOp:
        self.stage()
        step_records, ends = [], []
        for index, block in enumerate(self.blocks):
            recs, nxt = self.lower_block(index, block)
            step_records.append(recs)
            ends.append(nxt)
        self.outbox(step_records, ends)
        self.next_token()
        program = self.b.program
        remove_dead_ops(program)
        program.attributes["qgc.vocab"] = builtin.DictionaryAttr({
            "records": builtin.IntAttr(self.vocab.records),
            "blocks": builtin.IntAttr(self.vocab.blocks),
            "warps": builtin.IntAttr(self.vocab.warps)})
        return program


def vocabulary_of(program: T.ProgramOp) -> P.Vocabulary:
    attr = program.attributes.get("qgc.vocab")
    if not isinstance(attr, builtin.DictionaryAttr):
        raise DiagnosticException(f"error: tensor program '{program.program_name}' carries no "
                                  "GPU vocabulary (run convert-simt-to-tensor)")
    data = attr.data
    return P.Vocabulary(*(data[k].data for k in ("records", "blocks", "warps")))  # type: ignore


def remove_dead_ops(program: T.ProgramOp) -> None:
    """Erase thresholds and reads nobody uses, and memories nobody reads."""
    changed = True
    while changed:
        changed = False
        for op in reversed(program.ops()):
            if isinstance(op, T.ThresholdOp | T.SliceOp | T.ConcatOp | T.KvReadOp) and \
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
