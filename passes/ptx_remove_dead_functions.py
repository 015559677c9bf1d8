"""`ptx-remove-dead-functions`: drop `.func` bodies that no `call` reaches.

clang emits helper `.func`s that inlining left unused; the machine runs kernels
only, so an unreachable function must not count against its limits. With
`entry` (a launch's kernel: `qgc run` and `qgc compile --launch` set it) the
module's other `.entry`s are dead too: a kernel runs although another
kernel of its file uses what the machine lacks (nvcc puts every kernel of a
`.cu` into one PTX file), and only it is compiled.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from qgc.dialects import ptx


def _callees(fn: ptx.EntryOp | ptx.FuncOp) -> set[str]:
    names: set[str] = set()
    for op in fn.body.ops:
        if isinstance(op, ptx.InstOp) and op.op.base == "call":
            names.update(arg.name for arg in op.operands_decoded if isinstance(arg, ptx.Sym))
    return names


@dataclass(frozen=True)
class PtxRemoveDeadFunctionsPass(ModulePass):
    name = "ptx-remove-dead-functions"

    #: the one `.entry` to keep; unset, or no entry of that name (which
    #: `pick_kernel` then reports): every entry
    entry: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for module in op.walk():
            if isinstance(module, ptx.ModuleOp):
                self._apply_to(module)

    def _apply_to(self, module: ptx.ModuleOp) -> None:
        functions = {f.kernel_name: f for f in module.body.ops
                     if isinstance(f, ptx.EntryOp | ptx.FuncOp)}
        live: set[str] = set()
        work = [f.kernel_name for f in functions.values() if isinstance(f, ptx.EntryOp)]
        if self.entry in work:
            work = [self.entry]
        while work:
            name = work.pop()
            if name in live or name not in functions:
                continue
            live.add(name)
            work.extend(_callees(functions[name]))
        for name, fn in functions.items():
            if name not in live:
                fn.detach()
                fn.erase()
