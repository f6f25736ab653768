"""Offset assignment for buffers with fixed lifetimes: the packing at the core of the planner.

Given sizes and inclusive lifetimes ``[first, last]``, choose offsets so that buffers whose
lifetimes intersect never overlap in memory, keeping the arena (max offset + size) small.
Heuristic: *greedy by size* with best fit (Pisarchyk & Lee, "Efficient Memory Management for
Deep Neural Net Inference", 2020; TFLite's ``GreedyBySizeOffsetCalculation``): take buffers in
a priority order and put each into the smallest gap between already placed, time-overlapping
buffers that holds it (lowest offset on ties), else just above them. We run it with several
priority orders and keep the smallest arena (the first order wins ties); on small arenas a
deterministic local search over the winning order follows (:func:`_local_search`). Every placement
ends at or below the sum of the sizes placed so far, so the arena never exceeds one buffer
per call site; it is never below :func:`lower_bound`.
"""

from __future__ import annotations

import bisect
import operator
import random
from collections.abc import Callable, Sequence
from itertools import compress

import numpy as np

#: Priority orders tried, by name: each maps buffer i to a sort key (ascending).
#: Every key ends with the buffer's index, so ties never depend on hash or sort stability.
ORDERINGS: dict[str, Callable[[int, int, int, int], tuple[int, ...]]] = {
    "greedy_by_size": lambda i, size, first, last: (-size, first, i),
    "greedy_by_area": lambda i, size, first, last: (-size * (last - first + 1), -size, i),
    "greedy_by_length": lambda i, size, first, last: (-(last - first), -size, i),
    "greedy_by_start": lambda i, size, first, last: (first, -size, i),
}


#: Above this many buffers in one arena only :data:`LARGE_INSTANCE_ORDERINGS` run, so that
#: 10k buffers plan in about a second: on the random instances of ``bench_buffers``
#: greedy-by-length gave the smallest arena every time and greedy-by-size is the reference
#: heuristic; by-area and by-start never won there.
LARGE_INSTANCE_BUFFERS = 4096
LARGE_INSTANCE_ORDERINGS = ("greedy_by_size", "greedy_by_length")

#: Up to this many buffers, when no ordering reaches the lower bound, a local search follows:
#: it swaps two random buffers of the best order so far and keeps the swap when the arena does
#: not grow. On a real graph (Llama SimpleFSDP x TP, 84 buffers per group) it took the best
#: ordering's 1.028 of the lower bound to 1.015. The generator has a fixed seed and
#: the number of tries is fixed, so plans stay deterministic.
LOCAL_SEARCH_BUFFERS = 512
LOCAL_SEARCH_NAME = "local_search"
LOCAL_SEARCH_TRIES = 300
LOCAL_SEARCH_SEED = 0


def lower_bound(sizes: Sequence[int], firsts: Sequence[int], lasts: Sequence[int]) -> int:
    """The largest sum of sizes of simultaneously live buffers (no packing can beat it).
    Sequences or integer numpy arrays."""
    if len(sizes) != len(firsts) or len(sizes) != len(lasts):
        raise ValueError("sizes, firsts and lasts differ in length")
    if len(sizes) == 0:
        return 0
    size = np.asarray(sizes, dtype=np.int64)
    times = np.concatenate([np.asarray(firsts, dtype=np.int64), np.asarray(lasts, dtype=np.int64) + 1])
    deltas = np.concatenate([size, -size])
    live = np.cumsum(deltas[np.lexsort((deltas, times))])  # frees before allocations at one time
    return max(0, int(live.max()))


class TimeRanges:
    """Every buffer's lifetime as nodes of a segment tree over compressed time.

    For buffer i, ``canon[i]`` are the canonical nodes of its range (disjoint, together
    exactly the range) and ``ancestors[i]`` their strict ancestors; ``own_reads[i]`` are the
    ancestors whose ``own`` set a placement can have written (those canonical for some
    buffer). Computed once per instance and shared by every ordering tried.
    """

    def __init__(self, firsts: Sequence[int], lasts: Sequence[int]) -> None:
        coords = sorted(set(firsts).union(last + 1 for last in lasts))
        index = {t: k for k, t in enumerate(coords)}
        leaves = 1
        while leaves < max(1, len(coords) - 1):
            leaves *= 2
        self.slots = 2 * leaves
        self.canon: list[list[int]] = []
        self.ancestors: list[list[int]] = []
        for first, last in zip(firsts, lasts, strict=True):
            lo = index[first] + leaves
            hi = index[last + 1] + leaves
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
            self.canon.append(canon)
            self.ancestors.append(ancestors)
        # A node's agg is only ever read where it is canonical for some buffer, its own only
        # where it is an ancestor of one: writes elsewhere are skipped (about a fifth). And
        # own is only ever written where a node is canonical: reads elsewhere are skipped.
        read_agg = {v for canon in self.canon for v in canon}
        read_own = {v for ancestors in self.ancestors for v in ancestors}
        self.agg_writes = [
            [v for v in canon if v in read_agg] + [v for v in ancestors if v in read_agg]
            for canon, ancestors in zip(self.canon, self.ancestors, strict=True)
        ]
        self.own_writes = [[v for v in canon if v in read_own] for canon in self.canon]
        self.own_reads = [[v for v in ancestors if v in read_agg] for ancestors in self.ancestors]


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
                    lasts: Sequence[int], *, ranges: TimeRanges | None = None) -> tuple[list[int], int]:
    """Place buffers in ``order``; returns (offsets, arena size).

    Each buffer goes into the smallest gap among already placed buffers that overlap it in
    time (lowest offset on ties), else on top of them. Zero-size buffers take offset 0.

    Which memory is taken when comes from a segment tree over time (``ranges``): every tree
    node keeps two coalesced sets of byte ranges as flat sorted lists ``[s0, e0, s1, e1, ...]``:
    ``own`` (placed buffers whose range covers the node's whole range, kept at their
    canonical nodes) and ``agg`` (the union of ``own`` over the node's subtree). The memory
    taken during a range is the union of ``agg`` at its canonical nodes and ``own`` at their
    ancestors: O(log T) sets, short because touching byte ranges merge. This avoids
    enumerating every pair of buffers whose lifetimes overlap (quadratic when some live long).
    """
    if ranges is None:
        ranges = TimeRanges(firsts, lasts)
    own: list[list[int] | None] = [None] * ranges.slots
    agg: list[list[int] | None] = [None] * ranges.slots
    all_canon, all_ancestors = ranges.canon, ranges.own_reads
    own_writes, agg_writes = ranges.own_writes, ranges.agg_writes
    offsets = [0] * len(sizes)
    arena = 0
    for i in order:
        size = sizes[i]
        if size <= 0:
            continue
        canon, ancestors = all_canon[i], all_ancestors[i]
        found = [agg[v] for v in canon if agg[v] is not None]
        found += [own[v] for v in ancestors if own[v] is not None]
        best_off = 0
        if found:
            if len(found) == 1:
                starts, ends = found[0][0::2], found[0][1::2]
            else:
                starts, ends = [], []
                for flat in found:
                    starts += flat[0::2]
                    ends += flat[1::2]
                starts.sort()
                ends.sort()
            # With starts and ends sorted separately, the free gaps of the union are exactly
            # [ends[k], starts[k + 1]) where positive (the k+1 smallest starts and ends pair up).
            gaps = list(map(operator.sub, starts[1:], ends))
            fits = list(compress(zip(gaps, ends, strict=False), map(size.__le__, gaps)))
            if starts[0] >= size:
                fits.append((starts[0], 0))
            best_off = min(fits)[1] if fits else ends[-1]
        offsets[i] = best_off
        end = best_off + size
        for v in own_writes[i]:
            own[v] = _merged(own[v], best_off, end)
        for v in agg_writes[i]:
            agg[v] = _merged(agg[v], best_off, end)
        if end > arena:
            arena = end
    return offsets, arena


def assign_offsets(sizes: Sequence[int], firsts: Sequence[int], lasts: Sequence[int],
                   orderings: Sequence[str] | None = None) -> tuple[list[int], int, str]:
    """Best of the greedy-by-size family: returns (offsets, arena size, winning ordering name).

    ``orderings`` (names from :data:`ORDERINGS`) default to all of them, or to
    :data:`LARGE_INSTANCE_ORDERINGS` above :data:`LARGE_INSTANCE_BUFFERS` buffers. Stops
    early when an ordering reaches the lower bound (it cannot be beaten).
    """
    n = len(sizes)
    if n == 0:
        return [], 0, "none"
    if orderings is not None:
        names = list(orderings)
    elif n > LARGE_INSTANCE_BUFFERS:
        names = list(LARGE_INSTANCE_ORDERINGS)
    else:
        names = list(ORDERINGS)
    bound = lower_bound(sizes, firsts, lasts)
    ranges = TimeRanges(firsts, lasts)
    best: tuple[list[int], int, str] | None = None
    best_order: list[int] = []
    tried: list[list[int]] = []
    for name in names:
        key = ORDERINGS[name]
        order = sorted(range(n), key=lambda i, key=key: key(i, sizes[i], firsts[i], lasts[i]))
        if order in tried:  # same priorities, same placement
            continue
        tried.append(order)
        offsets, arena = greedy_best_fit(order, sizes, firsts, lasts, ranges=ranges)
        if best is None or arena < best[1]:
            best = (offsets, arena, name)
            best_order = order
        if arena <= bound:
            break
    assert best is not None
    if orderings is None and best[1] > bound and n <= LOCAL_SEARCH_BUFFERS:
        best = _local_search(best_order, best, bound, sizes, firsts, lasts, ranges)
    return best


def _local_search(order: list[int], best: tuple[list[int], int, str], bound: int,
                  sizes: Sequence[int], firsts: Sequence[int], lasts: Sequence[int],
                  ranges: TimeRanges) -> tuple[list[int], int, str]:
    """Improve the best greedy placement by swapping pairs of buffers in its priority order.

    A swap is kept when the arena does not grow (sideways moves let the search cross
    plateaus); the result is only reported when it is strictly smaller. Deterministic: fixed
    seed, fixed number of tries; stops early at the lower bound.
    """
    rng = random.Random(LOCAL_SEARCH_SEED)
    n = len(order)
    current, current_arena = list(order), best[1]
    for _ in range(LOCAL_SEARCH_TRIES):
        j, k = rng.randrange(n), rng.randrange(n)
        if j == k:
            continue
        candidate = list(current)
        candidate[j], candidate[k] = candidate[k], candidate[j]
        offsets, arena = greedy_best_fit(candidate, sizes, firsts, lasts, ranges=ranges)
        if arena <= current_arena:
            current, current_arena = candidate, arena
            if arena < best[1]:
                best = (offsets, arena, LOCAL_SEARCH_NAME)
            if arena <= bound:
                break
    return best
