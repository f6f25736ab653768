"""Offset assignment for buffers with fixed lifetimes: the packing at the core of the planner.

Given sizes and inclusive lifetimes ``[first, last]``, choose offsets so that buffers whose
lifetimes intersect never overlap in memory, keeping the arena (max offset + size) small.
Heuristic: *greedy by size* with best fit (Pisarchyk & Lee, "Efficient Memory Management for
Deep Neural Net Inference", 2020; TFLite's ``GreedyBySizeOffsetCalculation``): take buffers in
a priority order and put each into the smallest gap between already placed, time-overlapping
buffers that holds it (lowest offset on ties), else just above them. We run it with several
priority orders and keep the smallest arena (the first order wins ties). Every placement
ends at or below the sum of the sizes placed so far, so the arena never exceeds one buffer
per call site; it is never below :func:`lower_bound`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

#: Priority orders tried, by name: each maps buffer i to a sort key (ascending).
#: Every key ends with the buffer's index, so ties never depend on hash or sort stability.
ORDERINGS: dict[str, Callable[[int, int, int, int], tuple[int, ...]]] = {
    "greedy_by_size": lambda i, size, first, last: (-size, first, i),
    "greedy_by_area": lambda i, size, first, last: (-size * (last - first + 1), -size, i),
    "greedy_by_length": lambda i, size, first, last: (-(last - first), -size, i),
    "greedy_by_start": lambda i, size, first, last: (first, -size, i),
}


def lower_bound(sizes: Sequence[int], firsts: Sequence[int], lasts: Sequence[int]) -> int:
    """The largest sum of sizes of simultaneously live buffers (no packing can beat it)."""
    events: list[tuple[int, int]] = []
    for s, f, last in zip(sizes, firsts, lasts, strict=True):
        events.append((f, s))
        events.append((last + 1, -s))
    events.sort(key=lambda e: (e[0], e[1]))  # frees (negative) before allocations at one time
    live = best = 0
    for _, d in events:
        live += d
        if live > best:
            best = live
    return best


class _OccupancyTree:
    """Which memory is taken, by time range: a segment tree over compressed time.

    Every node keeps two coalesced sets of byte ranges, each a flat sorted list
    ``[start0, end0, start1, end1, ...]``: ``own`` (buffers whose time range covers the
    node's whole range, stored at their canonical nodes) and ``agg`` (the union of ``own``
    over the node's subtree). The memory taken during a time range is then the union of
    ``agg`` at the range's canonical nodes and ``own`` at their ancestors: O(log T) sets,
    each short because touching byte ranges merge. This avoids enumerating every pair of
    buffers whose lifetimes overlap (quadratic when some live very long).
    """

    def __init__(self, coords: list[int]) -> None:
        self.index = {t: k for k, t in enumerate(coords)}
        leaves = 1
        while leaves < max(1, len(coords) - 1):
            leaves *= 2
        self.leaves = leaves
        self.own: list[list[int] | None] = [None] * (2 * leaves)
        self.agg: list[list[int] | None] = [None] * (2 * leaves)

    def nodes_for(self, first: int, last: int) -> tuple[list[int], list[int]]:
        """(canonical nodes, their strict ancestors) of the time range [first, last]."""
        lo = self.index[first] + self.leaves
        hi = self.index[last + 1] + self.leaves
        canon: list[int] = []
        while lo < hi:
            if lo & 1:
                canon.append(lo)
                lo += 1
            if hi & 1:
                hi -= 1
                canon.append(hi)
            lo >>= 1
            hi >>= 1
        seen: set[int] = set()
        ancestors: list[int] = []
        for c in canon:
            c >>= 1
            while c and c not in seen:
                seen.add(c)
                ancestors.append(c)
                c >>= 1
        return canon, ancestors

    def taken(self, canon: list[int], ancestors: list[int]) -> list[tuple[int, int]]:
        """Byte ranges ``(start, end)`` taken by placed buffers live during the range, sorted
        by start (ranges from different sets may overlap)."""
        agg, own = self.agg, self.own
        found = [agg[v] for v in canon if agg[v]] + [own[v] for v in ancestors if own[v]]
        if len(found) == 1:
            flat = found[0]
            return list(zip(flat[0::2], flat[1::2], strict=True))
        pairs: list[tuple[int, int]] = []
        for flat in found:
            pairs.extend(zip(flat[0::2], flat[1::2], strict=True))
        pairs.sort()
        return pairs

    def add(self, canon: list[int], ancestors: list[int], start: int, end: int) -> None:
        """Mark [start, end) taken during the range with these canonical nodes."""
        own, agg = self.own, self.agg
        for v in canon:
            own[v] = _merged(own[v], start, end)
            agg[v] = _merged(agg[v], start, end)
        for v in ancestors:
            agg[v] = _merged(agg[v], start, end)


def _merged(flat: list[int] | None, start: int, end: int) -> list[int]:
    """``flat`` (disjoint, non-touching ranges) with [start, end) added, merged in place."""
    if flat is None:
        return [start, end]
    i = bisect.bisect_left(flat, start)
    if i & 1:  # start falls in (or touches the end of) range i // 2
        i -= 1
        start = flat[i]
    j = bisect.bisect_right(flat, end)
    if j & 1:  # end falls in (or touches the start of) range j // 2
        end = flat[j]
        j += 1
    flat[i:j] = (start, end)
    return flat


def greedy_best_fit(order: Sequence[int], sizes: Sequence[int], firsts: Sequence[int],
                    lasts: Sequence[int]) -> tuple[list[int], int]:
    """Place buffers in ``order``; returns (offsets, arena size).

    Each buffer goes into the smallest gap among already placed buffers that overlap it in
    time (lowest offset on ties), else on top of them. Zero-size buffers take offset 0.
    """
    n = len(sizes)
    coords = sorted(set(firsts).union(last + 1 for last in lasts))
    tree = _OccupancyTree(coords)
    offsets = [0] * n
    arena = 0
    for i in order:
        size = sizes[i]
        if size <= 0:
            continue
        canon, ancestors = tree.nodes_for(firsts[i], lasts[i])
        best_off = -1
        best_gap = -1
        top = 0
        for start, end in tree.taken(canon, ancestors):
            gap = start - top
            if gap >= size and (best_gap < 0 or gap < best_gap):
                best_gap, best_off = gap, top
            if end > top:
                top = end
        if best_off < 0:
            best_off = top
        offsets[i] = best_off
        tree.add(canon, ancestors, best_off, best_off + size)
        if best_off + size > arena:
            arena = best_off + size
    return offsets, arena


def assign_offsets(sizes: Sequence[int], firsts: Sequence[int], lasts: Sequence[int],
                   orderings: Sequence[str] | None = None) -> tuple[list[int], int, str]:
    """Best of the greedy-by-size family: returns (offsets, arena size, winning ordering name).

    Stops early when an ordering reaches the lower bound (it cannot be beaten).
    """
    n = len(sizes)
    if n == 0:
        return [], 0, "none"
    names = list(orderings) if orderings is not None else list(ORDERINGS)
    bound = lower_bound(sizes, firsts, lasts)
    best: tuple[list[int], int, str] | None = None
    tried: list[list[int]] = []
    for name in names:
        key = ORDERINGS[name]
        order = sorted(range(n), key=lambda i, key=key: key(i, sizes[i], firsts[i], lasts[i]))
        if order in tried:  # same priorities, same placement
            continue
        tried.append(order)
        offsets, arena = greedy_best_fit(order, sizes, firsts, lasts)
        if best is None or arena < best[1]:
            best = (offsets, arena, name)
        if arena <= bound:
            break
    assert best is not None
    return best
