"""Progress bars for the long steps (scheduling, codegen, merging layers):
tqdm on stderr, shown only on a terminal and only once a step has run for
`DELAY` seconds, so short compiles and scripts see nothing. A bar's clock
keeps moving while one item takes long (a ticker thread redraws it), so a
step never sits silent. tqdm's own `TQDM_DISABLE=1` turns them off."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")

#: seconds a step runs before its bar appears
DELAY = 1.0
#: seconds between redraws of a bar whose count has not moved
TICK = 0.5


class _Bar(tqdm):
    """A tqdm bar redrawn every `TICK` seconds once `DELAY` has passed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._stop = threading.Event()
        if not self.disable:
            threading.Thread(target=self._tick, daemon=True).start()

    def _tick(self) -> None:
        while not self._stop.wait(TICK):
            if time.time() - self.start_t >= DELAY and not self.disable:
                self.refresh()

    def close(self) -> None:
        if hasattr(self, "_stop"):
            self._stop.set()
        super().close()


def progress(iterable: Iterable[T] | None = None, *, desc: str, total: int | None = None,
             unit: str = "it") -> tqdm:
    """A bar named `qgc: desc` over `iterable` (or updated by hand to `total`);
    use it as a context manager, or iterate it to the end, so that it closes."""
    return _Bar(iterable, desc=f"qgc: {desc}", total=total, unit=unit, delay=DELAY,
                leave=False, disable=None, file=sys.stderr, dynamic_ncols=True)
