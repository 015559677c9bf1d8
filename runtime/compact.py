"""The `compact` engine: the compiled layers' own weights, restricted to what
is not zero, in the stock layer math.

A compiled layer is a stock Qwen3.5 linear-attention decoder layer whose
weights are almost all zero: dot's 26 layers hold 302,531 non-zeros of
1.528 G and use 44 of 416 DeltaNet heads. On a GPU token the rest adds
exactly zero: a head whose output gate z is zero has its gated norm times
SiLU(0) = 0, a neuron whose gate row is zero gives SiLU(0)·up = 0, and a
weight that reads a coordinate every GPU token holds at 0 (in every GPU
row, and written by no unit kept before it) adds 0 — which leaves out the
text mute of a `qgc build` checkpoint, its marker layer and its gate terms
(`runtime/text_mute.py`). So `CompactPlan` keeps, per layer, the used value
heads (their q/k/v/z rows, gates, norm and output columns), the used neurons
(their gate/up rows and down columns) and the convolution taps of the
channels that are not the identity, all as the layers file holds them; and
`CompactStepper` runs the stock decode step on those alone (the same
operations as `Qwen3_5DecoderLayer` with a cache: RMSNorm, the causal
convolution, SiLU, l2norm, the gated delta rule, the gated RMSNorm, SwiGLU),
then reads the next GPU token from the readout layer's code coordinates as
the tied LM head does: the GPU token whose code has the largest dot product
with them. It does not run the base layers, whose effect on a GPU token's
readout the verified mode (`--verify`) checks with the stock model.

`CompactStepper` is a stepper of `runtime/trace.py` (`__call__`, `prefill`):
the host loop is the one every engine shares.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from qgc import protocol as P

#: a block with fewer non-zeros than this fraction is held sparse (CSR)
SPARSE_BELOW = 0.25
QKV, Z = "linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight"
B, A = "linear_attn.in_proj_b.weight", "linear_attn.in_proj_a.weight"
CONV, OUT = "linear_attn.conv1d.weight", "linear_attn.out_proj.weight"
GATE, UP, DOWN = "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"


@dataclass
class Block:
    """A projection's non-zero block: the rows it writes (`rows`, of the
    output) from the columns it reads (`cols`, of the input); CSR where it is
    sparse."""

    weight: torch.Tensor           # (rows with a non-zero, len(cols))
    rows: torch.Tensor             # the rows the block stands for
    cols: torch.Tensor
    filled: torch.Tensor           # positions in `rows` of the weight's rows

    @classmethod
    def of(cls, entries: tuple[tuple[np.ndarray, ...], np.ndarray],
           rows: np.ndarray | None = None) -> Block:
        """The block of a matrix given by its non-zeros `entries` on rows
        `rows` (default: its non-zero ones) and its non-zero columns there."""
        (r, c), values = entries
        if rows is None:
            rows = np.unique(r)
        at = _positions(r, rows)
        keep = at >= 0
        r, c, values = at[keep], c[keep], values[keep]
        filled, cols = np.unique(r), np.unique(c)
        block = torch.zeros(len(filled), len(cols))
        block[torch.from_numpy(np.searchsorted(filled, r)),
              torch.from_numpy(np.searchsorted(cols, c))] = torch.from_numpy(values)
        if block.numel() and len(values) < SPARSE_BELOW * block.numel():
            with warnings.catch_warnings():     # "sparse CSR support is in beta"
                warnings.simplefilter("ignore", UserWarning)
                block = block.to_sparse_csr()
        return cls(block, torch.from_numpy(np.asarray(rows, dtype=np.int64)),
                   torch.from_numpy(cols.astype(np.int64)),
                   torch.from_numpy(filled.astype(np.int64)))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The block's rows of `matrix @ x` (zero where the matrix is)."""
        return torch.zeros(len(self.rows)).index_copy_(0, self.filled,
                                                        self.weight @ x[self.cols])

    def add_to(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """`h + matrix @ x` (x over the block's columns' whole range)."""
        return h.index_add(0, self.rows[self.filled], self.weight @ x[self.cols])

    @property
    def entries(self) -> int:
        """Weights the block holds (its non-zeros where it is sparse)."""
        w = self.weight
        return w.values().numel() if w.layout == torch.sparse_csr else w.numel()


@dataclass
class CompactLayer:
    """One decoder layer's non-zero structure (`dk`, `dv`: head dims)."""

    norm_in: torch.Tensor          # (hidden,) 1 + input_layernorm.weight
    norm_post: torch.Tensor        # (hidden,) 1 + post_attention_layernorm.weight
    heads: list[int]               # used value heads
    qkv: Block                     # the used heads' q, k, v rows (stacked)
    z: Block                       # the used heads' z rows
    b: Block
    a: Block
    conv: torch.Tensor             # (qkv rows, kernel) taps of the used channels
    conv_identity: bool            # every used channel's taps are (0, …, 0, 1)
    decay: torch.Tensor            # (used heads,) −exp(A_log)
    dt_bias: torch.Tensor
    head_norm: torch.Tensor        # (dv,) the gated RMSNorm's weight
    no_decay: bool                 # exp(g) is exactly 1 (a constant `a`): no decay
    out: Block                     # hidden rows from the used heads' values
    gate: Block                    # the used neurons' rows
    up: Block
    down: Block                    # hidden rows from the used neurons
    dk: int
    dv: int

    @property
    def weights(self) -> int:
        """Entries the plan holds for this layer."""
        return self.conv.numel() + sum(p.entries for p in (
            self.qkv, self.z, self.b, self.a, self.out, self.gate, self.up, self.down))


@dataclass
class CompactPlan:
    """The compiled layers (step layers, then the readout) as `CompactLayer`s,
    the GPU tokens' embedding rows and the codes the next token is read by."""

    layers: list[CompactLayer]
    rows: torch.Tensor             # (GPU tokens, hidden) embedding rows
    code: list[int]                # the code coordinates
    codes: torch.Tensor            # (GPU tokens, code) each token's code, ±1
    eps: float
    vocab: P.Vocabulary

    @classmethod
    def of(cls, layers, config) -> CompactPlan:
        """The plan of a layers file's contents (`layers_file.CompiledLayers`)
        for the base text `config` (head counts and dims, ε)."""
        rows = torch.from_numpy(np.ascontiguousarray(layers.gpu_rows, dtype=np.float32))
        code = list(layers.code)
        zero = ~layers.gpu_rows.any(axis=0)     # held at 0 by every GPU token so far
        plan = []
        for i in range(layers.count):
            layer, written = _layer(layers, i, config, zero)
            plan.append(layer)
            zero[written] = False
        return cls(plan, rows, code, rows[:, code].clone(), config.rms_norm_eps,
                   layers.vocabulary)

    @property
    def weights(self) -> int:
        return sum(layer.weights for layer in self.layers)

    def __getstate__(self) -> dict:
        """Pickled without what a backend cached on it (`compact_numba.packed`, `code_book`):
        made again from the plan where it is loaded."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_packed", "_book")}

    @property
    def heads(self) -> int:
        return sum(len(layer.heads) for layer in self.layers)


def _layer(layers, index: int, config, zero: np.ndarray) -> tuple[CompactLayer, np.ndarray]:
    """The non-zero structure of layer `index` of `layers`, and the
    coordinates it writes. Weights that read a coordinate in `zero` (every
    GPU token holds it at 0: the text mute's marker and squares) add 0 and are
    left out; so are the neurons left without a gate (SiLU(0)·up = 0) and the
    heads without an output gate z (the gated norm multiplies by SiLU(0)) or
    output columns, which add 0 too."""
    nk, nv = config.linear_num_key_heads, config.linear_num_value_heads
    dk, dv = config.linear_key_head_dim, config.linear_value_head_dim
    per_k, key_dim = nv // nk, nk * dk

    def vector(name: str) -> torch.Tensor:
        return torch.from_numpy(layers.param(index, name))

    entries = {name: layers.nonzeros(index, name) for name in (QKV, Z, B, A, OUT, GATE, UP, DOWN)}
    live = ~zero
    for name in (QKV, Z, B, A, GATE, UP):
        entries[name] = _reading(entries[name], live)

    def rows_of(name: str, axis: int = 0) -> set[int]:
        return set(entries[name][0][axis].tolist())
    z_rows, out_cols = rows_of(Z), rows_of(OUT, 1)

    def channels(h: int) -> list[int]:
        """Head h's q, k and v rows of in_proj_qkv (its key head's q and k)."""
        kh = h // per_k
        return [*range(kh * dk, (kh + 1) * dk), *range(key_dim + kh * dk, key_dim + (kh + 1) * dk),
                *range(2 * key_dim + h * dv, 2 * key_dim + (h + 1) * dv)]

    def values(h: int) -> range:
        return range(h * dv, (h + 1) * dv)
    used = [h for h in range(nv) if z_rows & set(values(h)) and out_cols & set(values(h))]
    # q rows of all used heads, then k rows, then v rows: the stock split
    parts = [[c for h in used for c in channels(h)[k * dk:(k + 1) * dk]] for k in (0, 1)]
    rows = np.array(parts[0] + parts[1] + [c for h in used for c in channels(h)[2 * dk:]],
                    dtype=np.int64)
    value_rows = np.array([v for h in used for v in values(h)], dtype=np.int64)
    conv = vector(CONV)[torch.from_numpy(rows), 0, :]
    identity = torch.zeros_like(conv)
    identity[:, -1] = 1
    neurons = np.array(sorted(rows_of(GATE) & rows_of(DOWN, 1)), dtype=np.int64)
    down, out = _columns(entries[DOWN], neurons), _columns(entries[OUT], value_rows)
    written = np.unique(np.concatenate([down[0][0], out[0][0]]))
    heads = torch.tensor(used, dtype=torch.long)
    decay = -vector("linear_attn.A_log")[heads].exp()
    dt_bias = vector("linear_attn.dt_bias")[heads]
    return CompactLayer(
        norm_in=1 + vector("input_layernorm.weight"),
        norm_post=1 + vector("post_attention_layernorm.weight"), heads=used,
        qkv=Block.of(entries[QKV], rows), z=Block.of(entries[Z], value_rows),
        b=Block.of(entries[B], np.array(used, dtype=np.int64)),
        a=Block.of(entries[A], np.array(used, dtype=np.int64)), conv=conv,
        conv_identity=bool(torch.equal(conv, identity)), decay=decay, dt_bias=dt_bias,
        no_decay=bool((torch.nn.functional.softplus(dt_bias) * decay).exp().eq(1).all()),
        head_norm=vector("linear_attn.norm.weight"),
        out=Block.of(out), gate=Block.of(entries[GATE], neurons),
        up=Block.of(entries[UP], neurons), down=Block.of(down), dk=dk, dv=dv), written


def _reading(entries, live: np.ndarray):
    """A matrix's non-zeros restricted to the columns `live` marks."""
    (r, c), values = entries
    keep = live[c]
    return (r[keep], c[keep]), values[keep]


def _columns(entries, columns: np.ndarray):
    """A matrix's non-zeros restricted to `columns`, renumbered in their order."""
    (r, c), values = entries
    at = _positions(c, columns)
    keep = at >= 0
    return (r[keep], at[keep]), values[keep]


def _positions(indices: np.ndarray, subset: np.ndarray) -> np.ndarray:
    """Each index's position in `subset` (−1 where it is not there)."""
    at = np.full(int(max(indices.max(initial=-1), subset.max(initial=-1))) + 1, -1)
    at[subset] = np.arange(len(subset))
    return at[indices]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Qwen3.5's RMSNorm (`weight` is 1 + the stored one) over the last axis."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class CompactStepper:
    """The stock decode step on a `CompactPlan`, one GPU token at a time,
    with each layer's recurrent state (used heads) and convolution window."""

    def __init__(self, plan: CompactPlan):
        self.plan = plan
        self.states = [torch.zeros(len(layer.heads), layer.dk, layer.dv)
                       for layer in plan.layers]
        self.windows = [torch.zeros(layer.conv.shape[0], layer.conv.shape[1] - 1)
                        for layer in plan.layers]

    @torch.no_grad()
    def __call__(self, token: P.Token) -> P.Token | None:
        h = self.residual(self.plan.vocab.id_of(token))
        scores = self.plan.codes @ h[self.plan.code]
        return self.plan.vocab.token(int(scores.argmax()))

    @torch.no_grad()
    def residual(self, token_id: int) -> torch.Tensor:
        """The residual after every layer on GPU token `token_id` (the states
        move on)."""
        h = self.plan.rows[token_id].clone()
        for index, layer in enumerate(self.plan.layers):
            h = self._mixer(index, layer, h, rms_norm(h, layer.norm_in, self.plan.eps))
            x = rms_norm(h, layer.norm_post, self.plan.eps)
            h = layer.down.add_to(h, torch.nn.functional.silu(layer.gate(x)) * layer.up(x))
        return h

    def prefill(self, tokens: Sequence[P.Token]) -> None:
        for token in tokens:
            self(token)

    def _mixer(self, index: int, layer: CompactLayer, h: torch.Tensor,
               x: torch.Tensor) -> torch.Tensor:
        """`h` plus the gated DeltaNet of the used heads on one token (`x`:
        `h` normalized)."""
        n = len(layer.heads)
        if n == 0:
            return h
        mixed = layer.qkv(x)
        if not layer.conv_identity:
            window = torch.cat([self.windows[index], mixed[:, None]], dim=1)
            self.windows[index] = window[:, 1:]
            mixed = (window * layer.conv).sum(1)
        mixed = torch.nn.functional.silu(mixed)
        q, k, v = mixed.split([n * layer.dk, n * layer.dk, n * layer.dv])
        q = _l2norm(q.view(n, layer.dk)) / layer.dk ** 0.5
        k = _l2norm(k.view(n, layer.dk))
        v = v.view(n, layer.dv)
        beta = torch.sigmoid(layer.b(x))
        state = self.states[index]
        if layer.a.cols.numel() or not layer.no_decay:
            g = layer.decay * torch.nn.functional.softplus(layer.a(x) + layer.dt_bias)
            state.mul_(g.exp()[:, None, None])
        delta = (v - torch.bmm(k[:, None, :], state)[:, 0]) * beta[:, None]
        state.baddbmm_(k[:, :, None], delta[:, None, :])
        o = torch.bmm(q[:, None, :], state)[:, 0]
        o = rms_norm(o, layer.head_norm, self.plan.eps)
        z = layer.z(x).view(n, layer.dv)
        return layer.out.add_to(h, (o * torch.nn.functional.silu(z)).flatten())


def _l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
