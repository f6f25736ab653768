"""Random graphs in random valid orders: every plan validates and sits between its bounds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from commopt.buffers import compare_plans, plan_buffers, validate_plan
from tests.strategies import graphs, random_topological_order


@given(graphs(), st.randoms(use_true_random=False), st.sampled_from([1, 64, 512, 4096]))
def test_random_graph_plans_validate(graph, rng, align):
    order = random_topological_order(graph, rng)
    plan = plan_buffers(graph, order, align=align)
    assert validate_plan(graph, order, plan) == []
    for arena in plan.groups:
        assert arena.lower_bound_bytes <= arena.arena_bytes <= arena.per_call_site_bytes
        for buf in arena.buffers:
            assert buf.first <= buf.last
            assert buf.offset_bytes % align == 0 and buf.size_bytes % align == 0
    expected = sum(
        1 if graph.nodes[c].collective.in_place else 1 + len(graph.nodes[c].outputs)
        for c in graph.collectives()
    )
    assert plan.totals.buffers == expected
    cmp = compare_plans(graph, None, order, new_plan=plan, align=align)
    assert cmp.arena_increase_bytes == plan.totals.arena_bytes - cmp.original_arena_bytes
