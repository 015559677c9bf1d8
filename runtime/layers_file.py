"""layers.safetensors: a `weights.model` (dialects/weights.py), compact,
under Qwen3.5 names.

The file stores what is compiled, nothing that can be derived. Tensor names
are those of the decoder layers they fill
(`model.layers.{i}.linear_attn.in_proj_qkv.weight`, `...mlp.gate_proj.weight`).
A parameter is stored dense under its own name when that is the smaller form
(the norms' weights), else sparse as `NAME.indices` (its non-zeros' flat,
row-major positions: int32, int64 past 2^31 entries) and `NAME.values`
(float32), its shape in the metadata: a compiled layer holds a few thousand
non-zeros of tens of millions of weights. The GPU tokens' embedding rows are
not stored: the metadata holds their encoding (`encoding`: the coordinates
every row sets and each input's coordinates, `runtime/gpu_rows.py`), and
`CompiledLayers.gpu_rows` makes them when the merge needs them. `__metadata__`
also holds the layers-file format (`LAYERS_FORMAT`), the qgc version, the
kernel, the machine parameters, the base text config the layers target, the
GPU vocabulary (`Vocabulary.to_json`) and the token protocol version
(`protocol.PROTOCOL_VERSION`). The file holds the step layers and the readout;
the text mute's marker layer is made at the merge (`describe_layers` says the
count one way everywhere).

`read_layers` checks a file completely before anything uses it (format,
metadata against `METADATA_SCHEMA`, every tensor's name, dtype, shape and
index range, the encoding against the vocabulary): a damaged file is a
diagnostic, never an internal error; a file of an older format is refused
with "recompile". `check_base` compares it with a base model's config before
merging. `qgc build` from PTX goes through the same `CompiledLayers` in
memory, so both build paths merge one thing. The file is written to a
temporary name and renamed, with the mode the umask gives: a failure leaves
no partial file.

numpy only (no torch): compiling never needs torch.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from functools import cached_property
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
from qgc.runtime.gpu_rows import RowEncoding

#: The layers-file format this qgc writes and reads (2: sparse weights by
#: flat index, the GPU rows as their encoding; 1, unnamed, stored them dense).
LAYERS_FORMAT = "2"
#: Bytes per stored entry: a dense weight; a sparse non-zero (index, value).
DENSE_BYTES, SPARSE_BYTES = 4, 8


def index_dtype(shape: tuple[int, ...]) -> np.dtype:
    """The dtype of a sparse parameter's flat indices."""
    return np.dtype(np.int32 if int(np.prod(shape)) < 1 << 31 else np.int64)


def stored_sparse(nonzeros: int, shape: tuple[int, ...]) -> bool:
    """Whether a parameter with this many non-zeros is smaller stored sparse."""
    return nonzeros * SPARSE_BYTES < int(np.prod(shape)) * DENSE_BYTES


def layer_tensors(layers: list[W.LayerOp], shapes: dict[str, tuple[int, ...]]
                  ) -> tuple[dict[str, np.ndarray], dict[str, list[int]]]:
    tensors: dict[str, np.ndarray] = {}
    sparse: dict[str, list[int]] = {}
    for layer in layers:
        tables = layer.weights.tables()
        for name, shape in shapes.items():
            full = f"model.layers.{layer.layer_index}.{name}"
            table = tables.get(name, {})
            if not stored_sparse(len(table), shape):
                dense = np.zeros(shape, dtype=np.float32)
                for idx, v in table.items():
                    dense[idx] = v
                tensors[full] = dense
            else:
                keys = np.array(list(table), dtype=np.int64).reshape(len(table), len(shape))
                flat = np.ravel_multi_index(tuple(keys.T), shape) if len(table) else keys[:, 0]
                tensors[full + ".indices"] = flat.astype(index_dtype(shape))
                tensors[full + ".values"] = np.fromiter(table.values(), np.float32, len(table))
                sparse[full] = list(shape)
    return tensors, sparse


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
    machine = {k: _value(v) for k, v in model.machine.data.items()}
    vocab = P.Vocabulary.from_attr(model.vocabulary)
    meta = {
        "layers_format": LAYERS_FORMAT, "qgc_version": __version__, "protocol_version": str(P.PROTOCOL_VERSION),
        "kernel": model.kernel_name, "machine": json.dumps(machine, sort_keys=True),
        "base_config": json.dumps(base, sort_keys=True, default=str),
        "gpu_vocabulary": json.dumps(vocab.to_json()),
        "layers": str(len(layers)), "sparse_shapes": json.dumps(sparse, sort_keys=True),
        "encoding": json.dumps(RowEncoding.of(model.encoding).to_json()),
    }
    return CompiledLayers(tensors, meta, decode_metadata(meta))


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

    @cached_property
    def encoding(self) -> RowEncoding:
        return RowEncoding.from_json(self.fields["encoding"])

    @property
    def code(self) -> list[int]:
        """The coordinates of the code every GPU token's row carries."""
        return self.encoding.code

    @cached_property
    def gpu_rows(self) -> np.ndarray:
        """Every GPU token's embedding row (float32, in token-id order), made
        from the encoding: the file does not store them."""
        return self.encoding.rows(self.vocabulary)

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
        return {name: self.param(index, name) for name in self.shapes()}

    def param(self, index: int, name: str) -> np.ndarray:
        """Parameter `name` of layer `index`, dense (a new array)."""
        full = f"model.layers.{index}.{name}"
        if full in self.tensors:
            return self.tensors[full].copy()
        dense = np.zeros(self.shapes()[name], dtype=np.float32)
        dense.reshape(-1)[self.tensors[full + ".indices"]] = self.tensors[full + ".values"]
        return dense

    def nonzeros(self, index: int, name: str) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """Parameter `name` of layer `index` as its non-zeros: their indices
        along each axis and their values (without making it dense)."""
        full = f"model.layers.{index}.{name}"
        if full in self.tensors:
            where = np.nonzero(self.tensors[full])
            return where, self.tensors[full][where]
        values = self.tensors[full + ".values"]
        keep = values != 0
        return (np.unravel_index(self.tensors[full + ".indices"][keep], self.shapes()[name]),
                values[keep])

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
                    flat = self.tensors[full + ".indices"][values != 0]
                    rows.update(np.unravel_index(flat, self.shapes()[name])[0].tolist())
        return rows

    def write(self, path: str | Path) -> int:
        """Write the file atomically; returns its size in bytes. The same
        layers give the same bytes (`reproducible`)."""
        from safetensors.numpy import save
        blob = reproducible(save(self.tensors, metadata=self.meta))
        write_atomically(path, lambda tmp: Path(tmp).write_bytes(blob))
        return len(blob)


def reproducible(blob: bytes) -> bytes:
    """A safetensors file with its `__metadata__` in sorted key order: the
    library writes it from a hash map, in an order that changes from run to
    run, which would make two compiles of one kernel differ. The tensors'
    offsets are relative to the end of the header, so the data is kept as is."""
    size = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + size])
    header["__metadata__"] = dict(sorted(header.get("__metadata__", {}).items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)          # the data starts 8-byte aligned
    return len(text).to_bytes(8, "little") + text + blob[8 + size:]


# ------------------------------------------------------------------ reading
class NotLayersFile(Exception):
    """Why a file is not a qgc layers file."""


#: Metadata fields holding JSON text (decoded before the schema is checked).
JSON_FIELDS = ("machine", "base_config", "gpu_vocabulary", "sparse_shapes", "encoding")
#: The most GPU tokens a file may name: their rows are made at the merge, so a
#: damaged vocabulary must not ask for more (2^20 rows at hidden 2048: 8 GB).
MAX_GPU_TOKENS = 1 << 20
_COUNT = {"type": "integer", "minimum": 0, "maximum": 1 << 30}
_SIZE = {"type": "integer", "minimum": 1, "maximum": 1 << 20}
_SHAPE = {"type": "array", "items": _SIZE, "minItems": 1, "maxItems": 4}
_COORDS = {"type": "array", "items": _COUNT, "uniqueItems": True}
_FLOAT32 = {"type": "number", "minimum": -1e38, "maximum": 1e38}   # NaN: decode_metadata


def _pair(first: dict, second: dict) -> dict:
    return {"type": "array", "prefixItems": [first, second], "minItems": 2, "maxItems": 2}


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
        "encoding": {
            "type": "object", "required": ["hidden", "set", "inputs"],
            "properties": {"hidden": _SIZE, "set": {"type": "array", "items": _pair(_COUNT, _FLOAT32)},
                           "inputs": {"type": "array",
                                      "items": _pair({"type": "string"}, _COORDS)}}},
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
    if meta.get("layers_format") != LAYERS_FORMAT:
        raise NotLayersFile(f"it is in layers format {meta.get('layers_format', '1')}, written by "
                            f"another qgc; this one reads format {LAYERS_FORMAT} (recompile the "
                            "kernel)")
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
    if not 1 <= size <= MAX_GPU_TOKENS:
        raise NotLayersFile(f"metadata 'gpu_vocabulary': {size:,} GPU tokens (1 to "
                            f"{MAX_GPU_TOKENS:,} are merged)")
    check_encoding(fields["encoding"], fields["base_config"]["hidden_size"], vocab)
    return fields


def check_encoding(encoding: dict[str, Any], hidden: int, vocab: P.Vocabulary) -> None:
    """The rows' encoding fits the base's hidden size and the vocabulary's inputs."""
    def bad(why: str) -> NotLayersFile:
        return NotLayersFile(f"metadata 'encoding': {why}")
    if encoding["hidden"] != hidden:
        raise bad(f"hidden size {encoding['hidden']}, the base config's is {hidden}")
    rows = RowEncoding.from_json(encoding)
    coords = [c for c, _ in rows.constant] + [c for _, cs in rows.inputs for c in cs]
    if any(c >= hidden for c in coords):
        raise bad(f"a coordinate beyond the hidden size {hidden}")
    if not np.isfinite([v for _, v in rows.constant]).all():
        raise bad("a NaN")
    if not dict(rows.inputs).get("code"):
        raise bad("no code coordinates")
    why = rows.mismatch(vocab)
    if why is not None:
        raise bad(why)


def _short(message: str, limit: int = 120) -> str:
    return message if len(message) <= limit else message[:limit] + "..."


def check_tensors(layers: CompiledLayers) -> None:
    """Every layer's every parameter present with its dtype, shape and
    (sparse) index range; nothing else."""
    tensors, sparse = layers.tensors, layers.fields["sparse_shapes"]
    expected: set[str] = set()
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
    _check_array(name + ".indices", indices, index_dtype(shape), (count,))
    if count and (indices.min() < 0 or indices.max() >= int(np.prod(shape))):
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
