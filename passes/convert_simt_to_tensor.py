"""`convert-simt-to-tensor{max-warps=8}`: one machine step as one `tensor.program`.

The program is what *every* GPU token computes on its way through the
compiled layers (qgc.protocol names the tokens); the simt kernel stays in the
module beside it (the runtime lays memory out from it). Per token kind:

- records (`A`, `D`): layer 0 stages the record's address and bytes in
  one-slot memories; the record's top byte assembles the word and *commits*
  it into every copy of the state it addresses: the machine memory (one head
  per read port), the launch area (the same), or the executing warp's
  register file (one head per block, lane and register the block reads,
  keyed by warp and register; the warp is staged by the `EXEC` token);
- `EXEC(w, b)`: machine block b of warp w. The warp's `lanes` word gives each
  lane's next block (relative to b), exited and waiting bits: a lane runs if
  it waits at b (and is not held at a barrier the host has not released).
  The block's live-in registers come from the register file through its own
  read ports (read in the block's group, so a port's bits live only while
  its block uses them, and share coordinates with the other blocks'), its
  predicates from the warp's `preds` word. Ops are exact bit circuits per lane (`circuits.Alu`);
  loads read their ports and see the block's earlier stores (forwarding);
  stores, atomics, the registers the block leaves live and the changed
  control words become the step's *records*, written with the step's end
  (the warp's next block by min-PC, or a barrier wait) into the *outbox*
  (one-slot memories that later tokens of the step read). Every block's
  circuits run; the executing block's results are selected by its one-hot;
- every token then names the next token of the trace: the first record of the
  step (after `EXEC`), the record's next byte (after `A`, `D`), the next
  record or `END`/`BAR` (after a top byte).

Memory: record addresses have 10 bits (qgc.protocol): below 512 the word
memory, 512–639 the launch area (`protocol.LaunchArea`), 768–895 the
registers of the executing warp. A memory head holds 127 words; a kernel
with more (`mem_words` up to 508) keeps its memory in 2 or 4 *banks*
interleaved by the low address bits (word a in row a >> k of bank a & (2^k − 1)),
so every port is a head per bank and a read is the merge of the banks' reads,
each enabled by its bank bits.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc import protocol as P
from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.passes.simt_layout_memory import check_laid_out
from qgc.passes.simt_to_tensor.lowering import Lowering


def vocabulary_of(program: T.ProgramOp) -> P.Vocabulary:
    attr = program.attributes.get("qgc.vocab")
    if not isinstance(attr, builtin.DictionaryAttr):
        raise DiagnosticException(f"error: tensor program '{program.program_name}' carries no "
                                  "GPU vocabulary (run convert-simt-to-tensor)")
    return P.Vocabulary.from_attr(attr)


@dataclass(frozen=True)
class ConvertSimtToTensorPass(ModulePass):
    name = "convert-simt-to-tensor"

    max_warps: int = 8
    """Warps a launch may have (the EXEC tokens' warp field)."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for kernel in simt.kernels_of(op):
            if any(isinstance(o, T.ProgramOp) for o in op.body.block.ops):
                raise DiagnosticException("error: the module already holds a tensor program")
            check_laid_out(kernel, "convert-simt-to-tensor")
            op.body.block.add_op(Lowering(kernel, self.max_warps).lower())
