"""The machine model the simulator, the memory accounting and compute-overlap share."""

from __future__ import annotations

import math

import pytest

from commopt.ir.builder import GraphBuilder
from commopt.passes.compute_overlap import bottom_levels_us
from commopt.sim import critical_path_us, peak_memory, simulate
from commopt.sim.model import memory_model, needs_finish, step_durations, stream_of


def _graph():
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    b.group("h", ranks=[0, 1])
    x = b.input("x", (4, 8))
    a = b.compute("a", "aten.relu.default", [x], (4, 8))
    c1 = b.collective("c1", "all_reduce", "g", a)
    c2 = b.collective("c2", "all_reduce", "g", x)
    c3 = b.collective("c3", "all_reduce", "h", x)
    other = b.compute("other", "aten.relu.default", [x], (4, 8))
    w1 = b.wait("w1", c1)
    w2 = b.wait("w2", c2)
    w3 = b.wait("w3", c3)
    d = b.compute("d", "aten.add.Tensor", [w1, other], (4, 8))
    b.output([d, w2, w3])
    return b.build()


def test_a_collective_is_needed_finished_only_by_its_waits_readers_and_its_groups_next():
    g = _graph()
    ix = g.index_of
    assert needs_finish(g, ix["c1"], ix["w1"])
    assert needs_finish(g, ix["c1"], ix["c2"])  # same group: queues behind it
    assert not needs_finish(g, ix["c1"], ix["c3"])  # another group's stream
    assert needs_finish(g, ix["a"], ix["c1"])  # compute is always needed finished
    assert stream_of(g.nodes[ix["c3"]]) == "h"
    assert stream_of(g.nodes[ix["a"]]) is None


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_durations_must_be_finite_and_non_negative(bad):
    g = _graph()
    d = [1.0] * len(g)
    d[g.index_of["a"]] = bad
    with pytest.raises(ValueError, match="'a'"):
        step_durations(g, d)
    with pytest.raises(ValueError):
        simulate(g, g.original_order, d)


def test_inputs_outputs_and_views_take_no_time():
    g = _graph()
    d = step_durations(g, [7.0] * len(g))
    assert d[g.index_of["x"]] == 0.0
    assert d[g.index_of["a"]] == 7.0


def test_memory_model_frees_after_the_last_use_and_holds_collective_inputs_until_their_wait():
    g = _graph()
    m = memory_model(g)
    ix = g.index_of
    assert m.alloc[ix["x"]] > 0 and m.is_input[ix["x"]]
    # a is the input of c1: its storage is used by c1 and, through the wait, by w1
    assert ix["a"] in m.releases[ix["w1"]]
    assert ix["x"] not in m.releases[ix["w1"]]  # graph inputs are never freed
    assert m.uses[ix["a"]] == sum(ix["a"] in r for r in m.releases)
    assert memory_model(g) is m  # cached per graph
    # the peak of the simulator equals peak_memory's on the same order
    assert simulate(g, g.original_order, [1.0] * len(g)).peak_memory_bytes == peak_memory(g, g.original_order)[0]


def test_bottom_levels_and_critical_path_share_the_stream_rule():
    g = _graph()
    d = [0.0] * len(g)
    for name, v in {"a": 3.0, "c1": 10.0, "c2": 4.0, "c3": 50.0, "other": 1.0, "d": 2.0}.items():
        d[g.index_of[name]] = v
    level = bottom_levels_us(g, g.original_order, d, {})
    # the longest path starts at x: c3 (50) ends in its wait and the output
    assert max(level) == pytest.approx(critical_path_us(g, d))


def test_memory_models_share_storage_facts_but_not_the_wait_holds():
    """The padded and unpadded models, with and without held inputs, are derived from one
    another (:func:`commopt.sim.model._releases`); each must equal a model built alone."""
    from commopt.sim import model as m

    for first in ((True, False), (False, True), (True, True)):
        g = _graph()
        models = {first: memory_model(g, padded=first[0], hold_inputs_until_wait=first[1])}
        for padded in (False, True):
            for hold in (False, True):
                models[(padded, hold)] = memory_model(g, padded=padded, hold_inputs_until_wait=hold)
        for (padded, hold), got in models.items():
            alone = _graph()
            want = memory_model(alone, padded=padded, hold_inputs_until_wait=hold)
            assert (got.alloc, got.roots, got.releases, got.uses, got.is_input) == (
                want.alloc, want.roots, want.releases, want.uses, want.is_input)
        held = models[(False, True)].releases
        free = models[(False, False)].releases
        assert held != free  # the wait holds its collective's input only with holding
        assert m._RELEASES[g]
