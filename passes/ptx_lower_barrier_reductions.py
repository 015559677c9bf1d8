"""`ptx-lower-barrier-reductions`: `bar.red` (`__syncthreads_count`,
`__syncthreads_and`, `__syncthreads_or`) as the machine's `bar.sync 0`
around a counter in shared memory.

The machine's only CTA barrier is `bar.sync 0`. A barrier that also
reduces a predicate over the CTA counts it in a shared word of its own:

    selp.u32           t, 1, 0, p        // and: the threads whose p is false
    red.shared.add.u32 [counter], t
    bar.sync           0
    ld.shared.u32      n, [counter]
    bar.sync           0                 // every thread has read n ...
    sub.u32            t, 0, t
    red.shared.add.u32 [counter], t      // ... before any takes its t back
    mov.u32 d, n   |   setp.ne.u32 d, n, 0 (or)   |   setp.eq.u32 d, n, 0 (and)

The counter starts at 0 (the machine's shared memory does) and is 0 again
once every thread has taken its part back: a thread's next `bar.red` adds
after its own take-back, and the next read comes after a barrier that every
take-back precedes, so each read sees exactly one reduction's count.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from qgc.dialects import ptx
from qgc.passes.ptx_to_simt.common import unsupported

#: the counter and the two registers each function with a `bar.red` declares
COUNTER, TAKEN, COUNT = "__qgc_bar_red_count", "%qgc_bar_red_t", "%qgc_bar_red_n"


def _is_reduction(op) -> bool:
    return isinstance(op, ptx.InstOp) and op.op.base in ("bar", "barrier") and op.op.has("red")


def _lowered(inst: ptx.InstOp) -> list[ptx.InstOp]:
    """The ops that stand for the `bar.red` `inst`."""
    args = [a.data for a in inst.args.data]
    if len(args) != 3 or args[1] != "0" or inst.guard is not None:
        raise unsupported(inst, inst.opcode.data, "only a reduction at barrier 0 by every "
                          "thread of the CTA, unguarded")
    dst, _, pred = args
    kind = "and" if inst.op.has("and") else "or" if inst.op.has("or") else "popc"
    negated = pred.startswith("!")
    counts_true = negated == (kind == "and")       # `and` counts the false ones
    one, zero = ("1", "0") if counts_true else ("0", "1")
    counter = f"[{COUNTER}]"
    ops = [ptx.InstOp("selp.u32", [TAKEN, one, zero, pred.lstrip("!")]),
           ptx.InstOp("red.shared.add.u32", [counter, TAKEN]),
           ptx.InstOp("bar.sync", ["0"]),
           ptx.InstOp("ld.shared.u32", [COUNT, counter]),
           ptx.InstOp("bar.sync", ["0"]),
           ptx.InstOp("sub.u32", [TAKEN, "0", TAKEN]),
           ptx.InstOp("red.shared.add.u32", [counter, TAKEN])]
    if kind == "popc":
        ops.append(ptx.InstOp("mov.u32", [dst, COUNT]))
    else:
        ops.append(ptx.InstOp(f"setp.{'ne' if kind == 'or' else 'eq'}.u32", [dst, COUNT, "0"]))
    return ops


def _declarations() -> list:
    return [ptx.VarOp("shared", "u32", COUNTER, [1], 4), ptx.RegOp(TAKEN, "b32"),
            ptx.RegOp(COUNT, "b32")]


@dataclass(frozen=True)
class PtxLowerBarrierReductionsPass(ModulePass):
    name = "ptx-lower-barrier-reductions"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        ptx.expand_instructions(op, _is_reduction, _declarations,
                                lambda inst, _: _lowered(inst))
