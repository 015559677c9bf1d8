"""Which lanes run a step, and where the warp goes next (min-PC, barriers)."""

from __future__ import annotations

from xdsl.ir import SSAValue

from qgc import protocol as P
from qgc.dialects import simt
from qgc.passes.simt_to_tensor.step_values import END_BITS, LA, BlockResult, Control, Record


class LaneControl:
    """The `lanes` and `flags` words in, each lane's next block and the new
    words out."""

    def control(self) -> Control:
        """Which lanes run: waiting at the EXEC's block, not exited, not held
        at a barrier (an `EXEC` of a warp whose live lanes all wait is the
        host's release)."""
        word, flags = self.launch_word("lanes"), self.launch_word("flags")
        lanes = range(simt.LANES)
        rel = [self.b.slice(word, 8 * ln, 8 * ln + P.BLOCK_BITS) for ln in lanes]
        exited = [self.b.slice(flags, 8 * ln + LA.EXITED, 8 * ln + LA.EXITED + 1) for ln in lanes]
        wait = [self.b.slice(flags, 8 * ln + LA.WAITING, 8 * ln + LA.WAITING + 1) for ln in lanes]
        here = [self.none_of(self.bits_of(rel[ln]) + [exited[ln]]) for ln in lanes]
        all_wait = self.gate(wait + exited, need=simt.LANES)
        active = [self.b.threshold([here[ln], wait[ln], all_wait],
                                   [({0: 2, 1: -1, 2: 1}, 2)]) for ln in lanes]
        held = [self.gate([wait[ln]], [all_wait]) for ln in lanes]
        pc = [self.alu.xor(rel[ln], self.inp["exec_b_bits"]) for ln in lanes]
        return Control(active, pc, exited, held, word, flags)

    def next_state(self, ctl: Control, results: list[BlockResult]) -> list[Record]:
        """Each lane's next block; the warp's next block by min-PC (or a
        barrier wait when every live lane waits); the new `lanes` and `flags`
        words and, if the executing block changed them, the `preds` word."""
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
        lanes_word = b.concat([self.alu.xor(new_pc[ln], nb) for ln in lanes])
        flags_word = b.concat([b.concat([new_exit[ln], waiting[ln], self.const(0, 6)])
                               for ln in lanes])
        out = [Record(self.gate([self.differs(new, old)], [exited_all]), self.warp_slot(name), new)
               for name, new, old in (("lanes", lanes_word, ctl.lanes_word),
                                      ("flags", flags_word, ctl.flags_word))]
        preds = [r.preds for r in results]
        if any(p is not None for p in preds):
            old = self.launch_word("preds")
            word = self.by_block([p if p is not None else old for p in preds])
            valid = self.by_block([self.const(int(p is not None), 1) for p in preds])
            out.insert(0, Record(valid, self.warp_slot("preds"), word))
        return out

    def differs(self, new: SSAValue, old: SSAValue) -> SSAValue:
        return self.any_of(self.bits_of(self.alu.xor(new, old)))
