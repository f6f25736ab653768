"""Property tests on random graphs: bucketing never breaks an invariant or a memory budget."""

from __future__ import annotations

from hypothesis import find, given, settings
from hypothesis import strategies as st

from commopt.bucketing import apply_buckets
from commopt.invariants import check_order
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


def _bucketed(gd) -> bool:
    graph, durs = gd
    ctx = PassContext.for_graph(graph, durs, max_memory_increase=0.5, estimate=_estimate)
    passes = [get_registry().create(n) for n in ("raise-comms", "bucket")]
    return PassManager(passes).run(graph, graph.original_order, ctx).graph is not None


def test_random_graphs_exist_where_bucketing_pays() -> None:
    """The property above is not vacuous: the strategy draws graphs the pass rewrites."""
    find(graph_and_durations(), _bucketed, settings=settings(max_examples=500, database=None))


@settings(max_examples=30, deadline=None)
@given(graph_and_durations())
def test_bucket_pass_does_nothing_without_proof_or_estimator(gd) -> None:
    graph, durs = gd
    order = raised_order(graph)
    no_proof = PassContext.for_graph(graph, durs, estimate=_estimate, not_one_program="pipeline stages")
    no_estimator = PassContext.for_graph(graph, durs)
    for ctx in (no_proof, no_estimator):
        out = BucketPass().run(graph, order, ctx)
        assert not isinstance(out, GraphChange) and out == list(order)
