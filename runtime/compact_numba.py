"""The compact engine's compiled CPU backend: one numba function runs a whole
decode step (every layer of a `CompactPlan`, then the readout's choice of
token) over the plan's weights packed into flat arrays.

`CompactStepper` (runtime/compact.py) is the readable form of the same step
in torch; this one packs each projection as CSR rows (the row it writes, the
input coordinates it reads, their weights) in one pool, the vectors (norms,
taps, gates) in another, the recurrent states and convolution windows in a
third, and walks them with plain loops in float32: no per-op dispatch, so a
token costs what its non-zeros cost. The next token's choice (codes · h)
is numpy's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from qgc import protocol as P
from qgc.runtime.compact import Block, CompactLayer, CompactPlan

try:
    import numba
except ImportError:          # the torch form runs without it
    numba = None

#: the fields of a layer's row of `Packed.layers` (ints)
(HEADS, DK, DV, CONV_IDENTITY, DECAYS, QKV, Z, B, A, OUT, GATE, UP, DOWN, NORM_IN, NORM_POST,
 CONV, DECAY, DT_BIAS, HEAD_NORM, STATE, WINDOW, TAPS, NEURONS, FIELDS) = range(24)
#: the projections' order in a layer's row
MATRICES = ("qkv", "z", "b", "a", "out", "gate", "up", "down")


class Packed:
    """A `CompactPlan` as flat arrays: matrices (CSR rows: `row_of` the
    output position each row writes, `starts` its first entry), floats,
    and the per-layer table `layers` of offsets."""

    def __init__(self, plan: CompactPlan):
        self.row_of: list[int] = []
        self.starts: list[int] = [0]
        self.index: list[np.ndarray] = []
        self.value: list[np.ndarray] = []
        self.matrix_rows: list[int] = [0]       # matrix m's rows: matrix_rows[m]..[m + 1]
        self.floats: list[np.ndarray] = []
        self.float_size = 0
        self.state_size = self.window_size = 0
        self.layers = np.array([self._layer(layer) for layer in plan.layers],
                               dtype=np.int64).reshape(-1, FIELDS)
        self.row_of_a = np.array(self.row_of, dtype=np.int64)
        self.starts_a = np.array(self.starts, dtype=np.int64)
        self.index_a = np.concatenate(self.index or [np.zeros(0, np.int64)]).astype(np.int64)
        self.value_a = np.concatenate(self.value or [np.zeros(0, np.float32)]).astype(np.float32)
        self.matrix_rows_a = np.array(self.matrix_rows, dtype=np.int64)
        self.floats_a = np.concatenate(self.floats or [np.zeros(0, np.float32)]).astype(
            np.float32)

    def _matrix(self, block: Block, scatter: bool) -> int:
        """Append `block` as CSR rows; its matrix number."""
        w = block.weight.to_dense() if block.weight.layout == torch.sparse_csr else block.weight
        w = w.numpy()
        rows = (block.rows[block.filled] if scatter else block.filled).numpy()
        cols = block.cols.numpy()
        for position, row in zip(rows, w, strict=True):
            nz = np.flatnonzero(row)
            self.row_of.append(int(position))
            self.index.append(cols[nz])
            self.value.append(row[nz])
            self.starts.append(self.starts[-1] + len(nz))
        self.matrix_rows.append(len(self.row_of))
        return len(self.matrix_rows) - 2

    def _floats(self, t: torch.Tensor) -> int:
        at = self.float_size
        self.floats.append(t.detach().numpy().astype(np.float32).reshape(-1))
        self.float_size += t.numel()
        return at

    def _layer(self, layer: CompactLayer) -> list[int]:
        row = [0] * FIELDS
        n = len(layer.heads)
        row[HEADS], row[DK], row[DV] = n, layer.dk, layer.dv
        row[CONV_IDENTITY] = int(layer.conv_identity)
        row[DECAYS] = int(bool(layer.a.cols.numel()) or not layer.no_decay)
        for field, name in zip((QKV, Z, B, A, OUT, GATE, UP, DOWN), MATRICES, strict=True):
            row[field] = self._matrix(getattr(layer, name), scatter=name in ("out", "down"))
        row[NORM_IN], row[NORM_POST] = self._floats(layer.norm_in), self._floats(layer.norm_post)
        row[CONV], row[TAPS] = self._floats(layer.conv), layer.conv.shape[1]
        row[DECAY], row[DT_BIAS] = self._floats(layer.decay), self._floats(layer.dt_bias)
        row[HEAD_NORM] = self._floats(layer.head_norm)
        row[NEURONS] = len(layer.gate.rows)
        row[STATE], row[WINDOW] = self.state_size, self.window_size
        self.state_size += n * layer.dk * layer.dv
        self.window_size += layer.conv.shape[0] * max(layer.conv.shape[1] - 1, 0)
        return row


def packed(plan: CompactPlan) -> Packed:
    """The plan's packed arrays, made once per plan (steppers share them)."""
    if getattr(plan, "_packed", None) is None:
        plan._packed = Packed(plan)          # type: ignore[attr-defined]
    return plan._packed                       # type: ignore[attr-defined]


class NumbaStepper:
    """`CompactStepper`'s step, compiled: a stepper of runtime/trace.py."""

    def __init__(self, plan: CompactPlan):
        if numba is None:
            raise ImportError("numba is not installed: use the torch backend")
        self.plan, self.packed = plan, packed(plan)
        self.rows = plan.rows.numpy().astype(np.float32)
        self.code = np.array(plan.code, dtype=np.int64)
        self.codes = plan.codes.numpy().astype(np.float32)
        self.state = np.zeros(self.packed.state_size, np.float32)
        self.window = np.zeros(self.packed.window_size, np.float32)

    def __call__(self, token: P.Token) -> P.Token | None:
        p = self.packed
        h = self.rows[self.plan.vocab.id_of(token)].copy()
        _step(h, p.layers, p.row_of_a, p.starts_a, p.index_a, p.value_a, p.matrix_rows_a,
              p.floats_a, self.state, self.window, np.float32(self.plan.eps))
        # the readout's choice in numpy's BLAS (numba's matmul needs scipy)
        return self.plan.vocab.token(int(np.argmax(self.codes @ h[self.code])))

    def prefill(self, tokens: Sequence[P.Token]) -> None:
        for token in tokens:
            self(token)


def _jit(fn):
    return numba.njit(cache=True, fastmath=False)(fn) if numba is not None else fn


@_jit
def _matvec(m, x, out, accumulate, row_of, starts, index, value, matrix_rows):
    """out[row] (+)= Σ value · x[index] over matrix m's CSR rows."""
    for r in range(matrix_rows[m], matrix_rows[m + 1]):
        s = np.float32(0.0)
        for e in range(starts[r], starts[r + 1]):
            s += value[e] * x[index[e]]
        if accumulate:
            out[row_of[r]] += s
        else:
            out[row_of[r]] = s


@_jit
def _rms(x, weight, eps):
    s = np.float32(0.0)
    for v in x:
        s += v * v
    scale = np.float32(1.0) / np.sqrt(s / np.float32(len(x)) + eps)
    return x * scale * weight


@_jit
def _silu(v):
    return v / (np.float32(1.0) + np.exp(-v))


@_jit
def _step(h, layers, row_of, starts, index, value, matrix_rows, floats, state, window, eps):
    """Every layer on the residual `h`, in place."""
    hidden = len(h)
    for li in range(layers.shape[0]):
        L = layers[li]
        x = _rms(h, floats[L[NORM_IN]:L[NORM_IN] + hidden], eps)
        n, dk, dv = L[HEADS], L[DK], L[DV]
        if n > 0:
            width = n * (2 * dk + dv)
            mixed = np.zeros(width, np.float32)
            _matvec(L[QKV], x, mixed, False, row_of, starts, index, value, matrix_rows)
            taps = L[TAPS]
            if not L[CONV_IDENTITY]:
                conv = floats[L[CONV]:L[CONV] + width * taps]
                w0 = L[WINDOW]
                for c in range(width):
                    s = conv[c * taps + taps - 1] * mixed[c]
                    for j in range(taps - 1):
                        s += conv[c * taps + j] * window[w0 + c * (taps - 1) + j]
                    for j in range(taps - 2):
                        window[w0 + c * (taps - 1) + j] = window[w0 + c * (taps - 1) + j + 1]
                    window[w0 + c * (taps - 1) + taps - 2] = mixed[c]
                    mixed[c] = s
            for c in range(width):
                mixed[c] = _silu(mixed[c])
            z = np.zeros(n * dv, np.float32)
            _matvec(L[Z], x, z, False, row_of, starts, index, value, matrix_rows)
            b = np.zeros(n, np.float32)
            _matvec(L[B], x, b, False, row_of, starts, index, value, matrix_rows)
            a = np.zeros(n, np.float32)
            _matvec(L[A], x, a, False, row_of, starts, index, value, matrix_rows)
            o_all = np.zeros(n * dv, np.float32)
            head_norm = floats[L[HEAD_NORM]:L[HEAD_NORM] + dv]
            for hd in range(n):
                q = mixed[hd * dk:(hd + 1) * dk].copy()
                k = mixed[n * dk + hd * dk:n * dk + (hd + 1) * dk].copy()
                v = mixed[2 * n * dk + hd * dv:2 * n * dk + (hd + 1) * dv]
                q *= np.float32(1.0) / np.sqrt(np.sum(q * q) + np.float32(1e-6))
                q /= np.sqrt(np.float32(dk))
                k *= np.float32(1.0) / np.sqrt(np.sum(k * k) + np.float32(1e-6))
                beta = np.float32(1.0) / (np.float32(1.0) + np.exp(-b[hd]))
                S = state[L[STATE] + hd * dk * dv:L[STATE] + (hd + 1) * dk * dv].reshape(dk, dv)
                if L[DECAYS]:
                    t = a[hd] + floats[L[DT_BIAS] + hd]
                    soft = np.log1p(np.exp(t)) if t < 20 else t
                    S *= np.exp(floats[L[DECAY] + hd] * soft)
                delta = np.zeros(dv, np.float32)
                for d in range(dk):
                    kd = k[d]
                    if kd != 0:
                        for j in range(dv):
                            delta[j] += S[d, j] * kd
                for j in range(dv):
                    delta[j] = (v[j] - delta[j]) * beta
                o = np.zeros(dv, np.float32)
                for d in range(dk):
                    kd, qd = k[d], q[d]
                    if kd != 0:
                        for j in range(dv):
                            S[d, j] += kd * delta[j]
                    if qd != 0:
                        for j in range(dv):
                            o[j] += S[d, j] * qd
                o = _rms(o, head_norm, eps)
                for j in range(dv):
                    o_all[hd * dv + j] = o[j] * _silu(z[hd * dv + j])
            _matvec(L[OUT], o_all, h, True, row_of, starts, index, value, matrix_rows)
        x = _rms(h, floats[L[NORM_POST]:L[NORM_POST] + hidden], eps)
        if L[NEURONS] > 0:
            gate = np.zeros(L[NEURONS], np.float32)
            up = np.zeros(L[NEURONS], np.float32)
            _matvec(L[GATE], x, gate, False, row_of, starts, index, value, matrix_rows)
            _matvec(L[UP], x, up, False, row_of, starts, index, value, matrix_rows)
            for j in range(len(gate)):
                gate[j] = _silu(gate[j]) * up[j]
            _matvec(L[DOWN], gate, h, True, row_of, starts, index, value, matrix_rows)
