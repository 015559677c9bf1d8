"""Instruction semantics of the reference engine: each `ptx.inst` → a closure.

`compile_inst(ctx, inst)` decodes one instruction once, before execution, into
one of the step kinds the scheduler (`ref.py`) runs:

- `(ALU, fn)`: `fn(thread)` for every thread of the group whose guard holds
  (arithmetic, memory, atomics — atomics thus run lane by lane in lane order);
- `(BRANCH, pc)`, `(EXIT, None)`, `(NOP, None)`, `(TRAP, message)`;
- `(BARRIER, BarrierSpec)`: `bar.sync`/`barrier.sync`/`bar.arrive`/`bar.red`;
- `(WARP, fn)`: `fn(threads)` once for the threads of the warp that execute
  the instruction together (shfl, vote, activemask, match, redux).

Every opcode family registers itself in `TABLE` (ref_decode's `@op`) with the
forms it accepts, which `coverage.supported_opcodes()` reports; the families
live by concern: ref_int (integer arithmetic, bit operations, compare and
select), ref_float (f32 arithmetic, cvt), ref_memory (mov, ld/st, atomics),
ref_control (branches, barriers) and ref_warp (warp collectives). Operand
decoding is ref_decode's `Ctx`. Anything else is an `UnsupportedError` that
names the opcode and its `file:line:col`. The engine is the independent oracle
of the differential tests: it shares no opcode table with the simt machine.

Semantics that PTX leaves to the hardware, as defined here:
- integer division by zero: every quotient bit set (`div.u32 x, 0` =
  0xFFFFFFFF, `div.s32 x, 0` = -1); `rem x, 0` = x (the dividend);
  `div.s32 INT_MIN, -1` = INT_MIN and `rem.s32 INT_MIN, -1` = 0;
- float → integer conversions saturate to the destination range, NaN → 0;
- arithmetic NaN results are the canonical NaN 0x7FFFFFFF; `abs`/`neg` are
  sign-bit operations; `min`/`max` return the non-NaN operand and order -0 < +0;
- `shfl` reading a lane that is inactive reads that lane's register as it
  is; a lane past the end of a partial warp reads the caller's own value.
"""

from __future__ import annotations

from qgc.dialects import ptx

# The family modules register their opcodes in TABLE when imported.
from qgc.runtime import ref_control, ref_float, ref_int, ref_memory, ref_warp  # noqa: F401
from qgc.runtime.ref_decode import TABLE, Ctx

__all__ = ["TABLE", "compile_inst"]


def compile_inst(ctx: Ctx, inst: ptx.InstOp) -> tuple[int, object]:
    """Decode one instruction into a step (kind, payload); raises UnsupportedError."""
    ctx.begin(inst)
    base = ctx.code.base
    if base == "call":
        raise ctx.unsupported("calls to device functions are not supported")
    opdef = TABLE.get(base)
    if opdef is None:
        raise ctx.unsupported()
    for m in ctx.code.modifiers:
        if m not in opdef.mods and not m.startswith(("L1::", "L2::")):
            raise ctx.unsupported()
    return opdef.compile(ctx)
