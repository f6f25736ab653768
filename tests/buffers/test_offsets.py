"""Offset assignment on random lifetimes and sizes: valid, above the bound, below per-call-site."""

from __future__ import annotations

import itertools
from bisect import bisect_left, bisect_right

from hypothesis import given
from hypothesis import strategies as st

from commopt.buffers.offsets import (
    LOCAL_SEARCH_NAME,
    ORDERINGS,
    Occupancy,
    TimeRanges,
    assign_offsets,
    greedy_best_fit,
    lower_bound,
)

ALIGN = 512

buffers_strategy = st.lists(
    st.tuples(st.integers(0, 64), st.integers(0, 40), st.integers(0, 15)),  # size units, first, length
    min_size=0, max_size=60,
)


def _unpack(items):
    sizes = [units * ALIGN for units, _, _ in items]
    firsts = [f for _, f, _ in items]
    lasts = [f + length for _, f, length in items]
    return sizes, firsts, lasts


def _brute_lower_bound(sizes, firsts, lasts):
    times = range(0, max(lasts, default=-1) + 1)
    return max((sum(s for s, f, la in zip(sizes, firsts, lasts, strict=True) if f <= t <= la) for t in times), default=0)


def _overlaps(offsets, sizes, firsts, lasts):
    n = len(sizes)
    return [
        (i, j) for i in range(n) for j in range(i + 1, n)
        if firsts[i] <= lasts[j] and firsts[j] <= lasts[i]
        and offsets[i] < offsets[j] + sizes[j] and offsets[j] < offsets[i] + sizes[i]
        and sizes[i] > 0 and sizes[j] > 0
    ]


@given(buffers_strategy)
def test_every_ordering_packs_without_overlap_between_the_bounds(items):
    sizes, firsts, lasts = _unpack(items)
    bound = _brute_lower_bound(sizes, firsts, lasts)
    assert lower_bound(sizes, firsts, lasts) == bound
    for name, key in ORDERINGS.items():
        order = sorted(range(len(sizes)), key=lambda i, key=key: key(i, sizes[i], firsts[i], lasts[i]))
        offsets, arena = greedy_best_fit(order, sizes, firsts, lasts)
        assert _overlaps(offsets, sizes, firsts, lasts) == [], name
        assert all(off % ALIGN == 0 for off in offsets)
        assert arena == max((o + s for o, s in zip(offsets, sizes, strict=True)), default=0)
        assert bound <= arena <= sum(sizes), name


@given(buffers_strategy)
def test_best_of_orderings_is_no_worse_than_greedy_by_size(items):
    sizes, firsts, lasts = _unpack(items)
    offsets, arena, name = assign_offsets(sizes, firsts, lasts)
    _, by_size = assign_offsets(sizes, firsts, lasts, orderings=["greedy_by_size"])[:2]
    assert _overlaps(offsets, sizes, firsts, lasts) == []
    assert arena <= by_size
    assert name in ORDERINGS or name == LOCAL_SEARCH_NAME or (name == "none" and not sizes)


def test_disjoint_lifetimes_reuse_one_slot_and_overlapping_ones_stack():
    sizes = [1024, 1024, 512]
    offsets, arena, _ = assign_offsets(sizes, [0, 5, 0], [4, 9, 9])
    # the 512 B buffer lives throughout; the two 1 KiB ones take turns in the same place
    assert arena == 1536
    assert offsets[0] == offsets[1]
    assert offsets[2] not in range(offsets[0], offsets[0] + 1024)


def test_best_fit_prefers_the_smallest_gap_that_holds_the_buffer():
    # placed first (biggest): a [0,4096) and c [6144,7168) at time 0..10 leave a 2 KiB hole;
    # b [4096, ...) ends early. A 1 KiB buffer live at 5..10 fits the 2 KiB hole at 4096.
    sizes = [4096, 2048, 1024, 1024]
    firsts = [0, 0, 0, 5]
    lasts = [10, 4, 10, 10]
    offsets, arena = greedy_best_fit([0, 1, 2, 3], sizes, firsts, lasts)
    assert offsets[:3] == [0, 4096, 6144]
    assert offsets[3] == 4096
    assert arena == 7168


def test_lower_bound_is_the_largest_sum_of_live_sizes():
    """The vectorized lower bound against the event sweep it replaced, on random lifetimes."""
    import random

    from commopt.buffers.offsets import lower_bound

    def sweep(sizes, firsts, lasts):
        events = sorted([(f, s) for s, f in zip(sizes, firsts, strict=True)] +
                        [(last + 1, -s) for s, last in zip(sizes, lasts, strict=True)])
        live = best = 0
        for _, d in events:
            live += d
            best = max(best, live)
        return best

    rng = random.Random(7)
    for _ in range(500):
        n = rng.randint(0, 25)
        firsts = [rng.randint(0, 30) for _ in range(n)]
        lasts = [f + rng.randint(0, 12) for f in firsts]
        sizes = [rng.choice([0, 1, 512, 4096, 2**20]) for _ in range(n)]
        assert lower_bound(sizes, firsts, lasts) == sweep(sizes, firsts, lasts)


@given(buffers_strategy, st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60), st.integers(0, 70),
                                            st.integers(0, 12)), max_size=20))
def test_occupancy_answers_what_a_scan_of_every_taken_range_answers(items, queries):
    """Occupancy.overlaps(i, start, end) is True exactly when some range taken for a lifetime
    that meets lifetime i shares a byte with [start, end)."""
    sizes, firsts, lasts = _unpack(items)
    taken = [(f, la, 7 * k, 7 * k + s // ALIGN)  # byte ranges that overlap one another too
             for k, (s, f, la) in enumerate(zip(sizes, firsts, lasts, strict=True)) if s > 0]
    q_firsts = [f for f, _, _, _ in queries]
    q_lasts = [f + length for f, length, _, _ in queries]
    occupancy = Occupancy(TimeRanges([t[0] for t in taken] + q_firsts, [t[1] for t in taken] + q_lasts))
    for i, (_, _, start, end) in enumerate(taken):
        occupancy.take(i, start, end)
    for j, (first, last, (_, _, start, units)) in enumerate(zip(q_firsts, q_lasts, queries, strict=True)):
        end = start + units + 1
        expected = any(f <= last and first <= la and s < end and start < e for f, la, s, e in taken)
        assert occupancy.overlaps(len(taken) + j, start, end) == expected


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10), st.integers(0, 60), st.integers(1, 20)),
                max_size=40),
       st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10)), min_size=1, max_size=10))
def test_occupancy_merges_ranges_taken_in_any_order(taken, queries):
    """Occupancy.take of byte ranges in any order (below, between, over and around ranges
    taken before) keeps every set coalesced: for a lifetime, taken() gives sets whose union
    is exactly the bytes taken for the lifetimes that meet it."""
    firsts = [f for f, _, _, _ in taken] + [f for f, _ in queries]
    lasts = [f + length for f, length, _, _ in taken] + [f + length for f, length in queries]
    occupancy = Occupancy(TimeRanges(firsts, lasts))
    for i, (_, _, start, size) in enumerate(taken):
        occupancy.take(i, start, start + size)
    for j, (first, length) in enumerate(queries, start=len(taken)):
        expected = {b for f, n, start, size in taken if f <= first + length and first <= f + n
                    for b in range(start, start + size)}
        got = set()
        for flat in occupancy.taken(j):
            assert all(a < b for a, b in itertools.pairwise(flat))  # sorted, touching ranges merged
            got |= {b for s, e in zip(flat[0::2], flat[1::2], strict=True) for b in range(s, e)}
        assert got == expected


def test_occupancy_ranges_that_only_touch_do_not_overlap():
    occupancy = Occupancy(TimeRanges([0, 0, 5], [3, 3, 9]))
    occupancy.take(0, 10, 20)
    assert not occupancy.overlaps(1, 0, 10) and not occupancy.overlaps(1, 20, 30)
    assert occupancy.overlaps(1, 19, 21) and occupancy.overlaps(1, 0, 11)
    assert not occupancy.overlaps(2, 10, 20)  # another time


def _canonical_nodes(lo: int, hi: int) -> list[int]:
    """The canonical nodes of leaf range [lo, hi) by the textbook bottom-up walk."""
    nodes = []
    while lo < hi:
        if lo & 1:
            nodes.append(lo)
            lo += 1
        if hi & 1:
            hi -= 1
            nodes.append(hi)
        lo >>= 1
        hi >>= 1
    return nodes


def _clique_points(firsts: list[int], lasts: list[int]) -> list[int]:
    """The leaves of a TimeRanges tree by their definition: each distinct end with a start
    after the end before it."""
    ends = sorted(set(lasts))
    return [e for k, e in enumerate(ends)
            if any((ends[k - 1] if k else -1) < f <= e for f in firsts)]


@given(buffers_strategy)
def test_two_lifetimes_overlap_exactly_when_they_hold_a_common_clique_point(items):
    """The segment tree's leaves keep every overlap and make none up."""
    _, firsts, lasts = _unpack(items)
    points = _clique_points(firsts, lasts)
    held = [{p for p in points if f <= p <= la} for f, la in zip(firsts, lasts, strict=True)]
    for i in range(len(firsts)):
        for j in range(len(firsts)):
            overlap = max(firsts[i], firsts[j]) <= min(lasts[i], lasts[j])
            assert overlap == bool(held[i] & held[j])


@given(buffers_strategy)
def test_time_ranges_walk_the_nodes_a_walk_of_each_range_names(items):
    """TimeRanges.nodes(i) equals a plain walk per buffer: the canonical nodes, and their
    strict ancestors once each (on two paths, each from the bottom up) less those whose
    aggregate nobody reads; aggregates are kept where some range is canonical, own sets where
    some range is canonical and some covers it in part."""
    _, firsts, lasts = _unpack(items)
    ranges = TimeRanges(firsts, lasts)
    leaves = ranges.slots // 2
    points = _clique_points(firsts, lasts)
    canon, above = [], []
    for f, la in zip(firsts, lasts, strict=True):
        nodes = _canonical_nodes(bisect_left(points, f) + leaves, bisect_right(points, la) + leaves)
        canon.append(set(nodes))
        above.append({v >> k for v in nodes for k in range(1, v.bit_length()) if v >> k})
    any_canon = set().union(*canon)
    any_above = set().union(*above)
    assert [v for v in range(ranges.slots) if ranges.agg_kept[v]] == sorted(any_canon)
    assert [v for v in range(ranges.slots) if ranges.own_kept[v]] == sorted(any_canon & any_above)
    for i in range(len(firsts)):
        canonical, left, right = ranges.nodes(i)
        assert sorted(canonical) == sorted(canon[i])
        assert sorted(left + right) == sorted(above[i] & any_canon)
        assert left == sorted(left, reverse=True) and right == sorted(right, reverse=True)
