"""The `weights` dialect: a compiled kernel as the weights of stock Qwen3.5
decoder layers, one op per layer, what `layers.safetensors` holds.

    weights.model @dot config {hidden_size = 2048 : i64, ...} machine {...}
        vocabulary {...} encoding <hidden 2048, inputs 16 (120 bits), set 177> {
      weights.layer 0 heads 2 neurons 57 nonzeros <in_proj_qkv 812, ..., down_proj 71>
      ...
      weights.layer 13 readout heads 0 neurons 33 nonzeros <gate_proj 66, ...>
    }

`convert-tensor-to-weights` lowers a scheduled `tensor.program` (and its
`simt.kernel`) to it. The values are held by the attributes and printed as a
summary (non-zeros per parameter), as MLIR elides large resources: the level
is made by the pass and written by `runtime/layers_file.py`, never parsed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from xdsl.dialects.builtin import (
    I64,
    DictionaryAttr,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    UnitAttr,
)
from xdsl.ir import Block, Data, Dialect, Operation, Region
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, NoTerminator, SymbolOpInterface

#: The base-config fields a compiled layer's shapes and encodings depend on.
SHAPE_FIELDS = ("hidden_size", "intermediate_size", "linear_num_key_heads",
                "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                "linear_conv_kernel_dim")
#: index → value of one parameter's non-zeros, in the order they were made
Table = tuple[tuple[tuple[int, ...], float], ...]


def _unparsable(what: str, parser: AttrParser) -> NoReturn:
    parser.raise_error(f"{what} prints a summary of its values and cannot be parsed: the "
                       "weights level is made by convert-tensor-to-weights")


def short_name(parameter: str) -> str:
    """`mlp.gate_proj.weight` → `gate_proj` (unique within a decoder layer)."""
    return parameter.removesuffix(".weight").rpartition(".")[2]


def param_shapes(config: Any) -> dict[str, tuple[int, ...]]:
    """Parameter name (inside a decoder layer) → shape, given a Qwen3.5 text
    config (or anything with its `SHAPE_FIELDS`)."""
    H, inter = config.hidden_size, config.intermediate_size
    nk, nv = config.linear_num_key_heads, config.linear_num_value_heads
    dk, dv = config.linear_key_head_dim, config.linear_value_head_dim
    conv_dim = 2 * nk * dk + nv * dv
    return {
        "input_layernorm.weight": (H,),
        "post_attention_layernorm.weight": (H,),
        "linear_attn.conv1d.weight": (conv_dim, 1, config.linear_conv_kernel_dim),
        "linear_attn.dt_bias": (nv,),
        "linear_attn.A_log": (nv,),
        "linear_attn.norm.weight": (dv,),
        "linear_attn.out_proj.weight": (H, nv * dv),
        "linear_attn.in_proj_qkv.weight": (conv_dim, H),
        "linear_attn.in_proj_z.weight": (nv * dv, H),
        "linear_attn.in_proj_b.weight": (nv, H),
        "linear_attn.in_proj_a.weight": (nv, H),
        "mlp.gate_proj.weight": (inter, H),
        "mlp.up_proj.weight": (inter, H),
        "mlp.down_proj.weight": (H, inter),
    }


@irdl_attr_definition
class SparseWeightsAttr(Data[tuple[tuple[str, Table], ...]]):
    """The non-zero weights of one decoder layer: (parameter name inside the
    layer, its non-zeros) in the order codegen made them. Printed as the
    non-zeros per parameter: `<in_proj_qkv 812, gate_proj 171>`."""

    name = "weights.sparse"

    @staticmethod
    def from_tables(tables: Mapping[str, Mapping[tuple[int, ...], float]]) -> SparseWeightsAttr:
        return SparseWeightsAttr(tuple((name, tuple(table.items()))
                                       for name, table in tables.items()))

    def tables(self) -> dict[str, dict[tuple[int, ...], float]]:
        return {name: dict(table) for name, table in self.data}

    def nnz(self) -> dict[str, int]:
        return {name: len(table) for name, table in self.data}

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> tuple[tuple[str, Table], ...]:
        _unparsable("#weights.sparse", parser)

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(", ".join(f"{short_name(name)} {len(table)}"
                                           for name, table in self.data))


@irdl_attr_definition
class EncodingAttr(Data[tuple[int, tuple[tuple[int, float], ...],
                              tuple[tuple[str, tuple[int, ...]], ...]]]):
    """How a GPU token becomes its embedding row (the residual vector its step
    program expects): (hidden, the coordinates every row sets — flag, −1 on
    the bits a layer writes first, pads —, each input's coordinates). An input
    bit b lands on its coordinate as 2b − 1."""

    name = "weights.encoding"

    @staticmethod
    def from_row(base: Sequence[float], inputs: Sequence[tuple[str, Sequence[int]]]
                 ) -> EncodingAttr:
        return EncodingAttr((len(base), tuple((c, v) for c, v in enumerate(base) if v),
                             tuple((name, tuple(coords)) for name, coords in inputs)))

    def encode(self, inputs: Mapping[str, Sequence[int]]) -> list[float]:
        """The row of one GPU token carrying these input bits."""
        hidden, constant, fields = self.data
        h = [0.0] * hidden
        for c, v in constant:
            h[c] = v
        for name, coords in fields:
            bits = list(inputs[name])
            if len(bits) != len(coords) or any(b not in (0, 1) for b in bits):
                raise ValueError(f"input '{name}' takes {len(coords)} bits (0 or 1)")
            for c, b in zip(coords, bits, strict=True):
                h[c] = 2.0 * b - 1.0
        return h

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> NoReturn:
        _unparsable("#weights.encoding", parser)

    def print_parameter(self, printer: Printer) -> None:
        hidden, constant, fields = self.data
        bits = sum(len(coords) for _, coords in fields)
        printer.print_string(f"<hidden {hidden}, inputs {len(fields)} ({bits} bits), "
                             f"set {len(constant)}>")


@irdl_op_definition
class LayerOp(IRDLOperation):
    """One decoder layer: the linear-attention heads and MLP neurons it uses
    and its non-zero weights. `readout`: the layer after the step program
    that writes the next token's code (`passes/tensor_to_weights/readout.py`)."""

    name = "weights.layer"
    index = prop_def(IntegerAttr[I64])
    readout = opt_prop_def(UnitAttr)
    heads = prop_def(IntegerAttr[I64])
    neurons = prop_def(IntegerAttr[I64])
    weights = prop_def(SparseWeightsAttr)
    assembly_format = ("$index (`readout` $readout^)? `heads` $heads `neurons` $neurons "
                       "`nonzeros` $weights attr-dict")

    def __init__(self, index: int, heads: int, neurons: int, weights: SparseWeightsAttr,
                 readout: bool = False):
        props = {"index": IntegerAttr(index, 64), "heads": IntegerAttr(heads, 64),
                 "neurons": IntegerAttr(neurons, 64), "weights": weights}
        if readout:
            props["readout"] = UnitAttr()
        super().__init__(properties=props)

    @property
    def layer_index(self) -> int:
        return self.index.value.data


@irdl_op_definition
class ModelOp(IRDLOperation):
    """A compiled kernel: its layers in order, the base-config fields their
    shapes follow (`config`), the machine parameters (`machine`), the GPU
    vocabulary (`protocol.Vocabulary.to_attr`) and its tokens' encoding."""

    name = "weights.model"
    sym_name = prop_def(SymbolNameConstraint())
    config = prop_def(DictionaryAttr)
    machine = prop_def(DictionaryAttr)
    vocabulary = prop_def(DictionaryAttr)
    encoding = prop_def(EncodingAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), IsolatedFromAbove(), SymbolOpInterface())
    assembly_format = ("$sym_name `config` $config `machine` $machine `vocabulary` $vocabulary "
                       "`encoding` $encoding attr-dict-with-keyword $body")

    def __init__(self, name: str, config: DictionaryAttr, machine: DictionaryAttr,
                 vocabulary: DictionaryAttr, encoding: EncodingAttr, layers: Sequence[LayerOp]):
        super().__init__(properties={"sym_name": StringAttr(name), "config": config,
                                     "machine": machine, "vocabulary": vocabulary,
                                     "encoding": encoding},
                         regions=[Region(Block(list(layers)))])

    @property
    def kernel_name(self) -> str:
        return self.sym_name.data

    def layers(self) -> list[LayerOp]:
        return [op for op in self.body.block.ops if isinstance(op, LayerOp)]


def models_of(module: Operation) -> list[ModelOp]:
    return [op for op in module.walk() if isinstance(op, ModelOp)]


WEIGHTS = Dialect("weights", [ModelOp, LayerOp], [SparseWeightsAttr, EncodingAttr])
