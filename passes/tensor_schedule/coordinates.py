"""Residual coordinates along the bits' lifetimes (step 3 of
`tensor-schedule-layers`), and the MLP neurons the clears take."""

from __future__ import annotations

import heapq

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

    - one nobody used in those views (a fresh coordinate, or one only other
      groups use: free for a grouped bit);
    - one whose bits there are dead, reset to −1 by a clear neuron in an MLP
      half between the last read and the write (gated by the group for a
      grouped bit; ungrouped, it clears every view), the threshold's own copy
      neuron when that is its own half;
    - else a new one.

    `state[c]` maps a view (group, or None) to the release half of the last
    bit there; a view absent holds −1. An ungrouped bit is in every view."""

    def __init__(self, n_groups: int, neurons: Neurons) -> None:
        self.views: list[int | None] = [None, *range(n_groups)]
        self.neurons = neurons
        self.next = T.ProgramOp.FLAG + 1
        self.state: dict[int, dict[int | None, int]] = {}
        self.clean: dict[int | None, list[int]] = {v: [] for v in self.views}
        self.dirty: dict[int | None, list[tuple[int, int]]] = {v: [] for v in self.views}
        self.all_dirty: list[tuple[int, int]] = []
        self.clears: dict[tuple[int, int | None], list[int]] = {}

    def fresh(self) -> int:
        c = self.next
        self.next += 1
        return c

    def hold(self, c: int, group: int | None, release: int) -> None:
        """Bit of `group` lives on c until `release`."""
        st = self.state.setdefault(c, {})
        if group is None:
            for v in self.views:
                st[v] = release
                if release < T.LIVE_TO_END:
                    heapq.heappush(self.dirty[v], (release, c))
        else:
            if not st:          # it was clean everywhere: the other groups may take it
                for v in self.views[1:]:
                    if v != group:
                        heapq.heappush(self.clean[v], c)
            st[group] = release
            if release < T.LIVE_TO_END:
                heapq.heappush(self.dirty[group], (release, c))
        if max(st.values()) < T.LIVE_TO_END:
            heapq.heappush(self.all_dirty, (max(st.values()), c))

    def take(self, group: int | None, birth: int, threshold: bool) -> tuple[int, int | None]:
        """A coordinate for a bit written in half `birth`, and the half of
        the neuron that clears it first (None: it holds −1 already; `birth`:
        the threshold's own copy neuron)."""
        latest = birth if threshold else birth - 1          # a read writes onto −1
        if group is None:
            return self._clear(self.all_dirty, None, birth, latest,
                               lambda c: max(self.state[c].values(), default=-2))
        heap = self.clean[group]
        while heap:
            c = heapq.heappop(heap)
            if group not in self.state[c]:
                return c, None
        return self._clear(self.dirty[group], group, birth, latest,
                           lambda c: self.state[c].get(group, -2))

    def _clear(self, heap: list[tuple[int, int]], group: int | None, birth: int, latest: int,
               release_of) -> tuple[int, int | None]:
        """The dead coordinate released first, cleared in an MLP half in
        [its release, latest] with a neuron to spare; else a fresh one."""
        while heap and heap[0][0] <= latest:
            release, c = heap[0]
            if release_of(c) != release:
                heapq.heappop(heap)                      # stale: taken or changed since
                continue
            half = self.neurons.take(release, latest)
            if half is None:
                break
            heapq.heappop(heap)
            if group is None:
                self.state[c] = {}
            else:
                del self.state[c][group]
            if half != birth:
                self.clears.setdefault((half, group), []).append(c)
            return c, half
        return self.fresh(), None

    def clear_ops(self) -> list[T.ClearOp]:
        """The clears not fused into a threshold (its own half) as ops."""
        return [T.ClearOp(half // 2, coords, group)
                for (half, group), coords in sorted(self.clears.items(),
                                                    key=lambda kv: (kv[0][0], str(kv[0][1])))]
