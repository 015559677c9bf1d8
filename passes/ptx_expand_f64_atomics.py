"""`ptx-expand-f64-atomics`: `atom.add.f64` and `red.add.f64` (CUDA's
`atomicAdd` on a double, sm_60 and later) as a compare-and-swap loop of
64-bit PTX ops, as GPUs without a double atomic run it:

    old = [a]
    again:  new = old + b          (add.rn.f64: round to nearest even)
            seen = cas([a], old, new)
            if seen != old: old = seen, again

The machine has 64-bit compare-and-swap and f64 addition on register
pairs, and no f64 atomic. The lanes on one word succeed one per iteration
in lane order, so their adds apply in the order `ref` applies them; the
atom's result is the value its swap replaced.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from qgc.dialects import ptx
from qgc.passes.ptx_to_simt.common import unsupported

#: registers each function with an f64 atomic declares (prefix, type, count)
REGISTERS = (("%qgc_fa", "b64", 3), ("%qgc_ff", "f64", 2), ("%qgc_fp", "pred", 1))
OLD, NEW, SEEN = (f"%qgc_fa{i}" for i in range(3))
OLD_F, NEW_F = "%qgc_ff0", "%qgc_ff1"
AGAIN = "%qgc_fp0"
SPACES = ("global", "shared")


def _is_f64_add(op) -> bool:
    return isinstance(op, ptx.InstOp) and op.op.base in ("atom", "red") and \
        op.op.type == "f64" and "add" in op.op.modifiers


_inst = ptx.instruction


def _expanded(inst: ptx.InstOp, label: str) -> list[ptx.Operation]:
    args = [a.data for a in inst.args.data]
    returns = inst.op.base == "atom"
    spaces = [m for m in inst.op.modifiers if m in SPACES]
    others = set(inst.op.modifiers) - {"add", *SPACES, "relaxed", "gpu", "cta", "sys"}
    if inst.guard is not None or others or len(args) != 2 + returns:
        raise unsupported(inst, inst.opcode.data,
                          "only an unguarded, relaxed add of a global or shared f64")
    space = "".join(f".{s}" for s in spaces)
    address, value = args[returns:]
    ops: list[ptx.Operation] = [
        _inst(f"ld{space}.b64", OLD, address),
        ptx.LabelOp(label),
        _inst("mov.b64", OLD_F, OLD),
        _inst("add.rn.f64", NEW_F, OLD_F, value),
        _inst("mov.b64", NEW, NEW_F),
        _inst(f"atom{space}.cas.b64", SEEN, address, OLD, NEW),
        _inst("setp.ne.b64", AGAIN, SEEN, OLD),
        _inst("mov.b64", OLD, SEEN),
        _inst("bra", label, guard=AGAIN)]
    if returns:
        ops.append(_inst("mov.b64", args[0], SEEN))
    return ops


@dataclass(frozen=True)
class PtxExpandF64AtomicsPass(ModulePass):
    name = "ptx-expand-f64-atomics"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        ptx.expand_instructions(op, _is_f64_add, lambda: ptx.registers(REGISTERS),
                                lambda inst, k: _expanded(inst, f"$qgc_f64_add_{k}"))
