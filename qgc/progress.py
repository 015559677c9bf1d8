"""Progress bars for the long steps (scheduling, codegen, merging layers):
tqdm on stderr, shown only on a terminal and only once a step has run for
`DELAY` seconds, so short compiles and scripts see nothing. tqdm's own
`TQDM_DISABLE=1` turns them off."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")

#: seconds a step runs before its bar appears
DELAY = 1.0


def progress(iterable: Iterable[T] | None = None, *, desc: str, total: int | None = None,
             unit: str = "it") -> tqdm:
    """A bar named `qgc: desc` over `iterable` (or updated by hand to `total`)."""
    return tqdm(iterable, desc=f"qgc: {desc}", total=total, unit=unit, delay=DELAY,
                leave=False, disable=None, file=sys.stderr, dynamic_ncols=True)
