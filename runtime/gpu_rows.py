"""The GPU tokens' embedding rows, made from their encoding in numpy.

A row is what `weights.EncodingAttr.encode` makes of `Vocabulary.inputs(t)`:
the coordinates every row sets, then each input bit b as 2b − 1 on its
coordinate. A layers file stores the encoding (`RowEncoding`), not the rows
(a vocabulary of 37 K tokens at hidden 2048 is 300 MB of float32); the merge
makes them here, for every token at once. `input_bits` is
`Vocabulary.inputs` over all token ids as arrays (tests/test_weights.py
holds the two equal), so no Python loop runs per token.

numpy only (no torch): compiling never needs torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from qgc import protocol as P


@dataclass(frozen=True)
class TokenFields:
    """Every GPU token's fields (`protocol.Token`), one array each, indexed
    by token id; the fields a token's kind does not use are 0."""

    kind: np.ndarray
    k: np.ndarray
    a: np.ndarray
    j: np.ndarray
    top: np.ndarray
    v: np.ndarray
    w: np.ndarray
    b: np.ndarray
    bar: np.ndarray
    site: np.ndarray
    lane: np.ndarray

    def of(self, kind: str) -> np.ndarray:
        return self.kind == P.KINDS.index(kind)


def token_fields(vocab: P.Vocabulary) -> TokenFields:
    """`Vocabulary.token` for every id at once."""
    ids = np.arange(vocab.size, dtype=np.int64)
    starts = np.array([vocab.id_of(P.Token(kind)) for kind in P.KINDS])
    kind = np.searchsorted(starts, ids, side="right") - 1
    r = ids - starts[kind]
    fields = {name: np.zeros(vocab.size, np.int64) for name in TokenFields.__dataclass_fields__}
    fields["kind"] = kind

    def put(kind_name: str, name: str, value: np.ndarray) -> None:
        where = kind == P.KINDS.index(kind_name)
        fields[name][where] = value[where]

    put("A", "k", r >> vocab.address_bits)
    put("A", "a", r & ((1 << vocab.address_bits) - 1))
    put("D", "j", (r >> 8) // 2)
    put("D", "top", (r >> 8) % 2)
    put("D", "v", r & 255)
    blocks = max(vocab.blocks, 1)      # no EXEC or END token divides by 0 blocks
    put("EXEC", "w", r // blocks)
    put("EXEC", "b", r % blocks)
    bar = (r > vocab.blocks).astype(np.int64)
    put("END", "bar", bar)
    put("END", "b", r - (vocab.blocks + 1) * bar)
    put("TRAP", "site", r // P.LANES)
    put("TRAP", "lane", r % P.LANES)
    return TokenFields(**fields)


def bits(x: np.ndarray, width: int) -> np.ndarray:
    """`protocol.bits` of every entry: (tokens, width), least significant first."""
    return (x[:, None] >> np.arange(width)) & 1


def onehot(i: np.ndarray, present: np.ndarray, n: int) -> np.ndarray:
    """`protocol.onehot(i if present else None, n)` of every entry."""
    return (present[:, None] & (i[:, None] == np.arange(n))).astype(np.int64)


def flag(x: np.ndarray) -> np.ndarray:
    return x.astype(np.int64)[:, None]


def code_bits(vocab: P.Vocabulary, t: TokenFields) -> np.ndarray:
    """`Vocabulary.code` of every token: its output fields side by side."""
    is_a, is_d, is_end = t.of("A"), t.of("D"), t.of("END")   # site, lane: TRAP's alone
    parts = {
        "next_kind": onehot(t.kind, np.ones_like(is_a), len(P.KINDS)),
        "next_k": onehot(t.k, is_a, vocab.records),
        "next_a": bits(t.a, vocab.address_bits),
        "next_j": onehot(t.j, is_d, P.BYTES),
        "next_top": flag(is_d & (t.top == 1)),
        "next_v": bits(t.v, 8),
        "next_end": onehot(t.b, is_end, vocab.blocks + 1),
        "next_bar": flag(is_end & (t.bar == 1)),
        "next_site": bits(t.site, vocab.site_bits),
        "next_lane": bits(t.lane, P.LANE_BITS if vocab.sites else 0),
    }
    return np.concatenate([parts[name] for name in P.Vocabulary.OUTPUTS], axis=1)


def input_bits(vocab: P.Vocabulary) -> dict[str, np.ndarray]:
    """`Vocabulary.inputs` of every token: input name → (tokens, width) bits,
    the zero-width inputs left out as there."""
    t = token_fields(vocab)
    is_a, is_d, is_exec = t.of("A"), t.of("D"), t.of("EXEC")
    top = is_d & (t.top == 1)
    byte = np.arange(P.BYTES - 1)
    own = bits(t.v, 8) * is_d[:, None]
    own_word = np.zeros((vocab.size, 8 * P.BYTES), np.int64)
    for j in range(P.BYTES):
        own_word[:, 8 * j:8 * j + 8] = own * (t.j == j)[:, None]
    next_d = is_d & (t.top == 0) & (t.j + 1 < P.BYTES)
    next_j = onehot(t.j + 1, next_d, P.BYTES) | onehot(np.zeros_like(t.j), is_a, P.BYTES)
    fields = {
        "is_a": flag(is_a), "is_d": flag(is_d), "is_exec": flag(is_exec), "is_top": flag(top),
        "is_record": flag(is_a | is_d), "reads_outbox": flag(is_a | is_d | is_exec),
        "rec_k": onehot(t.k, is_a, vocab.records),
        "rec_a": bits(t.a, vocab.address_bits),
        "stage_byte": (is_d[:, None] & (t.j[:, None] == byte)).astype(np.int64),
        "read_byte": (top[:, None] & (byte < t.j[:, None])).astype(np.int64),
        "own_word": own_word,
        "next_j": next_j,
        "exec_w": bits(t.w, vocab.warp_bits),
        "exec_b": onehot(t.b, is_exec, vocab.blocks),
        "exec_b_bits": bits(t.b * is_exec, P.BLOCK_BITS),
        "code": code_bits(vocab, t),
    }
    return {name: v for name, v in fields.items() if v.shape[1]}


@dataclass(frozen=True)
class RowEncoding:
    """How a GPU token becomes its row (`weights.EncodingAttr`'s data):
    the hidden size, the (coordinate, value) pairs every row sets, and each
    input's coordinates, in the order they are written."""

    hidden: int
    constant: tuple[tuple[int, float], ...]
    inputs: tuple[tuple[str, tuple[int, ...]], ...]

    @staticmethod
    def of(encoding: Any) -> RowEncoding:
        """Of a `weights.EncodingAttr`."""
        hidden, constant, inputs = encoding.data
        return RowEncoding(hidden, tuple(constant), tuple(inputs))

    def to_json(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "set": [list(p) for p in self.constant],
                "inputs": [[name, list(coords)] for name, coords in self.inputs]}

    @staticmethod
    def from_json(fields: Mapping[str, Any]) -> RowEncoding:
        return RowEncoding(fields["hidden"], tuple((c, float(v)) for c, v in fields["set"]),
                           tuple((name, tuple(coords)) for name, coords in fields["inputs"]))

    @property
    def code(self) -> list[int]:
        """The coordinates of the code every row carries."""
        return list(dict(self.inputs)["code"])

    def mismatch(self, vocab: P.Vocabulary) -> str | None:
        """Why the vocabulary's inputs do not fit these coordinates, or None."""
        # every token has the same inputs, of the same widths
        widths = {name: len(v) for name, v in vocab.inputs(P.Token("END")).items()}
        for name, coords in self.inputs:
            if widths.get(name) != len(coords):
                return (f"input '{name}' has {len(coords)} coordinates; the GPU vocabulary "
                        f"gives it {widths.get(name, 0)} bits")
        return None

    def rows(self, vocab: P.Vocabulary) -> np.ndarray:
        """Every GPU token's row, in token-id order (float32, as the old
        per-token `encode` made them)."""
        shared = np.zeros(self.hidden, np.float32)
        for c, v in self.constant:
            shared[c] = v
        rows = np.empty((vocab.size, self.hidden), np.float32)
        rows[:] = shared          # a broadcast copy: scattering columns is 10x slower
        table = input_bits(vocab)
        for name, coords in self.inputs:
            rows[:, list(coords)] = 2.0 * table[name] - 1.0
        return rows
