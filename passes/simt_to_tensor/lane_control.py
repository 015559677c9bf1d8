"""Which lanes run a step, and where the warp goes next (min-PC, barriers)."""

from __future__ import annotations

from xdsl.ir import SSAValue

from qgc import protocol as P
from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.passes.simt_to_tensor.circuits.compare import ONE_ROW_COMPARE_BITS
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
        b, lanes = self.b, range(simt.LANES)
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
        nb, waiting, exited_all, bar = self.next_block(new_pc, new_exit, new_wait)
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

    def next_block(self, new_pc: list[SSAValue], new_exit: list[SSAValue],
                   new_wait: list[SSAValue]) -> tuple[SSAValue, list[SSAValue], SSAValue,
                                                      SSAValue]:
        """The warp's next block from its lanes' (min-PC: the lowest block a
        ready lane waits at, else the lowest a lane held at a barrier waits
        at, else 0), each lane's waiting bit, whether every lane exited, and
        whether the warp waits at a barrier."""
        lanes = range(simt.LANES)
        ready = [self.none_of([new_exit[ln], new_wait[ln]]) for ln in lanes]
        waiting = [self.gate([new_wait[ln]], [new_exit[ln]]) for ln in lanes]
        barrier = self.none_of(ready)
        exited_all = self.gate(new_exit, need=simt.LANES)
        bar = self.gate([barrier], [exited_all])
        if len(self.blocks) == 1:
            return self.const(0, P.BLOCK_BITS), waiting, exited_all, bar
        # the lowest block of a ready lane, else (a barrier) of a waiting one;
        # a lane is out of the first race where it exited or waits, of the second
        # where it exited or does not wait: [exited·w_e + waits·w_w ≥ t]
        width = (len(self.blocks) - 1).bit_length()      # the bits a block number needs
        pc = [self.b.slice(new_pc[ln], 0, width) for ln in lanes]
        state = [[new_exit[ln], new_wait[ln]] for ln in lanes]
        races = (([[r] for r in ready], (1, 1, 1)), ([[w, barrier] for w in waiting], (1, -1, 0)))
        won = [self.lowest_lane(pc, runs, state, out) for runs, out in races]
        nb = self.zext(self.pick([(w[ln], pc[ln]) for w in won for ln in lanes]), P.BLOCK_BITS)
        return nb, waiting, exited_all, bar

    def lowest_lane(self, pc: list[SSAValue], runs: list[list[SSAValue]],
                    state: list[list[SSAValue]], out: tuple[int, ...]) -> list[SSAValue]:
        """One-hot of the lane whose block is lowest among the lanes that run
        (lane ln runs where every bit of `runs[ln]` is set; the lowest such
        lane on a tie; none where no lane runs). `out` = (weights..., t): lane
        ln is out of the race where [Σ weight·bit ≥ t] over its `state` bits,
        which pushes its key past every block. Every pair of lanes compares
        keys side by side: 3 levels (4 at 256 blocks) and at most about 20
        bits a lane, where a one-hot of the blocks cost about 10 bits a block."""
        lanes = range(simt.LANES)
        *weights, t = out
        width = T.width_of(pc[0])
        # a bit above the block number would take a second compare level at 8
        # bits: there the all-ones block, which no block is, stands for "out"
        sentinel = width + 1 > ONE_ROW_COMPARE_BITS and len(self.blocks) < 1 << width
        lift = t - sum(min(w, 0) for w in weights)   # a set block bit alone reaches t
        terms = {width + k: w for k, w in enumerate(weights)}
        key = []
        for ln in lanes:
            if sentinel:
                key.append(self.b.threshold([pc[ln], *state[ln]],
                                            [({i: lift} | terms, t) for i in range(width)]))
            else:                                         # a bit above the block: "out"
                flag = self.b.threshold(state[ln], [(dict(enumerate(weights)), t)])
                key.append(self.b.concat([pc[ln], flag]))
        beats = [[self.alu.setp("lt.u" if i > j else "le.u", key[i], key[j])
                  for j in lanes if j != i] for i in lanes]
        return [self.gate([*runs[i], *beats[i]]) for i in lanes]

    def differs(self, new: SSAValue, old: SSAValue) -> SSAValue:
        return self.any_of(self.bits_of(self.alu.xor(new, old)))
