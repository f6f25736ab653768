"""Property tests on random graphs: bucketing never breaks an invariant or a memory budget."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from commopt.bucketing import apply_buckets
from commopt.invariants import check_order
from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import NodeKind
from commopt.passes.base import GraphChange, PassContext
from commopt.passes.bucket import BucketPass
from commopt.passes.manager import PassManager
from commopt.passes.registry import get_registry
from commopt.sim import peak_memory
from commopt.sim.memory import memory_budget
from tests.bucketing.helpers import largest_buckets, raised_order
from tests.strategies import graph_and_durations


@settings(max_examples=60, deadline=None)
@given(graph_and_durations())
def test_largest_buckets_of_any_order_keep_every_invariant(gd) -> None:
    graph, _ = gd
    order = raised_order(graph)
    rw = apply_buckets(graph, order, largest_buckets(graph, order))
    assert check_order(rw.graph, rw.graph.original_order, allow_cross_group_reorder=False) == []
    assert len(rw.graph.collectives()) <= len(graph.collectives())


def _estimate(node, graph) -> float:
    return 0.0 if node.kind.label in ("view", "wait") else 3.0


@settings(max_examples=60, deadline=None)
@given(graph_and_durations(), st.sampled_from([0.0, 0.1, 0.5]))
def test_pipeline_with_bucketing_keeps_invariants_and_budget(gd, increase) -> None:
    graph, durs = gd
    ctx = PassContext.for_graph(graph, durs, max_memory_increase=increase, estimate=_estimate)
    reg = get_registry()
    passes = [reg.create(n) for n in ("raise-comms", "bucket", "sink-waits", "polish")]
    result = PassManager(passes).run(graph, graph.original_order, ctx)  # checks every order
    final = result.final_graph(graph)
    assert check_order(final, list(result.order)) == []
    if result.graph is not None:
        budget = memory_budget(graph, increase, graph.original_order)
        assert peak_memory(final, list(result.order), padded=True)[0] <= budget
        (record,) = [r for r in result.records if r.name == "bucket"]
        assert record.after.makespan_us < record.before.makespan_us  # kept only where it pays


def test_bucketing_pays_where_latency_dominates() -> None:
    """Two small all_reduces of one group, both in flight before either is used: one merged
    collective pays the latency once (the properties above are not vacuous)."""
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x, y = b.input("x", (4, 4)), b.input("y", (4, 4))
    cx = b.collective("ar_x", "all_reduce", "g", x)
    cy = b.collective("ar_y", "all_reduce", "g", y)
    wx, wy = b.wait("w_x", cx), b.wait("w_y", cy)
    b.output([b.compute("sum", "aten.add.Tensor", [wx, wy], (4, 4))])
    graph = b.build()
    durs = [50.0 if n.kind is NodeKind.COLLECTIVE else 1.0 for n in graph.nodes]
    ctx = PassContext.for_graph(graph, durs, max_memory_increase=1.0,  # room for the bucket buffer
                                estimate=lambda node, g: 52.0 if node.collective else 1.0)
    out = BucketPass().run(graph, graph.original_order, ctx)
    assert isinstance(out, GraphChange) and len(out.graph.collectives()) == 1
    after = ctx.with_durations(out.durations_us).simulate(out.graph, out.order)
    assert after.makespan_us < ctx.simulate(graph, graph.original_order).makespan_us
