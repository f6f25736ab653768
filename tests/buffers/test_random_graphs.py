"""Random graphs in random valid orders: every plan validates and sits between its bounds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from commopt.buffers import compare_plans, plan_buffers, validate_plan
from commopt.buffers.footprint import estimate_footprint, plan_footprint
from commopt.buffers.shared import shared_reads
from commopt.ir.graph import NodeKind
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
    shared = sum(len(b.shared_with) for a in plan.groups for b in a.buffers)
    assert plan.totals.buffers == expected - shared
    cmp = compare_plans(graph, None, order, new_plan=plan, align=align)
    assert cmp.arena_increase_bytes == plan.totals.arena_bytes - cmp.original_arena_bytes


@given(graphs(), st.randoms(use_true_random=False), st.data())
def test_persistent_parameters_keep_plans_valid(graph, rng, data):
    """Some inputs made parameters: with --persistent-params all, every plan still validates,
    each qualifying parameter has one slot live for the whole order (its readers share it),
    and the footprint counts the slot in the arena and the parameter nowhere else."""
    for node in graph.nodes:
        if node.kind is NodeKind.INPUT and data.draw(st.booleans()):
            node.attrs["role"] = "parameter"
    order = random_topological_order(graph, rng)
    plan = plan_buffers(graph, order, persistent_params="all")
    assert validate_plan(graph, order, plan) == []
    entry = plan.persistent_params
    slots = [b for a in plan.groups for b in a.buffers if b.persistent]
    assert sorted(b.name for b in slots) == sorted(p.buffer for p in entry.params)
    for b in slots:
        assert (b.first, b.last) == (0, len(order) - 1)
        assert graph.nodes[graph.index_of[b.value]].attrs["role"] == "parameter"
    assert entry.copies_saved_per_step == sum(1 + len(b.shared_with) for b in slots)
    without = plan_buffers(graph, order)
    assert plan.totals.arena_bytes >= without.totals.lower_bound_bytes or not slots
    fp = plan_footprint(graph, order, plan)
    assert fp.arena_bytes == plan.totals.arena_bytes
    est = estimate_footprint(graph, order, persistent_params="all")
    assert est.other_peak_bytes <= estimate_footprint(graph, order).other_peak_bytes


@given(graphs(), st.randoms(use_true_random=False))
def test_shared_slots_serve_reads_of_one_unwritten_storage(graph, rng):
    """Every shared input slot serves reads of one storage nothing writes, and is live from
    the first reader's issue to the last reader's wait."""
    order = random_topological_order(graph, rng)
    pos = {i: p for p, i in enumerate(order)}
    plan = plan_buffers(graph, order)
    written = {graph.storage_root[j] for n in graph.nodes for j in n.mutates}
    for arena in plan.groups:
        for buf in arena.buffers:
            if not buf.shared_with:
                continue
            readers = [graph.index_of[r.rpartition(":")[0]] for r in [buf.name, *buf.shared_with]]
            roots = {graph.storage_root[graph.index_of[buf.value]]}
            assert not roots & written
            assert buf.first <= min(pos[c] for c in readers)
            assert buf.last >= max(pos[w] for c in readers for w in graph.waits_of(c))
            c0 = graph.index_of[buf.node]
            assert shared_reads(graph)[(c0, buf.tensor_index)][0] == (c0, buf.tensor_index)
