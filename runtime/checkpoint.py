"""`qgc build`: the merged model as a stock checkpoint directory.

    DIR/config.json, model.safetensors, generation_config.json   (save_pretrained)
    DIR/tokenizer files   where the base has a tokenizer: its vocabulary, the
                          rows no tokenizer id maps to named, the GPU tokens added;
                          on a stand-in, a `tokenizer.json` whose only content is
                          the refusal `AutoTokenizer` shows (no text vocabulary)
    DIR/qgc.json          what the host needs beside the kernel's PTX: the GPU
                          vocabulary, the machine, the base vocabulary size, the
                          layer counts (`layer_counts`), the base and the dtype
    DIR/README.md         the model card (`model_card`)

Stock `AutoModelForCausalLM.from_pretrained(DIR)` loads it, no custom code;
its generation config is greedy and stops at a step's `END` or `TRAP`, so
`generate` runs one step per call. The host (`qgc run K.ptx --model DIR`)
compiles the kernel to the machine level again for the memory layout and
checks that it is the kernel DIR was built from. The directory is written
under a temporary name and renamed, with the modes the umask gives: a failure
leaves nothing half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from qgc import __version__
from qgc import protocol as P
from qgc.diagnostics import QgcError
from qgc.protocol import PROTOCOL_VERSION, kernel_fingerprint
from qgc.runtime.layers_file import CompiledLayers, give_umask_mode

QGC_FILE = "qgc.json"


def token_string(t: P.Token) -> str:
    """A GPU token's spelling in the extended tokenizer."""
    return f"<|qgc:{t.spelled()}|>"


def layer_counts(step: int, text_mute: bool) -> dict[str, int]:
    """The compiled layers qgc puts in front of the base, by kind: the step
    program's layers, the readout, and the text mute's marker layer (made at
    the merge where a coordinate is free; `runtime/text_mute.py`)."""
    return {"step": step, "readout": 1, "text_mute": int(text_mute)}


def describe_layers(step: int, text_mute: bool | None) -> str:
    """The layer count as every message says it: `27 compiled layers (25 step +
    1 readout + 1 text mute)`; `text_mute` None: before the merge (a layers
    file, --stats), which adds the marker layer where a coordinate is free."""
    if text_mute is None:
        return (f"{step + 1} compiled layers ({step} step + 1 readout; the merge adds 1 text "
                "mute layer)")
    counts = layer_counts(step, text_mute)
    parts = [f"{n} {kind.replace('_', ' ')}" for kind, n in counts.items() if n]
    return f"{sum(counts.values())} compiled layers ({' + '.join(parts)})"


def build_info(layers: CompiledLayers, base_vocab: int, text_mute: bool, *, base: str,
               dtype: str, source: str) -> dict:
    """qgc.json: what the host needs beside the kernel's PTX, and what the
    model card says. `source`: the file built from (PTX or layers file), the
    only field the two build paths give differently."""
    counts = layer_counts(layers.step_layers, text_mute)
    return {"qgc_version": __version__, "protocol_version": PROTOCOL_VERSION,
            "kernel": layers.fields["kernel"], "fingerprint": layers.machine["fingerprint"],
            "mem_words": layers.machine["mem_words"], "base_vocab": base_vocab,
            "compiled_layers": sum(counts.values()), "layers": counts,
            "gpu_vocabulary": layers.vocabulary.to_json(), "base": base, "dtype": dtype,
            "source": source}


def generation_config(model, vocab: P.Vocabulary, base_vocab: int):
    """Greedy; stops at the base's own eos tokens and at every step end."""
    from transformers import GenerationConfig

    from qgc.runtime.model_engine import stop_ids
    own = model.generation_config.eos_token_id if model.generation_config else None
    own = [] if own is None else [own] if isinstance(own, int) else list(own)
    stops = stop_ids(vocab, base_vocab)
    return GenerationConfig(do_sample=False, eos_token_id=list(dict.fromkeys(own + stops)),
                            pad_token_id=model.config.pad_token_id or stops[0])


def check_output(out: str | Path) -> None:
    """`out` may be written: absent, empty, or an earlier qgc build."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir())
                                              and not (out / QGC_FILE).exists())):
        raise QgcError(f"error: '{out}' exists and is not a qgc build; not overwriting it", 2)


def save_checkpoint(model, vocab: P.Vocabulary, info: dict, out: str | Path,
                    tokenizer_from: str | Path | None = None) -> None:
    out = Path(out)
    check_output(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as err:
        raise QgcError(f"error: cannot write '{out}': {err.strerror or err}", 2) from None
    try:
        model.generation_config = generation_config(model, vocab, info["base_vocab"])
        model.save_pretrained(tmp)
        if tokenizer_from is not None and has_tokenizer(Path(tokenizer_from)):
            extended_tokenizer(tokenizer_from, vocab, info["base_vocab"]).save_pretrained(tmp)
        else:
            (tmp / "tokenizer.json").write_text(json.dumps(NO_TOKENIZER) + "\n")
        (tmp / QGC_FILE).write_text(json.dumps(info, indent=1) + "\n")
        (tmp / "README.md").write_text(model_card(info, out.name))
        for path in (tmp, *tmp.rglob("*")):
            give_umask_mode(path)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise QgcError(f"error: cannot write '{out}': {err.strerror or err}", 2) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


#: A stand-in build's `tokenizer.json`: `AutoTokenizer.from_pretrained` fails
#: showing its version (tokenizers: "Unknown tokenizer version '...'"), where
#: without a tokenizer file it would make an empty one-token tokenizer.
NO_TOKENIZER = {
    "version": "none: qgc built this model on a stand-in base (seeded random weights), which "
               "has no text tokenizer; its inputs are GPU token ids (qgc.prompt_ids, see "
               "README.md)",
    "added_tokens": []}


def has_tokenizer(path: Path) -> bool:
    """A tokenizer's files are there (a stand-in build's refusal is none)."""
    if (path / "tokenizer_config.json").exists():
        return True
    try:
        return json.loads((path / "tokenizer.json").read_text()) != NO_TOKENIZER
    except (OSError, ValueError):
        return (path / "tokenizer.json").exists()


def extended_tokenizer(path: str | Path, vocab: P.Vocabulary, base_vocab: int):
    """The base tokenizer, ids up to the base's vocabulary size named (the
    rows no tokenizer id maps to get `<|qgc:unused_N|>`), then one special
    token per GPU token, in GPU-id order: id `base_vocab + id_of(t)`."""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    unused = [f"<|qgc:unused_{i}|>" for i in range(len(tokenizer), base_vocab)]
    gpu = [token_string(t) for t in vocab.tokens()]
    tokenizer.add_tokens(unused + gpu, special_tokens=True)
    ids = tokenizer.convert_tokens_to_ids([gpu[0], gpu[-1]])
    if ids != [base_vocab, base_vocab + vocab.size - 1]:
        raise QgcError(f"error: the base tokenizer at '{path}' has {len(tokenizer)} ids, more "
                       f"than the model's {base_vocab} rows; cannot add the GPU tokens", 2)
    return tokenizer


#: qgc.json, as far as the host reads it.
INFO_SCHEMA = {
    "type": "object",
    "required": ["protocol_version", "kernel", "fingerprint", "mem_words", "base_vocab",
                 "compiled_layers", "gpu_vocabulary"],
    "properties": {
        "protocol_version": {"type": "integer"},
        "kernel": {"type": "string"}, "fingerprint": {"type": "string"},
        "mem_words": {"type": "integer", "minimum": 1, "maximum": 1 << 20},
        "base_vocab": {"type": "integer", "minimum": 1, "maximum": 1 << 24},
        "compiled_layers": {"type": "integer", "minimum": 1},
        "gpu_vocabulary": {"type": "object",
                           "required": ["records", "blocks", "warps", "ports"]},
    },
}


def not_a_build(directory: str | Path, why: str) -> QgcError:
    return QgcError(f"error: '{directory}' is not a qgc build: {why}", 2)


def read_info(directory: str | Path) -> dict[str, Any]:
    import jsonschema
    path = Path(directory) / QGC_FILE
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise not_a_build(directory, f"cannot read {QGC_FILE} ({err})") from None
    if isinstance(info, dict) and info.get("protocol_version") not in (None, PROTOCOL_VERSION):
        raise QgcError(f"error: '{directory}' speaks token protocol version "
                       f"{info.get('protocol_version')}; this qgc speaks {PROTOCOL_VERSION} "
                       "(rebuild it)", 2)
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(INFO_SCHEMA).iter_errors(info))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "the top level"
        raise not_a_build(directory, f"{QGC_FILE} at {where}: {error.message[:120]}")
    try:
        if P.Vocabulary.from_json(info["gpu_vocabulary"]).size < 1:
            raise ValueError("no GPU tokens")
    except (KeyError, TypeError, ValueError) as err:
        raise not_a_build(directory, f"{QGC_FILE}: gpu_vocabulary: {err}") from None
    return info


def check_kernel(directory: str | Path, info: dict, kernel, vocab: P.Vocabulary) -> None:
    """The host's kernel is the one DIR was built from."""
    if kernel_fingerprint(kernel) != info["fingerprint"] or \
            vocab.to_json() != info["gpu_vocabulary"]:
        raise QgcError(f"error: '{directory}' was built from kernel '{info['kernel']}' "
                       f"(fingerprint {info['fingerprint']}), not from this one "
                       f"('{kernel.kernel_name}', {kernel_fingerprint(kernel)})", 2)


def load_checkpoint(directory: str | Path, dtype=None, info: dict | None = None):
    """The stock model (in `dtype`, else the checkpoint's own), its qgc.json
    (`info`, where the caller has read it already) and its GPU vocabulary."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM
    info = info or read_info(directory)
    try:
        model = AutoModelForCausalLM.from_pretrained(directory, local_files_only=True,
                                                     dtype=dtype or "auto")
    # what transformers and safetensors raise on a damaged config or weights file
    except (OSError, ValueError, TypeError, KeyError, RuntimeError, SafetensorError) as err:
        raise not_a_build(directory, f"cannot load the model ({_first_line(err)})") from None
    return model.eval(), info, P.Vocabulary.from_json(info["gpu_vocabulary"])


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else type(err).__name__


def model_card(info: dict, name: str) -> str:
    """README.md of a build: what it is and how to run it."""
    vocab = info["gpu_vocabulary"]
    counts = info["layers"]
    return MODEL_CARD.format(
        name=name, **{k: info[k] for k in ("kernel", "fingerprint", "qgc_version", "base",
                                           "dtype", "source", "base_vocab",
                                           "protocol_version")},
        layers=describe_layers(counts["step"], bool(counts["text_mute"])),
        gpu_tokens=vocab["size"],
        tokenizer=("the base's, extended with one special token per GPU token"
                   if not info["base"].startswith("stand-in") else
                   "none: the stand-in has no text vocabulary, so `AutoTokenizer` refuses "
                   "this directory (\"Unknown tokenizer version 'none: ...'\"); its inputs "
                   "are GPU token ids from `qgc.prompt_ids`"))


MODEL_CARD = """---
library_name: transformers
pipeline_tag: text-generation
tags:
- qgc
- compiled-kernel
- qwen3_5
---

# {name}: the CUDA kernel `{kernel}` as Qwen3.5 decoder layers

A stock `Qwen3_5ForCausalLM` checkpoint written by `qgc build` (qgc {qgc_version})
from `{source}`: {layers} in front of the base model execute the kernel
`{kernel}` (fingerprint `{fingerprint}`) exactly, inside the model's own forward
pass, decoding greedily over GPU tokens.

| | |
|---|---|
| base | {base} |
| dtype | {dtype} |
| text vocabulary | {base_vocab} rows (the base's) |
| GPU vocabulary | {gpu_tokens} tokens, ids from {base_vocab} on |
| token protocol | version {protocol_version} (qgc's `docs/protocol.md`) |
| tokenizer | {tokenizer} |

The first layers (`model.layers.0` onwards) are the compiled ones; the base's
layers follow, unchanged in value. `qgc.json` holds what the host needs beside the
kernel's PTX (the GPU vocabulary, the machine's memory size, the layer counts).

## Run a launch with qgc

```sh
qgc run {kernel}.ptx --launch launch.json --engine model --model {name}
```

The host feeds the launch (memory and launch areas as GPU tokens), then one
`EXEC` token per warp step; the model names the step's memory records and its
`END`, all by greedy decoding.

## Run it with stock transformers

```python
import torch
from transformers import AutoModelForCausalLM, GenerationConfig
import qgc

model = AutoModelForCausalLM.from_pretrained("{name}")
ids = qgc.prompt_ids("{name}", "{kernel}.ptx", "launch.json")  # the launch and its first EXEC
out = model.generate(torch.tensor([ids]), generation_config=GenerationConfig.from_pretrained("{name}"))
# out[0, len(ids):]: the first warp step, greedy, stopped by its END (an eos id)
```

No custom code: `generation_config.json` is greedy and stops at every step's
`END` or `TRAP`, so one `generate` call runs one warp step.
"""


class BuiltLayers:
    """A build's compiled layers (the text mute's marker, the step layers, the
    readout: `model.layers.0` up to `compiled_layers`) read from its weights
    files as `layers_file.CompiledLayers` reads a layers file, for
    `CompactPlan.of`: the tensors the checkpoint holds, in float32 (exact from
    bfloat16). On a GPU token the marker layer and the mute's gate terms add
    exactly 0: they read coordinates every GPU token holds at 0."""

    def __init__(self, directory: str | Path, info: dict):
        self.directory, self.info = Path(directory), info
        self.count = info["compiled_layers"]
        self.vocabulary = P.Vocabulary.from_json(info["gpu_vocabulary"])

    @cached_property
    def _files(self) -> dict[str, Path]:
        """Tensor name → the weights file holding it (one file, or the shards
        of `model.safetensors.index.json`)."""
        index = self.directory / "model.safetensors.index.json"
        if not index.exists():
            from safetensors import safe_open
            path = self.directory / "model.safetensors"
            with safe_open(path, "np") as f:
                return dict.fromkeys(f.keys(), path)
        weight_map = json.loads(index.read_text())["weight_map"]
        return {name: self.directory / file for name, file in weight_map.items()}

    @cached_property
    def _opened(self) -> dict:
        """Weights file → its open (memory-mapped) reader, each opened once."""
        from safetensors import safe_open
        return {path: safe_open(path, "pt")      # "pt": numpy has no bfloat16
                for path in set(self._files.values())}

    def _tensor(self, name: str, rows: slice = slice(None)) -> np.ndarray:
        import torch
        reader = self._opened[self._files[name]]
        return reader.get_slice(name)[rows].to(torch.float32).numpy()

    def param(self, index: int, name: str) -> np.ndarray:
        return self._tensor(f"model.layers.{index}.{name}")

    def nonzeros(self, index: int, name: str) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        dense = self.param(index, name)
        where = np.nonzero(dense)
        return where, dense[where]

    @cached_property
    def gpu_rows(self) -> np.ndarray:
        return self._tensor("model.embed_tokens.weight", slice(self.info["base_vocab"], None))

    @cached_property
    def code(self) -> list[int]:
        """The code coordinates: where the GPU tokens' LM head rows are not 0
        (`text_mute.head_rows`: the code's coordinates only)."""
        head = self._tensor("lm_head.weight", slice(self.info["base_vocab"], None))
        return np.flatnonzero(head.any(axis=0)).tolist()
