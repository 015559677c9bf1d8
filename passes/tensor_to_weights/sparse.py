"""Sparse decoder-layer weights: the constants the gadgets are solved for,
bfloat16 exactness, the parameter shapes of a Qwen3.5 linear-attention
decoder layer, and the affine rows every gadget is made of (the encoding is
described in `codegen.py`)."""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from qgc.dialects import tensor as T

# ------------------------------------------------------------------ constants

FLAG_VALUE = 8.0          # the flag coordinate; x_flag = 1 after the norm
ENERGY_PER_COORD = 64     # sum(h²) = 64·hidden: RMSNorm scale exactly 1/8
NEURON_SCALE = 256.0      # gate 256·G, up U/256
KEY_ON = 64.0             # key pre-activation at the addressed slot
QUERY_ON = 251.0          # query pre-activation at the addressed slot
QUERY_PARTNER = 26.75     # query pre-activation at the partner slot
PARTNER_SLOT = 127        # never written: keeps the query's l2 norm exact
VALUE_ON = 256.0          # value pre-activation of the active dimension of a group
SILENT = -96.0            # a pre-activation ≤ this is exactly −0 after SiLU
BETA_PRE = 32.0           # sigmoid(32) == 1.0 in float32 and bfloat16
Z_PRE = 32.0              # SiLU(32) == 32
NORM_WEIGHT = 1.0 / 64.0  # gated norm weight: 2 · 1/64 · 32 = 1
A_LOG = -30.0             # g = −e^−30·ln 2: e^g == 1.0, no decay
OUT_WEIGHT = 2.0          # a set bit moves its coordinate from −1 to +1
HEAD_DIM = 128            # key and value head dims the constants above are solved for
MAX_EPS = 2e-6            # rms_norm_eps that 64 + eps and 126.5625 + eps still round away


class CodegenError(Exception):
    """The program does not fit the config, or a weight would not be exact."""


def is_bf16(value: float) -> bool:
    """True when `value` is exactly representable in bfloat16 (8 significant bits)."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0] if math.isfinite(value) and \
        abs(value) < 3.4e38 else 1
    return bits & 0xFFFF == 0 and struct.unpack("<f", struct.pack("<I", bits))[0] == value


def _bf16_mask(values: np.ndarray) -> np.ndarray:
    """`is_bf16` of every float64 in `values`, at once."""
    finite = np.isfinite(values) & (np.abs(values) < 3.4e38)
    narrow = np.where(finite, values, 0.0).astype(np.float32)
    return finite & (narrow == values) & (narrow.view(np.uint32) & 0xFFFF == 0)


def _bf16_values(lo: float, hi: float) -> list[float]:
    out = []
    e = math.floor(math.log2(lo)) if lo > 0 else 0
    while 2.0 ** e <= hi:
        for m in range(128, 256):
            v = m * 2.0 ** (e - 7)
            if lo <= v <= hi:
                out.append(v)
        e += 1
    return sorted(set(out))


def conjunction_penalties(on: float, n: int) -> list[float]:
    """Per-bit penalties A_i for a pre-activation `on − Σ A_i·mismatch_i`: every
    mismatch silences (on − A_i ≤ −96), and the weights ±4A_i and the flag
    constant on − Σ A_i/2 are exact in bfloat16."""
    return list(_penalties(on, n))


@functools.cache
def _penalties(on: float, n: int) -> tuple[float, ...]:
    """`conjunction_penalties`, once per (on, n): codegen asks thousands of
    times for a handful of decoders."""
    if n == 0:
        return ()
    candidates = _bf16_values(on - SILENT, 64 * (on - SILENT))
    for a in candidates:
        if is_bf16(4 * a) and is_bf16(on - n * a / 2):
            return (a,) * n
    for a in candidates:
        if not is_bf16(4 * a):
            continue
        for last in candidates:
            if is_bf16(4 * last) and is_bf16(on - (n - 1) * a / 2 - last / 2):
                return (a,) * (n - 1) + (last,)
    raise CodegenError(f"no bfloat16-exact decoder of {n} bits to pre-activation {on}")


# --------------------------------------------------------------- sparse weights

@dataclass
class SparseLayer:
    """The non-zero weights of one decoder layer: parameter → {index: value}."""

    index: int
    weights: dict[str, dict[tuple[int, ...], float]] = field(default_factory=dict)

    def add(self, name: str, index: tuple[int, ...], value: float) -> None:
        table = self.weights.setdefault(name, {})
        v = table.get(index, 0.0) + value
        if v == 0.0:
            table.pop(index, None)
        else:
            table[index] = v

    def set(self, name: str, index: tuple[int, ...], value: float) -> None:
        self.weights.setdefault(name, {})[index] = value

    def nnz(self) -> int:
        return sum(len(t) for t in self.weights.values())

    def check_bf16(self) -> None:
        for name, table in self.weights.items():
            values = np.fromiter(table.values(), dtype=np.float64, count=len(table))
            exact = _bf16_mask(values)
            if not exact.all():
                index, v = list(table.items())[int(np.argmin(exact))]   # the first inexact
                raise CodegenError(f"layer {self.index} {name}{list(index)} = {v!r} is not "
                                   "exact in bfloat16")


def affine(layer: SparseLayer, name: str, row: int, terms: Sequence[tuple[int, float]],
           const: float, scale: float = 1.0) -> None:
    """Row `row` of projection `name` computes scale·(Σ α·b + γ) from the bits
    b at coordinates c (b = 4·x_c + x_flag/2)."""
    flag = const
    for c, alpha in terms:
        layer.add(name, (row, c), scale * 4 * alpha)
        flag += alpha / 2
    layer.add(name, (row, T.ProgramOp.FLAG), scale * flag)


def conjunction(layer: SparseLayer, name: str, row: int,
                required: Sequence[tuple[int, int]], on: float) -> None:
    """Pre-activation `on` when every (coordinate, bit) matches, ≤ −96 otherwise."""
    pens = conjunction_penalties(on, len(required))
    terms = [(c, a if want else -a) for (c, want), a in zip(required, pens, strict=True)]
    const = on - sum(a for (_, want), a in zip(required, pens, strict=True) if want)
    affine(layer, name, row, terms, const)
