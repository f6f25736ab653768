"""polish: fill exposed waits with independent compute, one move at a time, each kept only
when the simulator confirms a shorter makespan within the memory budget.

The list scheduler and the movers decide with local rules; this pass checks their result on
the simulator. For the collective that exposes the most time, it tries moving a compute node
that comes after the collective's wait, but depends on nothing at or after it, to just
before the wait (so it runs while the collective is in flight). The first move that
shortens the simulated makespan, or keeps it and shortens the exposed communication without
a worse makespan when the costs are off (:func:`commopt.passes._common.degrades_no_more`),
and keeps the padded peak within budget is taken; then it starts over. Effort is capped (``max_work`` node-simulations), so large graphs get few or no
trials; it stops at the lower bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from commopt.ir.graph import Graph, NodeKind
from commopt.ir.schedule import Schedule
from commopt.passes._common import degrades_no_more, zero_cost_view_mask
from commopt.passes.base import Pass, PassContext

#: Positions after a wait searched for compute to move in front of it, and the collectives
#: (most exposed first) looked at per round: both bound the work between simulations.
_SCAN = 256
_WORST = 16


@dataclass(frozen=True)
class Polish(Pass):
    """Simulator-confirmed moves of compute in front of exposed waits (module docstring).

    ``candidates``: compute nodes tried per exposed wait; ``max_work``: simulations times
    nodes spent at most (60k: 60 trials at 1k nodes, 6 at 10k, none from 60k nodes on).
    """

    name: ClassVar[str] = "polish"
    summary: ClassVar[str] = "move compute in front of exposed waits when the simulator confirms a gain"
    candidates: int = 6
    max_work: int = 60_000

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int]:
        """The polished order (see the module docstring)."""
        return polish(graph, order, ctx, candidates=self.candidates, max_work=self.max_work)


def polish(graph: Graph, order: Sequence[int], ctx: PassContext, *, candidates: int = 6,
           max_work: int = 60_000) -> list[int]:
    """``order`` improved by confirmed moves (see the module docstring); never worse."""
    from commopt.sim import simulate

    n = len(graph)
    trials_left = min(400, max_work // max(1, n))
    if trials_left <= 0 or not graph.collectives():
        return list(order)
    nodes = graph.nodes
    viewish = zero_cost_view_mask(graph)
    movable = [nodes[i].kind is NodeKind.COMPUTE and not viewish[i] and not nodes[i].side_effect
               and not nodes[i].rng
               for i in range(n)]
    current = list(order)
    sim = ctx.simulate(graph, current)
    floor_us = sim.lower_bound_us * (1.0 + 1e-9)
    tried: set[tuple[int, int]] = set()
    memo: dict = {}
    key = (sim.makespan_us, sim.exposed_comm_us)
    while trials_left > 0 and sim.makespan_us > floor_us:
        pos = Schedule(current, n).positions
        chain_prev = _previous_collective(graph, current, ctx.allow_cross_group_reorder)

        exposed = sorted((t for t in sim.collectives if t.exposed_us > 0 and t.wait_node is not None),
                         key=lambda t: (-t.exposed_us, t.node))[:_WORST]
        moved = False
        for timing in exposed:
            for x, to in _moves(graph, current, pos, chain_prev, movable, timing, candidates):
                k = pos[x]
                if to >= k or (x, to) in tried:
                    continue
                tried.add((x, to))
                cand = current[:to] + [x] + current[to:k] + current[k + 1:]
                trials_left -= 1
                if ctx.fits(graph, cand):
                    s2 = simulate(graph, cand, ctx.durations_us)
                    k2 = (s2.makespan_us, s2.exposed_comm_us)
                    if k2[0] <= key[0] and k2[1] < key[1] - 1e-9 and (
                            k2[0] < key[0] * (1.0 - 1e-9)
                            or degrades_no_more(graph, ctx, current, key[0], cand, k2[0], memo)):
                        current, sim, key, moved = cand, s2, k2, True
                        break
                if trials_left <= 0:
                    break
            if moved or trials_left <= 0:
                break
        if not moved:
            break
    return current


def _earliest(graph: Graph, v: int, pos: list[int], chain_prev: dict[int, int]) -> int:
    """The first position ``v`` may move up to: right after its latest predecessor."""
    ptr, idx = graph.pred_arrays()
    last = max((pos[idx[j]] for j in range(ptr[v], ptr[v + 1])), default=-1)
    a = chain_prev.get(v)
    return max(last, pos[a] if a is not None else -1) + 1


def _moves(graph: Graph, current: list[int], pos: list[int], chain_prev: dict[int, int],
           movable: list[bool], timing, candidates: int):
    """(node, new position) pairs to try for one exposed collective, best first."""
    w, c = timing.wait_node, timing.node
    at = pos[w]
    found = 0
    for k in range(at + 1, min(len(current), at + 1 + _SCAN)):  # compute in front of the wait
        x = current[k]
        if movable[x] and _earliest(graph, x, pos, chain_prev) <= at:
            yield x, at
            found += 1
            if found >= candidates:
                break
    yield c, _earliest(graph, c, pos, chain_prev)  # the collective, as early as it may go
    feeders = [p for p in graph.preds(c) if movable[p]]
    if feeders:  # the producer it waited for, as early as it may go
        p = max(feeders, key=lambda q: pos[q])
        yield p, _earliest(graph, p, pos, chain_prev)


def _previous_collective(graph: Graph, order: Sequence[int], allow_cross_group: bool) -> dict[int, int]:
    """Each collective's predecessor in the kept global collective order of ``order``
    (``{}`` when cross-group reordering is allowed: same-group edges are in the graph)."""
    if allow_cross_group:
        return {}
    prev: dict[int, int] = {}
    last = -1
    for i in order:
        if graph.nodes[i].kind is NodeKind.COLLECTIVE:
            if last >= 0:
                prev[i] = last
            last = i
    return prev
