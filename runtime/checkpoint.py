"""`qgc build`: the merged model as a stock checkpoint directory.

    DIR/config.json, model.safetensors, generation_config.json   (save_pretrained)
    DIR/tokenizer files   where the base has a tokenizer: its vocabulary, the
                          rows no tokenizer id maps to named, the GPU tokens added
    DIR/qgc.json          what the host needs beside the kernel's PTX: the GPU
                          vocabulary, the machine, the base vocabulary size

Stock `AutoModelForCausalLM.from_pretrained(DIR)` loads it, no custom code;
its generation config is greedy and stops at a step's `END` or `TRAP`, so
`generate` runs one step per call. The host (`qgc run K.ptx --model DIR`)
compiles the kernel to the machine level again for the memory layout and
checks that it is the kernel DIR was built from. The directory is written
under a temporary name and renamed: a failure leaves nothing half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from qgc import __version__
from qgc import protocol as P
from qgc.diagnostics import QgcError
from qgc.protocol import PROTOCOL_VERSION, kernel_fingerprint

QGC_FILE = "qgc.json"


def token_string(t: P.Token) -> str:
    """A GPU token's spelling in the extended tokenizer."""
    return f"<|qgc:{t.spelled()}|>"


def build_info(kernel, vocab: P.Vocabulary, base_vocab: int, compiled_layers: int) -> dict:
    return {"qgc_version": __version__, "protocol_version": PROTOCOL_VERSION,
            "kernel": kernel.kernel_name, "fingerprint": kernel_fingerprint(kernel),
            "mem_words": kernel.mem_words.value.data, "base_vocab": base_vocab,
            "compiled_layers": compiled_layers, "gpu_vocabulary": vocab.to_json()}


def generation_config(model, vocab: P.Vocabulary, base_vocab: int):
    """Greedy; stops at the base's own eos tokens and at every step end."""
    from transformers import GenerationConfig

    from qgc.runtime.model_engine import stop_ids
    own = model.generation_config.eos_token_id if model.generation_config else None
    own = [] if own is None else [own] if isinstance(own, int) else list(own)
    stops = stop_ids(vocab, base_vocab)
    return GenerationConfig(do_sample=False, eos_token_id=own + stops,
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
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.generation_config = generation_config(model, vocab, info["base_vocab"])
        model.save_pretrained(tmp)
        if tokenizer_from is not None and has_tokenizer(Path(tokenizer_from)):
            extended_tokenizer(tokenizer_from, vocab, info["base_vocab"]).save_pretrained(tmp)
        (tmp / QGC_FILE).write_text(json.dumps(info, indent=1) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def has_tokenizer(path: Path) -> bool:
    return any((path / name).exists() for name in ("tokenizer.json", "tokenizer_config.json"))


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


def read_info(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / QGC_FILE
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise QgcError(f"error: '{directory}' is not a qgc build (cannot read {QGC_FILE}: "
                       f"{err})", 2) from None
    if info.get("protocol_version") != PROTOCOL_VERSION:
        raise QgcError(f"error: '{directory}' speaks token protocol version "
                       f"{info.get('protocol_version')}; this qgc speaks {PROTOCOL_VERSION} "
                       "(rebuild it)", 2)
    return info


def check_kernel(directory: str | Path, info: dict, kernel, vocab: P.Vocabulary) -> None:
    """The host's kernel is the one DIR was built from."""
    if kernel_fingerprint(kernel) != info["fingerprint"] or \
            vocab.to_json() != info["gpu_vocabulary"]:
        raise QgcError(f"error: '{directory}' was built from kernel '{info['kernel']}' "
                       f"(fingerprint {info['fingerprint']}), not from this one "
                       f"('{kernel.kernel_name}', {kernel_fingerprint(kernel)})", 2)


def load_checkpoint(directory: str | Path, dtype):
    """The stock model and its qgc.json."""
    from transformers import AutoModelForCausalLM
    info = read_info(directory)
    model = AutoModelForCausalLM.from_pretrained(directory, local_files_only=True, dtype=dtype)
    return model.eval(), info, P.Vocabulary.from_json(info["gpu_vocabulary"])
