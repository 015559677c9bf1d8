"""A launch's warps, and the CTAs' residency in the machine's warp slots.

Every CTA's threads form warps of `simt.LANES` lanes (consecutive linear
thread ids); a lane without a thread is inactive from the start. The `simt`
engine runs the warps; the host of the token protocol schedules the same warps
by the same `Residency`, so their warp orders, and so the orders of atomics,
agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from qgc.dialects import simt
from qgc.runtime.launch import Launch, LaunchError


class Warp:
    """One warp: per-lane registers `r`, predicates `p`, the active lanes, the
    current block, and the machine-provided values of its lanes."""

    __slots__ = ("index", "ctaid", "cta", "tids", "active", "r", "p", "block", "pc",
                 "waiting", "done", "steps", "ops", "special")

    def __init__(self, index: int, ctaid: tuple[int, int, int],
                 tids: list[tuple[int, int, int] | None], nregs: int, npreds: int,
                 ntid: tuple[int, int, int], nctaid: tuple[int, int, int], cta: int = 0,
                 nwarps: int = 1):
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
        for which in simt.LANE_SPECIALS:
            self.special[which] = [simt.lane_special(which, lane) for lane in range(len(tids))]
        self.special["warpid"] = [index] * len(tids)
        self.special["nwarpid"] = [nwarps] * len(tids)

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


def iter_warps(launch: Launch, nregs: int, npreds: int) -> Iterator[Warp]:
    """Every CTA's warps, CTAs in grid order (x fastest), each made when asked
    for: a launch's warps never all exist at once unless all are resident."""
    bx, by, _ = launch.block
    n = launch.threads_per_block
    tids = [(i % bx, (i // bx) % by, i // (bx * by)) for i in range(n)]
    for cta, ctaid in enumerate(_grid(launch.grid)):
        for w in range(0, n, simt.LANES):
            lanes: list[tuple[int, int, int] | None] = list(tids[w:w + simt.LANES])
            lanes += [None] * (simt.LANES - len(lanes))
            yield Warp(w // simt.LANES, ctaid, lanes, nregs, npreds, launch.block,
                       launch.grid, cta, launch.warps_per_cta(simt.LANES))


def make_warps(launch: Launch, nregs: int, npreds: int) -> list[Warp]:
    """Every CTA's warps, CTAs in grid order (x fastest)."""
    return list(iter_warps(launch, nregs, npreds))


def _ctas(warps: Iterable[Warp]) -> Iterator[list[Warp]]:
    """The unfinished warps of each CTA, CTA by CTA (warps come in grid order)."""
    cta: list[Warp] = []
    for w in warps:
        if w.done:
            continue
        if cta and w.cta != cta[0].cta:
            yield cta
            cta = []
        cta.append(w)
    if cta:
        yield cta


class Residency:
    """Which warps hold the machine's warp slots, as an SM's occupancy: CTAs
    enter in grid order, each taking the lowest free slots, as soon as enough
    slots are free; a CTA's slots free once all its warps have exited. The
    `simt` engine and the host of the token protocol both schedule by it, so
    their warp orders, and so the orders of atomics, agree. `warps` may be a
    generator (`iter_warps`): a CTA's warps are taken from it when it enters;
    `slots` None holds every warp at once."""

    def __init__(self, warps: Iterable[Warp], slots: int | None):
        self.pending = _ctas(warps)
        self.next = next(self.pending, None)
        self.slots = slots
        self._check_fits(self.next)
        self.held: list[Warp | None] = []

    def _check_fits(self, cta: list[Warp] | None) -> None:
        if cta is not None and self.slots is not None and len(cta) > self.slots:
            raise LaunchError(f"a CTA of the launch has {len(cta)} warps; the machine holds "
                              f"{self.slots} warps (option max-warps)")

    def _room_for(self, cta: list[Warp]) -> bool:
        if self.slots is None:
            return True
        return len(cta) <= self.held.count(None) + self.slots - len(self.held)

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
        while self.next is not None and self._room_for(self.next):
            for w in self.next:
                slot = self.held.index(None) if None in self.held else len(self.held)
                if slot == len(self.held):
                    self.held.append(None)
                self.held[slot] = w
                entered.append((slot, w))
            self.next = next(self.pending, None)
            self._check_fits(self.next)
        return entered

    def resident(self) -> list[tuple[int, Warp]]:
        return [(slot, w) for slot, w in enumerate(self.held) if w is not None]
