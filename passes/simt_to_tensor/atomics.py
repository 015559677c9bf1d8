"""Atomics: each lane's read-modify-write in lane order."""

from __future__ import annotations

from xdsl.ir import SSAValue

from qgc.dialects import simt
from qgc.passes.simt_to_tensor.step_values import WORD, Record, Write, unsupported


class Atomics:
    """`atom.*` over the lanes, `atom.add` in parallel."""

    def lower_atom(self, op, regs, records, guards, where, ens, values, rec_addr) -> None:
        """Lanes apply in lane order: each lane's old value sees the earlier
        lanes' new values (through the forwarding of `load`)."""
        lanes = range(simt.LANES)
        swaps = [self.src(regs, ln, op.swap, guards[ln]) if op.swap is not None else None
                 for ln in lanes]
        kind = op.op.data
        if kind == "add.f32":
            raise unsupported(op, "'atom add.f32' (simt-expand-float expands it)")
        if kind == "add":
            self.lower_atom_add(op, regs, records, guards, where, ens, values, rec_addr)
            return
        for ln in lanes:
            old = self.load(where[ln][0], ens[ln], where[ln][2])
            new = self.atom_result(op, kind, old, values[ln], swaps[ln])
            records.append(Record(ens[ln], rec_addr[ln], new))
            self.pending.append(Write(where[ln][2], where[ln][0], ens[ln], new))
            self.define(regs, ln, op.dst, old, guards[ln])

    def atom_result(self, op, kind: str, old, v, swap) -> SSAValue:
        alu = self.alu
        if kind == "cas":
            return alu.select(alu.eq(old, v), swap, old)
        if kind == "exch":
            return v
        if kind == "ins":
            return alu.or_(alu.and_(old, alu.not_(swap)), v)
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

    def lower_atom_pair(self, op, regs, records, guards, where, high, ens) -> None:
        """A pair atomic, lane by lane: each lane's old 64-bit value sees the
        earlier lanes' new ones (both words forwarded through `load`)."""
        for ln in range(simt.LANES):
            g = guards[ln]
            old = tuple(self.load(w[ln][0], ens[ln], w[ln][2]) for w in (where, high))
            value = (self.src(regs, ln, op.value, g), self.src(regs, ln, op.value_hi, g))
            swap = (self.src(regs, ln, op.swap, g), self.src(regs, ln, op.swap_hi, g)) \
                if op.swap is not None else None
            new = self.pair_result(op.op.data, old, value, swap)
            for w, word in zip((where, high), new, strict=True):
                records.append(Record(ens[ln], self.zext(w[ln][0], self.vocab.address_bits),
                                      word))
                self.pending.append(Write(w[ln][2], w[ln][0], ens[ln], word))
            self.define(regs, ln, op.dst, old[0], g)
            self.define(regs, ln, op.dst_hi, old[1], g)

    def pair_result(self, kind: str, old, v, swap) -> tuple[SSAValue, SSAValue]:
        """The new (low, high) words of a pair atomic (`ATOM_PAIR_OPERATIONS`)."""
        alu = self.alu
        if kind == "cas":
            take = alu.and_(alu.eq(old[0], v[0]), alu.eq(old[1], v[1]))
            return alu.select(take, swap[0], old[0]), alu.select(take, swap[1], old[1])
        name, sign = kind.split(".")

        def less(a, b) -> SSAValue:       # a < b as 64-bit values
            return alu.or_(alu.setp(f"lt.{sign}", a[1], b[1]),
                           alu.and_(alu.eq(a[1], b[1]), alu.setp("lt.u", a[0], b[0])))
        take = less(v, old) if name == "min" else less(old, v)
        return alu.select(take, v[0], old[0]), alu.select(take, v[1], old[1])

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
            records.append(Record(valid, rec_addr[ln], new))
            self.pending.append(Write(where[ln][2], keys[ln], valid, new))
            self.define(regs, ln, op.dst, olds[ln], guards[ln])
