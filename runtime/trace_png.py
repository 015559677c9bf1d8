"""The trace picture (`--trace-png FILE`): which compiled units fired, token by token.

`ActivityRecorder` hooks the compiled layers of a merged model
(`runtime/model_engine.build_model`) and records, for every token position
any forward processes (a prefill's many, a decode step's one, in order):

- per layer, per linear-attention value head, whether the head's output
  (the `out_proj` input) is non-zero: a memory read that found a written row
  gives exactly 1 on its active dimensions, an empty row or an unused head
  exactly 0 (`docs/machine.md`, "The memory head");
- per layer, per group of `GROUP` consecutive MLP neurons, how many fired
  (the `down_proj` input, `SiLU(256·G)·U/256`: about `ReLU(G)` for a gate
  form G, at least ½ when on, exactly 0 when off).

`draw_trace` draws that as one PNG: tokens left to right, each compiled
layer's heads then its neuron groups top to bottom.

numpy and matplotlib (Agg, no display); torch only through the model.
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qgc import protocol as P

#: consecutive MLP neurons drawn as one row
GROUP = 64
#: |value| above which a head or neuron counts as fired: on values are ≥ ½
#: (gadget neurons, `tensor.Gadget`) or exactly 1 (heads), off values exactly
#: 0, so a quarter sits clear of both in float32 and bfloat16
FIRED = 0.25
#: rows above which all-zero rows are left out
MAX_ROWS = 256
#: columns above which several tokens share one column (their maximum)
MAX_COLUMNS = 1500
#: token kinds whose spelling labels the x axis
LABELLED = ("EXEC", "END", "TRAP")

HEAD_RGB = np.array([0.12, 0.35, 0.80])    # a head read a written row
MLP_RGB = np.array([0.85, 0.33, 0.05])     # share of a group's neurons that fired
UNRUN_RGB = np.array([0.88, 0.88, 0.88])   # a token the model was never fed


@dataclass
class Activity:
    """What fired, per token position the compiled layers processed."""

    heads: np.ndarray        # [tokens, layers, heads] bool
    groups: np.ndarray       # [tokens, layers, groups] uint8: neurons fired per group
    group_sizes: np.ndarray  # [groups]: neurons in each group (the last may be short)
    roles: tuple[str, ...] = ()  # per layer: "text mute", "step" or "readout"

    def role(self, layer: int) -> str:
        if self.roles:
            return self.roles[layer]
        return "readout" if layer == self.layers - 1 else "step"

    def __len__(self) -> int:
        return self.heads.shape[0]

    @property
    def layers(self) -> int:
        return self.heads.shape[1]


class ActivityRecorder:
    """Forward hooks on the first `n_compiled` layers of a merged model (the
    text mute's marker layer, the compiled layers and the readout), recording
    `Activity` while inside `with`; the hooks are removed on exit."""

    def __init__(self, model: Any, n_compiled: int, threshold: float = FIRED,
                 text_mute: bool | None = None):
        layers = model.model.layers
        if not 0 < n_compiled <= len(layers):
            raise ValueError(f"{n_compiled} compiled layers of a model with {len(layers)}")
        self.layers = list(layers)[:n_compiled]
        # the marker layer comes first where the merge made one (a model loaded
        # from a checkpoint does not carry the plan: its qgc.json says)
        muted = getattr(model, "qgc_text_mute", None) is not None if text_mute is None \
            else text_mute
        self.roles = tuple("text mute" if muted and i == 0 else
                           "readout" if i == n_compiled - 1 else "step" for i in range(n_compiled))
        if any(getattr(layer, "linear_attn", None) is None for layer in self.layers):
            raise ValueError("compiled layers are linear-attention layers")
        config = model.config
        self.n_heads = config.linear_num_value_heads
        self.head_dim = config.linear_value_head_dim
        self.intermediate = config.intermediate_size
        self.threshold = threshold
        n_groups = math.ceil(self.intermediate / GROUP)
        sizes = np.full(n_groups, GROUP, dtype=np.int64)
        sizes[-1] = self.intermediate - GROUP * (n_groups - 1)
        self.group_sizes = sizes
        self._heads: list[list[np.ndarray]] = [[] for _ in self.layers]
        self._groups: list[list[np.ndarray]] = [[] for _ in self.layers]
        self._handles: list[Any] = []

    def __enter__(self) -> ActivityRecorder:
        for i, layer in enumerate(self.layers):
            self._handles.append(layer.linear_attn.out_proj.register_forward_pre_hook(
                lambda m, args, i=i: self._heads[i].append(self._head_fired(args[0]))))
            self._handles.append(layer.mlp.down_proj.register_forward_pre_hook(
                lambda m, args, i=i: self._groups[i].append(self._group_counts(args[0]))))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _head_fired(self, x) -> np.ndarray:
        # [batch, seq, heads·dim] → [positions, heads]; batch rows in order
        x = x.detach().reshape(-1, self.n_heads, self.head_dim)
        return (x.abs() > self.threshold).any(-1).cpu().numpy()

    def _group_counts(self, x) -> np.ndarray:
        fired = (x.detach().reshape(-1, self.intermediate).abs() > self.threshold).cpu().numpy()
        pad = GROUP * len(self.group_sizes) - self.intermediate
        if pad:
            fired = np.pad(fired, ((0, 0), (0, pad)))
        return fired.reshape(len(fired), -1, GROUP).sum(-1, dtype=np.uint8)   # ≤ GROUP = 64

    @property
    def activity(self) -> Activity:
        """Everything recorded so far (the layers agree on the token count)."""
        counts = {sum(len(a) for a in chunks) for chunks in self._heads + self._groups}
        if len(counts) > 1:
            raise RuntimeError(f"the compiled layers saw different token counts {sorted(counts)}")
        n = counts.pop() if counts else 0

        def stack(per_layer: list[list[np.ndarray]], width: int, dtype) -> np.ndarray:
            if n == 0:
                return np.zeros((0, len(per_layer), width), dtype=dtype)
            return np.stack([np.concatenate(chunks) for chunks in per_layer], axis=1)

        return Activity(stack(self._heads, self.n_heads, bool),
                        stack(self._groups, len(self.group_sizes), np.uint8),
                        self.group_sizes.copy(), self.roles)


@dataclass
class _Row:
    layer: int
    half: str        # "attn" or "mlp"
    values: np.ndarray   # [tokens] in [0, 1]
    label: str       # which head, or which neurons


def _rows(activity: Activity) -> list[_Row]:
    """Per layer (numbered as the merged model's tensors, `model.layers.N`),
    its value heads, then its neuron groups."""
    rows = []
    for layer in range(activity.layers):
        for h in range(activity.heads.shape[2]):
            rows.append(_Row(layer, "attn", activity.heads[:, layer, h].astype(np.float32),
                             f"{layer}: head {h}"))
        first = 0
        for g, size in enumerate(activity.group_sizes):
            rows.append(_Row(layer, "mlp", activity.groups[:, layer, g] / np.float32(size),
                             f"{layer}: neurons {first}-{first + size - 1}"))
            first += size
    return rows


def _shade(colour: np.ndarray, values: np.ndarray) -> np.ndarray:
    """White → `colour`; any firing at least a quarter strong, to be seen."""
    strength = np.where(values > 0, 0.25 + 0.75 * values, 0.0)[..., None]
    return 1 - strength * (1 - colour)


def _colour_scales(fig, ax, height: float) -> None:
    """One colour bar per half, at the top with the token axis: the share of
    a group's neurons that fired, and whether a head read a written row."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import BoundaryNorm, ListedColormap, Normalize

    bars = dict(ax=ax, location="top", fraction=0.18 / height, pad=0.3 / height,
                shrink=0.45, anchor=(0.0, 0.0), panchor=(0.0, 1.0))
    share = np.linspace(0, 1, 256)
    mlp = fig.colorbar(ScalarMappable(Normalize(0, 1), ListedColormap(_shade(MLP_RGB, share))),
                       **bars)
    mlp.set_label(f"MLP: share of a group's {GROUP} neurons that fired", fontsize=7)
    heads = fig.colorbar(ScalarMappable(BoundaryNorm([0, 0.5, 1], 2),
                                        ListedColormap(_shade(HEAD_RGB, np.array([0.0, 1.0])))),
                         ticks=[0.25, 0.75], **bars)
    heads.ax.set_xticklabels(["no", "yes"])
    heads.set_label("linear attention: the head read a written row", fontsize=7)
    for bar in (mlp, heads):
        bar.ax.tick_params(labelsize=6)


def _columns(values: np.ndarray, per: int) -> np.ndarray:
    """[rows, tokens] → [rows, columns]: each column the maximum of `per` tokens."""
    n = values.shape[1]
    cols = math.ceil(n / per)
    padded = np.zeros((values.shape[0], cols * per), dtype=values.dtype)
    padded[:, :n] = values
    return padded.reshape(values.shape[0], cols, per).max(-1)


def _label_rows(ax, rows: list[_Row], activity: Activity) -> list[str]:
    """Each row its head or neurons on the left; each layer half its tensor
    name and role on the right, between separators."""
    ax.set_yticks(range(len(rows)), [r.label for r in rows], fontsize=4)
    ax.set_ylabel("model.layers.N: head, or MLP neurons")
    right = ax.secondary_yaxis("right")
    ticks, labels = [], []
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or (rows[i].layer, rows[i].half) != (rows[start].layer, rows[start].half):
            r = rows[start]
            ticks.append((start + i - 1) / 2)
            role = activity.role(r.layer)
            labels.append(f"model.layers.{r.layer} {r.half}"
                          + ("" if role == "step" else f" ({role})"))
            if i < len(rows):
                new_layer = rows[i].layer != r.layer
                ax.axhline(i - 0.5, color="black" if new_layer else "grey",
                           linewidth=0.8 if new_layer else 0.3)
            start = i
    right.set_yticks(ticks, labels, fontsize=6)
    return labels


def _label_tokens(ax, tokens: Sequence[P.Token], per: int, n_cols: int, width: float) -> None:
    """Every token's spelling where the width holds them, else EXEC / END /
    TRAP; a label is dropped where it would overlap the one before (a rotated
    5-point label takes about 9 pixels). The axis is drawn at the top and
    the bottom, so a tall picture shows it wherever one looks."""
    gap = 9 * n_cols / (width * 100 * 0.85)
    marks = range(len(tokens)) if per == 1 and gap <= 1 else \
        [i for i, t in enumerate(tokens) if t.kind in LABELLED]
    kept: list[int] = []
    for i in marks:
        if not kept or i // per - kept[-1] // per >= gap:
            kept.append(i)
    ax.set_xticks([i // per for i in kept], [tokens[i].spelled() for i in kept],
                  rotation=90, fontsize=5)
    ax.tick_params(axis="x", top=True, labeltop=True)
    ax.set_xlabel("token" if per == 1 else f"token ({per} per column, the most fired)")


def draw_trace(activity: Activity, tokens: Sequence[P.Token], path: str | Path,
               title: str = "qgc trace", collapse: bool | None = None) -> dict[str, Any]:
    """The activity as a PNG at `path`, written atomically; returns a summary.

    Columns are `tokens` (a fed token's column shows what its forward fired;
    the stream's last token, named but never fed, is grey). All-zero rows are
    left out when `collapse`, by default when there are more than `MAX_ROWS`."""
    from matplotlib.figure import Figure  # Agg by default: no pyplot, no display

    n_tokens = max(len(tokens), len(activity))
    rows = _rows(activity)
    total = len(rows)
    if collapse is None:
        collapse = total > MAX_ROWS
    if collapse:
        rows = [r for r in rows if r.values.any()]
    omitted = total - len(rows)

    values = np.zeros((len(rows), n_tokens), dtype=np.float32)
    for i, r in enumerate(rows):
        values[i, :len(r.values)] = r.values
    is_attn = np.array([r.half == "attn" for r in rows], dtype=bool)
    fed = np.zeros(n_tokens, dtype=np.float32)
    fed[:len(activity)] = 1
    per = max(1, math.ceil(n_tokens / MAX_COLUMNS))
    if per > 1:
        values, fed = _columns(values, per), _columns(fed[None], per)[0]
    n_cols = values.shape[1]

    colour = np.where(is_attn[:, None, None], HEAD_RGB, MLP_RGB)
    rgb = _shade(colour, values)
    rgb[:, fed == 0] = UNRUN_RGB

    width = min(80.0, max(10.0, 4.5 + 0.06 * n_cols))
    height = min(80.0, max(4.0, 2.0 + 0.09 * len(rows)))
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    if len(rows):
        ax.imshow(rgb, aspect="auto", interpolation="nearest",
                  extent=(-0.5, n_cols - 0.5, len(rows) - 0.5, -0.5))
    ax.set_xlim(-0.5, max(n_cols, 1) - 0.5)
    ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)
    halves = _label_rows(ax, rows, activity)
    _label_tokens(ax, tokens, per, n_cols, width)
    _colour_scales(fig, ax, height)

    unit = f", {per} tokens per column" if per > 1 else ""
    fig.suptitle("\n".join([
        title,
        f"{n_tokens} tokens ({len(activity)} fed{unit}); {len(rows)} rows drawn, {omitted} "
        "never-firing rows omitted",
        "rows: model.layers.N, as the merged model's tensors are named",
        f"blue: a head read a written row; orange: share of a group's {GROUP} neurons that "
        "fired; grey: not fed"]), fontsize=8)

    path = Path(path)
    # a fresh name beside the target, created with the umask's permissions
    # (mkstemp's 0600 would stay on the renamed PNG)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as f:
            fig.savefig(f, format="png")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {"tokens": n_tokens, "fed": len(activity), "rows": len(rows), "omitted": omitted,
            "tokens_per_column": per, "path": str(path),
            "row_labels": [r.label for r in rows], "layer_labels": halves}
