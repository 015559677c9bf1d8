"""`convert-ptx-to-simt{mem-words=127}`: instruction selection from `ptx` to `simt`.

Each PTX entry becomes a `simt.kernel` whose blocks are the PTX basic blocks
(a conditional `@%p bra` becomes `simt.branch`, a plain `bra` or a fallthrough
`simt.next`, `ret` `simt.exit`). Instructions become machine ops on *virtual*
registers: every 32-bit PTX register is one virtual register `vN`, every
predicate one `vpN`; they stay mutable locations (no SSA), which is what
`simt-allocate-registers` expects. 64-bit addresses are narrowed to 32-bit
word addresses with provenance, 64-bit integers become register pairs.

The selector lives in `qgc.passes.ptx_to_simt` (one module per concern: memory
accesses, address arithmetic, 64-bit and sub-word values, warp ops, control
flow, with the legalization helpers in `legalize`).

Anything else is refused at its PTX location:
`file.ptx:L:C: error: 'OPCODE' is not yet supported by the machine`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import ptx, simt
from qgc.passes.ptx_to_simt.common import unsupported
from qgc.passes.ptx_to_simt.selector import Selector
from qgc.passes.ptx_to_simt.wide import HoldsPointerValues


def check_no_functions(pmod: ptx.ModuleOp) -> None:
    for op in pmod.body.ops:
        if isinstance(op, ptx.FuncOp):
            raise unsupported(op, ".func", f"device function '{op.kernel_name}'; "
                              "run ptx-remove-dead-functions first if it is unused")


@dataclass(frozen=True)
class ConvertPtxToSimtPass(ModulePass):
    name = "convert-ptx-to-simt"

    mem_words: int = simt.DEFAULT_MEM_WORDS
    """Words of machine memory (parameter area, bounds pairs and buffers)."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.mem_words < 1:
            raise DiagnosticException(f"error: mem-words must be positive, got {self.mem_words}")
        for pmod in [o for o in op.walk() if isinstance(o, ptx.ModuleOp)]:
            kernels = []
            for entry in pmod.kernels():
                for inst in entry.body.ops:
                    if isinstance(inst, ptx.InstOp) and inst.op.base == "call":
                        raise unsupported(inst, inst.opcode.data, "calls")
                kernels.append(_select(entry, self.mem_words))
            check_no_functions(pmod)
            parent = pmod.parent_block()
            assert parent is not None
            parent.insert_ops_before(kernels, pmod)
            pmod.detach()
            pmod.erase()


def _select(entry: ptx.EntryOp, mem_words: int) -> simt.KernelOp:
    """The entry's kernel; selected again, with pointers as values, in the
    registers that also hold 64-bit integers."""
    values: frozenset[str] = frozenset()
    while True:
        try:
            return Selector(entry, mem_words, values).run()
        except HoldsPointerValues as mixed:
            values |= {mixed.name}
