"""The `model` engine: the launch through transformers' own forward.

The scheduled step program becomes stock Qwen3.5 linear-attention decoder
layers (`passes/tensor_to_weights/`) plus one *readout* layer; they go in
front of the base model's layers in one stock `Qwen3_5ForCausalLM`
(`runtime/model.py`), and the GPU tokens are new embedding rows:

- a GPU token's row is the residual vector its step program expects (the
  encoding of its fields, `CompiledProgram.encode`), which includes its
  *code* (`Vocabulary.code`): its output-style fields as ±1;
- the readout layer's MLP (`passes/tensor_to_weights/readout.py`) writes `gain · (2b − 1)` for every output
  bit b of the step onto the code coordinates. After the base layers and the
  final norm the residual points along the next token's code, so the tied LM
  head's argmax is that token (a row's logit falls by 2·gain per code bit it
  differs in; text rows are small).

The host loop (`runtime/trace.py`) then decodes token by token with the
model's own cache: the greedy continuation is the trace.
"""

from __future__ import annotations

import hashlib
import os
from bisect import bisect_right
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from qgc import protocol as P
from qgc.dialects.weights import param_shapes
from qgc.passes.tensor_to_weights import CompiledProgram, SparseLayer, readout_layer


class LayerStates(Sequence):
    """Dense state dicts of the compiled layers plus the readout, on demand."""

    def __init__(self, compiled: CompiledProgram, readout: SparseLayer, dtype: Any):
        self.compiled, self.readout, self.dtype = compiled, readout, dtype

    def __len__(self) -> int:
        return len(self.compiled.layers) + 1

    def __getitem__(self, index):  # type: ignore[override]
        if index < 0 or index >= len(self):
            raise IndexError(index)
        layer = self.compiled.layers[index] if index < len(self.compiled.layers) \
            else self.readout
        return dense_state(layer, self.compiled.config, self.dtype)


def dense_state(layer: SparseLayer, config: Any, dtype: Any) -> dict[str, torch.Tensor]:
    """Dense tensors of one sparse layer (names inside the decoder layer)."""
    out = {}
    for name, shape in param_shapes(config).items():
        t = torch.zeros(shape, dtype=dtype)
        table = layer.weights.get(name, {})
        if table:
            idx = torch.tensor(list(table.keys()), dtype=torch.long).T
            t.index_put_(tuple(idx), torch.tensor(list(table.values()), dtype=dtype))
        out[name] = t
    return out


@dataclass
class CompiledMachine:
    """Everything the model engine needs of a compiled kernel."""

    compiled: CompiledProgram
    vocab: P.Vocabulary

    def layer_states(self, dtype: Any) -> LayerStates:
        """The compiled layers and the readout, each made dense only when
        `merge` takes it (a 2B-shaped layer is 58.8 M weights)."""
        return LayerStates(self.compiled, readout_layer(self.compiled), dtype)

    def gpu_rows(self) -> torch.Tensor:
        """Every GPU token's row, as a layers file's `CompiledLayers.gpu_rows`."""
        from qgc.runtime.gpu_rows import RowEncoding
        return torch.from_numpy(RowEncoding.of(self.compiled.encoding).rows(self.vocab))

    def code_coords(self) -> list[int]:
        """The coordinates of the code every GPU token's row carries."""
        (code,) = [op for op in self.compiled.program.inputs() if op.input_name.data == "code"]
        return self.compiled.coords[code.result]

    def written(self) -> set[int]:
        """Coordinates the compiled layers and the readout write."""
        from qgc.runtime.text_mute import DOWN, OUT_PROJ
        layers = [*self.compiled.layers, readout_layer(self.compiled)]
        return {index[0] for layer in layers for name in (DOWN, OUT_PROJ)
                for index, value in layer.weights.get(name, {}).items() if value != 0}


#: The precision the compiled layers are merged from, whatever the model's
#: dtype: the layers file's, so that a model built from PTX and one built from
#: its layers file are the same (the mute's gains are computed from them).
MERGE_DTYPE = torch.float32


def build_model(machine: CompiledMachine, base, dtype: torch.dtype, mute: bool = True):
    """The merged model; `mute`: with the text mute (`runtime/text_mute.py`)."""
    code = machine.code_coords()
    return merge_muted(base, machine.layer_states(MERGE_DTYPE), machine.gpu_rows(), code,
                       machine.written(), 1 + len(code), dtype, mute)


def layers_model(layers, base, dtype: torch.dtype, mute: bool = True):
    """The merged model of a layers file's contents (`layers_file.CompiledLayers`,
    read or made in memory): the same merge as `build_model`."""
    from qgc.runtime.text_mute import DOWN, OUT_PROJ
    states = FileStates(layers)
    return merge_muted(base, states, torch.from_numpy(layers.gpu_rows), layers.code,
                       layers.written((DOWN, OUT_PROJ)), 1 + len(layers.code), dtype, mute)


class FileStates(Sequence):
    """A layers file's layers as state dicts of float32 tensors, made dense
    one at a time, as `merge` takes them."""

    def __init__(self, layers):
        self.layers = layers

    def __len__(self) -> int:
        return self.layers.count

    def __getitem__(self, index):  # type: ignore[override]
        if index < 0 or index >= len(self):
            raise IndexError(index)
        return {k: torch.from_numpy(v) for k, v in self.layers.state(index).items()}


def merge_muted(base, states: Sequence[dict], gpu_rows: torch.Tensor, code: list[int],
                written: set[int], readout_neurons: int, dtype: torch.dtype, mute: bool = True):
    """`merge` with the GPU tokens' own LM head rows and, where a coordinate
    is free, the text mute in front."""
    from qgc.runtime import text_mute as TM
    from qgc.runtime.model import merge
    config = base.config
    embedding = base.model.embed_tokens.weight.detach()
    plan = None
    if mute:
        plan = TM.plan(embedding, TM.free_coordinates(gpu_rows, written), config.rms_norm_eps,
                       TM.max_squares(config.intermediate_size, readout_neurons))
        if plan is None:
            import sys
            print("qgc: warning: no coordinate is free for the text mute: the compiled layers "
                  "act on text", file=sys.stderr)
        else:
            states = TM.MutedStates(states, plan, config.hidden_size)
    head = TM.head_rows(gpu_rows, code, embedding)
    model = merge(base, states, gpu_rows, head).to(dtype)
    model.qgc_text_mute = plan
    return model


class ModelStepper:
    """Greedy decoding with the model's own cache: the launch prompt in one
    forward (`prefill`), then one token at a time."""

    def __init__(self, model, vocab: P.Vocabulary, base_vocab: int):
        from transformers import DynamicCache
        from transformers.utils import logging
        logging.set_verbosity_error()   # not the notes on pure-PyTorch kernel fallbacks
        self.model, self.vocab, self.base_vocab = model, vocab, base_vocab
        self.cache = DynamicCache(config=model.config)
        self.position = 0

    @torch.no_grad()
    def _forward(self, tokens: Sequence[P.Token]) -> P.Token | None:
        ids = torch.tensor([[self.base_vocab + self.vocab.id_of(t) for t in tokens]])
        positions = torch.arange(self.position, self.position + len(tokens))[None]
        hidden = self.model.model(input_ids=ids, cache=self.cache, use_cache=True,
                                  position_ids=positions).last_hidden_state
        self.position += len(tokens)
        # the head on the last position as a 2-D row: torch's CPU bfloat16 `linear`
        # on the strided 3-D view `logits_to_keep=1` gives takes a slow path
        # (9.4 s instead of 0.09 s after a 39-token prefill at 2B)
        best = int(self.model.lm_head(hidden[0, -1:]).argmax())
        return None if best < self.base_vocab else self.vocab.token(best - self.base_vocab)

    def prefill(self, tokens: Sequence[P.Token]) -> None:
        self._forward(tokens)

    def __call__(self, t: P.Token) -> P.Token | None:
        return self._forward([t])


#: the stepper `runtime/trace.run_trace` takes (the name the callers use)
model_stepper = ModelStepper


def stop_ids(vocab: P.Vocabulary, base_vocab: int) -> list[int]:
    """The token ids that end a step: every `END`/`BAR` and every `TRAP`."""
    ends = [P.Token("END", b=b, bar=bar) for bar in (0, 1) for b in range(vocab.blocks + 1)]
    traps = [P.Token("TRAP", site=s, lane=ln) for s in range(vocab.sites) for ln in range(P.LANES)]
    return sorted(base_vocab + vocab.id_of(t) for t in ends + traps)


class GenerateMachine:
    """Stock `generate`: each step is one greedy `model.generate` call on the
    stream so far (its cache kept between calls), stopped by the step's `END`
    or `TRAP` (eos ids) or by the most tokens a step can name."""

    def __init__(self, model, vocab: P.Vocabulary, base_vocab: int):
        from transformers import DynamicCache
        from transformers.utils import logging

        from qgc.runtime.trace import step_limit
        logging.set_verbosity_error()
        self.model, self.vocab, self.base_vocab = model, vocab, base_vocab
        self.cache = DynamicCache(config=model.config)
        self.ids: list[int] = []
        self.stops, self.limit = stop_ids(vocab, base_vocab), step_limit(vocab)

    @torch.no_grad()
    def continue_with(self, host_tokens: Sequence[P.Token]):
        self.ids += [self.base_vocab + self.vocab.id_of(t) for t in host_tokens]
        out = self.model.generate(
            input_ids=torch.tensor([self.ids]), attention_mask=torch.ones(1, len(self.ids),
                                                                          dtype=torch.long),
            cache=self.cache, max_new_tokens=self.limit, do_sample=False,
            eos_token_id=self.stops, pad_token_id=self.stops[0])
        named = out[0, len(self.ids):].tolist()
        self.ids += named
        for i in named:
            yield self.vocab.token(i - self.base_vocab) if i >= self.base_vocab else None


@torch.no_grad()
def replay_check(model, vocab: P.Vocabulary, base_vocab: int, tokens: Sequence[P.Token],
                 predicted: Sequence[bool], window: int = 2048, chunk: int = 128,
                 layers_per_pass: int | None = None,
                 checkpoint: Path | None = None) -> dict[str, int]:
    """The recorded stream through the model as a prefill in windows of
    `window` tokens, the model's cache carried between them (the chunked
    DeltaNet kernels within a window, its recurrent and conv state across):
    at every token the machine named, the model's argmax over the whole
    vocabulary must be that token; else a trap naming the position. The
    windows bound the activations: a 12,000-token stream in one pass held
    about 20 GB.

    `layers_per_pass`: the stream goes through that many layers at a time,
    every window, before the next layers (`replay_by_layers`): the same
    operations on the same operands, so the same bits, but a model whose
    weights are paged from files is read once instead of once a window;
    `checkpoint` (a directory) keeps the progress after each pass, and a
    replay of the same stream through the same model resumes from it."""
    ids = torch.tensor([[base_vocab + vocab.id_of(t) for t in tokens]])
    checked = [i for i in range(1, len(tokens)) if predicted[i]]
    if layers_per_pass or checkpoint:
        hidden = replay_by_layers(model, ids, window, layers_per_pass or 8, checkpoint)
        _check_named(model, vocab, base_vocab, tokens, ids, hidden, 0, checked, chunk)
        return {"tokens": len(tokens), "checked": len(checked)}
    from transformers import DynamicCache

    from qgc.progress import progress
    cache = DynamicCache(config=model.config)
    with progress(desc="replay", total=len(tokens), unit="token") as bar:
        for start in range(0, len(tokens), window):
            end = min(start + window, len(tokens))
            hidden = model.model(input_ids=ids[:, start:end], cache=cache, use_cache=True,
                                 position_ids=torch.arange(start, end)[None]
                                 ).last_hidden_state[0]
            # predicted from position i - 1: start < i <= end
            named = checked[bisect_right(checked, start):bisect_right(checked, end)]
            _check_named(model, vocab, base_vocab, tokens, ids, hidden, start, named, chunk)
            bar.update(end - start)
    return {"tokens": len(tokens), "checked": len(checked)}


@torch.no_grad()
def replay_by_layers(model, ids: torch.Tensor, window: int, layers_per_pass: int,
                     checkpoint: Path | None = None) -> torch.Tensor:
    """The final hidden states of the stream `ids` (1×T), computed a pass of
    `layers_per_pass` layers at a time over every `window`-token window, by
    the model's own forward on those layers alone (`_only_layers`) with one
    cache for the whole stream: each layer sees the operands it sees in a
    window-by-window forward, so the result is that forward's bit for bit
    (a test holds them equal)."""
    from transformers import DynamicCache

    from qgc.progress import progress
    inner, total, length = model.model, model.config.num_hidden_layers, ids.shape[1]
    # a checkpoint's key samples every weight: not read without one
    key = _replay_key(model, ids, window, layers_per_pass) if checkpoint else ""
    done, hidden = _resume(checkpoint, key)
    cache = DynamicCache(config=model.config)
    with progress(desc="replay", total=total, unit="layer") as bar:
        bar.update(done)
        while done < total:
            upto = min(done + layers_per_pass, total)
            out = torch.empty(1, length, model.config.hidden_size, dtype=model.dtype)
            with _only_layers(inner, done, upto, final=upto == total):
                for start in range(0, length, window):
                    end = min(start + window, length)
                    fed = dict(input_ids=ids[:, start:end]) if hidden is None else \
                        dict(inputs_embeds=hidden[:, start:end])
                    out[:, start:end] = inner(cache=cache, use_cache=True,
                                              position_ids=torch.arange(start, end)[None],
                                              **fed).last_hidden_state
            bar.update(upto - done)
            done, hidden = upto, out
            _save(checkpoint, key, done, hidden)
    return hidden[0]


@contextmanager
def _only_layers(inner, first: int, end: int, final: bool):
    """The text model with layers first..end-1 alone (their layer types for
    the masks), the final norm only in the pass that ends the model."""
    saved = inner.layers, inner.config.layer_types, inner.norm
    inner.layers = torch.nn.ModuleList(list(saved[0][first:end]))
    inner.config.layer_types = saved[1][first:end]
    if not final:
        inner.norm = torch.nn.Identity()
    try:
        yield
    finally:
        inner.layers, inner.config.layer_types, inner.norm = saved


def _replay_key(model, ids: torch.Tensor, window: int, layers_per_pass: int) -> str:
    """What a checkpoint must match: the stream, the windows and passes, the
    dtype, and the weights (a sparse sample of every tensor: reading them all
    would cost what a pass over a paged model costs)."""
    digest = hashlib.sha256(ids.numpy().tobytes())
    digest.update(f"{window} {layers_per_pass} {model.dtype}".encode())
    for name, tensor in model.state_dict().items():
        sample = tensor.reshape(-1)[::65537].float().numpy().tobytes()
        digest.update(name.encode() + str(tuple(tensor.shape)).encode() + sample)
    return digest.hexdigest()


def _resume(checkpoint: Path | None, key: str) -> tuple[int, torch.Tensor | None]:
    """The layers done and the hidden states after them, from a checkpoint of
    this replay; else none."""
    path = checkpoint and Path(checkpoint) / "replay.pt"
    if not path or not path.exists():
        return 0, None
    saved = torch.load(path, weights_only=True)
    return (saved["done"], saved["hidden"]) if saved["key"] == key else (0, None)


def _save(checkpoint: Path | None, key: str, done: int, hidden: torch.Tensor) -> None:
    """The progress, written whole or not at all (a rename)."""
    if checkpoint is None:
        return
    path = Path(checkpoint)
    path.mkdir(parents=True, exist_ok=True)
    torch.save({"key": key, "done": done, "hidden": hidden}, path / "replay.pt.part")
    os.replace(path / "replay.pt.part", path / "replay.pt")


def _check_named(model, vocab: P.Vocabulary, base_vocab: int, tokens: Sequence[P.Token],
                 ids, hidden, start: int, named: Sequence[int], chunk: int) -> None:
    """The argmax at each position before `named` is the token there
    (logits for `chunk` positions at a time: the vocabulary is wide)."""
    from qgc.runtime.memory import Trap
    for at in range(0, len(named), chunk):
        positions = named[at:at + chunk]
        best = model.lm_head(hidden[[i - 1 - start for i in positions]]).argmax(-1).tolist()
        for i, b in zip(positions, best, strict=True):
            if b != ids[0, i]:
                got = vocab.token(b - base_vocab).spelled() if b >= base_vocab else \
                    f"text token {b}"
                raise Trap(f"trap: replay: at token {i} the model names {got} where the "
                           f"trace has {tokens[i].spelled()}")
