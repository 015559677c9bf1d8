"""A launch's warps, and the CTAs' residency in the machine's warp slots.

Every CTA's threads form warps of `simt.LANES` lanes (consecutive linear
thread ids); a lane without a thread is inactive from the start. The `simt`
engine runs the warps; the host of the token protocol schedules the same warps
by the same `Residency`, so their warp orders, and so the orders of atomics,
agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from qgc.dialects import simt
from qgc.runtime.launch import Launch, LaunchError


class Warp:
    """One warp: per-lane registers `r`, predicates `p`, the active lanes, the
    current block, and the machine-provided values of its lanes."""

    __slots__ = ("index", "ctaid", "cta", "tids", "active", "r", "p", "block", "pc",
                 "waiting", "done", "steps", "ops", "special")

    def __init__(self, index: int, ctaid: tuple[int, int, int],
                 tids: list[tuple[int, int, int] | None], nregs: int, npreds: int,
                 ntid: tuple[int, int, int], nctaid: tuple[int, int, int], cta: int = 0):
        self.index, self.ctaid, self.tids, self.cta = index, ctaid, tids, cta
        self.waiting: set[int] = set()      # lanes arrived at a barrier, not yet released
        self.active = [lane for lane, t in enumerate(tids) if t is not None]
        self.r = [[0] * nregs for _ in tids]
        self.p = [[False] * npreds for _ in tids]
        self.block, self.done, self.steps, self.ops = 0, not self.active, 0, 0
        # each live lane's next block (a lane without a thread never runs)
        self.pc: dict[int, int] = {lane: 0 for lane in self.active}
        self.special: dict[str, list[int]] = {}
        for axis, d in enumerate("xyz"):
            self.special[f"tid.{d}"] = [t[axis] if t else 0 for t in tids]
            self.special[f"ntid.{d}"] = [ntid[axis]] * len(tids)
            self.special[f"ctaid.{d}"] = [ctaid[axis]] * len(tids)
            self.special[f"nctaid.{d}"] = [nctaid[axis]] * len(tids)

    def select(self) -> bool:
        """The next step's block and active lanes: min-PC over the live lanes
        that do not wait at a barrier; False when every live lane waits."""
        ready = [b for lane, b in self.pc.items() if lane not in self.waiting]
        if not ready:
            return False
        self.block = min(ready)
        self.active = [lane for lane, b in self.pc.items()
                       if b == self.block and lane not in self.waiting]
        return True

    def retire(self, lanes: list[int]) -> None:
        for lane in lanes:
            del self.pc[lane]
        self.done = not self.pc

    @property
    def at_barrier(self) -> bool:
        """Every live lane has arrived at a barrier (an exited lane counts)."""
        return set(self.pc) <= self.waiting

    def who(self, lane: int) -> str:
        return (f"warp {self.index} lane {lane} (ctaid {_xyz(self.ctaid)} "
                f"tid {_xyz(self.tids[lane] or (0, 0, 0))})")


def _xyz(v: tuple[int, int, int]) -> str:
    return f"({v[0]},{v[1]},{v[2]})"


def _grid(grid: tuple[int, int, int]) -> Iterator[tuple[int, int, int]]:
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                yield (x, y, z)


def make_warps(launch: Launch, nregs: int, npreds: int) -> list[Warp]:
    """Every CTA's warps, CTAs in grid order (x fastest)."""
    warps: list[Warp] = []
    bx, by, _ = launch.block
    n = launch.threads_per_block
    for cta, ctaid in enumerate(_grid(launch.grid)):
        tids = [(i % bx, (i // bx) % by, i // (bx * by)) for i in range(n)]
        for w in range(0, n, simt.LANES):
            lanes: list[tuple[int, int, int] | None] = list(tids[w:w + simt.LANES])
            lanes += [None] * (simt.LANES - len(lanes))
            warps.append(Warp(w // simt.LANES, ctaid, lanes, nregs, npreds, launch.block,
                              launch.grid, cta))
    return warps


class Residency:
    """Which warps hold the machine's warp slots, as an SM's occupancy: CTAs
    enter in grid order, each taking the lowest free slots, as soon as enough
    slots are free; a CTA's slots free once all its warps have exited. The
    `simt` engine and the host of the token protocol both schedule by it, so
    their warp orders, and so the orders of atomics, agree."""

    def __init__(self, warps: list[Warp], slots: int | None):
        ctas: dict[int, list[Warp]] = {}
        for w in warps:
            if not w.done:
                ctas.setdefault(w.cta, []).append(w)
        self.pending = list(ctas.values())
        largest = max((len(c) for c in self.pending), default=0)
        if slots is not None and largest > slots:
            raise LaunchError(f"a CTA of the launch has {largest} warps; the machine holds "
                              f"{slots} warps (option max-warps)")
        self.held: list[Warp | None] = [None] * (slots or sum(map(len, self.pending)))

    def admit(self, done: Callable[[Warp], bool]) -> list[tuple[int, Warp]]:
        """Free the slots of CTAs whose warps have all exited, then let in
        the next CTAs that fit; the (slot, warp) pairs that entered."""
        ctas: dict[int, list[int]] = {}
        for slot, w in enumerate(self.held):
            if w is not None:
                ctas.setdefault(w.cta, []).append(slot)
        for slots in ctas.values():
            if all(done(self.held[s]) for s in slots):
                for s in slots:
                    self.held[s] = None
        entered: list[tuple[int, Warp]] = []
        while self.pending and len(self.pending[0]) <= self.held.count(None):
            for w in self.pending.pop(0):
                slot = self.held.index(None)
                self.held[slot] = w
                entered.append((slot, w))
        return entered

    def resident(self) -> list[tuple[int, Warp]]:
        return [(slot, w) for slot, w in enumerate(self.held) if w is not None]
