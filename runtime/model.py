"""The base model and the merged model: compiled layers in front of Qwen3.5.

The base comes from a local checkpoint directory (`--base PATH` or `QGC_BASE`);
without one, a stand-in with the 2B text config and seeded random weights is
built and announced on stderr. `merge` builds one stock `Qwen3_5ForCausalLM`
whose first layers are the compiled ones and whose remaining layers, norm and
embedding rows are the base model's own tensors, unchanged in value; GPU tokens
are extra embedding rows (tied embeddings grow with them).

torch and transformers are imported here and only here (lazily by callers); the
modelling code only where a model is built.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from huggingface_hub.errors import StrictDataclassError
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

from qgc.base_config import config_error, read_config_dict, resolve_config_path
from qgc.diagnostics import QgcError
from qgc.progress import progress

if TYPE_CHECKING:
    from transformers.models.qwen3_5 import Qwen3_5ForCausalLM


def load_text_config(name_or_path: str | Path | None = None) -> Qwen3_5TextConfig:
    """A full Qwen3.5 text config, checked (`qgc.base_config`): a shipped one by
    name (`2b`, `0.8b`, `small`; None is the 2B's), a JSON file or a checkpoint
    directory (the installed `Qwen3_5TextConfig()` defaults are not the 2B's)."""
    data = read_config_dict(name_or_path)
    try:
        return Qwen3_5TextConfig(**{k: v for k, v in data.items() if k != "model_type"})
    except (StrictDataclassError, ValueError, TypeError, AttributeError) as err:
        reason = str(err).strip().splitlines()[-1].strip()
        raise config_error(resolve_config_path(name_or_path),
                           f"transformers refuses it: {reason}") from None


def stand_in(config: Qwen3_5TextConfig, seed: int = 0,
             dtype: torch.dtype = torch.float32) -> Qwen3_5ForCausalLM:
    """A base model with `config` and seeded random weights, said on stderr;
    refused before any allocation if it cannot fit this machine's memory."""
    check_fits_in_memory(config, "a stand-in base")
    print(f"qgc: no base checkpoint (--base PATH or QGC_BASE): using a stand-in with "
          f"hidden {config.hidden_size}, {config.num_hidden_layers} layers and seeded random "
          f"weights (seed {seed})", file=sys.stderr)
    torch.manual_seed(seed)
    with torch.device("cpu"):
        model = _causal_lm()(config).to(dtype)
    return model.eval()


def _causal_lm() -> type[Qwen3_5ForCausalLM]:
    """The model class, imported on first use: the modelling code takes seconds
    to import, and the paths that only read a config (the compact engine) never
    build a model."""
    from transformers.models.qwen3_5 import Qwen3_5ForCausalLM
    return Qwen3_5ForCausalLM


def machine_memory_bytes() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_fits_in_memory(config: Qwen3_5TextConfig, what: str) -> None:
    """Refuse, before any allocation, a model of `config` whose float32
    weights (how a stand-in is built) exceed this machine's memory: its
    parameters are counted on the meta device."""
    with torch.device("meta"):
        parameters = sum(p.numel() for p in _causal_lm()(config).parameters())
    need, have = 4 * parameters, machine_memory_bytes()
    if need > have:
        raise QgcError(f"error: {what} with hidden {config.hidden_size}, "
                       f"{config.num_hidden_layers} layers and {config.vocab_size} vocabulary "
                       f"rows has {parameters / 1e9:.1f}B parameters, {need / 2**30:.1f} GiB in "
                       f"float32: more than this machine's {have / 2**30:.1f} GiB of memory "
                       "(a smaller --base-config: 0.8b, small)", 2)


def load_base(path: str | Path | None, config: Qwen3_5TextConfig | None = None,
              seed: int = 0, dtype: torch.dtype = torch.float32) -> Qwen3_5ForCausalLM:
    """The real checkpoint at `path` (local files only), else the stand-in."""
    if path is None:
        return stand_in(config or load_text_config(), seed, dtype)
    if not Path(path).is_dir():
        raise QgcError(f"error: --base '{path}' is not a checkpoint directory", 2)
    from transformers import AutoModelForCausalLM
    try:
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
    except (OSError, ValueError) as err:
        raise QgcError(f"error: cannot load the base checkpoint '{path}': {err}", 2) from None
    return model.eval()


def merged_config(base: Qwen3_5TextConfig, compiled_layers: int,
                  extra_rows: int, tied: bool = True) -> Qwen3_5TextConfig:
    # A fresh config, not an edited copy: derived fields (per-layer configs for the
    # cache) are computed at construction.
    data = {k: v for k, v in base.to_dict().items() if k != "model_type"}
    data["layer_types"] = ["linear_attention"] * compiled_layers + list(base.layer_types)
    data["num_hidden_layers"] = len(data["layer_types"])
    data["vocab_size"] = base.vocab_size + extra_rows
    data["tie_word_embeddings"] = tied
    return Qwen3_5TextConfig(**data)


def merge(base: Qwen3_5ForCausalLM, layer_states: list[dict[str, torch.Tensor]],
          gpu_rows: torch.Tensor, head_rows: torch.Tensor | None = None) -> Qwen3_5ForCausalLM:
    """Compiled layers (state dicts of `Qwen3_5DecoderLayer`s, in order) in front of
    `base`'s layers, `gpu_rows` appended to the embedding; the LM head grows by
    `head_rows` (untied: its first rows are the base's tied embedding, as they
    are), else stays tied. The base model's tensors are moved over as they are:
    bit-identical in the merged model. `base` is consumed: its layers are
    renumbered for their place in the merged stack."""
    hidden = base.config.hidden_size
    if gpu_rows.dim() != 2 or gpu_rows.shape[1] != hidden:
        raise QgcError(f"error: GPU token rows have shape {tuple(gpu_rows.shape)}, the base "
                       f"model's hidden size is {hidden}", 2)
    if not base.config.tie_word_embeddings:
        raise QgcError("error: the base model's LM head is not tied to its embedding; qgc "
                       "merges Qwen3.5 checkpoints with tied embeddings", 2)
    config = merged_config(base.config, len(layer_states), gpu_rows.shape[0],
                           tied=head_rows is None)
    with torch.device("meta"):
        merged = _causal_lm()(config)
    dtype = base.model.embed_tokens.weight.dtype
    compiled = _materialise_layers(merged, layer_states, dtype)
    merged.model.layers = torch.nn.ModuleList([*compiled, *base.model.layers])
    for layer_index, layer in enumerate(merged.model.layers):
        _renumber(layer, layer_index)
    merged.model.norm = base.model.norm
    merged.model.rotary_emb = base.model.rotary_emb
    embedding = torch.cat([base.model.embed_tokens.weight.detach(), gpu_rows.to(dtype)])
    merged.model.embed_tokens = torch.nn.Embedding.from_pretrained(embedding, freeze=True)
    if head_rows is None:
        merged.lm_head.weight = merged.model.embed_tokens.weight
    else:
        head = torch.cat([base.model.embed_tokens.weight.detach(), head_rows.to(dtype)])
        merged.lm_head.weight = torch.nn.Parameter(head, requires_grad=False)
    return merged.eval()


def _materialise_layers(merged: Qwen3_5ForCausalLM, states: list[dict[str, torch.Tensor]],
                        dtype: torch.dtype) -> list[torch.nn.Module]:
    layers = []
    taken: set[int] = set()      # storages already made parameters (a state may repeat)

    def own(tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.to(dtype)
        if tensor.untyped_storage().data_ptr() in taken:
            tensor = tensor.clone()
        taken.add(tensor.untyped_storage().data_ptr())
        return tensor

    with progress(states, desc="merging the compiled layers", unit="layer") as bar:
        for index, state in enumerate(bar):
            layer = merged.model.layers[index].to_empty(device="cpu")
            missing = set(layer.state_dict()) - set(state)
            if missing:
                raise QgcError(f"error: compiled layer {index} lacks {sorted(missing)[0]} "
                               f"(and {len(missing) - 1} more)", 2)
            # assign: the dense tensors become the parameters, no second copy
            layer.load_state_dict({k: own(v) for k, v in state.items()}, assign=True)
            layers.append(layer)
    return layers


def _renumber(layer: torch.nn.Module, index: int) -> None:
    """Cache slots are indexed by `layer_idx`: keep them in stack order."""
    for module in (getattr(layer, "linear_attn", None), getattr(layer, "self_attn", None)):
        if module is not None:
            module.layer_idx = index
