"""Every committed sample graph: plans validate, pack tightly, and agree across formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from commopt.buffers import plan_buffers, validate_plan
from commopt.io import load_graph
from commopt.ir.graph import NodeKind

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs" / "ws8"
JSON_SAMPLES = sorted(SAMPLES.glob("*.json")) if SAMPLES.is_dir() else []

pytestmark = pytest.mark.skipif(not JSON_SAMPLES, reason="sample graphs not generated yet (make samples)")


def _sink_waits(graph):
    order = [i for i in graph.original_order if graph.nodes[i].kind is not NodeKind.WAIT]
    for w in graph.waits():
        order.insert(min(order.index(u) for u in graph.users(w)), w)
    return order


@pytest.mark.parametrize("path", JSON_SAMPLES, ids=lambda p: p.stem)
def test_sample_plans_validate_and_stay_within_5_percent_of_the_bound(path: Path):
    graph = load_graph(path)
    for order in (graph.original_order, _sink_waits(graph)):
        plan = plan_buffers(graph, order)
        assert plan.totals.buffers > 0
        assert validate_plan(graph, order, plan) == []
        for arena in plan.groups:
            assert arena.lower_bound_bytes <= arena.arena_bytes <= 1.05 * arena.lower_bound_bytes
            assert arena.arena_bytes <= arena.per_call_site_bytes


@pytest.mark.parametrize("path", JSON_SAMPLES[:1], ids=lambda p: p.stem)
def test_pt2_and_json_of_a_sample_give_the_same_plan(path: Path):
    pt2 = path.with_suffix(".pt2")
    if not pt2.exists():
        pytest.skip("no .pt2 beside the .json sample")
    assert plan_buffers(load_graph(pt2)).digest == plan_buffers(load_graph(path)).digest
