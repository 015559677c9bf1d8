"""Affine forms, rows and sum rows: the vocabulary of the circuits.

Internally a bit is a `Form`: an integer combination of real bits plus a
constant that is known to be 0 or 1. Literals (x, 1 − x), constants (folded
away, so `add(x, const(5, W))` is cheaper than a generic add) and *virtual*
bits (a bit that is a linear combination of other thresholds, see
`counters`) are all Forms; a row over Forms expands to a row over real bits.
Rows that reduce to a constant or a copy of one bit become views, not
neurons.

Tightening. A row whose threshold sits far from the middle of its range (a
digit of one-bit columns: [D ≥ 256] with D ≤ 318) is rewritten with smaller
weights for the same function: a bit the row needs only needs to lift the
rest's maximum past t, a bit that decides alone only needs to reach t from
the rest's minimum (`tighten`, tried when a row fails).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from xdsl.ir import SSAValue
from xdsl.utils.exceptions import VerifyException

from qgc.dialects import tensor as T

Key = tuple[SSAValue, int]


class Form:
    """Σ w·bit + const over real bits (keys (value, index)); the value of a
    Form used as a bit is known to be 0 or 1."""

    __slots__ = ("terms", "const")

    def __init__(self, terms: dict[Key, int] | None = None, const: int = 0):
        self.terms = {k: w for k, w in (terms or {}).items() if w}
        self.const = const

    @staticmethod
    def bit(value: SSAValue, index: int) -> Form:
        return Form({(value, index): 1})

    def __add__(self, other: Form | int) -> Form:
        if isinstance(other, int):
            return Form(self.terms, self.const + other)
        terms = dict(self.terms)
        for k, w in other.terms.items():
            terms[k] = terms.get(k, 0) + w
        return Form(terms, self.const + other.const)

    __radd__ = __add__

    def __neg__(self) -> Form:
        return Form({k: -w for k, w in self.terms.items()}, -self.const)

    def __sub__(self, other: Form | int) -> Form:
        return self + (-other)

    def __rsub__(self, other: int) -> Form:
        return (-self) + other

    def __mul__(self, s: int) -> Form:
        return Form({k: w * s for k, w in self.terms.items()}, self.const * s)

    __rmul__ = __mul__

    @property
    def is_const(self) -> bool:
        return not self.terms

    @property
    def is_real(self) -> bool:
        """A plain real bit (weight 1, no constant)."""
        return self.const == 0 and len(self.terms) == 1 and next(iter(self.terms.values())) == 1

    def hi(self) -> int:
        return self.const + sum(w for w in self.terms.values() if w > 0)

    def lo(self) -> int:
        return self.const + sum(w for w in self.terms.values() if w < 0)


def fsum(forms: Sequence[Form | int]) -> Form:
    out = Form()
    for f in forms:
        out = out + f
    return out


Row = tuple[Form, int]   # [form ≥ t]
Bound = Callable[[int], Form]   # k -> the bit [value ≥ k]
Part = tuple[int, Form, int | Fraction]   # c·[form ≥ t]


@dataclass(frozen=True)
class Sum:
    """A bit as Σ c·[form ≥ t] (a `tensor.threshold` sum row, one layer): the
    caller promises it is 0 or 1. Parts equal within one op share neurons."""

    parts: tuple[Part, ...]

    def __add__(self, other: Sum) -> Sum:
        return Sum(self.parts + other.parts)

    def __mul__(self, c: int) -> Sum:
        return Sum(tuple((k * c, f, t) for k, f, t in self.parts))


def linear(form: Form) -> Sum:
    """A Form that is 0 or 1 as a sum row: a copy part [x ≥ 1] per bit and the
    constant as [0 ≥ 0]."""
    parts: list[Part] = [(w, Form({key: 1}), 1) for key, w in form.terms.items()]
    if form.const:
        parts.append((form.const, Form(), 0))
    return Sum(tuple(parts))


def step(form: Form, t: int | Fraction) -> Sum:
    return Sum(((1, form, t),))


#: Rows for one layer and how their output bits (in row order) make a result:
#: several levels can share one `tensor.threshold` (`CounterCircuits._together`).
Level = tuple[list[Row | Sum], Callable[[list[Form]], Any]]


def _threshold_row(form: Form, t: int | Fraction) -> T.ThresholdRow:
    keys = list(form.terms)
    return T.ThresholdRow(tuple((i, form.terms[k]) for i, k in enumerate(keys)),
                          Fraction(t) - form.const)


def constant_of(form: Form, t: int | Fraction) -> int | None:
    """[form ≥ t] when it is the same for every input, else None."""
    if form.is_const or form.hi() < t or form.lo() >= t:
        return int(form.lo() >= t)
    return None


def row_ok(form: Form, t: int) -> bool:
    """Whether [form ≥ t] passes the gadget bounds as one row."""
    try:
        _threshold_row(form, t).gadget()
    except VerifyException:
        return False
    return True


def checked_row(form: Form, t: int | Fraction) -> Row:
    """The row, or its `tighten`ed equivalent when it breaks the gadget
    bounds (VerifyException when that does too)."""
    if row_ok(form, t):
        return form, t
    tight = tighten(form, t)
    _threshold_row(*tight).gadget()
    return tight


def tighten(form: Form, t: int | Fraction) -> Row:
    """The same threshold function with smaller weights: a bit the row needs
    (the rest cannot reach t without it) only needs a weight that lifts the
    rest's maximum past the threshold, and a bit that decides the row alone
    only needs to reach it from the rest's minimum. Rows whose threshold sits
    far from the middle of their range (a digit of one-bit columns) come back
    within the gadget bounds."""
    terms, t = dict(form.terms), math.ceil(Fraction(t) - form.const)   # integer sums
    changed = True
    while changed:
        changed = False
        for key in sorted(terms, key=lambda k: -abs(terms[k])):
            w = terms[key]
            rest = Form({k: v for k, v in terms.items() if k != key})
            # a negative weight as a positive one on the complement: w·x = w + |w|·(1 − x)
            a, th = abs(w), t - min(w, 0)
            if rest.hi() < th:                    # needed: x ∧ [rest ≥ th − a]
                new_a = rest.hi() - (th - a) + 1
                new_th = th - a + new_a
            elif rest.lo() + a >= th:             # enough: x ∨ [rest ≥ th]
                new_a, new_th = th - rest.lo(), th
            else:
                continue
            if 0 < new_a < a:
                terms[key] = new_a if w > 0 else -new_a
                t = new_th + min(terms[key], 0)
                changed = True
    return Form(terms), t


def bit_of_count(t: int, dmax: int, d: Form) -> Sum:
    """Bit t of D (0 ≤ D ≤ dmax) as a staircase: Σ_k (bit_t(k) − bit_t(k−1))·[D ≥ k]."""
    parts = []
    for k in range(1, dmax + 1):
        c = ((k >> t) & 1) - (((k - 1) >> t) & 1)
        if c:
            parts.append((c, d, k))
    return Sum(tuple(parts))


def low_sum(s: Sequence[Form], k: int, base: int) -> Form:
    """Σ_{i<k} 2^i s_{base+i}."""
    return fsum([s[base + i] * (1 << i) for i in range(k)])


def one_hot(parts: Sequence[Sum]) -> Sum:
    """The OR of parts of which at most one is 1: their sum, one sum row."""
    return Sum(tuple(p for part in parts for p in part.parts))
