"""`ptx-strip-debug-info`: drop `.file`/`.loc` directives and pragmas.

Later levels keep PTX positions as op locations; the CUDA-level `.loc` records
only matter to people reading the `ptx` IR, so lowering pipelines start here.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from qgc.dialects import ptx


@dataclass(frozen=True)
class PtxStripDebugInfoPass(ModulePass):
    name = "ptx-strip-debug-info"

    keep_pragmas: bool = False
    """Keep `.pragma` directives (e.g. `nounroll`)."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        dropped = (ptx.FileOp, ptx.LocOp) if self.keep_pragmas else (
            ptx.FileOp, ptx.LocOp, ptx.PragmaOp)
        for inner in list(op.walk()):
            if isinstance(inner, dropped):
                inner.detach()
                inner.erase()
