"""sink-waits: move every wait as late as possible, just before the first real use of its
result (views and metadata-only ops in between are not uses and move along with it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from commopt.ir.graph import Graph, NodeKind
from commopt.ir.schedule import Schedule
from commopt.passes._common import (
    collective_chain,
    demand_order,
    neighbour_lists,
    widest_fitting,
    zero_cost_view_mask,
)
from commopt.passes.base import Pass, PassContext


@dataclass(frozen=True)
class SinkWaits(Pass):
    """Sinks waits (and the views hanging off them) to their first real use.

    Side-effect barriers, storage hazards and the output stay in front of them (they are
    ordering edges of the graph). When the memory budget would be exceeded (a collective
    keeps its inputs alive until its wait), waits are held back at most a window of
    ``factor x`` their collective's duration of compute, the widest factor that fits.
    """

    name: ClassVar[str] = "sink-waits"
    summary: ClassVar[str] = "move each wait just before the first real use of its result"

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> Sequence[int]:
        """The sunk order (see the class docstring)."""
        nodes = graph.nodes
        n = len(nodes)
        if not graph.waits():
            return list(order)
        viewish = zero_cost_view_mask(graph)
        lazy = bytearray(n)
        for i in order:  # a topological order: a view's source is classified first
            node = nodes[i]
            if node.kind is NodeKind.WAIT:
                lazy[i] = 1
            elif viewish[i] and node.inputs and any(lazy[p] for p in node.inputs):
                lazy[i] = 1
        fence = bytearray(n)
        for node in nodes:
            if node.kind is NodeKind.OUTPUT:
                fence[node.index] = 1
        chain = collective_chain(graph, order, ctx.allow_cross_group_reorder)
        preds = neighbour_lists(*graph.pred_arrays(), {b: a for a, b in chain.items()})

        dur = ctx.durations_us
        step = [dur[i] if nodes[i].kind is NodeKind.COMPUTE else 0.0 for i in range(n)]
        coll_dur = [0.0] * n
        for node in nodes:
            if node.kind is NodeKind.WAIT and node.wait_of is not None:
                coll_dur[node.index] = dur[node.wait_of]

        def build(factor: float) -> Schedule:
            if factor == math.inf:
                window = [math.inf] * n
            else:
                window = [factor * coll_dur[i] if nodes[i].kind is NodeKind.WAIT else math.inf
                          for i in range(n)]
            return Schedule(demand_order(order, lazy, fence, preds, step, window), n)

        return widest_fitting(order, lambda o: ctx.fits(graph, o), build)
