"""The compact engine's GPU backend: a `CompactPlan`'s decode step as a few
Triton kernels per layer, for `batch` launches in lockstep and for several
tokens of each at once.

`CompactStepper` (runtime/compact.py) is the step in readable torch and
`NumbaStepper` (runtime/compact_numba.py) the same step compiled for one
CPU core; this one runs it where the GPU tokens of many launches share one
pass over the weights. A compiled layer's projections are a few thousand
short sparse rows, so a step is launch-bound: a layer is at most five
launches, each fusing what it can up to the next grid-wide dependency (a
launch that normalizes h needs all of it):

1. `_sparse_rows`, MIXER: the input RMSNorm, the q/k/v/z/b/a rows (one
   matrix), the causal convolution (where its taps are not the identity)
   and SiLU of q/k/v, SiLU of z;
2. `_delta_heads`: per used head and batch row, over the pass's tokens in
   order, l2norm, the gated delta rule on the recurrent state, the gated
   RMSNorm times silu(z);
3. `_sparse_rows`, ADD: the output projection added to h;
4. `_sparse_rows`, MLP: the post-attention RMSNorm, each used neuron's gate
   and up rows (adjacent), silu(gate)·up;
5. `_sparse_rows`, ADD: the down projection added to h.

A layer without used heads is the last two. A pass (`steps`) takes T tokens
of each batch row as batch × T rows: only the delta rule runs through
them in order, so a launch prompt is one pass, not one per token (the
convolution's window is per token in the MIXER epilogue, so a plan with
one takes a token a pass; compiled layers have none). A matrix is held as
sliced ELL: rows sorted longest first, in blocks of `block_rows`, each
block's entries stored entry-major and padded with zeros to its longest
row, so a program loads its block's weights without masks, once for its
tile of rows (the grid: row blocks × row tiles), `chunk` entries a loop.
An RMSNorm's weight is folded into the matrix it feeds and its scale
applied to the row sums, and sums within a chunk are trees: float32 like
the other backends, not bit for bit theirs (compiled kernels round products
before adding them, as they do). The next GPU token (codes · h, the first
maximum) is chosen by torch on the device.

The kernels run compiled on CUDA tensors and in Triton's interpreter on CPU
tensors (how CI runs them). Triton picks one of the two when a function is
decorated, by TRITON_INTERPRET, and decorates its own library functions
(`tl.sum`, `tl.zeros`, …) when triton is imported: so the kernels call
only builtins (`tl.reduce` with the library's sum combiner, which the
interpreter runs as numpy's sum), and a stepper on a CPU device runs each
kernel's Python function in the interpreter whatever TRITON_INTERPRET said
at import. The interpreter pays per operation before it pays per element:
its tiles (`INTERPRETER_TILES`) are large and fitted to each matrix, and
index arithmetic is in int64, which it does not check for overflow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from qgc import protocol as P
from qgc.runtime.compact import Block, CompactLayer, CompactPlan

try:
    import triton
    import triton.language as tl
except ImportError:           # the torch and numba backends run without it
    triton = tl = None

_jit = triton.jit if triton is not None else (lambda fn: fn)
#: the library's sum combiner: `tl.reduce` with it is `tl.sum` (see above)
_SUM = tl.standard._sum_combine if tl is not None else None

#: `_sparse_rows` modes, as its (NORMED, GATED, ADDS)
MIXER, MLP, ADD = (True, False, False), (True, True, False), (False, False, True)


@dataclass(frozen=True)
class Tiles:
    """Program shapes, at most: matrix rows per block, entries per chunk,
    (batch row, head) pairs per `_delta_heads` program, rows per
    `_sparse_rows` program and elements of its tiles (rows × block rows ×
    chunk); with `fit`, each matrix's block rows and chunk are the ones of
    least interpreter time (`INTERPRETER_COSTS`)."""

    block_rows: int
    chunk: int
    heads: int
    rows: int
    elements: int
    fit: bool = False


GPU_TILES = Tiles(block_rows=64, chunk=16, heads=1, rows=4, elements=4096)
INTERPRETER_TILES = Tiles(block_rows=1 << 16, chunk=1 << 12, heads=64, rows=64,
                          elements=1 << 18, fit=True)
#: compiled kernels round products before adding them (no FMA contraction), as
#: the CPU backends do (the interpreter ignores it)
COMPILE = dict(enable_fp_fusion=False)
#: what the interpreter spends (s, on one core) on a program, on a chunk of a
#: row block, on a tile element per row: it pays per operation first
INTERPRETER_COSTS = (3e-3, 0.5e-3, 40e-9)


@_jit
def _sparse_rows(x, x_stride, x_len, eps, index, value, bases, widths, row_of,
                 out, out_stride, window, window_stride, conv, conv_end, silu_end,
                 NORMED: tl.constexpr, GATED: tl.constexpr, ADDS: tl.constexpr,
                 BB: tl.constexpr, BLOCK_R: tl.constexpr,
                 CHUNK: tl.constexpr, BLOCK_X: tl.constexpr, CONV: tl.constexpr,
                 TAPS: tl.constexpr, BLOCK_T: tl.constexpr):
    """Row block `block` of a sliced-ELL matrix times rows `BB·tile …` of
    `x` (`NORMED`: RMSNormed, the norm's weight in the matrix's and its scale
    applied to the sums) into the same rows of `out`: stored (after SiLU up
    to `silu_end`, and first a causal convolution up to `conv_end` with
    `CONV`), `GATED` (rows 2i and 2i + 1 are output i's gate and up:
    silu(gate)·up stored) or added (`ADDS`). Tiles are (rows, matrix rows[,
    entries]); padding rows are zero and write `out`'s last column, which
    nothing reads."""
    block = tl.program_id(0).to(tl.int64)
    bb = tl.program_id(1).to(tl.int64) * BB + tl.arange(0, BB)
    xb = x + bb * x_stride
    if NORMED:
        k = tl.arange(0, BLOCK_X)[None, :]
        hv = tl.load(xb[:, None] + k, mask=k < x_len, other=0.0)
        mean = tl.div_rn(tl.reduce(hv * hv, 1, _SUM), tl.full([BB], x_len, tl.float32))
        scale = tl.div_rn(1.0, tl.sqrt_rn(mean + eps))
    xb = xb[:, None, None]
    cells = tl.arange(0, CHUNK)[None, :] * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    base = tl.load(bases + block)
    acc = tl.full([BB, BLOCK_R], 0.0, tl.float32)
    for j0 in range(0, tl.load(widths + block), CHUNK):
        at = base + j0 * BLOCK_R + cells
        xv = tl.load(xb + tl.load(index + at)[None, :, :])
        acc += tl.reduce(tl.load(value + at)[None, :, :] * xv, 2, _SUM)
    if NORMED:
        acc = acc * scale[:, None]
    ob = (out + bb * out_stride)[:, None]
    if GATED:
        gate, up = tl.split(tl.reshape(acc, [BB, BLOCK_R // 2, 2]))
        ob += tl.load(row_of + block * (BLOCK_R // 2) + tl.arange(0, BLOCK_R // 2))[None, :]
        tl.store(ob, tl.div_rn(gate, 1.0 + tl.exp(-gate)) * up)
    else:
        p = tl.load(row_of + block * BLOCK_R + tl.arange(0, BLOCK_R))[None, :]
        ob += p
        if ADDS:
            tl.store(ob, tl.load(ob) + acc)
        else:
            if CONV:      # the causal convolution: the window, then this token
                on = (p < conv_end)[:, :, None]
                t = tl.arange(0, BLOCK_T)[None, None, :]
                wb = (window + bb[:, None] * window_stride + p * (TAPS - 1))[:, :, None]
                seq = tl.where(t == TAPS - 1, acc[:, :, None],
                               tl.load(wb + t, mask=on & (t < TAPS - 1), other=0.0))
                taps = tl.load(conv + p[:, :, None] * TAPS + t, mask=on & (t < TAPS), other=0.0)
                tl.store(wb + t - 1, seq, mask=on & (t >= 1) & (t < TAPS))
                acc = tl.where(p < conv_end, tl.reduce(taps * seq, 2, _SUM), acc)
            tl.store(ob, tl.where(p < silu_end, tl.div_rn(acc, 1.0 + tl.exp(-acc)), acc))


@_jit
def _delta_heads(u, u_stride, state, state_stride, o, o_stride, decay, dt_bias, head_norm,
                 heads, slots, steps, root_dk, eps, DK: tl.constexpr, DV: tl.constexpr,
                 HB: tl.constexpr, DECAYS: tl.constexpr):
    """(batch row, head) pairs `HB·pid …` over `steps` tokens (row
    b·steps + t of `u` and `o`): the gated delta rule on q, k, v (SiLU'd) of
    `u` = [q | k | v | silu(z) | b | a], the state held across the tokens,
    the gated RMSNorm's output times silu(z) into `o` (`root_dk`: √DK in
    float32)."""
    s = tl.program_id(0).to(tl.int64) * HB + tl.arange(0, HB)
    live = s < slots
    b, hd = s // heads, s % heads
    on = live[:, None]
    d, j = tl.arange(0, DK)[None, :], tl.arange(0, DV)[None, :]
    qs = (hd * DK)[:, None] + d                          # q's columns of u; k's: + heads·DK
    vs = (2 * heads * DK + hd * DV)[:, None] + j         # v's; silu(z)'s: + heads·DV
    gates = 2 * heads * (DK + DV) + hd                   # b's; a's: + heads
    at = ((state + b * state_stride + hd * (DK * DV))[:, None, None]
          + (tl.arange(0, DK)[:, None] * DV + j)[None, :, :])
    st = tl.load(at, mask=on[:, :, None], other=0.0)
    norm = tl.load(head_norm + j)
    if DECAYS:
        bias = tl.load(dt_bias + hd, mask=live, other=0.0)
        rate = tl.load(decay + hd, mask=live, other=0.0)
    for t in range(steps):
        row = b * steps + t
        ub = u + row * u_stride
        q = tl.load(ub[:, None] + qs, mask=on, other=0.0)
        k = tl.load(ub[:, None] + qs + heads * DK, mask=on, other=0.0)
        v = tl.load(ub[:, None] + vs, mask=on, other=0.0)
        z = tl.load(ub[:, None] + vs + heads * DV, mask=on, other=0.0)
        beta = tl.div_rn(1.0, 1.0 + tl.exp(-tl.load(ub + gates, mask=live, other=0.0)))
        q = q * tl.div_rn(1.0, tl.sqrt_rn(tl.reduce(q * q, 1, _SUM) + 1e-6))[:, None]
        q = tl.div_rn(q, root_dk)
        k = k * tl.div_rn(1.0, tl.sqrt_rn(tl.reduce(k * k, 1, _SUM) + 1e-6))[:, None]
        if DECAYS:    # exp(−exp(A_log) · softplus(a + dt_bias)); log1p by Goldberg's rule
            x = tl.load(ub + gates + heads, mask=live, other=0.0) + bias
            e = tl.exp(x)
            grown = 1.0 + e
            log1p = tl.where(grown == 1.0, e, tl.div_rn(tl.log(grown) * e, grown - 1.0))
            st = st * tl.exp(rate * tl.where(x < 20.0, log1p, x))[:, None, None]
        delta = (v - tl.reduce(st * k[:, :, None], 1, _SUM)) * beta[:, None]
        st = st + k[:, :, None] * delta[:, None, :]
        out = tl.reduce(st * q[:, :, None], 1, _SUM)
        mean = tl.div_rn(tl.reduce(out * out, 1, _SUM), tl.full([HB], DV, tl.float32))
        out = out * tl.div_rn(1.0, tl.sqrt_rn(mean + eps))[:, None] * norm
        tl.store((o + row * o_stride)[:, None] + (hd * DV)[:, None] + j, out * z, mask=on)
    tl.store(at, st, mask=on[:, :, None])


@dataclass
class _Rows:
    """Matrix rows on the host: each row's output position and entries
    (input coordinate, weight), row after row."""

    position: np.ndarray
    lens: np.ndarray
    index: np.ndarray
    value: np.ndarray

    @classmethod
    def of(cls, block: Block, scatter: bool = False, offset: int = 0) -> _Rows:
        """`block`'s rows: every row it stands for at `offset` + its
        position, or (`scatter`) its non-zero rows at their output rows."""
        w = block.weight.to_dense() if block.weight.layout == torch.sparse_csr else block.weight
        w = w.numpy()
        r, c = np.nonzero(w)                  # row by row, columns ascending
        filled = block.filled.numpy()
        if scatter:
            position, lens = block.rows.numpy()[filled], np.bincount(r, minlength=len(filled))
        else:
            position = np.arange(len(block.rows)) + offset
            lens = np.bincount(filled[r], minlength=len(block.rows))
        return cls(position, lens, block.cols.numpy()[c], w[r, c])

    def normed(self, norm: torch.Tensor) -> _Rows:
        """The rows times an RMSNorm's weight (`norm`) on their inputs."""
        return _Rows(self.position, self.lens, self.index,
                     self.value * norm.numpy().astype(np.float32)[self.index])

    @classmethod
    def concat(cls, parts: Sequence[_Rows]) -> _Rows:
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                     ("position", "lens", "index", "value")))


@dataclass
class _Sparse:
    """A matrix on the device, sliced ELL: block k's `block_rows` rows hold
    `widths[k]` entries each (a multiple of `chunk`) at `bases[k]`,
    entry-major; a row's output position in `row_of` (per `group` rows)."""

    blocks: int
    block_rows: int
    chunk: int
    row_of: torch.Tensor
    index: torch.Tensor
    value: torch.Tensor
    bases: torch.Tensor
    widths: torch.Tensor


class _Matrix:
    """One `_sparse_rows` launch's matrix: rows i of each of `parts` (the
    same output positions) as adjacent rows (gate and up in MLP mode),
    sorted longest first; a `_Sparse` on the device per (block rows,
    chunk), whose padding rows write position `scratch`."""

    def __init__(self, parts: Sequence[_Rows], scratch: int, device: torch.device):
        self.group, self.outputs = len(parts), len(parts[0].position)
        self.scratch, self.device = scratch, device
        lens = np.stack([p.lens for p in parts], axis=1)           # (outputs, group)
        order = np.argsort(-lens.max(1, initial=0), kind="stable")
        rank = np.empty(self.outputs, np.int64)
        rank[order] = np.arange(self.outputs)
        #: the matrix rows' lengths, in their order
        self.lens = lens[order].reshape(-1)
        # each entry's matrix row and its place in the row, row after row
        row = np.concatenate([np.repeat(rank * self.group + g, p.lens)
                              for g, p in enumerate(parts)])
        keep = np.argsort(row, kind="stable")
        self.row = row[keep]
        self.place = np.arange(len(row)) - np.repeat(np.cumsum(self.lens) - self.lens, self.lens)
        self.index = np.concatenate([p.index for p in parts])[keep]
        self.value = np.concatenate([p.value for p in parts])[keep]
        self.position = parts[0].position[order]
        self.layouts: dict[tuple[int, int], _Sparse] = {}

    def layout(self, block_rows: int, chunk: int) -> _Sparse:
        if (block_rows, chunk) not in self.layouts:
            longest = _longest(self.lens, block_rows)
            widths = -(-longest // chunk) * chunk
            bases = np.concatenate([[0], np.cumsum(widths * block_rows)[:-1]]).astype(np.int64)
            at = bases[self.row // block_rows] + self.place * block_rows + self.row % block_rows
            index = np.zeros(int(widths.sum()) * block_rows, np.int64)
            value = np.zeros(len(index), np.float32)
            index[at], value[at] = self.index, self.value
            row_of = np.full(len(longest) * block_rows // self.group, self.scratch, np.int64)
            row_of[:self.outputs] = self.position

            def put(a: np.ndarray) -> torch.Tensor:
                return torch.from_numpy(np.ascontiguousarray(a)).to(self.device)
            self.layouts[block_rows, chunk] = _Sparse(
                len(longest), block_rows, chunk, put(row_of), put(index), put(value),
                put(bases), put(widths))
        return self.layouts[block_rows, chunk]


def _longest(lens: np.ndarray, block_rows: int) -> np.ndarray:
    """Each block's longest row (`lens`: the rows' lengths, in order)."""
    blocks = -(-len(lens) // block_rows)
    padded = np.zeros(blocks * block_rows, np.int64)
    padded[:len(lens)] = lens
    return padded.reshape(blocks, block_rows).max(1, initial=0)


def _row_tile(tiles: Tiles, rows: int, block_rows: int, chunk: int) -> int:
    """Rows a `_sparse_rows` program takes of a pass of `rows` (padded)."""
    fits = max(tiles.elements // (block_rows * chunk), 1)
    return min(tiles.rows, triton.next_power_of_2(rows), 1 << (fits.bit_length() - 1))


def _shape(m: _Matrix, tiles: Tiles, rows: int) -> tuple[int, int]:
    """(block rows, chunk) for `m` in a pass of `rows` (padded) rows."""
    top = triton.next_power_of_2(max(len(m.lens), m.group))
    most = triton.next_power_of_2(max(int(m.lens.max(initial=1)), 1))
    if not tiles.fit:
        return min(tiles.block_rows, top), min(tiles.chunk, most)
    program, iteration, element = INTERPRETER_COSTS
    costs = {}
    for block_rows in (1 << i for i in range(m.group.bit_length() - 1,
                                             min(top, tiles.block_rows).bit_length())):
        longest = _longest(m.lens, block_rows)
        for chunk in (1 << i for i in range(min(most, tiles.chunk).bit_length())):
            if block_rows * chunk > tiles.elements:
                break
            row_tiles = -(-rows // _row_tile(tiles, rows, block_rows, chunk))
            loops = int((-(-longest // chunk)).sum())
            costs[block_rows, chunk] = (row_tiles * (len(longest) * program + loops * iteration)
                                        + loops * chunk * block_rows * rows * element)
    return min(costs, key=costs.get)


@dataclass
class _Layer:
    """One layer on the device: its matrices (None where empty) and vectors,
    its recurrent state (batch rows, heads · dk · dv) and convolution window
    (None where the taps are the identity)."""

    heads: int
    dk: int
    dv: int
    mixer: _Matrix | None
    out: _Matrix | None
    mlp: _Matrix | None
    down: _Matrix | None
    vectors: tuple[torch.Tensor, ...]          # decay, dt_bias, head_norm
    decays: bool
    conv: torch.Tensor | None
    state: torch.Tensor
    window: torch.Tensor | None


@dataclass
class _Buffers:
    """A pass's row vectors (h, the mixer's u, the heads' o, the MLP's act):
    rows padded to whole row tiles, and a last column more for the padding
    matrix rows' output."""

    h: torch.Tensor
    u: torch.Tensor
    o: torch.Tensor
    act: torch.Tensor


class TritonStepper:
    """`CompactStepper`'s step in Triton kernels for `batch` launches in
    lockstep (`step`, `steps`), and a stepper of runtime/trace.py where
    `batch` is 1. `tiles` overrides the device's (`GPU_TILES`,
    `INTERPRETER_TILES`)."""

    def __init__(self, plan: CompactPlan, batch: int = 1, device: str | torch.device = "cpu",
                 tiles: Tiles | None = None):
        if triton is None:
            raise ImportError("triton is not installed (pip install 'qgc[triton]'): "
                              "use the numba or torch backend")
        self.plan, self.batch, self.device = plan, batch, torch.device(device)
        interpret = self.device.type != "cuda" or _interpreted(_sparse_rows)
        self.tiles = tiles or (INTERPRETER_TILES if interpret else GPU_TILES)
        self._rows_kernel = _launchable(_sparse_rows, interpret)
        self._heads_kernel = _launchable(_delta_heads, interpret)
        f32 = dict(device=self.device, dtype=torch.float32)
        self.rows = plan.rows.to(**f32)
        self.code = torch.tensor(plan.code, dtype=torch.long, device=self.device)
        self.codes = plan.codes.to(**f32)
        self.hidden = plan.rows.shape[1]
        #: the widths of h, u (q, k, v, z, b and a of the used heads), o, act
        self.widths = (self.hidden, *(max(map(width, plan.layers), default=0) for width in (
            lambda layer: len(layer.heads) * (2 * layer.dk + 2 * layer.dv + 2),
            lambda layer: len(layer.heads) * layer.dv, lambda layer: len(layer.gate.rows))))
        self.layers = [self._layer(layer) for layer in plan.layers]
        #: a pass takes several tokens of each row but where a convolution's
        #: window is in the MIXER epilogue (not in compiled layers)
        self.together = all(layer.window is None for layer in self.layers)
        self._passes: dict[int, tuple[_Buffers, list[tuple]]] = {}

    def launches(self, tokens: int = 1) -> int:
        """Kernel launches of a pass of `tokens` tokens a batch row."""
        return len(self._pass(tokens)[1])

    @torch.no_grad()
    def step(self, ids: torch.Tensor | np.ndarray, active: np.ndarray | None = None
             ) -> np.ndarray:
        """Each batch row's next GPU token id after GPU token ids `ids` (a
        batch stepper of `run_traces`: rows not `active` step too, their
        launch is over and their answer unread)."""
        return self.steps(torch.as_tensor(ids).reshape(-1, 1))[:, 0]

    @torch.no_grad()
    def steps(self, ids: torch.Tensor | np.ndarray, readout: bool = True) -> np.ndarray | None:
        """GPU token ids `ids` (batch rows, tokens) fed in order, each row to
        its launch, in one pass; after each, the row's next GPU token id (the
        readout's argmax, the first maximum)."""
        ids = torch.as_tensor(ids if torch.is_tensor(ids) else np.asarray(ids),
                              dtype=torch.long, device=self.device)
        if ids.dim() != 2 or ids.shape[0] != self.batch:
            raise ValueError(f"steps takes ({self.batch}, tokens) ids, got {tuple(ids.shape)}")
        if not self.together and ids.shape[1] > 1:
            named = [self.steps(ids[:, t:t + 1], readout) for t in range(ids.shape[1])]
            return np.concatenate(named, axis=1) if readout else None
        buffers, launches = self._pass(ids.shape[1])
        buffers.h.zero_()
        buffers.h[:ids.numel(), :self.hidden] = self.rows[ids.reshape(-1)]
        with np.errstate(over="ignore"):         # the interpreter's exp(−x) in SiLU
            for kernel, grid, args, options in launches:
                kernel[grid](*args, **options)
        if not readout:
            return None
        scores = buffers.h[:ids.numel(), self.code] @ self.codes.T       # (rows, GPU tokens)
        return scores.argmax(1).reshape(ids.shape).cpu().numpy().astype(np.int64)

    def __call__(self, token: P.Token) -> P.Token | None:
        self._one_launch()
        return self.plan.vocab.token(int(self.step(np.array([self.plan.vocab.id_of(token)]))[0]))

    def prefill(self, tokens: Sequence[P.Token]) -> None:
        self._one_launch()
        if tokens:
            self.steps(np.array([[self.plan.vocab.id_of(t) for t in tokens]]), readout=False)

    def _one_launch(self) -> None:
        if self.batch != 1:
            raise ValueError(f"a stepper of {self.batch} launches steps with step(ids)")

    def _padded(self, rows: int) -> int:
        """`rows` rounded up to whole row tiles."""
        tile = min(self.tiles.rows, triton.next_power_of_2(rows))
        return -(-rows // tile) * tile

    def _layer(self, layer: CompactLayer) -> _Layer:
        """`layer`'s matrices and vectors on the device, its state and window."""
        f32 = dict(device=self.device, dtype=torch.float32)
        n, dk, dv = len(layer.heads), layer.dk, layer.dv

        def matrix(parts: list[_Rows], out: int, norm: torch.Tensor | None = None):
            """The rows (into row vector `out` of `widths`), None if none."""
            if not len(parts[0].lens):
                return None
            if norm is not None:
                parts = [p.normed(norm) for p in parts]
            return _Matrix(parts, self.widths[out], self.device)
        mixer = out = conv = window = None
        if n:
            if dk & (dk - 1) or dv & (dv - 1):
                raise ValueError(f"the Triton backend needs head dims that are powers of two, "
                                 f"not {dk} and {dv}")
            width = n * (2 * dk + dv)
            mixer = matrix([_Rows.concat([_Rows.of(layer.qkv), _Rows.of(layer.z, offset=width),
                                          _Rows.of(layer.b, offset=width + n * dv),
                                          _Rows.of(layer.a, offset=width + n * dv + n)])],
                           1, layer.norm_in)
            out = matrix([_Rows.of(layer.out, scatter=True)], 0)
            if not layer.conv_identity:
                conv = layer.conv.to(**f32).contiguous()
                window = torch.zeros(self._padded(self.batch), width * (conv.shape[1] - 1),
                                     **f32)
        return _Layer(
            n, dk, dv, mixer, out,
            matrix([_Rows.of(layer.gate), _Rows.of(layer.up)], 3, layer.norm_post),
            matrix([_Rows.of(layer.down, scatter=True)], 0),
            tuple(t.to(**f32) for t in (layer.decay, layer.dt_bias, layer.head_norm)),
            bool(layer.a.cols.numel()) or not layer.no_decay, conv,
            torch.zeros(self.batch, n * dk * dv, **f32), window)

    def _pass(self, tokens: int) -> tuple[_Buffers, list[tuple]]:
        """The buffers and launches of a pass of `tokens` tokens a row (the
        last few kept)."""
        if tokens not in self._passes:
            if len(self._passes) >= 4:
                self._passes.pop(next(iter(self._passes)))
            self._passes[tokens] = self._build_pass(tokens)
        return self._passes[tokens]

    def _build_pass(self, tokens: int) -> tuple[_Buffers, list[tuple]]:
        padded = self._padded(self.batch * tokens)
        b = _Buffers(*(torch.zeros(padded, w + 1, device=self.device, dtype=torch.float32)
                       for w in self.widths))
        launches: list[tuple] = []

        def rows_launch(mode: tuple[bool, bool, bool], m: _Matrix | None, x: torch.Tensor,
                        out: torch.Tensor, layer: _Layer | None = None) -> None:
            if m is None:
                return
            s = m.layout(*_shape(m, self.tiles, padded))
            tile = _row_tile(self.tiles, padded, s.block_rows, s.chunk)
            conv = window = None
            width = silu_end = 0
            if layer is not None:                # MIXER: SiLU of q, k, v, z
                width = layer.heads * (2 * layer.dk + layer.dv)
                silu_end = width + layer.heads * layer.dv
                conv, window = layer.conv, layer.window
            taps = conv.shape[1] if conv is not None else 1
            args = (x, x.shape[1], self.hidden, self.plan.eps, s.index, s.value, s.bases,
                    s.widths, s.row_of, out, out.shape[1],
                    x if window is None else window, 0 if window is None else window.shape[1],
                    x if conv is None else conv, 0 if conv is None else width, silu_end)
            options = dict(zip(("NORMED", "GATED", "ADDS"), mode, strict=True), BB=tile,
                           BLOCK_R=s.block_rows, CHUNK=s.chunk,
                           BLOCK_X=triton.next_power_of_2(self.hidden) if mode[0] else 1,
                           CONV=conv is not None, TAPS=taps,
                           BLOCK_T=triton.next_power_of_2(taps), **COMPILE, num_warps=4)
            launches.append((self._rows_kernel, (s.blocks, padded // tile), args, options))

        for layer in self.layers:
            if layer.heads:
                rows_launch(MIXER, layer.mixer, b.h, b.u, layer)
                slots = layer.heads * self.batch
                hb = min(self.tiles.heads, triton.next_power_of_2(slots))
                args = (b.u, b.u.shape[1], layer.state, layer.state.shape[1], b.o, b.o.shape[1],
                        *layer.vectors, layer.heads, slots, tokens,
                        float(np.sqrt(np.float32(layer.dk))), self.plan.eps)
                options = dict(DK=layer.dk, DV=layer.dv, HB=hb, DECAYS=layer.decays,
                               **COMPILE, num_warps=8)
                launches.append((self._heads_kernel, (-(-slots // hb),), args, options))
                rows_launch(ADD, layer.out, b.o, b.h)
            rows_launch(MLP, layer.mlp, b.h, b.act)
            rows_launch(ADD, layer.down, b.act, b.h)
        return b, launches


def _interpreted(kernel) -> bool:
    from triton.runtime.interpreter import InterpretedFunction
    return isinstance(kernel, InterpretedFunction)


def _launchable(kernel, interpret: bool):
    """`kernel` as decorated, or its Python function in the interpreter."""
    if not interpret or _interpreted(kernel):
        return kernel
    from triton.runtime.interpreter import InterpretedFunction
    return InterpretedFunction(kernel.fn)
