"""The readout's choice of the next GPU token, read off the signs of its code
coordinates where that is provably the choice of the full product.

The compact engines choose the GPU token whose code (±1 on each of the n
code coordinates) has the largest dot product with the residual's code
coordinates h: argmax over tokens of `codes @ h`, the first on a tie. That
product is (GPU tokens × n) multiply-adds per launch and token: dot at 2B,
9,239 × 42, a third of a batched step. But the last compiled layer writes
the next token's code, greatly amplified, onto h, so the signs of h *are*
that token's code, and the full product only confirms it.

`CodeBook.choose` takes the token whose code is sign(h) without the
product when it is sure to be the product's argmax in float32:

- Exactly, sign(h)'s code scores Σ|hᵢ| = S, the most any ±1 code can, and a
  code that differs from it at some i scores at most S − 2·m, with m the
  least |hᵢ|.
- The float32 product's error in each score, whatever order the BLAS sums
  in, is at most γₙ·S with γₙ = n·u / (1 − n·u), u = 2⁻²⁴ (Higham, §3.1).
- So when m > γₙ·S, sign(h)'s code scores strictly more than every other
  code in float32 too; it is the product's argmax.

Columns where that does not hold (a zero or tiny coordinate, NaN or ∞, a
sign pattern that is no token's code or is two tokens' codes) take the
choice of the product of every column as before: where two scores tie in
real arithmetic, which one float32 ranks first depends on the BLAS kernel,
and a product of those columns alone can rank them the other way.
"""

from __future__ import annotations

import numpy as np

UNIT_ROUNDOFF = 2.0 ** -24


class CodeBook:
    """The GPU tokens' ±1 codes (tokens × n), indexed by their sign patterns."""

    def __init__(self, codes: np.ndarray):
        self.codes = np.ascontiguousarray(codes, dtype=np.float32)
        n = self.codes.shape[1]
        # γₙ, rounded up a little so that the float64 S below cannot undercut it
        self.gamma = n * UNIT_ROUNDOFF / (1 - n * UNIT_ROUNDOFF) * (1 + 2 ** -20)
        self.token_of: dict[bytes, int] = {}
        shared: set[bytes] = set()
        for token, key in enumerate(_keys(self.codes.T)):
            if key in self.token_of:
                shared.add(key)
            self.token_of.setdefault(key, token)
        for key in shared:         # two tokens, one code: the product's rounding decides
            del self.token_of[key]

    def choose(self, h: np.ndarray) -> np.ndarray:
        """The argmax over tokens of `codes @ h` for each column of `h`
        (n × launches, float32), as np.argmax of the float32 product gives it."""
        chosen = self.by_signs(h)
        unsure = chosen < 0
        if unsure.any():      # the whole product: BLAS may round a subset's differently
            chosen[unsure] = self.product_choice(h)[unsure]
        return chosen

    def by_signs(self, h: np.ndarray) -> np.ndarray:
        """The token whose code is sign(h), for each column where it is sure to
        be the product's argmax; −1 where it is not."""
        magnitudes = np.abs(h.astype(np.float64))
        sure = magnitudes.min(axis=0) > self.gamma * magnitudes.sum(axis=0)
        chosen = np.full(h.shape[1], -1, np.int64)
        for column, key in zip(np.flatnonzero(sure), _keys(h[:, sure]), strict=True):
            chosen[column] = self.token_of.get(key, -1)
        return chosen

    def product_choice(self, h: np.ndarray) -> np.ndarray:
        """The full product's argmax (what `choose` stands for)."""
        return np.argmax(self.codes @ h, axis=0)


def _keys(columns: np.ndarray) -> list[bytes]:
    """Each column's sign pattern (positive or not, coordinate by coordinate) as bytes."""
    return [bytes(row) for row in np.packbits(columns.T > 0, axis=1)]
