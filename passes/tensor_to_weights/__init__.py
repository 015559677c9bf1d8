"""The backend of `convert-tensor-to-weights`: a scheduled `tensor.program`
as the sparse weights of stock Qwen3.5 linear-attention decoder layers.

- `sparse.py`: the gadget constants, bfloat16 exactness, `SparseLayer` and
  the affine rows every gadget is made of;
- `codegen.py`: `compile_program` (layers, coordinates, the tokens' encoding);
- `readout.py`: the layer after the step that writes the next token's code;
- `margins.py`: the static bounds of the MLP gates (every gate exact).
"""

from qgc.dialects.weights import param_shapes
from qgc.passes.tensor_to_weights.codegen import (
    CompiledProgram,
    Usage,
    compile_program,
    value_coords,
)
from qgc.passes.tensor_to_weights.margins import Margins, check_margins, gate_margin, margins
from qgc.passes.tensor_to_weights.readout import READOUT_GAIN, readout_layer
from qgc.passes.tensor_to_weights.sparse import (
    CodegenError,
    SparseLayer,
    conjunction_penalties,
    is_bf16,
)

__all__ = ["READOUT_GAIN", "CodegenError", "CompiledProgram", "Margins", "SparseLayer", "Usage",
           "check_margins", "compile_program", "conjunction_penalties", "gate_margin",
           "is_bf16", "margins", "param_shapes", "readout_layer", "value_coords"]
