"""The step's end: the outbox of records and the next token of the trace."""

from __future__ import annotations

from xdsl.ir import SSAValue

from qgc import protocol as P
from qgc.dialects import tensor as T
from qgc.passes.simt_to_tensor.step_values import END_BITS, WORD, Record


class Outbox:
    """Records into the outbox, and what every token names next."""

    def outbox(self, step_records: list[list[Record]], control: list[Record]) -> None:
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
        invalid = Record(self.const(0, 1), self.const(0, self.vocab.address_bits),
                         self.const(0, WORD))
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
