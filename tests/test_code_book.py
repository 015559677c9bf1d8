"""`CodeBook.choose` (runtime/code_book.py) against the float32 product it
stands for: the same token on every column, whether it read the signs or
fell back to the product."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from qgc.runtime.code_book import CodeBook


@st.composite
def books_and_columns(draw):
    """±1 codes (tokens may share one) and code columns of every kind: a
    token's code amplified, with small noise, with a zero, tiny or
    non-finite coordinate, a sign pattern no token has, near-ties."""
    n = draw(st.integers(1, 70))
    tokens = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    codes = rng.choice(np.float32([-1, 1]), size=(tokens, n))
    if draw(st.booleans()):                          # two tokens with one code
        codes[-1] = codes[0]
    columns, neighbours = [], []
    for _ in range(draw(st.integers(1, 8))):
        token = codes[rng.integers(tokens)]
        kind = draw(st.sampled_from(["amplified", "noisy", "zero", "tiny", "random",
                                     "nonfinite", "tie"]))
        scale = np.float32(draw(st.sampled_from([1.0, 3.0, 1023.0, 2.0**20])))
        h = token * scale + rng.standard_normal(n).astype(np.float32) * (
            scale / 4 if kind == "noisy" else 0)
        if kind == "zero":
            h[rng.integers(n)] = 0
        elif kind == "tiny":      # a token that differs there only, ahead of this one
            at = rng.integers(n)
            h[at] = token[at] * scale * np.float32(2.0**-30)
            neighbours.append(token.copy())
            neighbours[-1][at] *= -1
        elif kind == "random":
            h = rng.standard_normal(n).astype(np.float32)
        elif kind == "nonfinite":
            h[rng.integers(n)] = draw(st.sampled_from([np.inf, -np.inf, np.nan]))
        elif kind == "tie":       # two codes exactly as good in real arithmetic
            h = np.abs(h) * token
            h[0] = 0
        columns.append(h.astype(np.float32))
    codes = np.concatenate([np.array(neighbours, np.float32).reshape(-1, n), codes])
    return codes, np.stack(columns, axis=1)


@settings(max_examples=300, deadline=None)
@given(books_and_columns())
def test_choose_is_the_products_argmax(case):
    codes, h = case
    book = CodeBook(codes)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(book.choose(h), book.product_choice(h))


def test_an_amplified_code_is_read_off_its_signs():
    """The machine's readout (a code amplified 1024×, over its own ±1 code)
    is chosen from the signs, without the product."""
    rng = np.random.default_rng(0)
    codes = rng.choice(np.float32([-1, 1]), size=(9239, 42))
    codes = np.unique(codes, axis=0)
    picked = rng.integers(len(codes), size=64)
    h = (codes[picked] * 1024 + codes[rng.integers(len(codes), size=64)]).T
    assert np.array_equal(CodeBook(codes).by_signs(h), picked)


def test_unsure_columns_are_left_to_the_product():
    codes = np.float32([[1, 1, 1], [1, 1, -1], [1, 1, 1]])     # tokens 0 and 2 share a code
    h = np.float32([[5, 5, 5, 5], [5, 5, 5, 5], [5, -5, 0, 2.0**-40]])
    book = CodeBook(codes)
    assert list(book.by_signs(h)) == [-1, 1, -1, -1]
    assert list(book.choose(h)) == [0, 1, 0, 0]


def test_a_shared_code_is_the_whole_products_choice():
    """Regression (hypothesis): tokens 0 and 26 share a code, and the float32
    product of that column alone ranked them one way, the product of all
    eight columns the other (OpenBLAS's kernels differ with the shape). An
    unsure column takes the whole product's choice, as the engine's product
    gave it before the code book."""
    rng = np.random.default_rng(34)
    codes = rng.choice(np.float32([-1, 1]), size=(33, 8))
    h = rng.standard_normal((8, 8)).astype(np.float32)
    book = CodeBook(codes)
    assert np.array_equal(book.choose(h), book.product_choice(h))
