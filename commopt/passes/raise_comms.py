"""raise-comms: move every collective as early as possible, right after the last node it
depends on, as far as the memory budget allows."""

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
class RaiseComms(Pass):
    """Raises collectives (and the views that only feed them) towards their inputs.

    Runs the demand-driven mover on the reversed order: a collective rises until it meets a
    node it depends on, a side-effect barrier, the previous collective of the global order
    (kept unless cross-group reordering is allowed) or the graph inputs. A collective
    allocates its output when issued, so raising every FSDP all-gather to the top can blow
    the memory budget: collectives then rise at most ``factor x`` their own duration of
    compute, the widest factor that fits the budget.
    """

    name: ClassVar[str] = "raise-comms"
    summary: ClassVar[str] = "move each collective up to just after its last dependency, within the memory budget"

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> Sequence[int]:
        """The raised order (see the class docstring)."""
        nodes = graph.nodes
        n = len(nodes)
        if not graph.collectives():
            return list(order)
        viewish = zero_cost_view_mask(graph)
        sptr, sidx = graph.succ_arrays()
        lazy = bytearray(n)
        for i in reversed(order):  # reverse topological: a view's users are classified first
            node = nodes[i]
            if node.kind is NodeKind.COLLECTIVE:
                lazy[i] = 1
            elif viewish[i]:
                users = sidx[sptr[i]:sptr[i + 1]]
                if users and all(lazy[s] for s in users):
                    lazy[i] = 1
        fence = bytearray(n)
        for node in nodes:
            if node.kind is NodeKind.INPUT:
                fence[node.index] = 1
        chain = collective_chain(graph, order, ctx.allow_cross_group_reorder)
        succs = neighbour_lists(sptr, sidx, chain)

        dur = ctx.durations_us
        step = [dur[i] if nodes[i].kind is NodeKind.COMPUTE else 0.0 for i in range(n)]
        rev = list(reversed(order))

        def build(factor: float) -> Schedule:
            if factor == math.inf:
                window = [math.inf] * n
            else:
                window = [factor * dur[i] if nodes[i].kind is NodeKind.COLLECTIVE else math.inf
                          for i in range(n)]
            return Schedule(demand_order(rev, lazy, fence, succs, step, window)[::-1], n)

        return widest_fitting(order, lambda o: ctx.fits(graph, o), build)
