"""`convert-tensor-to-weights{hidden=2048 intermediate=6144 heads=16 ...}`: the
final codegen pass. The scheduled step program (`tensor.program`) and its
machine (`simt.kernel`) become one `weights.model`: the sparse weights of
stock Qwen3.5 linear-attention decoder layers, one `weights.layer` each, then
the readout layer, with the machine parameters, the GPU vocabulary and the
tokens' encoding (dialects/weights.py). The options are the base text
config's fields the layers follow (`options_of(config)`).
`runtime/layers_file.py` writes the level as `layers.safetensors`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Attribute
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc import protocol as P
from qgc.base_config import TextConfig
from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.dialects import weights as W
from qgc.passes.convert_simt_to_tensor import vocabulary_of
from qgc.passes.tensor_to_weights import (
    CodegenError,
    CompiledProgram,
    SparseLayer,
    compile_program,
    readout_layer,
)


class OneKernelError(CodegenError):
    """The module does not hold exactly one kernel at the tensor level."""

    def __init__(self) -> None:
        super().__init__("code generation takes one kernel (one simt.kernel and its "
                         "tensor.program)")


def the_kernel(module: builtin.ModuleOp) -> tuple[T.ProgramOp, simt.KernelOp]:
    programs, kernels = T.programs_of(module), simt.kernels_of(module)
    if len(programs) != 1 or len(kernels) != 1:
        raise OneKernelError()
    return programs[0], kernels[0]


def compiled_machine(module: builtin.ModuleOp, config: Any
                     ) -> tuple[CompiledProgram, SparseLayer, P.Vocabulary, simt.KernelOp]:
    """(CompiledProgram, readout layer, vocabulary, simt kernel) of the module."""
    program, kernel = the_kernel(module)
    compiled = compile_program(program, config)
    return compiled, readout_layer(compiled), vocabulary_of(program), kernel


def weights_model(module: builtin.ModuleOp, config: Any) -> W.ModelOp:
    """The module's kernel as a (detached) `weights.model`."""
    compiled, readout, vocab, kernel = compiled_machine(module, config)
    machine: dict[str, Any] = {name: kernel.limit(name) for name in kernel.LIMIT_PROPS}
    machine.update(lanes=kernel.lanes.value.data, mem_words=kernel.mem_words.value.data,
                   layers=len(compiled.layers) + 1, fingerprint=P.kernel_fingerprint(kernel))
    usage = compiled.usage
    layers = [W.LayerOp(layer.index, usage.heads[layer.index], usage.neurons[layer.index],
                        W.SparseWeightsAttr.from_tables(layer.weights))
              for layer in compiled.layers]
    gates = readout.weights.get("mlp.gate_proj.weight", {})
    layers.append(W.LayerOp(readout.index, 0, 1 + max((i for i, _ in gates), default=0),
                            W.SparseWeightsAttr.from_tables(readout.weights), readout=True))
    shape = builtin.DictionaryAttr({name: builtin.IntegerAttr(getattr(config, name), 64)
                                    for name in W.SHAPE_FIELDS})
    return W.ModelOp(kernel.kernel_name, shape, machine_attr(machine), vocab.to_attr(),
                     compiled.encoding, layers)


def machine_attr(machine: dict[str, int | str | None]) -> builtin.DictionaryAttr:
    def attr(v: int | str | None) -> Attribute:
        if v is None:
            return builtin.NoneAttr()
        return builtin.StringAttr(v) if isinstance(v, str) else builtin.IntegerAttr(v, 64)
    return builtin.DictionaryAttr({k: attr(v) for k, v in machine.items()})


@dataclass(frozen=True)
class ConvertTensorToWeightsPass(ModulePass):
    name = "convert-tensor-to-weights"

    hidden: int = T.DEFAULT_HIDDEN
    """Residual coordinates per token (the config's hidden_size)."""

    intermediate: int = T.DEFAULT_INTERMEDIATE
    """MLP neurons per layer (intermediate_size)."""

    heads: int = T.DEFAULT_HEADS
    """Linear-attention value heads per layer (linear_num_value_heads)."""

    key_heads: int = T.DEFAULT_HEADS
    """Linear-attention key heads (linear_num_key_heads)."""

    key_head_dim: int = 128
    """linear_key_head_dim"""

    value_head_dim: int = 128
    """linear_value_head_dim"""

    conv_kernel: int = 4
    """linear_conv_kernel_dim"""

    act: str = "silu"
    """hidden_act (the neuron gadget needs SiLU)"""

    rms_norm_eps: float = 1e-6
    """rms_norm_eps (at most 2e-6 keeps the norms exact)"""

    def text_config(self) -> Any:
        return TextConfig(
            hidden_size=self.hidden, intermediate_size=self.intermediate,
            linear_num_key_heads=self.key_heads, linear_num_value_heads=self.heads,
            linear_key_head_dim=self.key_head_dim, linear_value_head_dim=self.value_head_dim,
            linear_conv_kernel_dim=self.conv_kernel, hidden_act=self.act,
            rms_norm_eps=self.rms_norm_eps)

    @staticmethod
    def options_of(config: Any) -> dict[str, Any]:
        """The pass's options for a base text config."""
        return {"hidden": config.hidden_size, "intermediate": config.intermediate_size,
                "heads": config.linear_num_value_heads,
                "key_heads": config.linear_num_key_heads,
                "key_head_dim": config.linear_key_head_dim,
                "value_head_dim": config.linear_value_head_dim,
                "conv_kernel": config.linear_conv_kernel_dim, "act": config.hidden_act,
                "rms_norm_eps": float(config.rms_norm_eps)}

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        try:
            model = weights_model(op, self.text_config())
        except CodegenError as err:
            raise DiagnosticException(f"error: {err}") from None
        program, kernel = the_kernel(op)
        op.body.block.insert_op_before(model, program)
        for old in (program, kernel):
            old.detach()
            old.erase()
