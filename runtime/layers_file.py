"""layers.safetensors: the compiled layers, compact, under Qwen3.5 names.

Tensor names are those of the decoder layers they fill
(`model.layers.{i}.linear_attn.in_proj_qkv.weight`, `...mlp.gate_proj.weight`).
A parameter with few entries is stored dense under its own name; a large,
sparse one (the projections) as `NAME.indices` (int64, one row per dimension)
and `NAME.values` (float32), its shape in the metadata: a compiled layer holds
a few thousand non-zeros of tens of millions of weights. The GPU tokens' embedding rows are
`qgc.gpu_rows` (float32, one row per token of the GPU vocabulary). `__metadata__`
holds the qgc version, the kernel, the machine parameters, the base text config
the layers target, the GPU vocabulary and the token protocol version;
`check_base` compares them with a base model's config before merging. The file is
written to a temporary name and renamed: a failure leaves no partial file.

numpy only (no torch): compiling never needs torch.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from qgc import __version__
from qgc import protocol as P
from qgc.diagnostics import QgcError
from qgc.runtime.tensor_codegen import SparseLayer, param_shapes

PROTOCOL_VERSION = 1
DENSE_LIMIT = 1 << 16
GPU_ROWS = "qgc.gpu_rows"
#: The base config fields a compiled layer's shapes and encodings depend on.
SHAPE_FIELDS = ("hidden_size", "intermediate_size", "linear_num_key_heads",
                "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                "linear_conv_kernel_dim")


def layer_tensors(layers: list[SparseLayer], config: Any) -> tuple[dict[str, np.ndarray],
                                                                   dict[str, list[int]]]:
    shapes = param_shapes(config)
    tensors: dict[str, np.ndarray] = {}
    sparse: dict[str, list[int]] = {}
    for layer in layers:
        for name, shape in shapes.items():
            full = f"model.layers.{layer.index}.{name}"
            table = layer.weights.get(name, {})
            if int(np.prod(shape)) <= DENSE_LIMIT:
                dense = np.zeros(shape, dtype=np.float32)
                for idx, v in table.items():
                    dense[idx] = v
                tensors[full] = dense
            else:
                keys = list(table)
                idx = np.array(keys, dtype=np.int64).T.reshape(len(shape), len(keys))
                tensors[full + ".indices"] = np.ascontiguousarray(idx)
                tensors[full + ".values"] = np.array([table[k] for k in keys], dtype=np.float32)
                sparse[full] = list(shape)
    return tensors, sparse


def vocabulary_fields(vocab: P.Vocabulary) -> dict[str, Any]:
    return {"records": vocab.records, "blocks": vocab.blocks, "warps": vocab.warps,
            "sites": vocab.sites, "ports": [list(p) for p in vocab.ports], "size": vocab.size}


def vocabulary_from(fields: dict[str, Any]) -> P.Vocabulary:
    return P.Vocabulary(fields["records"], fields["blocks"], fields["warps"],
                        ports=tuple(tuple(p) for p in fields["ports"]), sites=fields["sites"])


def write_layers(path: str | Path, layers: list[SparseLayer], config: Any, kernel: str,
                 machine: dict[str, Any], vocab: P.Vocabulary, gpu_rows: np.ndarray) -> int:
    """Write the file atomically; returns its size in bytes."""
    from safetensors.numpy import save_file
    tensors, sparse = layer_tensors(layers, config)
    tensors[GPU_ROWS] = np.ascontiguousarray(gpu_rows, dtype=np.float32)
    meta = {
        "qgc_version": __version__, "protocol_version": str(PROTOCOL_VERSION),
        "kernel": kernel, "machine": json.dumps(machine, sort_keys=True),
        "base_config": json.dumps(config.to_dict() if hasattr(config, "to_dict") else config,
                                  sort_keys=True, default=str),
        "gpu_vocabulary": json.dumps(vocabulary_fields(vocab)),
        "layers": str(len(layers)), "sparse_shapes": json.dumps(sparse, sort_keys=True),
    }
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent or ".")
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=meta)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path.stat().st_size


def read_layers(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Dense arrays under the Qwen3.5 names (and `qgc.gpu_rows`), and the metadata."""
    from safetensors import SafetensorError, safe_open
    try:
        with safe_open(str(path), framework="np") as f:
            meta = f.metadata() or {}
            raw = {k: f.get_tensor(k) for k in f.keys()}
    except (OSError, SafetensorError) as err:
        raise QgcError(f"error: cannot read the layers file '{path}': {err}", 2) from None
    if "sparse_shapes" not in meta or GPU_ROWS not in raw:
        raise QgcError(f"error: '{path}' is not a qgc layers file (no qgc metadata or GPU "
                       "token rows)", 2)
    sparse = json.loads(meta["sparse_shapes"])
    out = {k: v for k, v in raw.items() if not k.endswith((".indices", ".values"))}
    for name, shape in sparse.items():
        dense = np.zeros(shape, dtype=np.float32)
        dense[tuple(raw[name + ".indices"])] = raw[name + ".values"]
        out[name] = dense
    return out, meta


def check_base(path: str | Path, meta: dict[str, str], base: Any) -> None:
    """A layers file fits a base model when it speaks this token protocol and
    was compiled for the base's layer shapes and vocabulary size; else an
    error naming the first mismatch."""
    version = meta.get("protocol_version")
    if version != str(PROTOCOL_VERSION):
        raise QgcError(f"error: '{path}' speaks token protocol version {version}; this qgc "
                       f"speaks version {PROTOCOL_VERSION} (recompile the kernel)", 2)
    target = json.loads(meta["base_config"])
    have = base.to_dict() if hasattr(base, "to_dict") else dict(base)
    for name in (*SHAPE_FIELDS, "vocab_size"):
        if target.get(name) != have.get(name):
            what = "vocabulary size" if name == "vocab_size" else name
            raise QgcError(f"error: '{path}' was compiled for a base with {what} "
                           f"{target.get(name)}; the base model has {have.get(name)} "
                           "(recompile with --base-config for this base)", 2)


def layer_states(arrays: dict[str, np.ndarray], n_layers: int) -> list[dict[str, np.ndarray]]:
    """The file's arrays as one state dict per layer (names inside the layer)."""
    states: list[dict[str, np.ndarray]] = [{} for _ in range(n_layers)]
    for name, array in arrays.items():
        if name.startswith("model.layers."):
            index, _, inner = name[len("model.layers."):].partition(".")
            states[int(index)][inner] = array
    return states
