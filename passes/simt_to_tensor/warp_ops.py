"""Cross-lane ops: shfl, vote, activemask."""

from __future__ import annotations

from xdsl.ir import SSAValue

from qgc.dialects import simt
from qgc.machine.abi import shfl_source


class WarpOps:
    """Warp ops over the lanes that execute them."""

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
        results = []        # every lane's, before any is defined: dst may be a source
        for ln in lanes:
            g = guards[ln]
            bv = self.src(regs, ln, b_src, g)
            cv = self.src(regs, ln, c_src, g)
            choices = self.shfl_sources(mode, ln, bv, cv)
            if pred_form:
                results.append(self.any_of([sel for sel, j in choices if j is not None]))
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
            results.append(self.pick(values))
        for ln, value in zip(lanes, results, strict=True):
            self.define(regs, ln, op.dst, value, guards[ln])

    def shfl_sources(self, mode: str, lane: int, bv: SSAValue, cv: SSAValue
                     ) -> list[tuple[SSAValue, int | None]]:
        """(selector bit, source lane or None: out of range) over every value
        of the 2-bit lane fields b, c and the 2-bit segment mask: the PTX
        pseudo-code evaluated at compile time per case, one threshold each."""
        source = shfl_source(mode)
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
