"""polish: fill exposed waits with independent compute, one move at a time, each kept only
when the simulator confirms a shorter makespan within the memory budget.

The list scheduler and the movers decide with local rules; this pass checks their result on
the simulator. For the collective that exposes the most time, it tries moving a compute node
that comes after the collective's wait, but depends on nothing at or after it, to just
before the wait (so it runs while the collective is in flight); it also tries delaying compute that runs before the
collective's issue but does not feed it, to just after the issue (so the collective starts
earlier and that compute fills its flight instead). The first move that
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
from commopt.passes._common import collective_chain, degrades_no_more, zero_cost_view_mask
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
    """``order`` improved by confirmed moves (see the module docstring); never worse.

    Compute moved in front of exposed waits first (:func:`_advances`); then, with a budget of
    its own, compute delayed past collectives it does not feed (:func:`_delays`), and when
    that helped, the first kind again with what is left of its budget.
    """
    n = len(graph)
    trials = min(400, max_work // max(1, n))
    if trials <= 0 or not graph.collectives():
        return list(order)
    search = _Descent(graph, order, ctx, candidates)
    left = search.descend(_advances, trials)
    if search.descend(_delays, trials) < trials and search.moved:
        search.descend(_advances, left)
    return search.current


class _Descent:
    """First-improvement descent on the simulator: the current order, its simulation and
    the moves tried so far (each (node, position) pair is tried once)."""

    def __init__(self, graph: Graph, order: Sequence[int], ctx: PassContext, candidates: int) -> None:
        nodes = graph.nodes
        viewish = zero_cost_view_mask(graph)
        self.movable = [nodes[i].kind is NodeKind.COMPUTE and not viewish[i]
                        and not nodes[i].side_effect and not nodes[i].rng for i in range(len(graph))]
        self.graph, self.ctx, self.candidates = graph, ctx, candidates
        self.current = list(order)
        self.sim = ctx.simulate(graph, self.current)
        self.floor_us = self.sim.lower_bound_us * (1.0 + 1e-9)
        self.key = (self.sim.makespan_us, self.sim.exposed_comm_us)
        self.tried: set[tuple[int, int]] = set()
        self.memo: dict = {}
        self.moved = False

    def descend(self, moves, trials: int) -> int:
        """Take confirmed moves proposed by ``moves`` (:func:`_advances` or :func:`_delays`)
        until none helps or ``trials`` simulations are spent; the trials left."""
        graph, n, ctx = self.graph, len(self.graph), self.ctx
        self.moved = False
        while trials > 0 and self.sim.makespan_us > self.floor_us:
            pos = Schedule(self.current, n).positions
            chain = collective_chain(graph, self.current, ctx.allow_cross_group_reorder)
            chain_prev = {b: a for a, b in chain.items()}  # each collective's previous one
            exposed = sorted((t for t in self.sim.collectives if t.exposed_us > 0 and t.wait_node is not None),
                             key=lambda t: (-t.exposed_us, t.node))[:_WORST]
            found = False
            for timing in exposed:
                for x, to in moves(graph, self.current, pos, chain_prev, self.movable, timing, self.candidates):
                    if to == pos[x] or (x, to) in self.tried:
                        continue
                    self.tried.add((x, to))
                    trials -= 1
                    found = self._try(_moved(self.current, pos[x], to))
                    if found or trials <= 0:
                        break
                if found or trials <= 0:
                    break
            if not found:
                break
            self.moved = True
        return trials

    def _try(self, cand: list[int]) -> bool:
        """Take ``cand`` when it fits the budgets and the simulator confirms it is better: a
        shorter makespan, or as short with less exposed communication and no worse a makespan
        when the costs are off."""
        from commopt.sim import simulate

        graph, ctx, key = self.graph, self.ctx, self.key
        if not ctx.fits(graph, cand):
            return False
        s2 = simulate(graph, cand, ctx.durations_us)
        k2 = (s2.makespan_us, s2.exposed_comm_us)
        if k2[0] <= key[0] and k2[1] < key[1] - 1e-9 and (
                k2[0] < key[0] * (1.0 - 1e-9)
                or degrades_no_more(graph, ctx, self.current, key[0], cand, k2[0], self.memo)):
            self.current, self.sim, self.key = cand, s2, k2
            return True
        return False


def _earliest(graph: Graph, v: int, pos: list[int], chain_prev: dict[int, int]) -> int:
    """The first position ``v`` may move up to: right after its latest predecessor."""
    ptr, idx = graph.pred_arrays()
    last = max((pos[idx[j]] for j in range(ptr[v], ptr[v + 1])), default=-1)
    a = chain_prev.get(v)
    return max(last, pos[a] if a is not None else -1) + 1


def _advances(graph: Graph, current: list[int], pos: list[int], chain_prev: dict[int, int],
              movable: list[bool], timing, candidates: int):
    """(node, new position) pairs that move work earlier for one exposed collective, best
    first: compute after its wait to in front of it, the collective or its last producer as
    early as they may go."""
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


def _delays(graph: Graph, current: list[int], pos: list[int], chain_prev: dict[int, int],
            movable: list[bool], timing, candidates: int):
    """(node, new position) pairs that delay compute not feeding one exposed collective's wait
    (:func:`_fillers_before`), nearest first: to just after the collective's issue (it then
    issues earlier), and to just before the wait (it fills the stall there: compute saved
    for a later gap, often in the backward pass's tail)."""
    c, w = timing.node, timing.wait_node
    for x, first_use in _fillers_before(graph, current, pos, chain_prev, movable, w, pos[c], candidates):
        yield x, pos[c]
        if first_use > pos[w]:
            yield x, pos[w] - 1


def _moved(current: list[int], k: int, to: int) -> list[int]:
    """``current`` with the node at position ``k`` moved to position ``to``."""
    x = current[k]
    if to < k:
        return current[:to] + [x] + current[to:k] + current[k + 1:]
    return current[:k] + current[k + 1:to + 1] + [x] + current[to + 1:]


def _fillers_before(graph: Graph, current: list[int], pos: list[int], chain_prev: dict[int, int],
                    movable: list[bool], w: int, before: int, candidates: int) -> list[tuple[int, int]]:
    """Up to ``candidates`` compute nodes among the :data:`_SCAN` positions before position
    ``before``, nearest first, that may move to position ``before``: none of ``w``'s
    ancestors (through data, ordering and kept collective-order edges) and no successor at or
    before ``before``; each with the position of its first successor."""
    lo = max(0, before - _SCAN)
    feeds = {w}
    stack = [w]
    while stack:  # w's ancestors inside the scanned positions
        v = stack.pop()
        for p in (*graph.preds(v), *((chain_prev[v],) if v in chain_prev else ())):
            if pos[p] >= lo and p not in feeds:
                feeds.add(p)
                stack.append(p)
    found: list[tuple[int, int]] = []
    for k in range(before - 1, lo - 1, -1):
        x = current[k]
        if movable[x] and x not in feeds:
            first_use = min((pos[s] for s in graph.succs(x)), default=len(current))
            if first_use > before:
                found.append((x, first_use))
            if len(found) >= candidates:
                break
    return found
