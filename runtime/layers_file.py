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
the layers target, the GPU vocabulary (`Vocabulary.to_json`), the code
coordinates (what the merge needs for the LM head rows and the text mute) and
the token protocol version (`protocol.PROTOCOL_VERSION`). The file holds the
step layers and the readout; the text mute's marker layer is made at the merge
(`describe_layers` says the count one way everywhere).

`read_layers` checks a file completely before anything uses it (metadata
against `METADATA_SCHEMA`, every tensor's name, dtype, shape and index range):
a damaged file is a diagnostic, never an internal error. `check_base` compares
it with a base model's config before merging. `qgc build` from PTX goes through
the same `CompiledLayers` in memory, so both build paths merge one thing. The
file is written to a temporary name and renamed, with the mode the umask gives:
a failure leaves no partial file.

numpy only (no torch): compiling never needs torch.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
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


def layers_of(model: W.ModelOp, config: Any) -> CompiledLayers:
    """The `weights.model` for the base text `config` as a layers file holds it."""
    shape = {k: _value(v) for k, v in model.config.data.items()}
    base = config.to_dict() if hasattr(config, "to_dict") else dict(config)
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
        "code": json.dumps(code_coordinates(model)),
    }
    return CompiledLayers(tensors, meta, decode_metadata(meta))


def code_coordinates(model: W.ModelOp) -> list[int]:
    """The coordinates of the code every GPU token's row carries."""
    _, _, fields = model.encoding.data
    return list(dict(fields)["code"])


def write_layers(path: str | Path, model: W.ModelOp, config: Any) -> int:
    """Write the `weights.model` for the base text `config` (recorded in the
    metadata) atomically; returns the file's size in bytes."""
    return layers_of(model, config).write(path)


# ------------------------------------------------------------------ output files
def umask() -> int:
    mask = os.umask(0o22)   # the only way to read it is to set it
    os.umask(mask)
    return mask


def give_umask_mode(path: Path) -> None:
    """The mode a plain `open` or `mkdir` would have given `path` (mkstemp and
    mkdtemp make it private)."""
    path.chmod((0o777 if path.is_dir() else 0o666) & ~umask())


def check_output_file(path: str | Path) -> None:
    """`path` can be written: its directory exists and is writable, and it is
    not a directory (checked before compiling, so a mistyped -o costs nothing)."""
    path = Path(path)
    parent = path.parent
    if path.is_dir():
        raise QgcError(f"error: cannot write '{path}': it is a directory", 2)
    if not parent.is_dir():
        why = "is not a directory" if parent.exists() else "does not exist"
        raise QgcError(f"error: cannot write '{path}': the directory '{parent}' {why}", 2)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise QgcError(f"error: cannot write '{path}': the directory '{parent}' is not "
                       "writable", 2)


def write_atomically(path: str | Path, write) -> None:
    """`write(tmp)` to a temporary file beside `path`, then renamed over it;
    an error names `path`, never the temporary name, and leaves nothing."""
    path = Path(path)
    check_output_file(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        give_umask_mode(Path(tmp))
        os.replace(tmp, path)
    except OSError as err:
        raise QgcError(f"error: cannot write '{path}': {err.strerror or err}", 2) from None
    finally:
        Path(tmp).unlink(missing_ok=True)


# ------------------------------------------------------------------ the contents
@dataclass
class CompiledLayers:
    """A layers file's contents, checked: the tensors as stored (dense, or
    `NAME.indices`/`NAME.values`), the metadata as written (strings) and
    decoded (`fields`). Layers are made dense one at a time (`state`): a
    2B-shaped layer is 58.8 M weights."""

    tensors: dict[str, np.ndarray]
    meta: dict[str, str]
    fields: dict[str, Any]

    @property
    def count(self) -> int:
        """Layers held: the step layers and the readout."""
        return self.fields["layers"]

    @property
    def step_layers(self) -> int:
        return self.count - 1

    @property
    def code(self) -> list[int]:
        return self.fields["code"]

    @property
    def gpu_rows(self) -> np.ndarray:
        return self.tensors[GPU_ROWS]

    @property
    def vocabulary(self) -> P.Vocabulary:
        return P.Vocabulary.from_json(self.fields["gpu_vocabulary"])

    @property
    def machine(self) -> dict[str, Any]:
        return self.fields["machine"]

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return param_shapes(SimpleNamespace(**self.fields["base_config"]))

    def state(self, index: int) -> dict[str, np.ndarray]:
        """Layer `index`'s parameters, dense (names inside the decoder layer),
        new arrays: the caller may edit them."""
        out = {}
        for name, shape in self.shapes().items():
            full = f"model.layers.{index}.{name}"
            if full in self.tensors:
                out[name] = self.tensors[full].copy()
            else:
                dense = np.zeros(shape, dtype=np.float32)
                dense[tuple(self.tensors[full + ".indices"])] = self.tensors[full + ".values"]
                out[name] = dense
        return out

    def written(self, names: tuple[str, ...]) -> set[int]:
        """Coordinates the parameters `names` (the layers' output projections)
        write: rows with a non-zero weight, in any layer."""
        rows: set[int] = set()
        for index in range(self.count):
            for name in names:
                full = f"model.layers.{index}.{name}"
                if full in self.tensors:
                    rows.update(np.flatnonzero(self.tensors[full].any(axis=1)).tolist())
                else:
                    values = self.tensors[full + ".values"]
                    rows.update(self.tensors[full + ".indices"][0][values != 0].tolist())
        return rows

    def write(self, path: str | Path) -> int:
        """Write the file atomically; returns its size in bytes."""
        from safetensors.numpy import save_file
        write_atomically(path, lambda tmp: save_file(self.tensors, tmp, metadata=self.meta))
        return Path(path).stat().st_size


# ------------------------------------------------------------------ reading
class NotLayersFile(Exception):
    """Why a file is not a qgc layers file."""


#: Metadata fields holding JSON text (decoded before the schema is checked).
JSON_FIELDS = ("machine", "base_config", "gpu_vocabulary", "sparse_shapes", "code")
_COUNT = {"type": "integer", "minimum": 0, "maximum": 1 << 30}
_SIZE = {"type": "integer", "minimum": 1, "maximum": 1 << 20}
_SHAPE = {"type": "array", "items": _SIZE, "minItems": 1, "maxItems": 4}
#: The decoded metadata of a layers file.
METADATA_SCHEMA = {
    "type": "object",
    "required": ["qgc_version", "protocol_version", "kernel", "layers", *JSON_FIELDS],
    "properties": {
        "qgc_version": {"type": "string"},
        "kernel": {"type": "string", "minLength": 1},
        "layers": {"type": "integer", "minimum": 1, "maximum": 4096},
        "machine": {"type": "object", "required": ["mem_words", "fingerprint"],
                    "properties": {"mem_words": _SIZE, "fingerprint": {"type": "string"}}},
        "base_config": {"type": "object", "required": [*SHAPE_FIELDS, "vocab_size"],
                        "properties": {**{k: _SIZE for k in SHAPE_FIELDS},
                                       "vocab_size": {**_SIZE, "maximum": 1 << 24}}},
        "gpu_vocabulary": {
            "type": "object", "required": ["records", "blocks", "warps", "ports"],
            "properties": {"records": {**_COUNT, "maximum": 1 << 16}, "blocks": _COUNT,
                           "warps": {**_SIZE, "maximum": 1 << 16},
                           "sites": {**_COUNT, "maximum": 1 << 16},
                           "ports": {"type": "array", "items": {"type": "array",
                                                                "items": _COUNT}}}},
        "sparse_shapes": {"type": "object", "additionalProperties": _SHAPE},
        "code": {"type": "array", "items": _COUNT, "minItems": 1, "uniqueItems": True},
    },
}


def read_layers(path: str | Path) -> CompiledLayers:
    """A layers file, checked completely (metadata, every tensor's name, dtype,
    shape and index range); else `error: 'F' is not a qgc layers file: why`."""
    try:
        meta, tensors = _read_safetensors(path)
        return checked_layers(tensors, meta)
    except NotLayersFile as why:
        raise QgcError(f"error: '{path}' is not a qgc layers file: {why}", 2) from None


def _read_safetensors(path: str | Path) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    from safetensors import SafetensorError, safe_open
    if Path(path).is_dir() or not Path(path).exists():
        raise NotLayersFile("no such file" if not Path(path).exists() else "it is a directory")
    try:
        with safe_open(str(path), framework="np") as f:
            return f.metadata() or {}, {k: f.get_tensor(k) for k in f.keys()}
    except OSError as err:
        raise NotLayersFile(err.strerror or str(err)) from None
    # the parser's verdicts on damaged bytes (header, dtype, offsets) come as these
    except (SafetensorError, ValueError, TypeError, OverflowError) as err:
        raise NotLayersFile(f"not a safetensors file ({err})") from None


def checked_layers(tensors: dict[str, np.ndarray], meta: dict[str, str]) -> CompiledLayers:
    """The contents, once every check passes (else `NotLayersFile`)."""
    if "protocol_version" not in meta:
        raise NotLayersFile("no qgc metadata")
    if meta["protocol_version"] != str(P.PROTOCOL_VERSION):
        raise NotLayersFile(f"it speaks token protocol version {meta['protocol_version']}; "
                            f"this qgc speaks version {P.PROTOCOL_VERSION} (recompile the kernel)")
    fields = decode_metadata(meta)
    layers = CompiledLayers(tensors, meta, fields)
    check_tensors(layers)
    return layers


def decode_metadata(meta: dict[str, str]) -> dict[str, Any]:
    import jsonschema
    fields: dict[str, Any] = dict(meta)
    for name in JSON_FIELDS:
        if name in fields:
            try:
                fields[name] = json.loads(fields[name])
            except ValueError as err:
                raise NotLayersFile(f"metadata '{name}' is not JSON ({err})") from None
    if isinstance(fields.get("layers"), str) and fields["layers"].isdigit():
        fields["layers"] = int(fields["layers"])
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(METADATA_SCHEMA).iter_errors(fields))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "metadata"
        raise NotLayersFile(f"metadata '{where}': {_short(error.message)}")
    try:
        vocab = P.Vocabulary.from_json(fields["gpu_vocabulary"])
        size = vocab.size
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise NotLayersFile(f"metadata 'gpu_vocabulary': {err}") from None
    if size < 1:
        raise NotLayersFile("metadata 'gpu_vocabulary': no GPU tokens")
    hidden = fields["base_config"]["hidden_size"]
    if max(fields["code"]) >= hidden:
        raise NotLayersFile(f"metadata 'code': a coordinate beyond the hidden size {hidden}")
    return fields


def _short(message: str, limit: int = 120) -> str:
    return message if len(message) <= limit else message[:limit] + "..."


def check_tensors(layers: CompiledLayers) -> None:
    """Every layer's every parameter, and the GPU rows, present with its
    dtype, shape and (sparse) index range; nothing else."""
    tensors, sparse = layers.tensors, layers.fields["sparse_shapes"]
    expected = {GPU_ROWS}
    hidden = layers.fields["base_config"]["hidden_size"]
    _check_array(GPU_ROWS, tensors.get(GPU_ROWS), np.float32,
                 (layers.vocabulary.size, hidden))
    for index in range(layers.count):
        for name, shape in layers.shapes().items():
            full = f"model.layers.{index}.{name}"
            if full in sparse:
                expected.update((full + ".indices", full + ".values"))
                _check_sparse(full, tensors, tuple(sparse[full]), shape)
            else:
                expected.add(full)
                _check_array(full, tensors.get(full), np.float32, shape)
    extra = sorted(set(tensors) - expected)
    if extra:
        raise NotLayersFile(f"unexpected tensor '{extra[0]}'")


def _check_array(name: str, array: np.ndarray | None, dtype, shape: tuple[int, ...]) -> None:
    if array is None:
        raise NotLayersFile(f"no tensor '{name}'")
    if array.dtype != dtype or array.shape != tuple(shape):
        raise NotLayersFile(f"tensor '{name}' is {array.dtype}{list(array.shape)}, "
                            f"expected {np.dtype(dtype)}{list(shape)}")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise NotLayersFile(f"tensor '{name}' holds a NaN or infinity")


def _check_sparse(name: str, tensors: dict[str, np.ndarray], stored: tuple[int, ...],
                  shape: tuple[int, ...]) -> None:
    if stored != tuple(shape):
        raise NotLayersFile(f"'{name}' has shape {list(stored)} in the metadata, expected "
                            f"{list(shape)}")
    values = tensors.get(name + ".values")
    count = values.shape[0] if values is not None and values.ndim == 1 else 0
    _check_array(name + ".values", values, np.float32, (count,))
    indices = tensors.get(name + ".indices")
    _check_array(name + ".indices", indices, np.int64, (len(shape), count))
    if count and ((indices < 0).any() or (indices.max(axis=1) >= np.array(shape)).any()):
        raise NotLayersFile(f"tensor '{name}.indices' reaches outside the shape {list(shape)}")


def check_base(path: str | Path, layers: CompiledLayers, base: Any) -> None:
    """A layers file fits a base model when it was compiled for the base's
    layer shapes and vocabulary size (its protocol version `read_layers`
    checked); else an error naming the first mismatch."""
    target = layers.fields["base_config"]
    have = base.to_dict() if hasattr(base, "to_dict") else dict(base)
    for name in (*SHAPE_FIELDS, "vocab_size"):
        if target.get(name) != have.get(name):
            what = "vocabulary size" if name == "vocab_size" else name
            raise QgcError(f"error: '{path}' was compiled for a base with {what} "
                           f"{target.get(name)}; the base model has {have.get(name)} "
                           "(recompile with --base-config for this base)", 2)
