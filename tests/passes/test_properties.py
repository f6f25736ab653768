"""Property tests: on random graphs every pass and pipeline keeps the invariants and the
memory budget, and is deterministic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from commopt.invariants import check_order
from commopt.passes.base import PassContext
from commopt.passes.manager import PassManager
from commopt.passes.registry import BUILTIN, get_registry
from commopt.sim import peak_memory
from tests.strategies import graph_and_durations

PIPELINES = [[name] for name in sorted(BUILTIN)] + [
    ["sink-waits", "raise-comms", "compute-overlap"],
    ["compute-overlap", "sink-waits", "raise-comms"],
    ["compute-overlap", "sink-waits"],
    ["raise-comms", "sink-waits"],
]


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: "+".join(p))
@settings(max_examples=30)
@given(gd=graph_and_durations())
def test_pipeline_keeps_invariants_and_budget(pipeline, gd):
    graph, durations = gd
    ctx = PassContext.for_graph(graph, durations, max_memory_increase=0.0)
    reg = get_registry()
    order = graph.original_order
    for name in pipeline:
        new = reg.create(name).run(graph, tuple(order), ctx)
        assert sorted(new) == list(range(len(graph)))
        assert check_order(graph, new) == []
        assert peak_memory(graph, new, padded=True)[0] <= ctx.memory_budget_bytes
        assert reg.create(name).run(graph, tuple(order), ctx) == new  # deterministic
        order = new


@given(gd=graph_and_durations(max_groups=3))
def test_cross_group_reorder_still_keeps_group_order(gd):
    graph, durations = gd
    ctx = PassContext.for_graph(graph, durations, allow_cross_group_reorder=True)
    reg = get_registry()
    result = PassManager([reg.create(n) for n in ("raise-comms", "compute-overlap")]).run(
        graph, graph.original_order, ctx)
    assert check_order(graph, result.order, allow_cross_group_reorder=True) == []


@settings(max_examples=40)
@given(gd=graph_and_durations())
def test_a_budget_below_the_input_never_gets_an_order_that_holds_more(gd):
    """A budget 30% below the original order's peak is mostly out of reach: the default
    pipeline's order then keeps the invariants, holds no more than the original and is
    deterministic; where it fits the budget it is taken."""
    from commopt.passes.base import DEFAULT_PIPELINE

    graph, durations = gd
    ctx = PassContext.for_graph(graph, durations, max_memory_increase=-0.3)
    reg = get_registry()
    result = PassManager([reg.create(n) for n in DEFAULT_PIPELINE]).run(graph, graph.original_order, ctx)
    order = list(result.order)
    assert check_order(graph, order) == []
    original_peak = peak_memory(graph, graph.original_order, padded=True)[0]
    assert peak_memory(graph, order, padded=True)[0] <= original_peak
    again = PassManager([reg.create(n) for n in DEFAULT_PIPELINE]).run(graph, graph.original_order, ctx)
    assert list(again.order) == order


@settings(max_examples=40)
@given(gd=graph_and_durations(max_groups=3))
def test_a_free_group_order_keeps_every_other_invariant_and_is_deterministic(gd):
    """On a graph whose groups' collectives may be reordered (--reorder-within-groups) the
    default pipeline keeps invariants 1, 4 and 5 and the budget, and is deterministic."""
    from commopt.passes.base import DEFAULT_PIPELINE

    graph, durations = gd
    free = graph.without_group_order()
    ctx = PassContext.for_graph(free, durations, max_memory_increase=0.0, allow_cross_group_reorder=True)
    reg = get_registry()
    order = list(PassManager([reg.create(n) for n in DEFAULT_PIPELINE]).run(free, free.original_order, ctx).order)
    assert check_order(free, order, allow_cross_group_reorder=True) == []
    for v in check_order(graph, order, allow_cross_group_reorder=True):  # only the group order
        coll = [graph.nodes[graph.index_of[name]].collective for name in v.nodes]
        assert v.invariant in (1, 2) and len(coll) == 2 and None not in coll, str(v)
        assert coll[0].group == coll[1].group, str(v)
    assert peak_memory(free, order, padded=True)[0] <= ctx.memory_budget_bytes
    again = PassManager([reg.create(n) for n in DEFAULT_PIPELINE]).run(free, free.original_order, ctx)
    assert list(again.order) == order
