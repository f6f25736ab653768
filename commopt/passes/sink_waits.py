"""sink-waits: move every wait as late as possible, just before the first real use of its
result (views and metadata-only ops in between are not uses and move along with it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from commopt.ir.graph import Graph, NodeKind
from commopt.ir.schedule import Schedule
from commopt.passes._common import (
    DemandMover,
    bounded_windows,
    collective_chain,
    compute_steps,
    lazy_neighbours,
    node_kinds,
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
        waits = graph.waits()
        if not waits:
            return list(order)
        viewish = zero_cost_view_mask(graph)
        kinds = node_kinds(graph)
        lazy = bytearray((kinds == NodeKind.WAIT).tobytes())
        order_arr = np.asarray(order, dtype=np.int64)
        may_follow = np.frombuffer(viewish, dtype=np.uint8).astype(bool) & (kinds != NodeKind.WAIT)
        for i in order_arr[may_follow[order_arr]].tolist():  # in order: a view's source is classified first
            inputs = nodes[i].inputs
            if inputs and any(lazy[p] for p in inputs):
                lazy[i] = 1
        fence = (kinds == NodeKind.OUTPUT).tobytes()
        chain = collective_chain(graph, order, ctx.allow_cross_group_reorder)
        needs = lazy_neighbours(graph, lazy, {b: a for a, b in chain.items()}, successors=False)

        dur = ctx.durations_us
        mover = DemandMover(order, lazy, fence, needs, compute_steps(graph, dur))
        is_wait = kinds == NodeKind.WAIT
        coll_dur = np.zeros(n)
        for w in waits:
            if nodes[w].wait_of is not None:
                coll_dur[w] = dur[nodes[w].wait_of]

        def build(factor: float) -> Schedule:
            window = bounded_windows(is_wait, coll_dur, factor)
            return Schedule(mover.order(window), n)

        return widest_fitting(order, lambda o: ctx.fits(graph, o), build)
