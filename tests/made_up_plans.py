"""Made-up compact plans for the compact engine's tests: what compiled
layers lack (causal convolution taps, a decay) on a small hidden size that
is not a power of two, and the torch form's residuals on them, which the
numba and Triton backends are compared with."""

from __future__ import annotations

import numpy as np
import torch

from qgc.runtime.compact import Block, CompactLayer, CompactPlan, CompactStepper


def _block(rng, rows: int, cols: int, density: float = 0.4,
           written: np.ndarray | None = None) -> Block:
    """A random sparse block of every one of `rows` (or of those `written`)
    from `cols` columns."""
    r, c = np.nonzero(rng.random((rows, cols)) < density)
    values = rng.normal(size=len(r)).astype(np.float32)
    keep = np.ones(len(r), bool) if written is None else np.isin(r, written)
    return Block.of(((r[keep], c[keep]), values[keep]), np.arange(rows))


def _qkv_written(heads: int, dk: int, dv: int) -> np.ndarray:
    """The q, k and v channels a made-up qkv writes: as compiled ones, not
    all (every query channel; each head's key channels but its second and
    last, and its value channels but every fourth: their state rows and
    columns stay 0)."""
    keys = [d for d in range(dk) if d not in (1, dk - 1)]
    values = [j for j in range(dv) if j % 4 != 3]
    return np.array([*range(heads * dk),
                     *(heads * dk + hd * dk + d for hd in range(heads) for d in keys),
                     *(2 * heads * dk + hd * dv + j for hd in range(heads) for j in values)])


def _scatter(rng, rows: int, cols: int) -> Block:
    """A random projection into `rows` of h from `cols` values (out, down)."""
    r, c = np.nonzero(rng.random((rows, cols)) < 0.3)
    return Block.of(((r, c), (rng.normal(size=len(r)) / 4).astype(np.float32)))


def _vector(rng, size: int, around: float = 1) -> torch.Tensor:
    return torch.from_numpy((around + rng.normal(size=size) / 4).astype(np.float32))


def _made_up_layer(rng, hidden: int, heads: int, conv: bool, decays: bool,
                   dk: int = 8, dv: int = 16, taps: int = 4, neurons: int = 24) -> CompactLayer:
    width = heads * (2 * dk + dv)
    taps_of = torch.zeros(width, taps)
    taps_of[:, -1] = 1
    if conv:
        taps_of = torch.from_numpy(rng.normal(size=(width, taps)).astype(np.float32))
    return CompactLayer(
        norm_in=_vector(rng, hidden), norm_post=_vector(rng, hidden), heads=list(range(heads)),
        qkv=_block(rng, width, hidden, written=_qkv_written(heads, dk, dv)),
        z=_block(rng, heads * dv, hidden),
        b=_block(rng, heads, hidden), a=_block(rng, heads, hidden if decays else 0),
        conv=taps_of, conv_identity=not conv,
        decay=-torch.from_numpy(rng.random(heads).astype(np.float32) + 0.5),
        dt_bias=_vector(rng, heads, 0), head_norm=_vector(rng, dv), no_decay=not decays,
        out=_scatter(rng, hidden, heads * dv), gate=_block(rng, neurons, hidden, 0.2),
        up=_block(rng, neurons, hidden, 0.2), down=_scatter(rng, hidden, neurons), dk=dk, dv=dv)


def made_up_plan(convolution: bool, seed: int = 0, hidden: int = 48,
                 tokens: int = 16) -> CompactPlan:
    """Four layers (3, 0, 2 and 1 used heads, the first with decay), with
    or without convolution taps; hidden 48, not a power of two."""
    rng = np.random.default_rng(seed)
    layers = [_made_up_layer(rng, hidden, 3, conv=convolution, decays=True),
              _made_up_layer(rng, hidden, 0, conv=False, decays=False),
              _made_up_layer(rng, hidden, 2, conv=False, decays=False),
              _made_up_layer(rng, hidden, 1, conv=convolution, decays=False)]
    rows = torch.from_numpy(rng.normal(size=(tokens, hidden)).astype(np.float32))
    code = list(range(12))
    return CompactPlan(layers, rows, code, rows[:, code].sign(), 1e-6, vocab=None)


def torch_residuals(plan: CompactPlan, ids: list[int]) -> torch.Tensor:
    """h after each of `ids` in `CompactStepper`'s step."""
    stepper = CompactStepper(plan)
    return torch.stack([stepper.residual(i) for i in ids])


#: three launches' tokens on a made-up plan (16 tokens)
STREAMS = np.array([[1, 5, 2, 2, 9], [3, 3, 3, 3, 3], [7, 0, 15, 4, 1]])


