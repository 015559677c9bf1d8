"""Made-up compact plans for the compact engine's tests: what compiled
layers lack (causal convolution taps, a decay) on a small hidden size that
is not a power of two, and the torch form's residuals on them, which the
numba and Triton backends are compared with."""

from __future__ import annotations

import numpy as np
import torch

from qgc.runtime.compact import Block, CompactLayer, CompactPlan, CompactStepper


def _block(rng, rows: int, cols: int, density: float = 0.4) -> Block:
    """A random sparse block of every one of `rows` from `cols` columns."""
    r, c = np.nonzero(rng.random((rows, cols)) < density)
    return Block.of(((r, c), rng.normal(size=len(r)).astype(np.float32)), np.arange(rows))


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
        qkv=_block(rng, width, hidden), z=_block(rng, heads * dv, hidden),
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


