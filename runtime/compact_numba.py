"""The compact engine's compiled CPU backend: one numba function runs a whole
decode step (every layer of a `CompactPlan`, then the readout's choice of
token) over the plan's weights packed into flat arrays.

`CompactStepper` (runtime/compact.py) is the readable form of the same step
in torch; this one packs each projection as CSR rows (the row it writes, the
input coordinates it reads, their weights) in one pool, the vectors (norms,
taps, gates) in another, the recurrent states and convolution windows in a
third, and walks them with plain loops in float32: no per-op dispatch, so a
token costs what its non-zeros cost. The next token's choice (codes · h)
is `CodeBook.choose`'s (runtime/code_book.py).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from qgc import protocol as P
from qgc.runtime.code_book import CodeBook
from qgc.runtime.compact import Block, CompactLayer, CompactPlan

try:
    import numba
except ImportError:          # the torch form runs without it
    numba = None

#: the fields of a layer's row of `Packed.layers` (ints)
(HEADS, DK, DV, CONV_IDENTITY, DECAYS, QKV, Z, B, A, OUT, GATE, UP, DOWN, NORM_IN, NORM_POST,
 CONV, DECAY, DT_BIAS, HEAD_NORM, WINDOW, TAPS, NEURONS, READ_IN, READ_POST, UP_AT,
 QK_ROWS, HEAD_AT, FIELDS) = range(28)
#: the fields of a head's record in `Packed.reads`, from its layer's HEAD_AT
(H_STATE, H_KEYS, H_ROW_OF, H_VALUES, H_FIELDS) = range(5)
#: the projections' order in a layer's row
MATRICES = ("qkv", "z", "b", "a", "out", "gate", "up", "down")


class Packed:
    """A `CompactPlan` as flat arrays: matrices (CSR rows, each distinct row
    once: its entries from `starts`, the output positions it writes from
    `out_starts` in `outs`), floats, and the per-layer table `layers` of
    offsets."""

    def __init__(self, plan: CompactPlan):
        self.outs: list[np.ndarray] = []         # the output positions of each row
        self.fans: list[np.ndarray] = []         # how many each row has
        self.coefs: list[np.ndarray] = []        # each output's coefficient of its split column
        self.splits: list[int] = []              # each matrix's split column (-1: none)
        self.counts: list[np.ndarray] = []       # entries per row
        self.index: list[np.ndarray] = []
        self.value: list[np.ndarray] = []
        self.matrix_rows: list[int] = [0]       # matrix m's rows: matrix_rows[m]..[m + 1]
        self.floats: list[np.ndarray] = []
        self.float_size = 0
        self.reads: list[np.ndarray] = []       # READ_*: coordinates a norm's output is read at,
        #                                         QK_ROWS: the q and k rows qkv writes,
        #                                         HEAD_AT: each head's record (`_heads`)
        self.up_rows: list[np.ndarray] = []     # UP_AT: each neuron's row of its up matrix (−1: none)
        self.up_coefs: list[np.ndarray] = []    # and its coefficient of the split column
        self.read_size = 0
        self.state_size = self.window_size = 0
        self.work_size = 0                        # floats of one launch's layer vectors
        self.nonzero_size = 0                     # ints of one launch's `_head_channels` lists
        self.layers = np.array([self._layer(layer) for layer in plan.layers],
                               dtype=np.int64).reshape(-1, FIELDS)
        self.outs_a = _joined(self.outs, np.int64)
        self.out_starts_a = _starts(self.fans)
        self.coefs_a = _joined(self.coefs, np.float32)
        self.splits_a = np.array(self.splits, dtype=np.int64)
        self.starts_a = _starts(self.counts)
        self.index_a = _joined(self.index, np.int64)
        self.value_a = _joined(self.value, np.float32)
        self.matrix_rows_a = np.array(self.matrix_rows, dtype=np.int64)
        self.floats_a = _joined(self.floats, np.float32)
        self.reads_a = _joined(self.reads, np.int64)
        self.up_rows_a = _joined(self.up_rows, np.int64)
        self.up_coefs_a = _joined(self.up_coefs, np.float32)

    @property
    def nbytes(self) -> int:
        """Bytes the packed weights take (without the states)."""
        return sum(a.nbytes for a in self.matrices + (self.layers, self.floats_a, self.reads_a,
                                                      self.up_rows_a, self.up_coefs_a))

    @property
    def ups(self) -> tuple[np.ndarray, np.ndarray]:
        """Each neuron's up row and coefficient (`_up_by_neuron`), as `_step` takes them."""
        return self.up_rows_a, self.up_coefs_a

    @property
    def matrices(self) -> tuple[np.ndarray, ...]:
        """The pool of matrices, as `_matvec` takes it after m, x, out and accumulate."""
        return (self.outs_a, self.out_starts_a, self.coefs_a, self.splits_a, self.starts_a,
                self.index_a, self.value_a, self.matrix_rows_a)

    def _matrix(self, block: Block, scatter: bool) -> int:
        """Append `block` as CSR rows, each row's entries in column order;
        its matrix number. A gathering block's rows are factored first: the
        column most rows read (a layer's constant coordinate, which carries
        every threshold's offset) comes out of each row as a coefficient, and
        each distinct remainder is one CSR row, summed once and written to
        every output position that has it, plus that position's coefficient
        times the column (dot at 2B: 23,126 gate rows with 171,854 entries
        are 13,389 remainders with 36,926; 23,129 up rows are 1). The sum's
        order changes where a row reads the column: float32 rounding, which
        the threshold gadgets' margins absorb (the traces are the tensor
        engine's, tests/test_compact.py)."""
        w = block.weight.to_dense() if block.weight.layout == torch.sparse_csr else block.weight
        w = w.numpy()
        positions = (block.rows[block.filled] if scatter else block.filled).numpy()
        split = -1 if scatter or not w.size else int(np.argmax((w != 0).sum(axis=0)))
        coefs = w[:, split].copy() if split >= 0 else np.zeros(len(w), np.float32)
        if split >= 0:
            w = w.copy()
            w[:, split] = 0
        forms: dict[bytes, list[int]] = {}
        for i, row in enumerate(w):
            cols = np.flatnonzero(row)
            forms.setdefault(cols.tobytes() + row[cols].tobytes(), []).append(i)
        members = list(forms.values())
        distinct = w[np.array([rows[0] for rows in members], dtype=np.int64)]
        r, c = np.nonzero(distinct)                # row-major: by row, then column
        self.counts.append(np.bincount(r, minlength=len(distinct)))
        self.index.append(block.cols.numpy()[c])
        self.value.append(distinct[r, c])
        self.fans.append(np.array([len(rows) for rows in members], dtype=np.int64))
        order = np.concatenate(members + [np.zeros(0, np.int64)]).astype(np.int64)
        self.outs.append(positions[order])
        self.coefs.append(coefs[order])
        self.splits.append(block.cols.numpy()[split] if split >= 0 else -1)
        self.matrix_rows.append(self.matrix_rows[-1] + len(distinct))
        return len(self.matrix_rows) - 2

    def _up_by_neuron(self, m: int, neurons: int) -> int:
        """Each neuron's row of up matrix `m` (relative to its first, −1 where
        the neuron has none) and coefficient, appended; where they start.
        The gate's pass computes each neuron's up from them as it writes
        silu(gate) · up (`_matvec`, SILU_TIMES), not a pass of its own."""
        rows, coefs = np.full(neurons, -1, np.int64), np.zeros(neurons, np.float32)
        fans = self.fans[m]
        rows[self.outs[m]] = np.repeat(np.arange(len(fans)), fans)
        coefs[self.outs[m]] = self.coefs[m]
        at = sum(len(r) for r in self.up_rows)
        self.up_rows.append(rows)
        self.up_coefs.append(coefs)
        return at

    def _floats(self, t: torch.Tensor) -> int:
        at = self.float_size
        self.floats.append(t.detach().numpy().astype(np.float32).reshape(-1))
        self.float_size += t.numel()
        return at

    def _heads(self, n: int, dk: int, dv: int, written: np.ndarray) -> int:
        """Each head's record (H_*), appended to `reads`; where they start.
        A head's state keeps only the rows of the key channels qkv writes and
        the columns of the value channels it writes: no other entry of S can
        leave 0 (a key channel never written is 0 in every token, and so is
        a value channel, whose delta is then (0 − 0)·β), so the head reads
        and writes nothing else (dot at 2B: 1.1 MB a launch, not 3.1).
        H_STATE: where its state starts in a launch's row of `state`;
        H_KEYS: its rows; H_ROW_OF: where the list of each key channel's row
        (−1: none) starts; H_VALUES: where its columns start (the count,
        then the value channels)."""
        def channels(first: int, size: int) -> np.ndarray:
            """The written ones of channels first..first + size, from first (sorted)."""
            return written[(written >= first) & (written < first + size)] - first

        records, at = [], self.state_size
        for hd in range(n):
            keys, values = channels((n + hd) * dk, dk), channels(2 * n * dk + hd * dv, dv)
            row_of = np.full(dk, -1, np.int64)
            row_of[keys] = np.arange(len(keys))
            records.append((at, len(keys), self._raw(row_of), self._list(values)))
            at += len(keys) * len(values)
        self.state_size = at
        return self._raw(np.array(records, np.int64).reshape(-1))

    def _raw(self, values: np.ndarray) -> int:
        """Append `values` to `reads` as they are; where they start."""
        at = self.read_size
        self.reads.append(np.asarray(values, np.int64))
        self.read_size += len(values)
        return at

    def _read(self, blocks: list[Block]) -> int:
        """Append the columns `blocks` read (`_list`); where they start."""
        return self._list(np.concatenate([b.cols.numpy() for b in blocks] + [np.zeros(0, int)]))

    def _list(self, values: np.ndarray) -> int:
        """Append `values` to `reads`, sorted and each once, with their count
        first; where they start."""
        values = np.unique(values)
        return self._raw(np.concatenate([[len(values)], values]))

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
        row[UP_AT] = self._up_by_neuron(row[UP], row[NEURONS])
        # a norm's output is read only where its projections have columns
        row[READ_IN] = self._read([layer.qkv, layer.z, layer.b, layer.a] if n else [])
        row[READ_POST] = self._read([layer.gate, layer.up])
        written = layer.qkv.filled.numpy()
        row[QK_ROWS] = self._list(written[written < 2 * n * layer.dk])
        row[WINDOW] = self.window_size
        row[HEAD_AT] = self._heads(n, layer.dk, layer.dv, written)
        hidden = len(layer.norm_in)
        self.work_size = max(self.work_size, hidden + n * (2 * layer.dk + 3 * layer.dv + 4)
                             + 2 * row[NEURONS])
        self.nonzero_size = max(self.nonzero_size, 2 * n * (layer.dk + 1))
        if not layer.conv_identity:         # an identity convolution keeps no window
            self.window_size += layer.conv.shape[0] * (layer.conv.shape[1] - 1)
        return row


def _joined(parts: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


def _starts(sizes: list[np.ndarray]) -> np.ndarray:
    """Where each row's run starts in a pool of runs of these sizes (one more: the end)."""
    return np.concatenate([[0], np.cumsum(_joined(sizes, np.int64))]).astype(np.int64)


def packed(plan: CompactPlan) -> Packed:
    """The plan's packed arrays, made once per plan (steppers share them)."""
    if getattr(plan, "_packed", None) is None:
        plan._packed = Packed(plan)          # type: ignore[attr-defined]
    return plan._packed                       # type: ignore[attr-defined]


def code_book(plan: CompactPlan) -> CodeBook:
    """The plan's `CodeBook`, made once per plan (steppers share it)."""
    if getattr(plan, "_book", None) is None:
        plan._book = CodeBook(plan.codes.numpy())     # type: ignore[attr-defined]
    return plan._book                                  # type: ignore[attr-defined]


class NumbaStepper:
    """`CompactStepper`'s step, compiled, for `batch` launches at once (each
    with its own states): a stepper of runtime/trace.py when `batch` is 1,
    a batch stepper of `run_traces` (`step`) for any."""

    def __init__(self, plan: CompactPlan, batch: int = 1):
        if numba is None:
            raise ImportError("numba is not installed: use the torch backend")
        self.plan, self.packed, self.batch = plan, packed(plan), batch
        # the plan's float32 tensors, shared (the rows are most of the memory)
        self.rows, self.book = plan.rows.numpy(), code_book(plan)
        self.code = np.array(plan.code, dtype=np.int64)
        self.state = np.zeros((batch, self.packed.state_size), np.float32)
        self.window = np.zeros((self.packed.window_size, batch), np.float32)
        # the layers' vectors for each launch, then two of a head's (at the end)
        self.work = np.zeros(self.packed.work_size * batch + 2 * plan.layers[0].dv, np.float32)
        self.nonzeros = np.zeros(self.packed.nonzero_size * batch, np.int32)
        # the step's own arrays, made once: fresh ones of this size each token
        # cost page faults
        self.h = np.zeros((len(self.rows[0]), batch), np.float32)
        self.h_code = np.zeros((len(self.code), batch), np.float32)
        self.prompt: dict[str, np.ndarray] = {}         # a prefill's, grown to its passes

    @property
    def nbytes(self) -> int:
        """Bytes the stepper holds: the packed weights, the GPU tokens'
        embedding rows and codes, the states, windows and workspace."""
        arrays = (self.rows, self.book.codes, self.state, self.window, self.work,
                  self.nonzeros, self.h, self.h_code)
        return self.packed.nbytes + sum(a.nbytes for a in arrays)

    def step(self, ids: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
        """The next GPU token id of each launch after its token `ids[b]`
        (launches not `active` are left as they are; their answer is noise)."""
        self._feed(ids, active)
        np.take(self.h, self.code, axis=0, out=self.h_code)
        if active is None or active.all():
            return self.book.choose(self.h_code)
        chosen = np.zeros(self.batch, np.int64)
        chosen[active] = self.book.choose(self.h_code[:, active])
        return chosen

    def _feed(self, ids: np.ndarray, active: np.ndarray | None = None) -> None:
        """Every layer on the tokens `ids`, one a launch: `self.h` is the
        residual after them."""
        p = self.packed
        _embed(self.rows, np.asarray(ids, np.int64), self.h)
        owner = np.arange(self.batch)
        if active is not None:
            owner[~active] = -1
        _step(self.h, owner, p.layers, p.matrices, p.ups, p.floats_a, p.reads_a, self.state,
              self.window, self.work, self.nonzeros, np.float32(self.plan.eps))

    def __call__(self, token: P.Token) -> P.Token | None:
        ids = np.array([self.plan.vocab.id_of(token)])
        return self.plan.vocab.token(int(self.step(ids)[0]))

    def prefill(self, tokens: Sequence[P.Token]) -> None:
        """The prompt's tokens in one pass, as a batch goes through a step
        (each weight read once for all of them), but as one launch's
        sequence: the convolution windows and the heads' states take the
        tokens in order. No readout (nothing reads its choice)."""
        self.prefill_rows([0], [np.array([self.plan.vocab.id_of(t) for t in tokens], np.int64)])

    def prefill_rows(self, rows: Sequence[int], ids: Sequence[np.ndarray]) -> None:
        """`prefill` of launch rows[i]'s tokens with ids ids[i], for every i
        at once (`run_traces` prefills its launches' prompts so): their
        tokens are the columns of passes of at most `PREFILL_COLUMNS`, a
        launch's in order."""
        owners = np.repeat(np.asarray(rows, np.int64), [len(i) for i in ids])
        tokens = np.concatenate([np.asarray(i, np.int64) for i in ids])
        for start in range(0, len(tokens), PREFILL_COLUMNS):
            self._prefill(owners[start:start + PREFILL_COLUMNS],
                          tokens[start:start + PREFILL_COLUMNS])

    def _prefill(self, owner: np.ndarray, ids: np.ndarray) -> None:
        """One pass of `prefill_rows`: token ids[c] of launch owner[c]."""
        p, count = self.packed, len(ids)
        h = self._prompt_array("h", len(self.rows[0]) * count, np.float32).reshape(-1, count)
        _embed(self.rows, ids, h)
        # the layers' vectors, then a head's two at the end
        work = self._prompt_array("work", p.work_size * count + 2 * self.plan.layers[0].dv,
                                  np.float32)
        nonzeros = self._prompt_array("nonzeros", p.nonzero_size * count, np.int32)
        _step(h, owner, p.layers, p.matrices, p.ups, p.floats_a, p.reads_a, self.state,
              self.window, work, nonzeros, np.float32(self.plan.eps))

    def _prompt_array(self, name: str, size: int, dtype) -> np.ndarray:
        """The first `size` entries of the prefill's array `name`, grown to
        fit and kept for the next pass (fresh pages each pass cost faults)."""
        if name not in self.prompt or len(self.prompt[name]) < size:
            self.prompt[name] = np.zeros(size, dtype)
        return self.prompt[name][:size]


class ThreadedStepper:
    """A batch stepper (`run_traces`) that splits its launches between
    `threads` threads, each a `NumbaStepper` of its share: numba's step
    releases the GIL, and the launches share nothing but the weights."""

    def __init__(self, plan: CompactPlan, batch: int, threads: int):
        bounds = np.linspace(0, batch, min(threads, batch) + 1).astype(np.int64)
        self.shares = [(int(lo), int(hi)) for lo, hi in zip(bounds, bounds[1:], strict=False)]
        self.steppers = [NumbaStepper(plan, batch=hi - lo) for lo, hi in self.shares]
        self.pool = ThreadPoolExecutor(len(self.steppers), thread_name_prefix="qgc-compact")
        weakref.finalize(self, self.pool.shutdown, wait=False)

    @property
    def nbytes(self) -> int:
        """Bytes the steppers hold (the packed weights and embedding rows once)."""
        shared = self.steppers[0].packed.nbytes + self.steppers[0].rows.nbytes
        return sum(s.nbytes for s in self.steppers) - shared * (len(self.steppers) - 1)

    def step(self, ids: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
        """`NumbaStepper.step` of each share, at once."""
        active = np.ones(len(ids), np.bool_) if active is None else active
        futures = [self.pool.submit(stepper.step, ids[lo:hi], active[lo:hi])
                   for (lo, hi), stepper in zip(self.shares, self.steppers, strict=True)]
        return np.concatenate([f.result() for f in futures])

    def prefill_rows(self, rows: Sequence[int], ids: Sequence[np.ndarray]) -> None:
        """`NumbaStepper.prefill_rows` of each share's rows, at once."""
        futures = []
        for (lo, hi), stepper in zip(self.shares, self.steppers, strict=True):
            mine = [i for i, row in enumerate(rows) if lo <= row < hi]
            if mine:
                futures.append(self.pool.submit(stepper.prefill_rows,
                                                [rows[i] - lo for i in mine], [ids[i] for i in mine]))
        for f in futures:
            f.result()


def _jit(fn=None, *, fastmath=False):
    """numba's compiled `fn` (cached on disk), as `@_jit` or
    `@_jit(fastmath=...)`; `fn` itself without numba."""
    if fn is None:
        return lambda f: _jit(f, fastmath=fastmath)
    return numba.njit(cache=True, nogil=True, fastmath=fastmath)(fn) if numba is not None else fn


@_jit
def _embed(rows, ids, h):
    """h[:, b] = the embedding row of token ids[b], in tiles of 64
    coordinates (a column of h is strided: a tile of every column stays in
    the cache while the rows are read)."""
    for first in range(0, h.shape[0], 64):
        last = min(first + 64, h.shape[0])
        for b in range(len(ids)):
            row = rows[ids[b]]
            for i in range(first, last):
                h[i, b] = row[i]


#: the most tokens one prefill pass takes as its columns: a pass reads a
#: row of its inputs (one float a column) for each weight, and more columns
#: than this fall out of the caches (dot at 2B: a token costs 113 µs in
#: passes of 39, 74 in passes of 128, as many in passes of 256)
PREFILL_COLUMNS = 128
#: `_matvec`'s activations of what it writes: none, SiLU, SiLU times up
PLAIN, SILU, SILU_TIMES = 0, 1, 2


@_jit
def _up(b, o, sums, rows, coefs, x, split):
    """Neuron o's up for column b, from its up matrix's row sums `sums`: the
    sum of its row plus its coefficient times the split column, as
    `_matvec` would have written it (0 for a neuron the matrix leaves out)."""
    if rows[o] < 0:
        return np.float32(0.0)
    s = sums[rows[o], b]
    return s + coefs[o] * x[split, b] if coefs[o] != 0 else s


@_jit
def _row_sums(m, x, sums, outs, out_starts, coefs, splits, starts, index, value, matrix_rows):
    """Σ value · x[index] of each of matrix m's CSR rows, for each column of
    `x`, summed as `_matvec` sums them (the ups `_up` reads)."""
    first = matrix_rows[m]
    for r in range(first, matrix_rows[m + 1]):
        for b in range(x.shape[1]):
            sums[r - first, b] = 0
        for e in range(starts[r], starts[r + 1]):
            w, xi = value[e], index[e]
            for b in range(x.shape[1]):
                sums[r - first, b] += w * x[xi, b]


@_jit
def _matvec(m, x, out, accumulate, act, up, outs, out_starts, coefs, splits, starts, index,
            value, matrix_rows):
    """out[o] (+)= act(Σ value · x[index]) over matrix m's CSR rows, at every
    output position o of the row, plus o's coefficient times the matrix's
    split column, for each column of `x` (a launch of the batch) alike.
    `act` (PLAIN, SILU, SILU_TIMES) applies SiLU, or SiLU times neuron o's
    up, to the sum as it is written: the projection and its activation in
    one pass over `out`. For SILU_TIMES (a SwiGLU's gate), `up` is (the up
    matrix's row sums, each neuron's row and coefficient, the up matrix
    number): each up is computed where it is used, as `_matvec` of the up
    matrix would have written it (the same products as silu(gate) · up)."""
    batch, split = x.shape[1], splits[m]
    sums, up_rows, up_coefs, up_m = up
    up_split = splits[up_m]
    if batch == 1:        # one launch: flat vectors and scalar sums, no inner loops
        _matvec_one(m, x, out.reshape(out.shape[0]), accumulate, act, up, outs, out_starts,
                    coefs, split, starts, index, value, matrix_rows, up_split)
        return
    s = np.zeros(batch, np.float32)
    for r in range(matrix_rows[m], matrix_rows[m + 1]):
        s[:] = 0
        for e in range(starts[r], starts[r + 1]):
            w, xi = value[e], index[e]
            for b in range(batch):
                s[b] += w * x[xi, b]
        for k in range(out_starts[r], out_starts[r + 1]):
            o, coef = outs[k], coefs[k]
            if act == PLAIN:
                for b in range(batch):
                    v = s[b] + coef * x[split, b] if coef != 0 else s[b]
                    out[o, b] = out[o, b] + v if accumulate else v
                continue
            between = 0
            if act == SILU_TIMES and up_rows[o] >= 0:     # silu(gate) · up, up computed here
                r_up, c_up = up_rows[o], up_coefs[o]
                for b in range(batch):
                    v = s[b] + coef * x[split, b] if coef != 0 else s[b]
                    known = (v > np.float32(17.0)) | (v == 0)
                    low = v < np.float32(-88.8)
                    between += not (known | low)
                    u = sums[r_up, b] + c_up * x[up_split, b] if c_up != 0 else sums[r_up, b]
                    out[o, b] = (v if known else np.float32(-0.0)) * u
            else:
                zero_up = act == SILU_TIMES
                for b in range(batch):      # the known ranges without branches (see _silu_all)
                    v = s[b] + coef * x[split, b] if coef != 0 else s[b]
                    known = (v > np.float32(17.0)) | (v == 0)
                    low = v < np.float32(-88.8)
                    between += not (known | low)
                    v = v if known else np.float32(-0.0)
                    out[o, b] = v * np.float32(0.0) if zero_up else v
            if between:
                for b in range(batch):
                    v = _silu(s[b] + coef * x[split, b] if coef != 0 else s[b])
                    out[o, b] = v * _up(b, o, sums, up_rows, up_coefs, x, up_split) \
                        if act == SILU_TIMES else v


@_jit
def _matvec_one(m, x2, out, accumulate, act, up, outs, out_starts, coefs, split, starts, index,
                value, matrix_rows, up_split):
    """`_matvec` for one launch, on flat x and out (x2: x as a column)."""
    x = x2.reshape(x2.shape[0])
    sums, up_rows, up_coefs, _ = up
    at_split = x[split] if split >= 0 else np.float32(0.0)
    for r in range(matrix_rows[m], matrix_rows[m + 1]):
        t = np.float32(0.0)
        for e in range(starts[r], starts[r + 1]):
            t += value[e] * x[index[e]]
        for k in range(out_starts[r], out_starts[r + 1]):
            o, coef = outs[k], coefs[k]
            v = t + coef * at_split if coef != 0 else t
            if act == PLAIN:
                out[o] = out[o] + v if accumulate else v
            else:
                v = _silu(v)
                out[o] = v * _up(0, o, sums, up_rows, up_coefs, x2, up_split) \
                    if act == SILU_TIMES else v


@_jit(fastmath={"reassoc"})
def _sum_of_squares(v):
    """Σ v², v contiguous; reassociated so that it runs as vector lanes (in
    order, a running sum is one dependent add per coordinate: 52 norms of
    2,048 coordinates were a fifth of a dot token)."""
    s = np.float32(0.0)
    for i in range(v.shape[0]):
        s += v[i] * v[i]
    return s


@_jit(fastmath={"reassoc"})
def _sum_of_magnitudes(v):
    """Σ |v| (0 only where every entry is: a square could underflow), as
    vector lanes."""
    s = np.float32(0.0)
    for i in range(v.shape[0]):
        s += abs(v[i])
    return s


@_jit
def _inverse_rms(x, eps):
    """1 / √(mean of squares + ε) of each column of `x` (coordinates ×
    launches)."""
    n, batch = x.shape
    scale = np.empty(batch, np.float32)
    if batch == 1:
        scale[0] = _sum_of_squares(x.reshape(n))
    else:                                # row by row: the launches are contiguous
        scale[:] = 0
        for i in range(n):
            for b in range(batch):
                scale[b] += x[i, b] * x[i, b]
    for b in range(batch):
        scale[b] = np.float32(1.0) / np.sqrt(scale[b] / np.float32(n) + eps)
    return scale


@_jit
def _rms_at(x, weight, eps, out, reads, at):
    """Qwen3.5's RMSNorm of each column of `x` into `out`, written only at
    the coordinates reads[at + 1 : at + 1 + reads[at]] (the ones the
    layer's projections read); none when there are none."""
    count = reads[at]
    if count == 0:
        return
    scale = _inverse_rms(x, eps)
    for i in reads[at + 1:at + 1 + count]:
        for b in range(x.shape[1]):
            out[i, b] = x[i, b] * scale[b] * weight[i]


@_jit
def _silu(v):
    """v / (1 + exp(−v)) in float32, without the exp where its value is
    known: past 17, exp(−v) < 2⁻²⁴ and 1 + exp(−v) rounds to 1, so the
    quotient is v (so it is at ±0); below −88.8, exp(−v) overflows and it is
    −0.0."""
    if v > np.float32(17.0) or v == 0:
        return v
    if v < np.float32(-88.8):
        return np.float32(-0.0)
    return v / (np.float32(1.0) + np.exp(-v))


@_jit
def _silu_all(a):
    """`_silu` of every entry of `a`, in place. Compiled neurons and channels
    sit in the known ranges on almost every token (dot: all of them), so a
    first pass without branches does those and counts the rest, which a
    second pass computes only when there are any."""
    n, batch = a.shape
    between = 0
    for j in range(n):
        for b in range(batch):
            v = a[j, b]
            low = v < np.float32(-88.8)
            a[j, b] = np.float32(-0.0) if low else v
            between += (not low) & (v <= np.float32(17.0)) & (v != 0)
    if between:
        for j in range(n):
            for b in range(batch):
                a[j, b] = _silu(a[j, b])


@_jit
def _conv(mixed, conv, taps, window, w0, owner):
    """The causal convolution of each channel over its window, which moves
    on: column b's over launch owner[b]'s window (a launch's columns in
    order; none where owner[b] < 0)."""
    width, batch = mixed.shape
    for c in range(width):
        at = w0 + c * (taps - 1)
        for b in range(batch):
            w = owner[b]
            if w < 0:
                continue
            s = conv[c * taps + taps - 1] * mixed[c, b]
            for j in range(taps - 1):
                s += conv[c * taps + j] * window[at + j, w]
            for j in range(taps - 2):
                window[at + j, w] = window[at + j + 1, w]
            window[at + taps - 2, w] = mixed[c, b]
            mixed[c, b] = s


@_jit
def _head_channels(mixed, n, dk, rows, squares, lists):
    """Σ x² and the non-zero channels of each head's query and key (query
    heads, then key heads: 2n), for each column of `mixed`, from `rows`
    alone (the q and k rows the qkv projection writes: no other can be
    non-zero). `squares` (2n × columns, zeroed) takes the sums; `lists`
    holds, for head hd and column b, at (hd · batch + b) · (dk + 1), the
    count, then the channels. `_head` walks these, not all dk channels: a
    compiled key has 0.12 non-zero components on average and a query 1.5,
    and a batch's column of a head is strided (one cache line a channel).
    Row by row, a row that is zero in every column is skipped and the
    columns are vector lanes; each column's sums add its channels in order,
    the zeros left out adding nothing. One column's heads are contiguous,
    and summed as vectors (reassociated) instead."""
    batch = mixed.shape[1]
    lists[:2 * n * batch * (dk + 1):dk + 1] = 0
    if batch == 1:
        m = mixed.reshape(mixed.shape[0])
        for hd in range(2 * n):
            squares[hd, 0] = _sum_of_squares(m[hd * dk:(hd + 1) * dk])
    for r in rows:
        hd, d = r // dk, r % dk
        row = mixed[r]
        if _sum_of_magnitudes(row) == 0:    # (Σ x² could underflow to 0)
            continue
        if batch > 1:
            for b in range(batch):
                squares[hd, b] += row[b] * row[b]
        for b in range(batch):
            if row[b] != 0:
                at = (hd * batch + b) * (dk + 1)
                lists[at] += 1
                lists[at + lists[at]] = d


@_jit
def _head(L, hd, n, m, q_squares, k_squares, beta_in, a_in, z, o_all, S, row_of, values, floats,
          eps, delta, o, queried, keyed):
    """One used head of one launch and token: the gated delta rule on its
    state `S` (its written key channels × value channels: `row_of` maps a
    key channel to its row, −1 where qkv never writes it; `values` are the
    columns' value channels) and the gated RMSNorm of its output into
    `o_all` (0 where qkv writes no value: o_all's as made).
    `m` (the token's q, k and v channels), `z` and `o_all` are that token's
    columns, `q_squares` and `k_squares` its query's and key's Σ x²,
    `queried` and `keyed` the channels where they are not zero
    (`_head_channels`); `delta` and `o` (dv) are scratch. A zero key leaves the
    state as it is and a zero query reads nothing (most heads on most
    tokens: a key has 0.12 non-zero components on average, a query 1.5)."""
    dk, dv, nv = L[DK], L[DV], len(values)
    q0, k0, v0 = hd * dk, n * dk + hd * dk, 2 * n * dk + hd * dv
    if L[DECAYS]:
        t = a_in + floats[L[DT_BIAS] + hd]
        soft = np.log1p(np.exp(t)) if t < 20 else t
        S *= np.exp(floats[L[DECAY] + hd] * soft)
    if len(keyed):
        # torch's l2norm: x / √(Σ x² + 1e-6)
        k_scale = np.float32(1.0) / np.sqrt(k_squares + np.float32(1e-6))
        beta = np.float32(1.0) / (np.float32(1.0) + np.exp(-beta_in))
        delta[:nv] = 0
        for d in keyed:         # (a written channel: each has its row)
            kd = m[k0 + d] * k_scale
            if kd != 0:
                r = row_of[d]
                for c in range(nv):
                    delta[c] += S[r, c] * kd
        for c in range(nv):
            delta[c] = (m[v0 + values[c]] - delta[c]) * beta
        for d in keyed:
            kd = m[k0 + d] * k_scale
            if kd != 0:
                r = row_of[d]
                for c in range(nv):
                    S[r, c] += kd * delta[c]
    if len(queried) == 0:
        return      # the output is 0 (o_all's as made)
    q_scale = np.float32(1.0) / np.sqrt(q_squares + np.float32(1e-6))
    root_dk = np.sqrt(np.float32(dk))
    o[:nv] = 0
    for d in queried:
        r = row_of[d]
        if r < 0:
            continue            # a row of zeros: adds nothing
        qd = m[q0 + d] * q_scale / root_dk
        if qd != 0:
            for c in range(nv):
                o[c] += S[r, c] * qd
    # the gated RMSNorm: o · rms scale · weight · SiLU(z), over all dv channels
    # (the unwritten ones are 0)
    scale = np.float32(1.0) / np.sqrt(_sum_of_squares(o[:nv]) / np.float32(dv) + eps)
    weight = floats[L[HEAD_NORM]:L[HEAD_NORM] + dv]
    for c in range(nv):
        if o[c] != 0:                # else the product is a zero (o_all's as made)
            j = values[c]
            o_all[hd * dv + j] = o[c] * scale * weight[j] * _silu(z[hd * dv + j])


@_jit
def _scratch(work, rows, batch, zeroed=True):
    """A (rows × batch) view of the workspace `work`, zeroed (where what
    writes it writes only some rows), and the rest."""
    size = rows * batch
    view = work[:size]
    if zeroed:
        view[:] = 0
    return view.reshape(rows, batch), work[size:]


@_jit
def _step(h, owner, layers, matrices, ups, floats, reads, state, window, work, nonzeros, eps):
    """Every layer on the residuals `h` (coordinates × launches), in place;
    the layers' intermediate vectors live in `work` and the heads' lists of
    non-zero channels in `nonzeros` (allocating them per token costs more
    than computing them). Column b is a token of launch owner[b] (its row of
    `state` and column of `window`; none where owner[b] < 0), and a launch's
    columns are its tokens in order: a batch step has one column a launch, a
    prefill a launch's prompt, whose tokens share its states and windows
    and go through them one after another."""
    hidden, batch = h.shape
    up_rows, up_coefs = ups
    plain = (h, up_rows[:0], up_coefs[:0], 0)       # what a PLAIN or SILU pass takes for up
    for li in range(layers.shape[0]):
        L = layers[li]
        # the norms write x where the projections read it, and they read nothing else
        x, rest = _scratch(work, hidden, batch, zeroed=False)
        _rms_at(h, floats[L[NORM_IN]:L[NORM_IN] + hidden], eps, x, reads, L[READ_IN])
        n, dk, dv = L[HEADS], L[DK], L[DV]
        if n > 0:
            mixed, rest = _scratch(rest, n * (2 * dk + dv), batch)
            if L[CONV_IDENTITY]:
                _matvec(L[QKV], x, mixed, False, SILU, plain, *matrices)
            else:      # SiLU after the convolution
                _matvec(L[QKV], x, mixed, False, PLAIN, plain, *matrices)
                _conv(mixed, floats[L[CONV]:], L[TAPS], window, L[WINDOW], owner)
                _silu_all(mixed)
            z, rest = _scratch(rest, n * dv, batch)
            _matvec(L[Z], x, z, False, PLAIN, plain, *matrices)
            beta, rest = _scratch(rest, n, batch)
            _matvec(L[B], x, beta, False, PLAIN, plain, *matrices)
            a, rest = _scratch(rest, n, batch)
            _matvec(L[A], x, a, False, PLAIN, plain, *matrices)
            o_all, rest = _scratch(rest, n * dv, batch)
            squares, rest = _scratch(rest, 2 * n, batch)
            _head_channels(mixed, n, dk, reads[L[QK_ROWS] + 1:L[QK_ROWS] + 1 + reads[L[QK_ROWS]]],
                           squares, nonzeros)
            delta, o = work[-2 * dv:-dv], work[-dv:]
            for b in range(batch):
                if owner[b] < 0:
                    continue
                for hd in range(n):
                    q_at, k_at = (hd * batch + b) * (dk + 1), ((n + hd) * batch + b) * (dk + 1)
                    if nonzeros[q_at] == 0 and nonzeros[k_at] == 0 and not L[DECAYS]:
                        continue            # the state stays, the output is 0
                    head = reads[L[HEAD_AT] + hd * H_FIELDS:L[HEAD_AT] + (hd + 1) * H_FIELDS]
                    at, keys, nv = head[H_STATE], head[H_KEYS], reads[head[H_VALUES]]
                    S = state[owner[b], at:at + keys * nv].reshape(keys, nv)
                    _head(L, hd, n, mixed[:, b], squares[hd, b], squares[n + hd, b],
                          beta[hd, b], a[hd, b], z[:, b], o_all[:, b], S,
                          reads[head[H_ROW_OF]:head[H_ROW_OF] + dk],
                          reads[head[H_VALUES] + 1:head[H_VALUES] + 1 + nv], floats, eps,
                          delta, o, nonzeros[q_at + 1:q_at + 1 + nonzeros[q_at]],
                          nonzeros[k_at + 1:k_at + 1 + nonzeros[k_at]])
            _matvec(L[OUT], o_all, h, True, PLAIN, plain, *matrices)
        _rms_at(h, floats[L[NORM_POST]:L[NORM_POST] + hidden], eps, x, reads, L[READ_POST])
        neurons = L[NEURONS]
        if neurons > 0:
            gate, rest = _scratch(rest, neurons, batch)
            m_up, matrix_rows = L[UP], matrices[7]
            sums, rest = _scratch(rest, matrix_rows[m_up + 1] - matrix_rows[m_up], batch, False)
            _row_sums(m_up, x, sums, *matrices)
            at = L[UP_AT]
            up = (sums, up_rows[at:at + neurons], up_coefs[at:at + neurons], m_up)
            _matvec(L[GATE], x, gate, False, SILU_TIMES, up, *matrices)   # silu(gate) · up
            _matvec(L[DOWN], gate, h, True, PLAIN, plain, *matrices)
