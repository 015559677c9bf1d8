"""`simt-layout-memory`: place each CTA's `.shared` variables in its window.

Instruction selection declares the kernel's `.shared` variables
(`shared_vars (tile: 64 align 4, s: extern align 16)`) and names them by
`simt.shared_addr vN, "tile"`. This pass lays the window out by the machine's
rule (qgc/machine/shared_window.py), as the `ref` engine does (and as PTX's
own layout would): the static variables in declaration order, each at the
next multiple of its alignment, then every `extern` array at one offset after
them, sized by the launch's dynamic shared bytes. The kernel then records
`shared_words` (static words) and `dynamic_shared` (the word where the extern
arrays start).

Each `simt.shared_addr` becomes a constant: when its register has no other
definition and every use is the base of a shared access, the offset is folded
into those accesses (`shared[v3 + 8]` → `shared[136]`) and the op is dropped;
otherwise it becomes `simt.alu "mov" vN, OFFSET` under its guard.

The rest of the machine's memory map is fixed, not chosen: the parameter area
(parameters, bounds pairs, high words of 64-bit scalars; `simt.KernelOp`)
leads, the launch places the buffers, the shared windows and the spill area
after it (docs/machine.md, "Memory").
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import ptx, simt
from qgc.machine.shared_window import place_shared_variables


def check_laid_out(kernel: simt.KernelOp, what: str) -> None:
    """Passes and engines after this one need placed shared variables."""
    if kernel.shared_vars is not None:
        raise DiagnosticException(f"{ptx.location_prefix(kernel)}error: kernel "
                                  f"'{kernel.kernel_name}' has .shared variables without a "
                                  f"layout; run simt-layout-memory before {what}")


@dataclass(frozen=True)
class SimtLayoutMemoryPass(ModulePass):
    name = "simt-layout-memory"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for kernel in simt.kernels_of(op):
            place_shared_variables(kernel)

