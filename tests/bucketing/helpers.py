"""Shared by the bucketing tests: the largest buckets an order allows."""

from __future__ import annotations

from collections.abc import Sequence

from commopt.bucketing.eligibility import bucket_problem
from commopt.bucketing.rewrite import Bucket
from commopt.bucketing.select import candidate_classes, grow_buckets
from commopt.ir.graph import Graph
from commopt.ir.schedule import Schedule


def largest_buckets(graph: Graph, order: Sequence[int]) -> list[Bucket]:
    """Each class's members in issue order, cut into the longest runs that are valid buckets
    in ``order`` (no simulator: the rewrite is tested on as many merges as possible)."""
    sched = Schedule.of(graph, order)
    return grow_buckets(candidate_classes(graph, sched),
                        lambda kept, cand: bucket_problem(graph, sched, cand) is None)


def raised_order(graph: Graph) -> list[int]:
    """The raise-comms order of ``graph`` without a memory budget: collectives issued as early
    as their inputs allow, so many are in flight together (the most bucketable order)."""
    from commopt.passes.base import PassContext
    from commopt.passes.raise_comms import RaiseComms

    ctx = PassContext(durations_us=[1.0] * len(graph), allow_cross_group_reorder=True)
    return RaiseComms().run(graph, graph.original_order, ctx)
