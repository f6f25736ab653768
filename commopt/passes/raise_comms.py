"""raise-comms: move every collective as early as possible, right after the last node it
depends on, as far as the memory budget allows."""

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
        n = len(graph.nodes)
        if not graph.collectives():
            return list(order)
        viewish = zero_cost_view_mask(graph)
        kinds = node_kinds(graph)
        is_coll = kinds == NodeKind.COLLECTIVE
        sptr, sidx = graph.succ_arrays()
        lazy = bytearray(is_coll.tobytes())
        rev_arr = np.asarray(order, dtype=np.int64)[::-1]
        may_follow = np.frombuffer(viewish, dtype=np.uint8).astype(bool) & ~is_coll
        for i in rev_arr[may_follow[rev_arr]].tolist():  # reverse topological: a view's users are classified first
            users = sidx[sptr[i]:sptr[i + 1]]
            if users and all(lazy[s] for s in users):
                lazy[i] = 1
        fence = (kinds == NodeKind.INPUT).tobytes()
        chain = collective_chain(graph, order, ctx.allow_cross_group_reorder)
        needs = lazy_neighbours(graph, lazy, chain, successors=True)

        dur = ctx.durations_us
        base = np.asarray(dur, dtype=float)
        mover = DemandMover(rev_arr.tolist(), lazy, fence, needs, compute_steps(graph, dur))

        def build(factor: float) -> Schedule:
            window = bounded_windows(is_coll, base, factor)
            return Schedule(mover.order(window)[::-1], n)

        return widest_fitting(order, lambda o: ctx.fits(graph, o), build)
