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

import operator
import random
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from itertools import chain, compress

import numpy as np

from commopt.sim.model import sorted_unique

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
    """Every buffer's lifetime as nodes of a segment tree over compressed time, and which
    sets of the tree a placement reads and writes (see :func:`greedy_best_fit`).

    Each tree node ``v`` has two sets, kept in one table of ``2 * slots`` entries: ``own``
    at ``v`` and ``agg`` at ``slots + v``. For buffer i, ``reads[i]`` are ``agg`` of the
    canonical nodes of its range (disjoint, together exactly the range) and ``own`` of
    their strict ancestors; ``writes[i]`` are ``own`` of its canonical nodes and ``agg`` of
    those and of their ancestors. Entries no placement writes are never read and the other
    way round (about a fifth fewer of each). Computed once per instance and shared by every
    ordering tried; with numpy, one tree level at a time for all buffers at once (a loop
    per buffer took a third of a second for 20,000 buffers).
    """

    def __init__(self, firsts: Sequence[int], lasts: Sequence[int]) -> None:
        first = np.asarray(firsts, dtype=np.int64).reshape(-1)
        last = np.asarray(lasts, dtype=np.int64).reshape(-1)
        if len(first) != len(last):
            raise ValueError("firsts and lasts differ in length")
        n = len(first)
        points = _clique_points(first, last)
        leaves = 1
        while leaves < max(1, len(points)):
            leaves *= 2
        self.slots = 2 * leaves
        lo = np.searchsorted(points, first) + leaves
        hi = np.searchsorted(points, last, side="right") + leaves
        ids = np.arange(n, dtype=np.int64)
        first_leaf, end_leaf = lo, hi
        canon_buf: list[np.ndarray] = []
        canon_node: list[np.ndarray] = []
        active = lo < hi
        while active.any():  # the bottom-up walk of a range query, every buffer at once
            left = active & (lo & 1 == 1)
            canon_buf.append(ids[left])
            canon_node.append(lo[left])
            lo = lo + left
            right = active & (hi & 1 == 1)
            hi = hi - right
            canon_buf.append(ids[right])
            canon_node.append(hi[right])
            lo >>= 1
            hi >>= 1
            active = lo < hi
        cbuf, cnode = _by_buffer(np.concatenate([[], *canon_buf]).astype(np.int64),
                                 np.concatenate([[], *canon_node]).astype(np.int64))
        key = sorted_unique(_ancestor_keys(first_leaf, end_leaf, leaves))
        abuf, anode = key // self.slots, key % self.slots
        # agg is only read at canonical nodes, own only at ancestors; own is only written at
        # canonical nodes: what no placement reads is not written, and the other way round
        canonical = np.zeros(self.slots, dtype=bool)
        canonical[cnode] = True
        ancestor = np.zeros(self.slots, dtype=bool)
        ancestor[anode] = True
        keep = canonical[anode]
        rbuf, rnode = _by_buffer(np.concatenate([cbuf, abuf[keep]]),
                                 np.concatenate([cnode + self.slots, anode[keep]]))
        entries = np.arange(2 * self.slots).astype(object)  # one int object per entry
        self.reads = _lists(rbuf, rnode, n, entries)
        mine = ancestor[cnode]
        wbuf = np.concatenate([cbuf[mine], cbuf, abuf[keep]])
        wnode = np.concatenate([cnode[mine], cnode + self.slots, anode[keep] + self.slots])
        # each buffer's agg entries children before parents (larger ids first), then its own
        # entries: :meth:`Occupancy.take` skips the parents of an agg that holds the range
        span = 2 * self.slots  # one sort of buffer * span + (span - 1 - entry)
        key = np.sort(wbuf * span + (span - 1 - wnode))
        self.writes = _lists(key // span, span - 1 - key % span, n, entries)


def _clique_points(first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The fewest times at which every pair of lifetimes ``[first, last]`` that overlap
    both live, ascending: the ends of lifetimes with a start after the previous end (one
    per maximal clique of the interval graph). Two lifetimes overlap exactly when they
    contain a common point, so the segment tree needs only these as leaves: a few times
    fewer than all starts and ends, two or three tree levels less to read and write."""
    ends = sorted_unique(last)
    starts = np.sort(first)
    before = np.searchsorted(starts, ends, side="right")  # starts up to each end
    return ends[before > np.concatenate(([0], before[:-1]))]


def _ancestor_keys(lo: np.ndarray, hi: np.ndarray, leaves: int) -> np.ndarray:
    """``buffer * 2 * leaves + node`` for every strict ancestor of buffer b's canonical nodes
    (leaf range ``[lo[b], hi[b])``), with repeats: the nodes its range covers in part, which
    are the nodes on the paths up from its two ends that the range does not start or end at
    the edge of (what a lazy segment tree pushes down on a range update)."""
    ids = np.arange(len(lo), dtype=np.int64)[lo < hi]
    lo, hi = lo[ids], hi[ids]
    parts = [np.zeros(0, dtype=np.int64)]
    for level in range(1, leaves.bit_length()):
        for edge, node in ((lo, lo >> level), (hi, (hi - 1) >> level)):
            partial = (edge >> level) << level != edge
            parts.append(ids[partial] * (2 * leaves) + node[partial])
    return np.concatenate(parts)


def _by_buffer(bufs: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(buffer, tree node) pairs grouped by buffer, each buffer's in their given order."""
    at = np.argsort(bufs, kind="stable")
    return bufs[at], nodes[at]


def _lists(bufs: np.ndarray, nodes: np.ndarray, n: int, entries: np.ndarray) -> list[list[int]]:
    """Per buffer 0..n-1, its tree nodes (pairs grouped by buffer) as a list of ints, taken
    from ``entries`` (the ints as objects): a million entries share a few ten thousand int
    objects instead of each being a new one (about 30 MB at 22,000 buffers)."""
    ends = np.cumsum(np.bincount(bufs, minlength=n)).tolist()
    flat = entries[nodes].tolist()
    starts = [0, *ends][:n]
    return [flat[a:b] for a, b in zip(starts, ends, strict=True)]


class Occupancy:
    """Byte ranges taken over time, on the segment tree of a :class:`TimeRanges`.

    Every tree node keeps two coalesced sets of byte ranges as flat sorted lists
    ``[s0, e0, s1, e1, ...]``: ``own`` (ranges taken for the node's whole time range, kept at
    their canonical nodes) and ``agg`` (the union of ``own`` over the node's subtree). The
    memory taken during a range is the union of ``agg`` at its canonical nodes and ``own`` at
    their ancestors: O(log T) sets, short because touching byte ranges merge. This avoids
    enumerating every pair of lifetimes that overlap (quadratic when some live long).
    """

    def __init__(self, ranges: TimeRanges) -> None:
        self.ranges = ranges
        self._sets: list[list[int] | None] = [None] * (2 * ranges.slots)  # own, then agg

    def taken(self, i: int) -> list[list[int]]:
        """The sets whose union is the memory taken during lifetime ``i`` (flat lists, not
        to be changed)."""
        sets = self._sets
        return [flat for v in self.ranges.reads[i] if (flat := sets[v]) is not None]

    def take(self, i: int, start: int, end: int) -> None:
        """Bytes [start, end) taken for all of lifetime ``i``."""
        sets = self._sets
        slots = self.ranges.slots
        # agg entries (at slots + node, parent at (v + slots) >> 1) that hold [start, end)
        # already: so does every ancestor's, a superset, which is then left alone
        held: set[int] = set()
        for v in self.ranges.writes[i]:  # add [start, end) to the set, merging what it touches
            if v in held:
                held.add((v + slots) >> 1)
                continue
            flat = sets[v]
            if flat is None:
                sets[v] = [start, end]
                continue
            top = flat[-1]
            if top <= start:  # above every range (greedy packing stacks up): no search
                if top == start:
                    flat[-1] = end
                else:
                    flat += (start, end)
                continue
            lo = bisect_left(flat, start)
            if lo & 1 and end <= flat[lo]:  # inside one range already
                held.add((v + slots) >> 1)
                continue
            first = flat[lo - 1] if lo & 1 else start  # starts in (or touches) a range
            lo -= lo & 1
            hi = bisect_right(flat, end)
            stop = flat[hi] if hi & 1 else end  # ends in (or touches) a range
            flat[lo:hi + (hi & 1)] = (first, stop)

    def overlaps(self, i: int, start: int, end: int) -> bool:
        """Whether any byte of [start, end) is taken at some time of lifetime ``i``."""
        for flat in self.taken(i):
            k = bisect_right(flat, start)  # ranges are half-open: one ending at start is clear
            if k & 1 or (k < len(flat) and flat[k] < end):
                return True
        return False


def greedy_best_fit(order: Sequence[int], sizes: Sequence[int], firsts: Sequence[int],
                    lasts: Sequence[int], *, ranges: TimeRanges | None = None) -> tuple[list[int], int]:
    """Place buffers in ``order``; returns (offsets, arena size).

    Each buffer goes into the smallest gap among already placed buffers that overlap it in
    time (lowest offset on ties), else on top of them. Zero-size buffers take offset 0.
    Which memory is taken when comes from an :class:`Occupancy` on ``ranges``.
    """
    if ranges is None:
        ranges = TimeRanges(firsts, lasts)
    occupancy = Occupancy(ranges)
    offsets = [0] * len(sizes)
    arena = 0
    for i in order:
        size = sizes[i]
        if size <= 0:
            continue
        found = occupancy.taken(i)
        best_off = 0
        if found:
            if len(found) == 1:
                starts, ends = found[0][0::2], found[0][1::2]
            else:  # every set has even length: all starts at even places, ends at odd ones
                bounds = list(chain.from_iterable(found))
                starts, ends = bounds[0::2], bounds[1::2]
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
        occupancy.take(i, best_off, end)
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
