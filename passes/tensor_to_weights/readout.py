"""The readout layer: the step's outputs, amplified onto the code coordinates.

Every GPU token's embedding row carries its *code* (`Vocabulary.code`: its
output-style fields as ±1). One layer after the step program writes
`READOUT_GAIN · (2b − 1)` for every output bit b onto the code coordinates,
so after the base model's layers and its final norm the residual points along
the next token's code and the tied LM head's argmax is that token: a row's
logit falls by 2·gain (before the norm) for every code bit it differs in.
"""

from __future__ import annotations

from qgc import protocol as P
from qgc.dialects import tensor as T
from qgc.passes.tensor_to_weights.codegen import CompiledProgram
from qgc.passes.tensor_to_weights.sparse import NEURON_SCALE, SparseLayer, affine

READOUT_GAIN = 1024.0


def readout_layer(compiled: CompiledProgram) -> SparseLayer:
    """One more layer: its MLP amplifies the step's outputs onto the code."""
    program = compiled.program
    (code_in,) = [op for op in program.inputs() if op.input_name.data == "code"]
    code = compiled.coords[code_in.result]
    out_bits = [c for name in P.Vocabulary.OUTPUTS
                for op in program.outputs() if op.output_name.data == name
                for c in compiled.coords[op.value]]
    if len(out_bits) != len(code):
        raise ValueError(f"the step has {len(out_bits)} output bits for a code of {len(code)}")
    layer = SparseLayer(len(compiled.layers))
    gate, up, down = "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"
    flag = T.ProgramOp.FLAG
    layer.add(gate, (0, flag), NEURON_SCALE)            # constant neuron: ReLU(1) = 1
    layer.add(up, (0, flag), 1.0 / NEURON_SCALE)
    for n, (src, dst) in enumerate(zip(out_bits, code, strict=True), start=1):
        affine(layer, gate, n, [(src, 1.0)], 0.0, NEURON_SCALE)    # G = b: ReLU(b) = b
        layer.add(up, (n, flag), 1.0 / NEURON_SCALE)
        layer.add(down, (dst, n), 2 * READOUT_GAIN)
        layer.add(down, (dst, 0), -READOUT_GAIN)
    return layer
