"""commopt.gc_freeze: objects frozen inside a command are handed back when it returns."""

from __future__ import annotations

import gc

import pytest

from commopt.gc_freeze import freeze_long_lived, freezing_gc


@freezing_gc
def _command(fail: bool = False) -> int:
    keep = [object() for _ in range(100)]
    freeze_long_lived()
    frozen = gc.get_freeze_count()
    if fail:
        raise ValueError("boom")
    assert keep
    return frozen


def test_frozen_inside_and_handed_back_after():
    assert gc.get_freeze_count() == 0
    assert _command() > 0
    assert gc.get_freeze_count() == 0


def test_handed_back_when_the_command_fails():
    with pytest.raises(ValueError):
        _command(fail=True)
    assert gc.get_freeze_count() == 0


def test_outside_a_command_nothing_is_frozen():
    freeze_long_lived()
    assert gc.get_freeze_count() == 0


def test_a_caller_that_froze_objects_keeps_them_frozen():
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        assert _command() == before  # the command does not freeze or unfreeze
        assert gc.get_freeze_count() == before
    finally:
        gc.unfreeze()


def test_young_generation_collected_less_often_inside_and_restored_after():
    from commopt.gc_freeze import YOUNG_THRESHOLD

    before = gc.get_threshold()

    @freezing_gc
    def inside() -> tuple[int, ...]:
        return gc.get_threshold()

    assert inside()[0] == max(YOUNG_THRESHOLD, before[0])
    assert inside()[1:] == before[1:]
    assert gc.get_threshold() == before


def test_collector_paused_restores_the_previous_state():
    from commopt.gc_freeze import collector_paused

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # nested: stays off, and the outer block turns it back on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
