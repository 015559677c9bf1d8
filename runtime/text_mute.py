"""Muting the compiled layers on text, and the GPU tokens' LM head rows.

A compiled layer computes on GPU tokens; on a text token its neurons would
fire at random and its memory heads read. No layer has a bias, so no gate
can be made negative on every text row by a linear form alone (the text
rows surround the origin). The mute therefore marks text first:

- the *marker layer* (one more layer, in front): its MLP writes
  `M = D·Σ_{j∈Z} x_j²` onto a *marker coordinate* c, where Z and c are
  coordinates every GPU token holds at exactly 0 in every layer (the
  squares are formed exactly as `SiLU(x)·x + SiLU(−x)·(−x) = x²`), so on a
  GPU token it adds exactly 0 and on a text token a positive mark;
- every compiled layer reads −K·x_c into every neuron's gate and every
  head's output gate z: on a text token `h_c + M ≥ ½·rms(h)`, so each gate
  is far below −100 and SiLU makes the layer add exactly 0; on a GPU token
  x_c = 0 adds nothing;
- the readout layer takes the mark out again: `θ_Z·Σ_Z x_j² + θ_c·x_c²` of
  its own input, θ fitted over every text row of the base embedding (its
  input is scaled by the mark itself, so the removal is a fit, not exact:
  `plan` reports the largest relative change it leaves).

D and c are chosen from the base's embedding rows (the one-sided worst case
of −h_c over all of them), K from the layers' gate weights. Text-token
inputs of the compiled stack are exactly the embedding rows, so the plan
covers every text token a sequence can start with (DeltaNet state written
by earlier text tokens is not read: the heads are muted).

The GPU tokens' LM head rows are `scale·code` (the code coordinates only),
untied from their embedding rows, whose encoding energy would otherwise
give them logits of ±‖row‖ on text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

#: x_c of a text token at the compiled layers is at least this (times its rms).
MARK_FLOOR = 0.5
#: Gate pre-activation a muted neuron stays below on text (SiLU(−100) ≈ −4e−42).
MUTED = 256.0
GATE, UP, DOWN = "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"
Z_PROJ = "linear_attn.in_proj_z.weight"
OUT_PROJ = "linear_attn.out_proj.weight"


@dataclass
class TextMute:
    marker: int
    squares: list[int]
    scale: float                      # D
    removal: tuple[float, float]      # θ_Z, θ_c
    min_mark: float                   # smallest x_c of a text token at the compiled layers
    report: dict[str, float] = field(default_factory=dict)


def free_coordinates(gpu_rows: torch.Tensor, written: set[int]) -> list[int]:
    """Coordinates every GPU token holds at 0 at every layer: zero in every
    embedding row, and `written` by no layer."""
    used = gpu_rows.ne(0).any(0)
    return [c for c in range(gpu_rows.shape[1]) if not used[c] and c not in written]


def written_coordinates(states: Sequence[dict]) -> set[int]:
    """Coordinates dense layer states write (their down and out projections' rows)."""
    out: set[int] = set()
    for state in states:
        for name in (DOWN, OUT_PROJ):
            out.update(state[name].ne(0).any(1).nonzero()[:, 0].tolist())
    return out


def max_squares(intermediate: int, readout_neurons: int) -> int:
    """Squares the marker layer and the readout's removal have neurons for."""
    return min(intermediate // 2, (intermediate - readout_neurons) // 2 - 1)


def _normed(rows: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    h = rows.double()
    r = (h.pow(2).mean(-1, keepdim=True) + eps).sqrt()
    return h, r


def plan(embedding: torch.Tensor, free: list[int], eps: float, max_squares: int,
         chunk: int = 8192) -> TextMute | None:
    """The mute for these text rows, or None where no coordinate is free."""
    if len(free) < 2 or max_squares < 1:
        return None
    worst = torch.full((len(free),), -math.inf, dtype=torch.float64)
    for at in range(0, embedding.shape[0], chunk):        # c: the smallest one-sided worst
        h, r = _normed(embedding[at:at + chunk], eps)
        worst = torch.maximum(worst, (-h[:, free] / r).max(0).values)
    marker = free[int(worst.argmin())]
    squares = [c for c in free if c != marker][:max_squares]
    parts = [_rows(embedding[at:at + chunk], marker, squares, eps)
             for at in range(0, embedding.shape[0], chunk)]
    hc, q, r, norm2 = (torch.cat(p) for p in zip(*parts, strict=True))
    scale = _bf16_above(1.125 * float(((MARK_FLOOR * r - hc) / q).max()))
    mark = scale * q
    hidden = embedding.shape[1]
    r2 = (norm2 + 2 * hc * mark + mark * mark) / hidden + eps
    q_after, c_after = q * (r * r) / r2, (hc + mark).pow(2) / r2
    # least squares, relative to each row's norm: mark ≈ θ_Z·q_after + θ_c·c_after
    weight = 1 / norm2.sqrt()
    a = torch.stack([q_after * weight, c_after * weight], 1)
    theta = torch.linalg.lstsq(a, (mark * weight)[:, None]).solution[:, 0]
    left = (mark - a @ theta / weight) * weight
    min_mark = float(((hc + mark) / r2.sqrt()).min())
    return TextMute(marker, squares, scale, (float(theta[0]), float(theta[1])), min_mark,
                    {"max_change": float(left.abs().max()),
                     "rms_change": float(left.pow(2).mean().sqrt()),
                     "mark": float((mark * weight).max()), "squares": len(squares)})


def _bf16_above(x: float) -> float:
    """The least bfloat16 value ≥ x (the weight is the same in either dtype)."""
    b = torch.tensor(x, dtype=torch.float64).to(torch.bfloat16)
    if float(b) < x:
        b = torch.nextafter(b, torch.tensor(math.inf, dtype=torch.bfloat16))
    return float(b)


def _rows(rows: torch.Tensor, marker: int, squares: list[int], eps: float):
    h, r = _normed(rows, eps)
    r = r[:, 0]
    return h[:, marker], (h[:, squares] / r[:, None]).pow(2).sum(1), r, h.pow(2).sum(1)


def marker_layer(template: dict[str, torch.Tensor], mute: TextMute) -> dict[str, torch.Tensor]:
    """A layer whose attention half is empty and whose MLP writes the mark."""
    state = {k: torch.zeros_like(v) for k, v in template.items()}
    for n, j in enumerate(mute.squares):
        for sign, row in ((1.0, 2 * n), (-1.0, 2 * n + 1)):
            state[GATE][row, j] = sign
            state[UP][row, j] = sign
            state[DOWN][mute.marker, row] = mute.scale
    return state


def mute_layer(state: dict[str, torch.Tensor], mute: TextMute, hidden: int) -> None:
    """−K·x_c into every used neuron's gate and every head's z (in place)."""
    c, reach = mute.marker, math.sqrt(hidden)       # |x_j| ≤ √hidden for any token
    used = state[GATE].ne(0).any(1) | state[UP].ne(0).any(1)
    for name, rows in ((GATE, used), (Z_PROJ, None)):
        w = state[name]
        bound = float(w.abs().sum(1).max()) * reach + MUTED
        gain = 2.0 ** math.ceil(math.log2(bound / mute.min_mark))
        if rows is None:
            w[:, c] -= gain
        else:
            w[rows, c] -= gain


def add_removal(state: dict[str, torch.Tensor], mute: TextMute) -> None:
    """The readout's neurons that take the mark out (in place; not muted)."""
    gate, up, down = state[GATE], state[UP], state[DOWN]
    free = (~(gate.ne(0).any(1) | up.ne(0).any(1))).nonzero()[:, 0].tolist()
    terms = [(j, mute.removal[0]) for j in mute.squares] + [(mute.marker, mute.removal[1])]
    if len(free) < 2 * len(terms):
        raise ValueError(f"the readout has {len(free)} free neurons; the mark's removal "
                         f"takes {2 * len(terms)}")
    for n, (j, theta) in enumerate(terms):
        for sign, row in ((1.0, free[2 * n]), (-1.0, free[2 * n + 1])):
            gate[row, j] = sign
            up[row, j] = sign
            down[mute.marker, row] = -theta


class MutedStates(Sequence):
    """The compiled layers' state dicts with the mute: the marker layer in
    front, −K·x_c in every layer, the removal in the last (the readout)."""

    def __init__(self, states: Sequence[dict], mute: TextMute, hidden: int):
        self.states, self.mute, self.hidden = states, mute, hidden

    def __len__(self) -> int:
        return len(self.states) + 1

    def __getitem__(self, index):  # type: ignore[override]
        if index < 0 or index >= len(self):
            raise IndexError(index)
        if index == 0:
            return marker_layer(self.states[0], self.mute)
        state = self.states[index - 1]
        mute_layer(state, self.mute, self.hidden)
        if index == len(self) - 1:
            add_removal(state, self.mute)
        return state


def head_rows(gpu_rows: torch.Tensor, code: list[int], embedding: torch.Tensor) -> torch.Tensor:
    """The GPU tokens' LM head rows: `scale·code`. On a GPU token the final
    residual points along its next token's code (≈ √(H/n) per code
    coordinate), so that token's logit is `scale·√(H·n)` and a token one
    code bit off is lower by `2·scale·√(H/n)`; the scale puts it twice above
    the largest logit a text row can have there."""
    hidden, n = gpu_rows.shape[1], len(code)
    per = math.sqrt(hidden / n)
    text_best = float(embedding[:, code].double().abs().sum(1).max()) * per
    scale = 2.0 ** math.ceil(math.log2(2 * text_best / math.sqrt(hidden * n)))
    rows = torch.zeros_like(gpu_rows)
    rows[:, code] = gpu_rows[:, code] * scale
    return rows
