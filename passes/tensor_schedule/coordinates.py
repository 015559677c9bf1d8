"""Residual coordinates along the bits' lifetimes (step 3 of
`tensor-schedule-layers`), and the MLP neurons the clears take."""

from __future__ import annotations

import numpy as np

from qgc.dialects import tensor as T


class Neurons:
    """MLP neurons per half: the thresholds' gadgets (placed), then one more
    per copy or clear neuron while the half has room."""

    def __init__(self, placed: dict[int, int], intermediate: int) -> None:
        self.used = dict(placed)
        self.intermediate = intermediate

    def take(self, lo: int, hi: int) -> int | None:
        """An MLP half in [lo, hi] with a neuron to spare (the latest), taken."""
        for h in range(hi if hi % 2 else hi - 1, max(lo, 0) - 1, -2):
            if self.used.get(h, 1) < self.intermediate:
                self.used[h] = self.used.get(h, 1) + 1
                return h
        return None


class Coordinates:
    """Residual coordinates along the bits' lifetimes, per *view*: the tokens
    on which group g runs see only ungrouped bits and g's (another group's
    bits are zero there, so its coordinates stay −1), the tokens on which no
    group runs only ungrouped bits. A bit needs a coordinate that holds −1 in
    every view it appears in when it is written:

    - one nobody used in those views since its last clear (a fresh
      coordinate, or one only other groups use: free for a grouped bit);
    - one whose bits there are dead, reset to −1 by a clear neuron in an MLP
      half between the last read and the write (gated by the group for a
      grouped bit; ungrouped, it clears every view), the threshold's own copy
      neuron when that is its own half;
    - else a new one.

    Among those, a grouped bit takes the coordinate whose busy time in any
    view it extends least (best fit: other groups' bits that die when it
    does), so the groups' bits share coordinates and the coordinates free in
    every view, which an ungrouped bit needs, stay many.

    `release[c, v]`: the release half of the last bit on c in view v (column
    0 the view where no group runs, 1 + g group g's), `CLEAN` where c holds
    −1 there; an ungrouped bit is in every view."""

    def __init__(self, n_groups: int, neurons: Neurons) -> None:
        self.neurons = neurons
        self.next = T.ProgramOp.FLAG + 1
        self.release = np.full((256, 1 + n_groups), _CLEAN, dtype=np.int64)
        self.release[: self.next] = T.LIVE_TO_END          # the flag is never free
        self.busy = self.release.max(axis=1)               # the latest release in any view
        self.clears: dict[tuple[int, int | None], list[int]] = {}

    def fresh(self) -> int:
        c = self.next
        self.next += 1
        if c == len(self.release):
            self.release = np.concatenate([self.release, np.full_like(self.release, _CLEAN)])
            self.busy = np.concatenate([self.busy, np.full_like(self.busy, _CLEAN)])
        return c

    def hold(self, c: int, group: int | None, release: int) -> None:
        """Bit of `group` lives on c until `release`."""
        if group is None:
            self.release[c] = release
        else:
            self.release[c, 1 + group] = release
        self.busy[c] = self.release[c].max()

    def take(self, group: int | None, birth: int, release: int, threshold: bool,
             count: int = 1) -> list[tuple[int, int | None]]:
        """`count` coordinates for bits of `group` written in half `birth` and
        dead after `release`, held for them; with each, the half of the
        neuron that clears it first (None: it holds −1 already; `birth`: the
        threshold's own copy neuron)."""
        latest = birth if threshold else birth - 1          # a read writes onto −1
        n = self.next
        if group is None:
            last = self.busy[:n]
            usable = last <= latest                       # CLEAN everywhere included
            key = last                  # clean first (no clear neuron), then dead longest
        else:
            last = self.release[:n, 1 + group]
            usable = last <= latest
            covered = np.maximum(self.busy[:n], birth)
            longer = np.maximum(release - covered, 0)     # the busy time it adds
            spare = np.maximum(covered - release, 0)      # the busy time left after it dies
            key = (longer * _SPAN + spare) * 2 + (last != _CLEAN)
        candidates = np.flatnonzero(usable)
        order = candidates[np.argsort(key[candidates], kind="stable")]
        taken: list[tuple[int, int | None]] = []
        for c in order.tolist():
            if len(taken) == count:
                break
            half = self._cleared(c, group, int(last[c]), birth, latest)
            if half is not False:
                self.hold(c, group, release)
                taken.append((c, half))
        while len(taken) < count:
            c = self.fresh()
            self.hold(c, group, release)
            taken.append((c, None))
        return taken

    def _cleared(self, c: int, group: int | None, last: int, birth: int, latest: int):
        """Clear c's dead bits in the view(s) of `group` by `latest`: the half
        of the clear neuron, None when it holds −1 already, False when no MLP
        half in [last, latest] has a neuron to spare."""
        if last == _CLEAN:
            return None
        half = self.neurons.take(last, latest)
        if half is None:
            return False
        if half != birth:
            self.clears.setdefault((half, group), []).append(c)
        return half

    def clear_ops(self) -> list[T.ClearOp]:
        """The clears not fused into a threshold (its own half) as ops."""
        return [T.ClearOp(half // 2, coords, group)
                for (half, group), coords in sorted(self.clears.items(),
                                                    key=lambda kv: (kv[0][0], str(kv[0][1])))]


#: `release` of a coordinate that holds −1 in a view (below every half).
_CLEAN = -(1 << 20)
#: More halves than any schedule has (the key's spare part stays below it).
_SPAN = 1 << 31
