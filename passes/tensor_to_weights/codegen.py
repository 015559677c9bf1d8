"""Codegen: a scheduled `tensor.program` as the weights of stock Qwen3.5
linear-attention decoder layers, and the residual encoding of its tokens.

    compiled = compile_program(program, config)        # sparse, no torch needed
    layers = compiled.build_layers(torch.bfloat16)     # stock Qwen3_5DecoderLayer modules
    h = compiled.encode({"a": [...], "b": [...]})      # one GPU token's residual vector
    outputs = compiled.decode(h_after_last_layer)      # exact ±1 → bits, else an error

Encoding of a GPU token (hidden H): coordinate 0 (the flag) holds 8, every
data bit ±1 (bit b as 2b−1), a kv_read result −1 until its layer writes it,
pads (`tensor.pad`) the values that make `sum(h²) = 64·H` before and after
every half of every layer, everything else 0. So every RMSNorm scale is
exactly `rsqrt(64 + 1e-6) = 1/8` in float32 and bfloat16, the normed input is
`x = h/8` exactly, a bit reads as `b = 4·x + x_flag/2`, and the flag as 1: the
constant of every affine form. Norm weights stay zero-centred at 0 (factor 1),
nothing has a bias.

MLP half (the neuron gadget, `ThresholdRow.gadget`): neuron n has gate
`256·G_n` and up `1/256` (the flag), so `SiLU(256·G)·(1/256) = ReLU(G)` exactly
for G = 0 or |G| ≥ ½ (SiLU(≥128) is the identity, SiLU(≤−128) is −0); neuron 0
is the constant neuron (G = 1). An output bit f = base + Σ sign·ReLU(G) lands
on its fresh coordinate as `2f − 1` through the down projection; pads move by
the constant neuron. A coordinate the threshold `overwrites` holds a dead bit
`2·b_old − 1`: one more neuron, the copy neuron with G = b_old (0 or 1) and
down weight −2, and +1 from the constant neuron, make the change exactly
`(2f − 1) − (2·b_old − 1)`.

Attention half (the memory head): conv1d a pass-through of the current token,
`A_log = −30` (e^g == 1.0), `β = sigmoid(32) == 1.0`. Key pre-activation 64 at
the addressed slot (a conjunction of the key bits, silenced to SiLU(≤ −96) = −0
elsewhere), so the l2-normed key is exactly one-hot; value: each pair of bits
as a one-hot of four dimensions holding 256 (SiLU(256) = 256), so every
written row has 32 of 128 dimensions at 256; query 251 at the slot and 26.75 at
slot 127 (never written): l2norm and the kernel's 1/√128 give exactly
45/512 = 0.087890625 on the slot in both the chunked and the recurrent kernel,
so a read is 22.5 on a quarter of the dimensions, mean(o²) = 126.5625 (eps
vanishes), the gated norm gives exactly 2, times the norm weight 1/64 and
SiLU(z = 32) = 32: exactly 1 per active dimension, 0 for an empty row.
out_proj adds 2 per set bit onto the read's coordinates, which hold −1.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.ir import SSAValue

from qgc.dialects import tensor as T
from qgc.dialects import weights as W
from qgc.dialects.weights import param_shapes
from qgc.passes.tensor_to_weights.margins import check_margins
from qgc.passes.tensor_to_weights.sparse import (
    A_LOG,
    BETA_PRE,
    ENERGY_PER_COORD,
    FLAG_VALUE,
    HEAD_DIM,
    KEY_ON,
    MAX_EPS,
    NEURON_SCALE,
    NORM_WEIGHT,
    OUT_WEIGHT,
    PARTNER_SLOT,
    QUERY_ON,
    QUERY_PARTNER,
    VALUE_ON,
    Z_PRE,
    CodegenError,
    SparseLayer,
    affine,
    conjunction,
)
from qgc.progress import progress

# --------------------------------------------------------------- the program

def value_coords(program: T.ProgramOp) -> dict[SSAValue, list[int]]:
    """Residual coordinates of every bit vector of a scheduled program."""
    coords: dict[SSAValue, list[int]] = {}
    for op in program.ops():
        if isinstance(op, T.InputOp | T.ThresholdOp | T.KvReadOp):
            placed = op.properties.get("coords")
            if placed is None:
                raise CodegenError(f"{op.name} has no coordinates: run tensor-schedule-layers")
            coords[op.result] = T.coords_of(placed.get_values())  # type: ignore[union-attr]
        elif isinstance(op, T.SliceOp):
            coords[op.result] = coords[op.input][op.lo.value.data:op.hi.value.data]
        elif isinstance(op, T.ConcatOp):
            coords[op.result] = [c for v in op.inputs for c in coords[v]]
        elif isinstance(op, T.MergeOp):         # its reads share their coordinates
            coords[op.result] = coords[op.inputs[0]]
    return coords


@dataclass
class Usage:
    """What each layer of the compiled program uses."""

    neurons: list[int]
    heads: list[int]
    coords: int


@dataclass
class CompiledProgram:
    program: T.ProgramOp
    config: Any
    layers: list[SparseLayer]
    coords: dict[SSAValue, list[int]]
    usage: Usage

    # ---------------------------------------------------------------- encoding
    @property
    def hidden(self) -> int:
        return int(self.config.hidden_size)

    def encode(self, inputs: Mapping[str, Sequence[int]]) -> list[float]:
        """The residual vector of one GPU token carrying these input bits."""
        try:
            return self.encoding.encode(inputs)
        except ValueError as err:
            raise CodegenError(str(err)) from None

    @functools.cached_property
    def encoding(self) -> W.EncodingAttr:
        """What every token's row shares (flag, −1 on coordinates a read or a
        threshold writes first, pads), and each input's coordinates."""
        h = [0.0] * self.hidden
        h[T.ProgramOp.FLAG] = FLAG_VALUE
        fields = []
        for op in self.program.ops():
            if isinstance(op, T.InputOp):
                fields.append((op.input_name.data, self.coords[op.result]))
            elif isinstance(op, T.KvReadOp):
                for c in self.coords[op.result]:
                    h[c] = -1.0
            elif isinstance(op, T.ThresholdOp):
                for c in set(self.coords[op.result]) - set(op.overwritten_coords()):
                    h[c] = -1.0       # a fresh bit coordinate: bit 0 until written
            elif isinstance(op, T.PadOp):
                h[op.coord.value.data] = float(op.value.value.data)
        return W.EncodingAttr.from_row(h, fields)

    def decode(self, h: Sequence[float]) -> dict[str, list[int]]:
        """Output bits of a residual vector; every output coordinate must hold
        exactly +1 or −1."""
        out = {}
        for op in self.program.outputs():
            bits = []
            for c in self.coords[op.value]:
                v = float(h[c])
                if v not in (1.0, -1.0):
                    raise CodegenError(f"output '{op.output_name.data}' coordinate {c} holds "
                                       f"{v!r}, not ±1")
                bits.append(int(v > 0))
            out[op.output_name.data] = bits
        return out

    def output_coords(self) -> list[int]:
        return [c for op in self.program.outputs() for c in self.coords[op.value]]

    def gate_neurons(self, layer: int) -> int:
        """Neurons layer `layer` uses (the constant neuron included)."""
        return self.usage.neurons[layer]

    # ---------------------------------------------------------------- stock modules
    def layer_config(self) -> Any:
        """The config of the compiled stack alone: the base config with these
        layers (all linear attention). A fresh config, so that derived fields
        (the cache's per-layer types) follow."""
        data = {k: v for k, v in self.config.to_dict().items() if k != "model_type"}
        data["layer_types"] = ["linear_attention"] * len(self.layers)
        data["num_hidden_layers"] = len(self.layers)
        return self.config.__class__(**data)

    def layer_states(self, dtype: Any = None) -> list[dict[str, Any]]:
        """Dense state dicts of the compiled layers, in order (what
        `runtime.model.merge` takes)."""
        return [self.dense_state(i, dtype) for i in range(len(self.layers))]

    def dense_state(self, index: int, dtype: Any = None) -> dict[str, Any]:
        """Dense tensors of layer `index` (names inside the decoder layer)."""
        import torch
        shapes = param_shapes(self.config)
        out = {}
        for name, shape in shapes.items():
            t = torch.zeros(shape, dtype=torch.float64)
            table = self.layers[index].weights.get(name, {})
            if table:
                idx = torch.tensor(list(table.keys()), dtype=torch.long).T
                t.index_put_(tuple(idx), torch.tensor(list(table.values()), dtype=torch.float64))
            out[name] = t.to(dtype or torch.float32)
        return out

    def fill_layer(self, module: Any, index: int) -> None:
        """Set every parameter of a stock Qwen3_5DecoderLayer to layer `index`."""
        import torch
        state = self.dense_state(index)
        with torch.no_grad():
            for name, value in state.items():
                p = module.get_parameter(name)
                p.copy_(value.to(p.dtype))

    def build_layers(self, dtype: Any = None) -> list[Any]:
        """Stock `Qwen3_5DecoderLayer` modules holding the program, in eval mode."""
        import torch
        from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer
        cfg = self.layer_config()
        modules = []
        for i in range(len(self.layers)):
            with torch.device("meta"):
                layer = Qwen3_5DecoderLayer(cfg, i)
            layer = layer.to_empty(device="cpu")
            self.fill_layer(layer, i)
            modules.append(layer.to(dtype or torch.float32).eval())
        return modules

    def state_dict(self, prefix: str = "model.layers.{i}.") -> dict[str, Any]:
        """Sparse COO tensors under the Qwen3.5 parameter names (for safetensors)."""
        import torch
        shapes = param_shapes(self.config)
        out = {}
        for layer in self.layers:
            for name, table in layer.weights.items():
                idx = torch.tensor(list(table.keys()), dtype=torch.long).T
                vals = torch.tensor(list(table.values()), dtype=torch.float32)
                out[prefix.format(i=layer.index) + name] = torch.sparse_coo_tensor(
                    idx, vals, shapes[name], check_invariants=True).coalesce()
        return out


# ---------------------------------------------------------------- compilation

def check_config(program: T.ProgramOp, config: Any) -> None:
    name = program.program_name
    if not program.scheduled:
        raise CodegenError(f"tensor program '{name}' is not scheduled: run "
                           "tensor-schedule-layers")
    hidden = program.limit("hidden")
    if config.hidden_size != hidden:
        raise CodegenError(f"tensor program '{name}' is scheduled for hidden {hidden}; the config "
                           f"has hidden_size {config.hidden_size}")
    if config.linear_key_head_dim != HEAD_DIM or config.linear_value_head_dim != HEAD_DIM:
        raise CodegenError(f"the memory head needs linear key/value head dims {HEAD_DIM}; the "
                           f"config has {config.linear_key_head_dim}/"
                           f"{config.linear_value_head_dim}")
    if config.linear_num_key_heads != config.linear_num_value_heads:
        raise CodegenError("the memory head needs as many linear key heads as value heads; the "
                           f"config has {config.linear_num_key_heads} and "
                           f"{config.linear_num_value_heads}")
    if config.hidden_act != "silu":
        raise CodegenError(f"the neuron gadget needs SiLU; the config has {config.hidden_act}")
    if not 0 <= config.rms_norm_eps <= MAX_EPS:
        raise CodegenError(f"rms_norm_eps {config.rms_norm_eps} would shift the exact RMSNorm "
                           f"scales (at most {MAX_EPS})")


def _compile_mlp(layer: SparseLayer, ops: list[T.ThresholdOp | T.ClearOp],
                 coords: dict[SSAValue, list[int]], groups: list[int] | None) -> int:
    if not ops:
        return 0
    gate, up, down = "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"
    flag = T.ProgramOp.FLAG
    layer.add(gate, (0, flag), NEURON_SCALE)             # the constant neuron: G = 1
    layer.add(up, (0, flag), 1.0 / NEURON_SCALE)
    top = 1
    for op in ops:
        if isinstance(op, T.ClearOp):
            top = max(top, _compile_clear(layer, op, groups))
            continue
        placed = op.neurons
        assert placed is not None
        n = placed.get_values()[0]
        inputs = [c for v in op.inputs for c in coords[v]]
        overwritten = set(op.overwritten_coords())
        # a grouped op's neurons take their up projection from the group's bit:
        # ReLU(G)·e, exactly zero while another group runs
        g = op.group_index
        gate_bit = None if g is None else groups[g]  # type: ignore[index]

        def up_from(neuron: int, gate_bit: int | None = gate_bit) -> None:
            _gated_up(layer, neuron, gate_bit)

        first: dict[T.ThresholdRow, int] = {}        # part → its first neuron
        for part in op.distinct_parts():
            first[part] = n
            form, t = part.form()
            for _, slope, offset in part.gadget().neurons:
                # G = slope·(Σ w·b − t) + offset
                terms = [(inputs[i], float(slope * w)) for i, w in form]
                affine(layer, gate, n, terms, float(offset - slope * t), NEURON_SCALE)
                up_from(n)
                n += 1
        constant = 0                                 # the neuron that writes each row's base
        if gate_bit is not None and op.needs_group_constant():
            constant = n
            layer.add(gate, (n, flag), NEURON_SCALE)
            up_from(n)
            n += 1
        for row, out_coord in zip(op.row_list(), coords[op.result], strict=True):
            base = 0
            for coef, part in row.parts:
                gd = part.gadget()
                for k, (sign, _, _) in enumerate(gd.neurons):
                    layer.add(down, (out_coord, first[part] + k), 2.0 * sign * coef)
                base += coef * gd.base
            # the coordinate holds 2·b_old − 1 (a fresh one −1: b_old = 0) and
            # moves by (2f − 1) − (2·b_old − 1) = 2f − 2·b_old
            if base:
                layer.add(down, (out_coord, constant), 2.0 * base)
            if out_coord in overwritten:
                # the copy neuron: G = b_old (0 or 1, exact), down −2
                affine(layer, gate, n, [(out_coord, 1.0)], 0.0, NEURON_SCALE)
                up_from(n)
                layer.add(down, (out_coord, n), -2.0)
                n += 1
        if n != placed.get_values()[1]:
            raise CodegenError(f"tensor.threshold placed on neurons {list(placed.get_values())} "
                               f"uses {n - placed.get_values()[0]}")
        top = max(top, n)
    return top


def _gated_up(layer: SparseLayer, neuron: int, gate_bit: int | None) -> None:
    """The neuron's up projection: 1/256 from the flag, or from a group's bit
    (ReLU(G)·e: exactly zero while another group runs)."""
    up = "mlp.up_proj.weight"
    if gate_bit is None:
        layer.add(up, (neuron, T.ProgramOp.FLAG), 1.0 / NEURON_SCALE)
    else:
        affine(layer, up, neuron, [(gate_bit, 1.0)], 0.0, 1.0 / NEURON_SCALE)


def _compile_clear(layer: SparseLayer, op: T.ClearOp, groups: list[int] | None) -> int:
    """One neuron per coordinate: G = b_old (0 or 1, exact), down −2, so the
    coordinate moves from 2·b_old − 1 to −1."""
    placed = op.neurons
    assert placed is not None
    n = placed.get_values()[0]
    g = op.group_index
    gate_bit = None if g is None else groups[g]  # type: ignore[index]
    for c in op.cleared_coords():
        affine(layer, "mlp.gate_proj.weight", n, [(c, 1.0)], 0.0, NEURON_SCALE)
        _gated_up(layer, n, gate_bit)
        layer.add("mlp.down_proj.weight", (c, n), -2.0)
        n += 1
    return n


def group_coords(program: T.ProgramOp, coords: dict[SSAValue, list[int]]) -> list[int] | None:
    """The coordinate of each group's bit (the program's `groups` input)."""
    name = program.groups_input
    if name is None:
        return None
    (op,) = [op for op in program.inputs() if op.input_name.data == name]
    return coords[op.result]


def _key_required(op: T.KvWriteOp | T.KvReadOp, key: list[int], enable: list[int] | None,
                  slot: int) -> list[tuple[int, int]]:
    req = [(enable[0], 1)] if enable else []
    if op.key_kind.data == "onehot":
        return [(key[slot], 1)] + req
    return [(c, (slot >> i) & 1) for i, c in enumerate(key)] + req


def _compile_memory(layer: SparseLayer, mem: T.MemoryOp, write: T.KvWriteOp | None,
                    read: T.KvReadOp | None, coords: dict[SSAValue, list[int]],
                    config: Any, groups: list[int] | None = None) -> None:
    assert mem.head is not None
    h = mem.head.value.data
    key_dim = config.linear_num_key_heads * HEAD_DIM
    qkv, flag = "linear_attn.in_proj_qkv.weight", T.ProgramOp.FLAG
    q0, k0, v0 = h * HEAD_DIM, key_dim + h * HEAD_DIM, 2 * key_dim + h * HEAD_DIM
    if write is not None:
        key = coords[write.key]
        en = coords[write.enable] if write.enable is not None else None
        for slot in range(mem.n_slots):
            conjunction(layer, qkv, k0 + slot, _key_required(write, key, en, slot), KEY_ON)
        val = coords[write.value]
        for g in range(HEAD_DIM // 4):
            group = [val[i] for i in (2 * g, 2 * g + 1) if i < len(val)]
            for code in range(4):
                want = [(code >> j) & 1 for j in range(2)]
                if any(want[j] for j in range(len(group), 2)):
                    continue                                   # a missing bit is always 0
                row = v0 + 4 * g + code
                if group:
                    conjunction(layer, qkv, row, list(zip(group, want, strict=False)),
                                VALUE_ON)
                elif code == 0:
                    layer.add(qkv, (row, flag), VALUE_ON)      # unused group: code 0
        layer.add("linear_attn.in_proj_b.weight", (h, flag), BETA_PRE)
    if read is not None:
        key = coords[read.key]
        en = coords[read.enable] if read.enable is not None else None
        # a grouped read: its group's bit is one more condition of the query
        g = read.group_index
        extra = [] if g is None else [(groups[g], 1)]  # type: ignore[index]
        for slot in range(mem.n_slots):
            conjunction(layer, qkv, q0 + slot,
                        _key_required(read, key, en, slot) + extra, QUERY_ON)
        layer.add(qkv, (q0 + PARTNER_SLOT, flag), QUERY_PARTNER)
        for d in range(HEAD_DIM):
            layer.add("linear_attn.in_proj_z.weight", (h * HEAD_DIM + d, flag), Z_PRE)
        for i, c in enumerate(coords[read.result]):
            g, j = divmod(i, 2)
            for code in range(4):
                if (code >> j) & 1:
                    layer.add("linear_attn.out_proj.weight", (c, h * HEAD_DIM + 4 * g + code),
                              OUT_WEIGHT)


def _compile_layer_constants(layer: SparseLayer, config: Any, heads: Sequence[int]) -> None:
    """No decay on any head; the conv passes the current token through on the
    q/k/v channels of the heads in use; the gated norm weight (shared by all
    heads) is 1/64."""
    key_dim = config.linear_num_key_heads * HEAD_DIM
    tap = config.linear_conv_kernel_dim - 1
    for h in heads:
        for base in (0, key_dim, 2 * key_dim):
            for d in range(HEAD_DIM):
                layer.set("linear_attn.conv1d.weight", (base + h * HEAD_DIM + d, 0, tap), 1.0)
    for h in range(config.linear_num_value_heads):
        layer.set("linear_attn.A_log", (h,), A_LOG)
    for d in range(HEAD_DIM):
        layer.set("linear_attn.norm.weight", (d,), NORM_WEIGHT)


def compile_program(program: T.ProgramOp, config: Any) -> CompiledProgram:
    """Sparse weights of the scheduled program for a Qwen3.5 text config."""
    check_config(program, config)
    n_layers = program.limit("layers")
    assert n_layers is not None
    coords = value_coords(program)
    layers = [SparseLayer(i) for i in range(n_layers)]
    thresholds: dict[int, list[T.ThresholdOp | T.ClearOp]] = {}
    writes = {op.memory_name: op for op in program.ops() if isinstance(op, T.KvWriteOp)}
    reads = {op.memory_name: op for op in program.ops() if isinstance(op, T.KvReadOp)}
    heads = [0] * n_layers
    used: list[list[int]] = [[] for _ in range(n_layers)]
    groups = group_coords(program, coords)
    for op in program.ops():
        if isinstance(op, T.ThresholdOp | T.ClearOp):
            assert op.placed_layer is not None
            thresholds.setdefault(op.placed_layer, []).append(op)
        elif isinstance(op, T.MemoryOp):
            assert op.placed_layer is not None and op.head is not None
            layer = op.placed_layer
            heads[layer] = max(heads[layer], op.head.value.data + 1)
            used[layer].append(op.head.value.data)
            _compile_memory(layers[layer], op, writes.get(op.memory_name),
                            reads.get(op.memory_name), coords, config, groups)
    with progress(range(n_layers), desc=f"codegen {program.program_name}",
                  unit="layer") as bar:
        neurons = [_compile_mlp(layers[i], thresholds.get(i, []), coords, groups) for i in bar]
    for i, n in enumerate(neurons):
        if n > config.intermediate_size:
            raise CodegenError(f"layer {i} of tensor program '{program.program_name}' needs {n} "
                               f"MLP neurons, the config has intermediate_size "
                               f"{config.intermediate_size}")
        if heads[i] > config.linear_num_value_heads:
            raise CodegenError(f"layer {i} of tensor program '{program.program_name}' needs "
                               f"{heads[i]} linear-attention heads, the config has "
                               f"{config.linear_num_value_heads}")
        _compile_layer_constants(layers[i], config, used[i])
    for layer in layers:
        layer.check_bf16()
    check_margins(program, n_layers)
    bit_coords = {c for op in program.ops()
                  if isinstance(op, T.InputOp | T.ThresholdOp | T.KvReadOp)
                  for c in coords[op.result]}
    used = 1 + len(bit_coords) + len(program.pads())
    compiled = CompiledProgram(program, config, layers, coords, Usage(neurons, heads, used))
    _check_energy(compiled)
    return compiled


def _check_energy(compiled: CompiledProgram) -> None:
    """sum(h²) of a token is 64·hidden at the start and stays so: every bit
    coordinate holds ±1 from the embedding on (a fresh threshold output −1
    until its half writes it; a coordinate that exclusive groups share counts
    once), and the pads are constant."""
    program = compiled.program
    energy = FLAG_VALUE ** 2
    fresh: set[int] = set()
    for op in program.ops():
        if isinstance(op, T.InputOp | T.KvReadOp):
            fresh.update(compiled.coords[op.result])
        elif isinstance(op, T.ThresholdOp):
            fresh.update(set(compiled.coords[op.result]) - set(op.overwritten_coords()))
        elif isinstance(op, T.PadOp):
            energy += op.value.value.data ** 2
    energy += len(fresh)
    target = ENERGY_PER_COORD * compiled.hidden
    if energy != target:
        raise CodegenError(f"tensor program '{program.program_name}' starts with sum(h²) = "
                           f"{energy}, not 64·hidden = {target}")
