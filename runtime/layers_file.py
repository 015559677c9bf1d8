"""layers.safetensors: the compiled layers, compact, under Qwen3.5 names.

Tensor names are those of the decoder layers they fill
(`model.layers.{i}.linear_attn.in_proj_qkv.weight`, `...mlp.gate_proj.weight`).
A parameter with few entries is stored dense under its own name; a large,
sparse one (the projections) as `NAME.indices` (int64, one row per dimension)
and `NAME.values` (float32), its shape in the metadata: a compiled layer holds
a few thousand non-zeros of tens of millions of weights. `__metadata__` holds
the qgc version, the kernel, the machine parameters, the base text config the
layers target, the GPU vocabulary and the token protocol version. The file is
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
from qgc.runtime.tensor_codegen import SparseLayer, param_shapes

PROTOCOL_VERSION = 1
DENSE_LIMIT = 1 << 16


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


def write_layers(path: str | Path, layers: list[SparseLayer], config: Any, kernel: str,
                 machine: dict[str, Any], vocab: P.Vocabulary) -> int:
    """Write the file atomically; returns its size in bytes."""
    from safetensors.numpy import save_file
    tensors, sparse = layer_tensors(layers, config)
    meta = {
        "qgc_version": __version__, "protocol_version": str(PROTOCOL_VERSION),
        "kernel": kernel, "machine": json.dumps(machine, sort_keys=True),
        "base_config": json.dumps(config.to_dict() if hasattr(config, "to_dict") else config,
                                  sort_keys=True, default=str),
        "gpu_vocabulary": json.dumps({"records": vocab.records, "blocks": vocab.blocks,
                                      "warps": vocab.warps, "size": vocab.size}),
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
    """Dense arrays under the Qwen3.5 names, and the metadata."""
    from safetensors import safe_open
    with safe_open(str(path), framework="np") as f:
        meta = f.metadata()
        raw = {k: f.get_tensor(k) for k in f.keys()}
    sparse = json.loads(meta["sparse_shapes"])
    out = {k: v for k, v in raw.items() if not k.endswith((".indices", ".values"))}
    for name, shape in sparse.items():
        dense = np.zeros(shape, dtype=np.float32)
        dense[tuple(raw[name + ".indices"])] = raw[name + ".values"]
        out[name] = dense
    return out, meta
