"""layers.safetensors: a `weights.model` (dialects/weights.py), compact,
under Qwen3.5 names.

Tensor names are those of the decoder layers they fill
(`model.layers.{i}.linear_attn.in_proj_qkv.weight`, `...mlp.gate_proj.weight`).
A parameter with few entries is stored dense under its own name; a large,
sparse one (the projections) as `NAME.indices` (int64, one row per dimension)
and `NAME.values` (float32), its shape in the metadata: a compiled layer holds
a few thousand non-zeros of tens of millions of weights. The GPU tokens' embedding rows are
`qgc.gpu_rows` (float32, one row per token of the GPU vocabulary). `__metadata__`
holds the qgc version, the kernel, the machine parameters, the base text config
the layers target, the GPU vocabulary (`Vocabulary.to_json`) and the token
protocol version (`protocol.PROTOCOL_VERSION`);
`check_base` compares them with a base model's config before merging. The file is
written to a temporary name and renamed: a failure leaves no partial file.

numpy only (no torch): compiling never needs torch.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from xdsl.dialects import builtin

from qgc import __version__
from qgc import protocol as P
from qgc.diagnostics import QgcError
from qgc.dialects import weights as W
from qgc.dialects.weights import SHAPE_FIELDS, param_shapes

DENSE_LIMIT = 1 << 16
GPU_ROWS = "qgc.gpu_rows"


def layer_tensors(layers: list[W.LayerOp], shapes: dict[str, tuple[int, ...]]
                  ) -> tuple[dict[str, np.ndarray], dict[str, list[int]]]:
    tensors: dict[str, np.ndarray] = {}
    sparse: dict[str, list[int]] = {}
    for layer in layers:
        tables = layer.weights.tables()
        for name, shape in shapes.items():
            full = f"model.layers.{layer.layer_index}.{name}"
            table = tables.get(name, {})
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


def gpu_rows(model: W.ModelOp) -> np.ndarray:
    """Every GPU token's embedding row, in token-id order."""
    vocab = P.Vocabulary.from_attr(model.vocabulary)
    return np.array([model.encoding.encode(vocab.inputs(t)) for t in vocab.tokens()],
                    dtype=np.float32)


def _value(attr: Any) -> int | str | None:
    """An integer, string or none attribute of `weights.model` as JSON."""
    if isinstance(attr, builtin.NoneAttr):
        return None
    return attr.data if isinstance(attr, builtin.StringAttr) else attr.value.data


def write_layers(path: str | Path, model: W.ModelOp, config: Any) -> int:
    """Write the `weights.model` for the base text `config` (recorded in the
    metadata) atomically; returns the file's size in bytes."""
    from safetensors.numpy import save_file
    shape = {k: _value(v) for k, v in model.config.data.items()}
    base = config.to_dict() if hasattr(config, "to_dict") else config
    if any(shape[k] != base.get(k) for k in SHAPE_FIELDS):
        raise QgcError(f"error: the layers of '{model.kernel_name}' were made for another base "
                       "config", 2)
    layers = model.layers()
    tensors, sparse = layer_tensors(layers, param_shapes(SimpleNamespace(**shape)))
    tensors[GPU_ROWS] = np.ascontiguousarray(gpu_rows(model), dtype=np.float32)
    machine = {k: _value(v) for k, v in model.machine.data.items()}
    vocab = P.Vocabulary.from_attr(model.vocabulary)
    meta = {
        "qgc_version": __version__, "protocol_version": str(P.PROTOCOL_VERSION),
        "kernel": model.kernel_name, "machine": json.dumps(machine, sort_keys=True),
        "base_config": json.dumps(base, sort_keys=True, default=str),
        "gpu_vocabulary": json.dumps(vocab.to_json()),
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
    if version != str(P.PROTOCOL_VERSION):
        raise QgcError(f"error: '{path}' speaks token protocol version {version}; this qgc "
                       f"speaks version {P.PROTOCOL_VERSION} (recompile the kernel)", 2)
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
