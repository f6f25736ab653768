"""Random graphs in random valid orders: every plan validates and sits between its bounds."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commopt.buffers import compare_plans, plan_buffers, validate_plan
from commopt.buffers.footprint import estimate_footprint, plan_footprint
from commopt.buffers.lifetimes import collect_buffers
from commopt.buffers.offsets import lower_bound
from commopt.buffers.persistent import find_persistent_params
from commopt.buffers.planner import DEFAULT_ALIGN_BYTES, align_up
from commopt.buffers.shared import shared_reads
from commopt.io import load_graph
from commopt.ir.graph import NodeKind
from commopt.sim.memory import footprint
from tests.strategies import graphs, random_topological_order

CORPUS = Path(__file__).resolve().parents[2] / "sample_graphs" / "corpus" / "ws2"


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


def _footprint_from_specs(graph, order, align, persistent_params):
    """The runner's estimated footprint computed from :func:`collect_buffers`' specs (what
    :func:`estimate_footprint` computes from the buffer table's arrays)."""
    specs = collect_buffers(graph, order, None, find_persistent_params(graph, persistent_params))
    by_group: dict[str, list] = {}
    for s in specs:
        by_group.setdefault(s.group, []).append(s)
    arena = sum(lower_bound([align_up(s.padded_bytes, align) for s in group],
                            [s.first for s in group], [s.last for s in group])
                for group in by_group.values())
    resident = {s.collective for s in specs if s.role in ("output", "inout")}
    resident.update(s.value for s in specs if s.persistent)
    copied = {s.collective for s in specs if s.role in ("input", "inout") and not s.persistent}
    copied.update(c for s in specs if not s.persistent for c, _ in s.shared)
    return footprint(graph, order, arena, resident, copied, padded=True)


@given(graphs(), st.randoms(use_true_random=False), st.sampled_from([1, 512, 4096]), st.data())
def test_footprint_estimate_agrees_with_the_buffer_specs(graph, rng, align, data):
    """The footprint estimate (lifetimes of a whole order at once, from the buffer table)
    equals the one its buffer specs give, with and without persistent parameters."""
    persistent = data.draw(st.booleans())
    if persistent:
        for node in graph.nodes:
            if node.kind is NodeKind.INPUT and data.draw(st.booleans()):
                node.attrs["role"] = "parameter"
    pp = "all" if persistent else None
    for order in (graph.original_order, random_topological_order(graph, rng)):
        assert estimate_footprint(graph, order, align=align, persistent_params=pp) == \
            _footprint_from_specs(graph, order, align, pp)


@pytest.mark.parametrize("name", ["llama_fsdp", "llama_tp_sp_2d", "deepseek_v3_ep"])
def test_footprint_estimate_agrees_with_the_buffer_specs_on_corpus_graphs(name):
    """The same on real programs (FSDP, 2-D TP+SP, expert parallel), in random valid orders."""
    graph = load_graph(CORPUS / f"{name}.pt2")
    rng = random.Random(0)
    for order in (graph.original_order, *(random_topological_order(graph, rng) for _ in range(2))):
        for pp in (None, "all"):
            assert estimate_footprint(graph, order, persistent_params=pp) == \
                _footprint_from_specs(graph, order, DEFAULT_ALIGN_BYTES, pp)


def test_footprint_budget_remembers_the_original_order_and_keeps_its_memo_when_raised(monkeypatch):
    """The budget's base is the original order's footprint, so checking that order computes
    nothing more; a raised budget (same options) keeps the footprints already computed."""
    from commopt.buffers import footprint as module

    graph = load_graph(CORPUS / "llama_fsdp.pt2")
    budget = module.FootprintBudget.for_graph(graph, 0.1, graph.original_order)
    other = random_topological_order(graph, random.Random(0))
    budget.footprint(graph, other)
    calls = []
    monkeypatch.setattr(module, "estimate_footprint", lambda *a, **k: calls.append(a))
    assert budget.footprint(graph, graph.original_order) is budget.base
    raised = budget.raised_to(budget.budget_bytes + 1)
    assert raised.budget_bytes == budget.budget_bytes + 1
    assert raised.footprint(graph, other) is budget.footprint(graph, other)
    assert raised.footprint(graph, graph.original_order) is budget.base
    assert calls == []
