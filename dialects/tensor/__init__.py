"""The `tensor` dialect: one step of the machine as exact bit-level tensor ops.

qgc's own dialect (xDSL's upstream `tensor` dialect is never loaded beside it).
A `tensor.program` is what one GPU token computes while it passes through the
compiled decoder layers. Values are bit vectors, `!tensor.bits<N>`: N residual
coordinates, each holding ±1 (bit b is stored as 2b−1). The ops have ideal
semantics — exact arithmetic on bits, `runtime/tensor_engine.py` runs them —
and each maps onto one half of a stock Qwen3.5 linear-attention decoder layer:

    tensor.program @step {
      %a = tensor.input "a" : !tensor.bits<4>
      %c = tensor.input "cin" : !tensor.bits<1>
      %k = tensor.threshold %a, %c [{0 = 1, 4 = 1} >= 1, {0 = 1, 1 = 1} >= 2]
          : !tensor.bits<4>, !tensor.bits<1> -> !tensor.bits<2>
      tensor.memory @m slots 16 width 2
      tensor.kv_write @m[binary %a], %k if %c : !tensor.bits<4>, !tensor.bits<2>, !tensor.bits<1>
      %r = tensor.kv_read @m[binary %a] : !tensor.bits<4> -> !tensor.bits<2>
      tensor.output "r" %r : !tensor.bits<2>
    }

- `tensor.threshold` (MLP half): each output bit is `[Σ w·x ≥ t]` over the
  operands' bits (concatenated), integer weights, integer or half-integer t;
  one or two SwiGLU neurons per output (`ThresholdRow.gadget`); or a sum of
  such parts that is 0 or 1 (`SumRow`).
- `tensor.memory` + `tensor.kv_write` / `tensor.kv_read` (attention half): a
  Gated DeltaNet head used as an exact key–value memory of `slots` rows of
  `width` ≤ 64 bits. Within one token a memory takes at most one write and one
  read, and the read sees the write (the write comes first in the program).
  A never-written slot, a disabled access and an out-of-range address read as
  all-zero bits; a disabled or out-of-range write writes nothing.

`tensor-schedule-layers` places every op: layer, half (`attn` | `mlp`), head,
neuron range, residual coordinates, and adds constant `tensor.pad` ops that
keep every token's energy `sum(h²) = 64·hidden` — the printed program is the
layer budget:

    %k = tensor.threshold ... at layer 0 mlp neurons [1, 3) coords [8, 10) : ...
    tensor.memory @m slots 16 width 2 at layer 1 attn head 0
    tensor.pad 10 = 63
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import Dialect

from qgc.dialects.tensor.assembly import (
    Keyword,
    Placement,
    Ranges,
    Rows,
    Slice,
    coords_of,
    ranges_of,
    spell_ranges,
)
from qgc.dialects.tensor.attributes import (
    DEFAULT_HEADS,
    DEFAULT_HIDDEN,
    DEFAULT_INTERMEDIATE,
    HALVES,
    KEY_KINDS,
    MAX_ACTIVE_GATE,
    MAX_MEMORY_SLOTS,
    MAX_MEMORY_WIDTH,
    BitsType,
    Gadget,
    Row,
    RowAttr,
    SumAttr,
    SumRow,
    ThresholdRow,
    bits,
    i64_array,
    i64_attr,
    is_bf16,
    plural,
    row_attr,
    row_attrs,
    sum_attr,
    width_of,
)
from qgc.dialects.tensor.builder import ProgramBuilder, programs_of
from qgc.dialects.tensor.ops import (
    ClearOp,
    ConcatOp,
    InputOp,
    KvReadOp,
    KvWriteOp,
    MemoryOp,
    MergeOp,
    OutputOp,
    PadOp,
    PlacedOp,
    SliceOp,
    TensorOp,
    ThresholdOp,
    coords_prop,
    half_index,
)
from qgc.dialects.tensor.program import (
    LIVE_TO_END,
    ProgramOp,
    ScheduleChecks,
    birth_half,
    bit_reads,
    bit_sources,
    exposed_bits,
    last_reads,
    merge_of,
    read_points,
)

TENSOR = Dialect(
    "tensor",
    [ProgramOp, InputOp, OutputOp, SliceOp, ConcatOp, ThresholdOp, MemoryOp, KvWriteOp,
     KvReadOp, PadOp, ClearOp, MergeOp],
    [BitsType, RowAttr, SumAttr],
)

#: Everything of the dialect, and a few helpers other modules build attributes with;
#: `ArrayAttr` and `StringAttr` as the single-module dialect offered them.
__all__ = [
    "ArrayAttr",
    "StringAttr",
    "TENSOR",
    "BitsType",
    "ClearOp",
    "ConcatOp",
    "DEFAULT_HEADS",
    "DEFAULT_HIDDEN",
    "DEFAULT_INTERMEDIATE",
    "Gadget",
    "HALVES",
    "InputOp",
    "KEY_KINDS",
    "Keyword",
    "KvReadOp",
    "KvWriteOp",
    "LIVE_TO_END",
    "MAX_ACTIVE_GATE",
    "MAX_MEMORY_SLOTS",
    "MAX_MEMORY_WIDTH",
    "MemoryOp",
    "MergeOp",
    "OutputOp",
    "PadOp",
    "PlacedOp",
    "Placement",
    "ProgramBuilder",
    "ProgramOp",
    "Ranges",
    "Row",
    "RowAttr",
    "Rows",
    "ScheduleChecks",
    "Slice",
    "SliceOp",
    "SumAttr",
    "SumRow",
    "TensorOp",
    "ThresholdOp",
    "ThresholdRow",
    "birth_half",
    "bit_reads",
    "bit_sources",
    "bits",
    "coords_of",
    "coords_prop",
    "exposed_bits",
    "half_index",
    "i64_array",
    "i64_attr",
    "is_bf16",
    "last_reads",
    "merge_of",
    "plural",
    "programs_of",
    "ranges_of",
    "read_points",
    "row_attr",
    "row_attrs",
    "spell_ranges",
    "sum_attr",
    "width_of",
]
