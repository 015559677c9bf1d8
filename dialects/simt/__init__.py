"""The `simt` dialect: the machine that lives inside the model (v0).

A kernel is a control-flow region of *machine blocks*. Each block is a
straight-line list of machine ops that one warp of 4 lanes executes in one step
(one EXEC token), ended by a terminator. Registers are per-lane 32-bit values
(`r0`..`r14` after allocation, `v0`, `v1`, ... before) and per-lane predicates
(`p0`..`p7`, virtual `vp0`, ...). Memory is one word-addressed map of 32-bit
words: the parameter area at word 0 (one word per kernel parameter, then a
bounds pair per pointer parameter), then the buffers. Every op keeps the PTX
location of the instruction it comes from as its location.

    simt.kernel @dot(ptr dot_param_0, ptr dot_param_1, ptr dot_param_2, u32 dot_param_3)
        lanes 4 mem_words 128 max_blocks 32 max_ops 8 regs 15 preds 8 {
      simt.ld r0, param[3]
      simt.special r1, "ctaid.x"
      simt.alu "mad.lo" r1, r1, r2, r3
      simt.setp "ge.s" p0, r1, r0
      simt.ld r5, global[r4 + 0] buffer 1 guard !p0
      simt.atom "add" r6, global[r7 + 0], r5 buffer 2 guard !p0
      simt.next ^bb1
    ^bb1:
      simt.exit
    }

The kernel's machine parameters are properties, set by the pass that decides
them: `lanes`/`mem_words`/`shared_vars` by `convert-ptx-to-simt`,
`shared_words`/`dynamic_shared` by `simt-layout-memory` (which replaces
`shared_vars`), `max_blocks`/`max_ops` by
`simt-form-blocks`, `regs`/`preds` by `simt-allocate-registers` (and
`spill_words`/`spilled` when it spills registers to the lane's own spill slots,
`spill[K]`); the verifier checks every limit that is set.

The dialect is a package as xDSL's large dialects are: `facts` (lanes,
default limits, parameter types), `attributes` (registers and guards),
`directives` (the custom syntax inside ops), `ops` (machine ops and
terminators), `kernel` (`simt.kernel` and CFG helpers); every public name is
re-exported here, so `simt.AluOp` and `from qgc.dialects.simt import RegAttr`
name them.
"""

from xdsl.ir import Dialect

from qgc.dialects.simt.attributes import GuardAttr, RegAttr, Src, reg
from qgc.dialects.simt.directives import (
    Address,
    Guard,
    ModuleVar,
    ModuleVars,
    OptReg,
    OptSource,
    Reg,
    SharedVar,
    SharedVars,
    Signature,
    Source,
    Sources,
    TrailingSources,
    module_var,
    module_vars_of,
    shared_vars_of,
)
from qgc.dialects.simt.facts import (
    ATOM_OPS,
    ATOM_PAIR_OPS,
    DEFAULT_MAX_BLOCKS,
    DEFAULT_MAX_OPS,
    DEFAULT_MEM_WORDS,
    DEFAULT_PREDS,
    DEFAULT_REGS,
    GEOMETRY_SPECIALS,
    LANE_SPECIALS,
    LANES,
    PARAM_TYPES,
    POINTER_TYPES,
    SETP_CONDS,
    SPACES,
    SPECIALS,
    WARP_SPECIALS,
    WIDE_SCALARS,
    lane_special,
)
from qgc.dialects.simt.kernel import (
    KernelOp,
    all_registers,
    kernels_of,
    limit_error,
    plural,
    predecessors,
    remove_unreachable,
    successors,
)
from qgc.dialects.simt.ops import (
    GUARD_FORMAT,
    PRED_ARITY,
    TERMINATORS,
    WARP_OPS,
    AluOp,
    AtomOp,
    BarrierOp,
    BranchOp,
    ExitOp,
    LdOp,
    MachineOp,
    MemoryOp,
    NextOp,
    PredOp,
    SetpOp,
    SharedAddrOp,
    SpecialOp,
    StOp,
    WarpOp,
)

SIMT = Dialect(
    "simt",
    [KernelOp, AluOp, SetpOp, PredOp, WarpOp, SpecialOp, SharedAddrOp, LdOp, StOp, AtomOp,
     NextOp, ExitOp, BranchOp, BarrierOp],
    [RegAttr, GuardAttr],
)

__all__ = [
    "ATOM_OPS", "ATOM_PAIR_OPS", "OptReg", "Address", "AluOp", "AtomOp", "BarrierOp", "BranchOp", "DEFAULT_MAX_BLOCKS",
    "DEFAULT_MAX_OPS", "DEFAULT_MEM_WORDS", "DEFAULT_PREDS", "DEFAULT_REGS", "ExitOp",
    "GUARD_FORMAT", "Guard", "GuardAttr", "KernelOp", "LANES", "LdOp", "MachineOp", "MemoryOp", "ModuleVar", "ModuleVars",
    "NextOp", "OptSource", "PARAM_TYPES", "POINTER_TYPES", "PRED_ARITY", "PredOp", "Reg",
    "RegAttr", "SETP_CONDS", "SPACES", "SPECIALS", "SetpOp", "SharedAddrOp", "SharedVar",
    "SharedVars", "Signature", "Source", "Sources", "SpecialOp", "Src", "StOp", "TERMINATORS",
    "GEOMETRY_SPECIALS", "LANE_SPECIALS", "WARP_SPECIALS", "lane_special",
    "TrailingSources", "WARP_OPS", "WIDE_SCALARS", "WarpOp", "all_registers", "kernels_of",
    "limit_error", "module_var", "module_vars_of", "plural", "predecessors", "reg", "remove_unreachable", "shared_vars_of",
    "successors", "SIMT",
]
