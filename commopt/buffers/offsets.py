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

import random
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from itertools import chain, islice

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

#: Above :data:`LARGE_INSTANCE_BUFFERS` buffers, an ordering after the first is given up once
#: its placements have read this many times the taken bounds the first one's read (a work
#: count, not a clock: plans stay deterministic). Placing the longest lifetimes first
#: fragments the arena, and every later placement then reads thousands of bounds: greedy by
#: length took 9 s on the 22,725 buffers of a 100k-node FSDP graph where greedy by size
#: took 0.4 s (it runs only when greedy by size misses the lower bound).
LARGE_INSTANCE_WORK_FACTOR = 4

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
    """Every buffer's lifetime as a range of leaves of a segment tree over compressed time,
    and where the tree nodes a placement reads and writes lie (see :class:`Occupancy`).

    The leaves are the clique points (:func:`_clique_points`); the tree has ``slots`` nodes
    (root 1, leaves from ``slots // 2`` on). Buffer i covers leaves ``[lo[i], hi[i])``: its
    *canonical* nodes (disjoint, together exactly the range) and their strict ancestors (the
    nodes it covers in part), which lie on two paths to the root: from ``left[i]`` up, and from
    ``right[i]`` up to where it joins the first path (``stop[i]``, an id at or above which
    the right path's nodes are on the left one; 0: it does not join). 0 is no node.
    :meth:`nodes` walks them. Per node, ``agg_kept``: some range has it canonical (someone reads
    its aggregate); ``own_kept``: also some range covers it in part (someone reads what is
    taken for all of its time). Only these ints and flags are kept, made with numpy a tree level
    at a time for all buffers at once: lists of every buffer's nodes took most of a second
    and hundreds of MB at a million graph nodes, more than walking the nodes when placing.
    """

    def __init__(self, firsts: Sequence[int], lasts: Sequence[int]) -> None:
        first = np.asarray(firsts, dtype=np.int64).reshape(-1)
        last = np.asarray(lasts, dtype=np.int64).reshape(-1)
        if len(first) != len(last):
            raise ValueError("firsts and lasts differ in length")
        points = _clique_points(first, last)
        leaves = 1
        while leaves < max(1, len(points)):
            leaves *= 2
        self.slots = 2 * leaves
        lo = np.searchsorted(points, first) + leaves
        hi = np.searchsorted(points, last, side="right") + leaves
        some = lo < hi
        # the left path starts above lo's lowest set bit, the right one above hi's (hi at the
        # right edge of the tree: no right path); they meet where both exist and lo, hi - 1 agree
        lo_bit, hi_bit = _bit_length(lo & -lo), _bit_length(hi & -hi)
        left = np.where(some, lo >> lo_bit, 0)
        right = np.where(some, (hi - 1) >> hi_bit, 0)
        join = np.maximum(np.maximum(lo_bit, hi_bit), _bit_length(lo ^ (hi - 1)))
        height = leaves.bit_length() - 1
        stop = np.where(some & (join <= height), (hi - 1) >> np.minimum(join, height), 0)
        canonical = _canonical_flags(lo, hi, self.slots)
        partial = np.zeros(self.slots, dtype=bool)
        for start in (left, right):
            nodes = start[start > 0]
            while len(nodes):
                partial[nodes] = True
                nodes = nodes[nodes > 1] >> 1
        kept_from = _nearest_kept(canonical, height)
        self.lo, self.hi = lo.tolist(), hi.tolist()
        self.left, self.right = kept_from[left].tolist(), kept_from[right].tolist()
        self.stop = stop.tolist()
        self.up = np.concatenate(([0, 0], kept_from[np.arange(2, self.slots) >> 1])).tolist()
        self.agg_kept = canonical.tobytes()
        self.own_kept = (canonical & partial).tobytes()

    def nodes(self, i: int) -> tuple[list[int], list[int], list[int]]:
        """Buffer i's canonical nodes, and the two paths of its strict ancestors (each from
        the bottom up, together every strict ancestor once) without the nodes whose
        aggregate nobody reads (nothing is kept there)."""
        lo, hi = self.lo[i], self.hi[i]
        canonical = []
        while lo < hi:  # the bottom-up walk of a range query
            if lo & 1:
                canonical.append(lo)
                lo += 1
            if hi & 1:
                hi -= 1
                canonical.append(hi)
            lo >>= 1
            hi >>= 1
        up = self.up
        left = []
        v = self.left[i]
        while v:
            left.append(v)
            v = up[v]
        right = []
        v, stop = self.right[i], self.stop[i]
        while v > stop:
            right.append(v)
            v = up[v]
        return canonical, left, right


def _nearest_kept(kept: np.ndarray, height: int) -> np.ndarray:
    """Per tree node (0 included, for none), the nearest of itself and its ancestors that is
    ``kept``, 0 for none: filled a level at a time from the root down."""
    nearest = np.zeros(len(kept), dtype=np.int64)
    nearest[1] = 1 if kept[1] else 0
    for level in range(1, height + 1):
        nodes = np.arange(1 << level, 2 << level, dtype=np.int64)
        nearest[nodes] = np.where(kept[nodes], nodes, nearest[nodes >> 1])
    return nearest


def _bit_length(values: np.ndarray) -> np.ndarray:
    """``int.bit_length`` of every value (non-negative, below 2**53)."""
    return np.frexp(values.astype(np.float64))[1].astype(np.int64)


def _canonical_flags(lo: np.ndarray, hi: np.ndarray, slots: int) -> np.ndarray:
    """Per tree node, whether it is a canonical node of some leaf range ``[lo, hi)``: the
    bottom-up walk of a range query, every range at once."""
    canonical = np.zeros(slots, dtype=bool)
    lo, hi = lo.copy(), hi.copy()
    active = lo < hi
    while active.any():
        left = active & (lo & 1 == 1)
        canonical[lo[left]] = True
        lo += left
        right = active & (hi & 1 == 1)
        hi -= right
        canonical[hi[right]] = True
        lo >>= 1
        hi >>= 1
        active = lo < hi
    return canonical


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


class Occupancy:
    """Byte ranges taken over time, on the segment tree of a :class:`TimeRanges`.

    Every tree node keeps two coalesced sets of byte ranges as flat sorted lists
    ``[s0, e0, s1, e1, ...]``: ``own`` (ranges taken for the node's whole time range, kept at
    their canonical nodes) and ``agg`` (the union of ``own`` over the node's subtree). The
    memory taken during a range is the union of ``agg`` at its canonical nodes and ``own`` at
    their ancestors: O(log T) sets, short because touching byte ranges merge. This avoids
    enumerating every pair of lifetimes that overlap (quadratic when some live long).
    ``scanned`` counts the taken bounds read so far (the work of the placements).
    """

    def __init__(self, ranges: TimeRanges) -> None:
        self.ranges = ranges
        self._own: list[list[int] | None] = [None] * ranges.slots
        self._agg: list[list[int] | None] = [None] * ranges.slots
        self.scanned = 0

    def taken(self, i: int) -> list[list[int]]:
        """The sets whose union is the memory taken during lifetime ``i`` (flat lists, not
        to be changed)."""
        return self._taken(self.ranges.nodes(i))

    def _taken(self, nodes: tuple[list[int], list[int], list[int]]) -> list[list[int]]:
        canonical, left, right = nodes
        own, agg = self._own, self._agg
        found = [flat for v in canonical if (flat := agg[v]) is not None]
        found += [flat for v in left if (flat := own[v]) is not None]
        found += [flat for v in right if (flat := own[v]) is not None]
        return found

    def take(self, i: int, start: int, end: int) -> None:
        """Bytes [start, end) taken for all of lifetime ``i``."""
        self._take(self.ranges.nodes(i), start, end)

    def _take(self, nodes: tuple[list[int], list[int], list[int]], start: int, end: int) -> None:
        canonical, left, right = nodes
        own, agg = self._own, self._agg
        own_kept, agg_kept = self.ranges.own_kept, self.ranges.agg_kept
        for v in canonical:
            if own_kept[v]:
                _add_range(own, v, start, end)
            _add_range(agg, v, start, end)
        for path in (left, right):
            for v in path:
                if agg_kept[v] and _add_range(agg, v, start, end):
                    break  # held [start, end) already: so do its ancestors' aggregates

    def overlaps(self, i: int, start: int, end: int) -> bool:
        """Whether any byte of [start, end) is taken at some time of lifetime ``i``."""
        for flat in self.taken(i):
            k = bisect_right(flat, start)  # ranges are half-open: one ending at start is clear
            if k & 1 or (k < len(flat) and flat[k] < end):
                return True
        return False

    def place_all(self, order: Sequence[int], sizes: Sequence[int], offsets: list[int],
                  work_limit: int | None) -> int | None:
        """Put the buffers of ``order`` one after another where best fit puts each
        (:func:`_best_fit`), take their bytes and write their offsets into ``offsets``;
        returns the arena (0 when nothing is placed), or None once :attr:`scanned` passes
        ``work_limit``. Zero-size buffers are left out (their offsets are not written).

        What :meth:`taken` and :meth:`take` do per buffer, in one walk of the tree with
        everything in locals and the common additions inline: this runs once per buffer and
        ordering, and calls per buffer and tree node dominated it."""
        ranges = self.ranges
        own, agg, up, own_kept = self._own, self._agg, ranges.up, ranges.own_kept
        los, his, lefts, rights, stops = ranges.lo, ranges.hi, ranges.left, ranges.right, ranges.stop
        scanned, arena = self.scanned, 0
        for i in order:
            size = sizes[i]
            if size <= 0:
                continue
            lo, hi = los[i], his[i]
            canonical = []
            while lo < hi:  # the bottom-up walk of a range query (TimeRanges.nodes)
                if lo & 1:
                    canonical.append(lo)
                    lo += 1
                if hi & 1:
                    hi -= 1
                    canonical.append(hi)
                lo >>= 1
                hi >>= 1
            found = [flat for v in canonical if (flat := agg[v]) is not None]
            left, right, stop = lefts[i], rights[i], stops[i]
            v = left
            while v:
                if (flat := own[v]) is not None:
                    found.append(flat)
                v = up[v]
            v = right
            while v > stop:
                if (flat := own[v]) is not None:
                    found.append(flat)
                v = up[v]
            scanned += sum(map(len, found))
            start = offsets[i] = _best_fit(size, found)
            end = start + size
            if end > arena:
                arena = end
            # [start, end) is free in every set read above, so in those of the canonical
            # nodes (an own set is part of its node's aggregate): _fill_gap, not _add_range
            for v in canonical:
                if own_kept[v]:
                    flat = own[v]
                    if flat is None:
                        own[v] = [start, end]
                    elif (top := flat[-1]) < start:
                        flat += (start, end)
                    elif top == start:
                        flat[-1] = end
                    else:
                        _fill_gap(flat, start, end)
                flat = agg[v]
                if flat is None:
                    agg[v] = [start, end]
                elif (top := flat[-1]) < start:
                    flat += (start, end)
                elif top == start:
                    flat[-1] = end
                else:
                    _fill_gap(flat, start, end)
            for v, bound in ((left, 0), (right, stop)):
                while v > bound:  # every node on the paths keeps an aggregate
                    flat = agg[v]
                    if flat is None:
                        agg[v] = [start, end]
                    elif (top := flat[-1]) < start:
                        flat += (start, end)
                    elif top == start:
                        flat[-1] = end
                    else:  # _add_range, inline
                        k = bisect_left(flat, start)
                        if k & 1:
                            if end <= flat[k]:
                                break  # held [start, end) already: so do its ancestors' aggregates
                            k -= 1
                            first, above = flat[k], k + 2
                        else:
                            first, above = start, k
                        if above == len(flat) or end < flat[above]:
                            flat[k:above] = (first, end)
                        else:
                            hi = bisect_right(flat, end, above)
                            flat[k:hi + (hi & 1)] = (first, flat[hi] if hi & 1 else end)
                    v = up[v]
            if work_limit is not None and scanned > work_limit:
                self.scanned = scanned
                return None
        self.scanned = scanned
        return arena


def _fill_gap(flat: list[int], start: int, end: int) -> None:
    """Add [start, end) to the set ``flat`` where it lies in a gap below the top range (it
    meets no range): it joins at most the ranges that end at ``start`` and start at ``end``."""
    k = bisect_right(flat, start)  # the start of the range above the gap
    if flat[k] == end:
        if k and flat[k - 1] == start:
            del flat[k - 1:k + 1]
        else:
            flat[k] = start
    elif k and flat[k - 1] == start:
        flat[k - 1] = end
    else:
        flat[k:k] = (start, end)


def _add_range(sets: list[list[int] | None], v: int, start: int, end: int) -> bool:
    """Add [start, end) to the set ``sets[v]``, merging the ranges it touches; True (and
    nothing changed) when one range of the set held it already."""
    flat = sets[v]
    if flat is None:
        sets[v] = [start, end]
        return False
    top = flat[-1]
    if top <= start:  # above every range (greedy packing stacks up): no search
        if top == start:
            flat[-1] = end
        else:
            flat += (start, end)
        return False
    lo = bisect_left(flat, start)
    if lo & 1:  # starts in (or touches) a range
        if end <= flat[lo]:  # inside it already
            return True
        lo -= 1
        first, above = flat[lo], lo + 2
    else:
        first, above = start, lo
    if above == len(flat) or end < flat[above]:  # reaches no range above: no second search
        flat[lo:above] = (first, end)
    else:
        hi = bisect_right(flat, end, above)
        flat[lo:hi + (hi & 1)] = (first, flat[hi] if hi & 1 else end)  # ends in (or touches) a range
    return False


def _best_fit(size: int, found: list[list[int]]) -> int:
    """Where best fit puts ``size`` bytes among the taken ranges ``found`` (flat sorted
    lists): the smallest free gap that holds them (lowest offset on ties), else on top."""
    if not found:
        return 0
    if len(found) == 1:
        starts, ends = found[0][0::2], found[0][1::2]
    else:  # every set has even length: all starts at even places, ends at odd ones
        bounds = list(chain.from_iterable(found))
        starts, ends = bounds[0::2], bounds[1::2]
        starts.sort()
        ends.sort()
    # With starts and ends sorted separately, the free gaps of the union are exactly
    # [ends[k], starts[k + 1]) where positive (the k+1 smallest starts and ends pair up).
    # One pass over them, lowest first, keeping the first smallest that fits (an exact fit
    # cannot be beaten); the gap below every range is the lowest of all.
    at, best = (0, starts[0]) if starts[0] >= size else (ends[-1], None)
    if best == size:
        return 0
    for end, start in zip(ends, islice(starts, 1, None), strict=False):  # the last end: none
        gap = start - end
        if gap >= size and (best is None or gap < best):
            at, best = end, gap
            if gap == size:
                break
    return at


def greedy_best_fit(order: Sequence[int], sizes: Sequence[int], firsts: Sequence[int],
                    lasts: Sequence[int], *, ranges: TimeRanges | None = None) -> tuple[list[int], int]:
    """Place buffers in ``order``; returns (offsets, arena size).

    Each buffer goes into the smallest gap among already placed buffers that overlap it in
    time (lowest offset on ties), else on top of them. Zero-size buffers take offset 0.
    Which memory is taken when comes from an :class:`Occupancy` on ``ranges``.
    """
    if ranges is None:
        ranges = TimeRanges(firsts, lasts)
    placed = _greedy_best_fit(order, sizes, ranges, None)
    assert placed is not None
    return placed[0], placed[1]


def _greedy_best_fit(order: Sequence[int], sizes: Sequence[int], ranges: TimeRanges,
                     work_limit: int | None) -> tuple[list[int], int, int] | None:
    """:func:`greedy_best_fit`, with its work (the taken bounds the placements read,
    :attr:`Occupancy.scanned`) third; None once the work passes ``work_limit``."""
    occupancy = Occupancy(ranges)
    offsets = [0] * len(sizes)
    arena = occupancy.place_all(order, sizes, offsets, work_limit)
    if arena is None:
        return None
    return offsets, arena, occupancy.scanned


def assign_offsets(sizes: Sequence[int], firsts: Sequence[int], lasts: Sequence[int],
                   orderings: Sequence[str] | None = None) -> tuple[list[int], int, str]:
    """Best of the greedy-by-size family: returns (offsets, arena size, winning ordering name).

    ``orderings`` (names from :data:`ORDERINGS`) default to all of them, or to
    :data:`LARGE_INSTANCE_ORDERINGS` above :data:`LARGE_INSTANCE_BUFFERS` buffers, where an
    ordering that reads more than :data:`LARGE_INSTANCE_WORK_FACTOR` times what the first one
    read is given up. Stops early when an ordering reaches the lower bound (it cannot be beaten).
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
    work_limit = None
    for name in names:
        key = ORDERINGS[name]
        keys = list(map(key, range(n), sizes, firsts, lasts))
        order = sorted(range(n), key=keys.__getitem__)
        if order in tried:  # same priorities, same placement
            continue
        tried.append(order)
        placed = _greedy_best_fit(order, sizes, ranges, work_limit)
        if placed is None:  # over the work cap: this ordering is left out
            continue
        offsets, arena, work = placed
        if n > LARGE_INSTANCE_BUFFERS and work_limit is None:
            work_limit = LARGE_INSTANCE_WORK_FACTOR * max(work, n)
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
