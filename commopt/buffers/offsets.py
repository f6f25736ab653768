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


def conflicts(firsts: Sequence[int], lasts: Sequence[int]) -> list[list[int]]:
    """For every buffer, the buffers whose lifetimes intersect its own (sweep over starts)."""
    n = len(firsts)
    by_start = sorted(range(n), key=lambda i: (firsts[i], i))
    out: list[list[int]] = [[] for _ in range(n)]
    active: list[tuple[int, int]] = []  # (last, index), a heap would not help the scan below
    for i in by_start:
        f = firsts[i]
        active = [a for a in active if a[0] >= f]
        for _, j in active:
            out[i].append(j)
            out[j].append(i)
        active.append((lasts[i], i))
    return out


def greedy_best_fit(order: Sequence[int], sizes: Sequence[int],
                    neighbours: Sequence[Sequence[int]]) -> tuple[list[int], int]:
    """Place buffers in ``order``; returns (offsets, arena size).

    Each buffer goes into the smallest gap among already placed buffers that overlap it in
    time, lowest offset on ties, else on top of them.
    """
    n = len(sizes)
    offsets = [-1] * n
    arena = 0
    for i in order:
        size = sizes[i]
        placed = sorted((offsets[j], offsets[j] + sizes[j]) for j in neighbours[i] if offsets[j] >= 0)
        best_off = -1
        best_gap = -1
        top = 0
        for off, end in placed:
            gap = off - top
            if gap >= size and (best_gap < 0 or gap < best_gap):
                best_gap, best_off = gap, top
            if end > top:
                top = end
        if best_off < 0:
            best_off = top
        offsets[i] = best_off
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
    neighbours = conflicts(firsts, lasts)
    bound = lower_bound(sizes, firsts, lasts)
    best: tuple[list[int], int, str] | None = None
    for name in names:
        key = ORDERINGS[name]
        order = sorted(range(n), key=lambda i, key=key: key(i, sizes[i], firsts[i], lasts[i]))
        offsets, arena = greedy_best_fit(order, sizes, neighbours)
        if best is None or arena < best[1]:
            best = (offsets, arena, name)
        if arena <= bound:
            break
    assert best is not None
    return best
