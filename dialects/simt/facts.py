"""The machine's facts: lanes, default limits, parameter types, memory spaces."""

from __future__ import annotations

from qgc.machine.opcodes import ATOM_OPERATIONS, ATOM_PAIR_OPERATIONS, SETP_CONDITIONS
from qgc.protocol import BLOCK_BITS

LANES = 4
DEFAULT_REGS = 15
DEFAULT_PREDS = 8
#: Words of machine memory by default (the tensor level holds 127 per memory
#: head and asks for `mem-words=127`).
DEFAULT_MEM_WORDS = 1024
#: Blocks per kernel: what the token protocol's block field numbers (the
#: published design had 32; fastmath_f's .approx algorithms take 124, and the
#: token vocabulary grows with the blocks a kernel uses).
DEFAULT_MAX_BLOCKS = 1 << BLOCK_BITS
DEFAULT_MAX_OPS = 16

#: ALU opcodes, setp conditions, predicate logic and atomic operations: the
#: machine's opcode table (`qgc.machine.opcodes`) is their one home.
SETP_CONDS = tuple(SETP_CONDITIONS)
ATOM_OPS = tuple(ATOM_OPERATIONS)
ATOM_PAIR_OPS = tuple(ATOM_PAIR_OPERATIONS)

#: Special registers the machine provides per lane: the launch geometry, the
#: lane's own (a constant of the lane: `lane_special`) and the warp's place in
#: its CTA (`warpid`: linear thread id / LANES; `nwarpid`: the CTA's warps).
GEOMETRY_SPECIALS = tuple(f"{r}.{d}" for r in ("tid", "ntid", "ctaid", "nctaid") for d in "xyz")
LANE_SPECIALS = ("laneid", *(f"lanemask_{c}" for c in ("eq", "lt", "le", "gt", "ge")))
WARP_SPECIALS = ("warpid", "nwarpid")
SPECIALS = GEOMETRY_SPECIALS + LANE_SPECIALS + WARP_SPECIALS


def lane_special(which: str, lane: int) -> int:
    """`%laneid` and the lane masks of lane `lane` on a warp of LANES lanes
    (masks of lanes that exist: `lanemask_gt` of the last lane is 0)."""
    if which == "laneid":
        return lane
    below, full = (1 << lane) - 1, (1 << LANES) - 1
    return {"eq": 1 << lane, "lt": below, "le": below | 1 << lane,
            "gt": full & ~(below | 1 << lane), "ge": full & ~below}[which.split("_")[1]]

#: Pointer parameters by the buffer elements one machine word holds: `ptr`
#: 4 bytes (32- and 64-bit data, 64-bit elements take two words), `ptr16` one
#: halfword, `ptr8` one byte (sub-word buffers keep one element per word).
POINTER_TYPES = {"ptr": 4, "ptr16": 2, "ptr8": 1}
#: 64-bit scalar parameters: the low word in the parameter's slot, the high
#: word after the bounds pairs.
WIDE_SCALARS = ("u64", "s64", "b64")
PARAM_TYPES = (*POINTER_TYPES, *WIDE_SCALARS, "u32", "s32", "b32", "f32", "u16", "s16",
               "b16", "u8", "s8", "b8")

#: Memory spaces: the parameter area (constant addresses), the buffers, the
#: CTA's shared window and the lane's own spill slots (`spill[2]`, written by
#: `simt-allocate-registers`).
SPACES = ("param", "global", "shared", "local", "spill")
