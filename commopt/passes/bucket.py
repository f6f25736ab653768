"""bucket: merge collectives of one group, type, reduce op and dtype into one collective over a
contiguous buffer, where the simulator says the merge shortens the step (commopt.bucketing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from commopt.bucketing.select import choose_buckets
from commopt.ir.graph import Graph
from commopt.passes.base import GraphChange, Pass, PassContext


@dataclass(frozen=True)
class BucketPass(Pass):
    """Rewrites the graph with the buckets :func:`commopt.bucketing.choose_buckets` keeps on
    the order it is given (each merge must shorten the simulated makespan within the memory
    budgets). It changes which collectives exist, so every rank must make the same merges:
    it only runs where every rank provably runs this same program, and only with an
    estimator for the nodes it adds. Otherwise, and when no merge pays, the order is kept."""

    name: ClassVar[str] = "bucket"
    summary: ClassVar[str] = ("merge collectives of one group, type and dtype into one where the "
                              "simulated makespan drops within the memory budget")

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int] | GraphChange:
        """The bucketed graph, or ``order`` unchanged (see the class docstring)."""
        if ctx.not_one_program is not None or ctx.estimate is None:
            return list(order)
        baseline = ctx.simulate(graph, order).makespan_us
        choice = choose_buckets(graph, order, ctx.durations_us, ctx.estimate,
                                lambda g, o: ctx.fits(g, o), baseline,
                                compute_slowdown=ctx.compute_slowdown)
        if choice.best is None:
            return list(order)
        rw = choice.best.rewritten
        merged = sum(len(m) for m, _ in rw.buckets)
        note = (f"{merged} collectives merged into {len(rw.buckets)} buckets "
                f"({choice.examined} merges simulated, {choice.rewrites} bucketed programs rewritten)")
        if choice.differed:  # never expected: the replay follows the simulator rule for rule
            note += (f"; {choice.differed} replayed makespans differed from the rewritten program's "
                     "(the rewritten program's decided)")
        if choice.unexamined:
            note += f"; {choice.unexamined} candidate merges not examined (work limit)"
        return GraphChange(rw.graph, list(range(len(rw.graph))), choice.best.durations_us, note,
                           detail=rw)
