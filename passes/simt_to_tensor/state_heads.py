"""The state heads of a step: the staged record and its commit, the copies of
the word memory and the launch area (banked), the register file's read ports."""

from __future__ import annotations

from xdsl.ir import SSAValue

from qgc import protocol as P
from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.passes.simt_to_tensor.gates import split_bits
from qgc.passes.simt_to_tensor.step_values import KEY_BITS, LA, SLOTS, WARP_KEY_BITS, WORD


class StateHeads:
    """Layer 0's staging and the memory heads every commit writes."""

    def stage(self) -> None:
        """Layer 0: the record's address and lower bytes, the warp of the
        step; the commit and where it goes."""
        b, R = self.b, self.vocab.records
        n = self.vocab.address_bits
        first = min(R, T.MAX_MEMORY_WIDTH - n)
        rec_k = self.inp["rec_k"]
        b.memory("stage_a", 1, first + n)
        b.kv_write("stage_a", "onehot", self.bit("is_a"),
                   b.concat([rec_k if first == R else b.slice(rec_k, 0, first),
                             self.inp["rec_a"]]))
        staged = b.kv_read("stage_a", "onehot", self.bit("is_d"))
        pieces = [b.slice(staged, 0, first)]
        for j, lo in enumerate(range(first, R, T.MAX_MEMORY_WIDTH)):   # more slots: rows of 64
            hi = min(R, lo + T.MAX_MEMORY_WIDTH)
            b.memory(f"stage_k{j + 1}", 1, hi - lo)
            b.kv_write(f"stage_k{j + 1}", "onehot", self.bit("is_a"), b.slice(rec_k, lo, hi))
            pieces.append(b.kv_read(f"stage_k{j + 1}", "onehot", self.bit("is_d")))
        self.staged_k = pieces[0] if len(pieces) == 1 else b.concat(pieces)
        addr = self.bits_of(b.slice(staged, first, first + n))
        state, regs = addr[n - 1], addr[n - 2]     # not memory; registers, not launch area
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
        self.commit_mem = [self.gate([top] + ones, [state] + zeros)
                           for ones, zeros in (split_bits(addr[:k], bank)
                                               for bank in range(1 << k))]
        self.commit_launch = self.gate([top, state], [regs])
        self.commit_reg_key = b.concat([staged_w, *addr[:4]])
        self.commit_reg = [self.gate([top, state, regs] + ones, zeros)
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

    def read(self, address: SSAValue, enable: SSAValue | None = None,
             bank: int | None = None) -> SSAValue:
        """The memory word at `address` (`address_bits` bits): every bank's
        head reads its row, enabled by the bank bits; one of them gives it.
        Where the address's bank is known (`bank`), that bank's head alone."""
        k = self.bank_bits
        if not k:
            return self.b.kv_read(self.port("mem"), "binary", address, enable)
        key = self.b.slice(address, k, k + KEY_BITS)
        if bank is not None:
            return self.b.kv_read(self.port("mem", bank), "binary", key, enable)
        bank_of = self.bits_of(self.b.slice(address, 0, k))
        reads = []
        for b in range(1 << k):
            ones, zeros = split_bits(bank_of, b)
            en = self.gate(ones + ([enable] if enable is not None else []), zeros)
            reads.append(self.b.kv_read(self.port("mem", b), "binary", key, en))
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

    def warp_slot(self, what: str) -> SSAValue:
        """The record address of the executing warp's launch-area word:
        LAUNCH_AREA + 16·w + field, a view of the warp bits."""
        return self.b.concat([self.const(LA.FIELDS.index(what), 4), self.exec_warp(),
                              self.const(self.vocab.launch_area >> 7,
                                         self.vocab.address_bits - 7)])
