"""The zero-copy analysis's question for all_reduce/broadcast producers: does another slot of
the arena use the output slot's bytes while the producer writes there? Asked of an
occupancy tree (commopt.codegen.zero_copy._busy), it must answer as Slot.clashes does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from commopt.codegen.slots import Slot
from commopt.codegen.zero_copy import _busy

slot_strategy = st.tuples(st.sampled_from(["g0", "g1"]), st.integers(0, 40), st.integers(0, 12),
                          st.integers(0, 30), st.integers(0, 10))  # group, offset, size, first, length


@given(st.lists(slot_strategy, min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(0, 39), st.integers(-2, 40), st.integers(-1, 8)), max_size=15))
def test_busy_answers_as_a_scan_of_every_slot(specs, windows):
    slots = {(i, "output", 0): Slot(f"b{i}", False, g, off, size, first, first + length)
             for i, (g, off, size, first, length) in enumerate(specs)}
    asked = {}
    for q, (i, first, length) in enumerate(windows):
        out = slots[i % len(specs), "output", 0]
        asked[q, 0] = (out, first, first + length)
    expected = {key: any(other is not out and out.clashes(other, first, last)
                         for other in slots.values())
                for key, (out, first, last) in asked.items()}
    assert _busy(slots, asked) == expected


def test_a_slot_sharing_bytes_only_outside_the_window_does_not_clash():
    out = Slot("out", False, "g", 0, 100, 10, 20)
    before = Slot("before", False, "g", 50, 100, 0, 4)
    other_arena = Slot("x", False, "h", 0, 100, 0, 9)
    slots = {(0, "output", 0): out, (1, "output", 0): before, (2, "output", 0): other_arena}
    assert _busy(slots, {(0, 0): (out, 5, 9)}) == {(0, 0): False}
    assert _busy(slots, {(0, 0): (out, 4, 9)}) == {(0, 0): True}


def test_an_empty_slot_inside_the_bytes_clashes_as_slot_clashes_says():
    out = Slot("out", False, "g", 0, 100, 10, 20)
    inside = Slot("inside", False, "g", 50, 0, 0, 9)  # a zero-element tensor's slot
    at_start = Slot("at_start", False, "g", 0, 0, 0, 9)
    slots = {(0, "output", 0): out, (1, "output", 0): at_start}
    assert _busy(slots, {(0, 0): (out, 5, 9)}) == {(0, 0): False}
    slots[2, "output", 0] = inside
    assert _busy(slots, {(0, 0): (out, 5, 9)}) == {(0, 0): True}
