"""Loads and stores: word addresses with their bounds checks (traps), and
forwarding from the step's earlier writes."""

from __future__ import annotations

from xdsl.ir import SSAValue

from qgc import protocol as P
from qgc.dialects import simt
from qgc.machine.abi import spill_bank
from qgc.passes.simt_to_tensor.step_values import WORD, Record, Write


class MemoryAccess:
    """Memory ops: addresses, checks and faults, loads and stores."""

    def word_address(self, op, regs, ln: int, g, extra: int = 0
                     ) -> tuple[SSAValue, list[SSAValue], object]:
        """(word address, `address_bits` bits; the checks it passes when all
        bits are set, the first that it is inside the word memory; where) of a
        memory op's word (`extra` words past it: a pair's high word): a global
        word inside its buffer's bounds, a shared word aligned and inside the
        CTA's window, a spill slot inside the word memory (by construction)."""
        space, n = op.space.data, self.address_bits
        bytewise = space in ("shared", "local") or op.is_located     # byte addresses
        off = op.offset.value.data + extra * (4 if bytewise else 1)
        if space == "spill":
            slot = ln * self.kernel.thread_words + off
            word = self.alu.add(self.launch_word("spill"), self.const(slot, WORD))
            inside = self.none_of(self.bits_of(self.b.slice(word, n, WORD)))
            return self.b.slice(word, 0, n), [inside], ("spill", ln, off)
        if space == "local":
            return self.local_word(op, regs, ln, g, off)
        if space == "shared":
            byte = self.byte_address(op, regs, ln, g, off)
            word = self.alu.add(self.b.slice(byte, 2, n + 3),
                                self.b.slice(self.launch_word("shared"), 0, n + 1))
            aligned = self.none_of(self.bits_of(self.b.slice(byte, 0, 2)))
            in_window = self.alu.setp("lt.u", self.b.slice(byte, 2, n + 2),
                                      self.b.slice(self.launch_word("window"), 0, n))
            inside = self.none_of(self.bits_of(self.b.slice(byte, n + 2, WORD)) +
                                  [self.b.slice(word, n, n + 1)])
            return self.b.slice(word, 0, n), [inside, aligned, in_window], "shared"
        if op.is_located:
            return self.located_word(op, regs, ln, g, off)
        base = self.use(regs, ln, op.base, g)
        addr = self.alu.add(base, self.const(off & 0xFFFF_FFFF, WORD)) if off else base
        inside = self.none_of(self.bits_of(self.b.slice(addr, n, WORD)))
        word = self.b.slice(addr, 0, n)
        lo, end = self.bounds(op.buffer_index)
        checks = [inside, self.alu.setp("ge.u", word, lo), self.alu.setp("lt.u", word, end)]
        return word, checks, f"global {op.buffer_index}"

    def byte_address(self, op, regs, ln: int, g, off: int) -> SSAValue:
        """A window access's byte address: its base register (if any) plus
        `off`, in 32 bits."""
        if op.base is None:
            return self.const(off & 0xFFFF_FFFF, WORD)
        base = self.use(regs, ln, op.base, g)
        return self.alu.add(base, self.const(off & 0xFFFF_FFFF, WORD)) if off else base

    def local_word(self, op, regs, ln: int, g, off: int
                   ) -> tuple[SSAValue, list[SSAValue], object]:
        """A `.local` byte address: the lane's thread's word past its spill
        slots, aligned and inside the frame (`local_size` words)."""
        n, kernel = self.address_bits, self.kernel
        byte = self.byte_address(op, regs, ln, g, off)
        first = self.const(ln * kernel.thread_words + kernel.spill_size, WORD)
        word = self.alu.add(self.alu.add(self.launch_word("spill"), first),
                            self.b.concat([self.b.slice(byte, 2, WORD), self.const(0, 2)]))
        aligned = self.none_of(self.bits_of(self.b.slice(byte, 0, 2)))
        in_frame = self.alu.setp("lt.u", byte, self.const(4 * kernel.local_size, WORD))
        inside = self.none_of(self.bits_of(self.b.slice(word, n, WORD)))
        return self.b.slice(word, 0, n), [inside, aligned, in_frame], f"local {ln}"

    def located_word(self, op, regs, ln: int, g, off: int
                     ) -> tuple[SSAValue, list[SSAValue], object]:
        """A located access's word: the 64-bit byte address `base:base_hi +
        off` inside a word buffer's bytes (below 2^32: the high word zero,
        no carry out of the low one), at a word boundary."""
        assert off >= 0, "convert-ptx-to-simt folds a negative offset into the address"
        lo = self.use(regs, ln, op.base, g)
        addr = self.alu.add(lo, self.const(off, WORD)) if off else lo
        below = self.bits_of(self.use(regs, ln, op.base_hi, g))
        no_carry = [self.alu.setp("ge.u", addr, self.const(off, WORD))] if off else []
        found, words = [], []
        for buffer in self.kernel.pointer_params():
            if simt.POINTER_TYPES[self.kernel.params[buffer][1]] != 4:
                continue        # one element per word: no word access reaches it
            ref, start, end = self.byte_bounds(buffer)
            found.append(self.gate([self.alu.setp("ge.u", addr, start),
                                    self.alu.setp("lt.u", addr, end)]))
            words.append(self.b.slice(self.alu.sub(addr, ref), 2, 2 + self.address_bits))
        if not found:
            nowhere = self.const(0, 1)
            return self.const(0, self.address_bits), [nowhere], "global"
        inside = self.gate(no_carry + [self.any_of(found)], below)
        aligned = self.none_of(self.bits_of(self.b.slice(addr, 0, 2)))
        return self.pick(list(zip(found, words, strict=True))), [inside, aligned], "global"

    def byte_bounds(self, buffer: int) -> tuple[SSAValue, SSAValue, SSAValue]:
        """Buffer `buffer`'s translation word and its first and end byte
        address, read in the block's group (once per block)."""
        if buffer not in self.byte_bounds_of:
            bw = self.kernel.bounds_word(buffer)
            base, size = self.read_word(bw), self.read_word(bw + 1)
            ref = self.read_word(self.kernel.ref_word(buffer))
            start = self.alu.add(ref, self.times4(base))
            self.byte_bounds_of[buffer] = ref, start, self.alu.add(start, self.times4(size))
        return self.byte_bounds_of[buffer]

    def times4(self, word: SSAValue) -> SSAValue:
        return self.b.concat([self.const(0, 2), self.b.slice(word, 0, WORD - 2)])

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
        mem = self.read(key, en, self.known_bank(where))
        earlier = [w for w in self.pending if may_alias(w.where, where)]
        if not earlier:
            return mem
        hits = [w.en if isinstance(where, tuple) else
                self.gate([w.en, self.alu.eq(w.key, key)]) for w in earlier]
        winners = [self.gate([h], hits[i + 1:], need=1) for i, h in enumerate(hits)]
        choices = list(zip(winners, [w.value for w in earlier], strict=True))
        return self.pick(choices + [(self.none_of(hits), mem)])

    def known_bank(self, where: object) -> int | None:
        """A spill slot's bank (`abi.SpillArea` aligns every warp's slots
        with the banks); None where the address decides it."""
        if not isinstance(where, tuple):
            return None
        _, ln, slot = where
        return spill_bank(self.kernel.thread_words, ln, slot, self.bank_bits)

    def uniform_load(self, keys: list[SSAValue], ens: list[SSAValue], where: object
                     ) -> SSAValue:
        """A load whose address every running lane computes alike
        (`qgc.analysis.uniformity`): one read at the first running lane's
        address serves them all."""
        first = [self.gate([en], ens[:ln], need=1) for ln, en in enumerate(ens)]
        key = self.pick(list(zip(first, keys, strict=True)))
        return self.load(key, self.any_of(ens), where)

    def lower_memory(self, op, regs, records) -> None:
        lanes = range(simt.LANES)
        guards = [self.guard_of(op, regs, ln) for ln in lanes]
        where = [self.word_address(op, regs, ln, guards[ln]) for ln in lanes]
        high = [self.word_address(op, regs, ln, guards[ln], 1) for ln in lanes] \
            if isinstance(op, simt.AtomOp) and op.is_pair else None
        checks = [where[ln][1] + (high[ln][1] if high else []) for ln in lanes]
        runs = [self.runs(ln, guards[ln]) for ln in lanes]
        # an access inside the word memory goes ahead even if it faults: a
        # fault names TRAP in place of the step's records, so nothing it
        # reads or writes is kept (and the load waits for no compare)
        ens = [self.gate([runs[ln], where[ln][1][0]] + ([high[ln][1][0]] if high else []))
               for ln in lanes]
        if op in self.sites:      # runs, and fails a check
            self.faults.append((self.sites[op], [
                self.b.threshold([runs[ln], *checks[ln]],
                                 [({0: len(checks[ln])} | {1 + i: -1 for i in
                                                           range(len(checks[ln]))}, 1)])
                for ln in lanes]))
        if high is not None:
            self.lower_atom_pair(op, regs, records, guards, where, high, ens)
            return
        keys = [w[0] for w in where]
        rec_addr = [self.zext(keys[ln], self.vocab.address_bits) for ln in lanes]
        if isinstance(op, simt.LdOp):
            if op in self.uniform_loads:
                values = [self.uniform_load(keys, ens, where[0][2])] * simt.LANES
            else:
                values = [self.load(keys[ln], ens[ln], where[ln][2]) for ln in lanes]
            for ln in lanes:
                self.define(regs, ln, op.dst, values[ln], guards[ln])
            return
        values = [self.src(regs, ln, op.value, guards[ln]) for ln in lanes]
        if isinstance(op, simt.StOp):
            for ln in lanes:
                records.append(Record(ens[ln], rec_addr[ln], values[ln]))
                self.pending.append(Write(where[ln][2], keys[ln], ens[ln], values[ln]))
            return
        self.lower_atom(op, regs, records, guards, where, ens, values, rec_addr)


def may_alias(a: object, b: object) -> bool:
    """Whether accesses at two `where`s may reach one word: the same place,
    or a located global access and any global one (disjoint buffers never
    alias)."""
    return a == b or "global" in (a, b) and all(isinstance(w, str) and
                                                 w.startswith("global") for w in (a, b))
