"""`--timing`: wall time per pass and per driver step, reported on stderr in
the shape of MLIR's `-mlir-timing` execution time report."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO

_RULE = "===" + "-" * 73 + "==="


@dataclass
class Timing:
    """Named wall-time records in the order they ran (a pass that runs twice is
    recorded twice, as MLIR lists it per run)."""

    records: list[tuple[str, float]] = field(default_factory=list)

    @contextmanager
    def scope(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.records.append((name, time.perf_counter() - start))

    @property
    def total(self) -> float:
        return sum(seconds for _, seconds in self.records)

    def report(self, stream: IO[str]) -> None:
        total = self.total or 1e-12
        title = "... Execution time report ..."
        lines = [_RULE, title.center(len(_RULE)).rstrip(), _RULE,
                 f"  Total Execution Time: {self.total:.4f} seconds", "",
                 "  ----Wall Time----  ----Name----"]
        lines += [f"  {s:8.4f} ({100 * s / total:5.1f}%)  {name}" for name, s in self.records]
        lines.append(f"  {self.total:8.4f} (100.0%)  Total")
        stream.write("\n".join(lines) + "\n")

    def to_json(self) -> dict[str, object]:
        return {"total_seconds": self.total,
                "steps": [{"name": n, "seconds": s} for n, s in self.records]}


#: The do-nothing timer: what runs when `--timing` is not asked for.
class NoTiming(Timing):
    @contextmanager
    def scope(self, name: str) -> Iterator[None]:
        yield
