"""polish: fill exposed waits with independent compute, one move (or one pair of moves) at a
time, each kept only when the simulator confirms a shorter makespan within the memory budget.

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

When no single move helps, pairs of moves are tried (:meth:`_Descent.find_pair`): a first
move that does not lengthen the order but alone does not shorten it either (compute taken
out of one collective's flight into another's stall, say), then a second move, first around
the collectives whose exposed time the first one grew (where it made room: compute from an
overfilled flight that held back the critical chain moved there). A pair is kept only when
the simulator confirms a strictly shorter makespan and the order fits the memory budgets,
as it is or compacted (:func:`_compacted`: the same timeline with each queued collective
issued as late as it still starts on time and each wait as early as its collective has
finished, so buffers live for less long); single moves are then tried again. Pairs come
after the single moves and have a budget of their own (:data:`_PAIR_TRIALS`, a quarter of
``max_work``, none below :data:`_PAIR_MIN_TRIALS` trials: small graphs only), so the result
is never worse than the single moves' and large graphs are unaffected. On the world-size-8
mesh2d sample single moves stop at 120.0 us; one pair reaches the exact solver's proven
optimum, 118.5 us.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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
#: Pairs of moves (:meth:`_Descent.find_pair`): at most :data:`_PAIR_TRIALS` trials and
#: ``max_work / _PAIR_COST`` node-simulations, none where fewer than :data:`_PAIR_MIN_TRIALS`
#: fit (from about 940 nodes on at the default ``max_work``): a pair is rarely found in fewer.
_PAIR_TRIALS = 200
_PAIR_COST = 4
_PAIR_MIN_TRIALS = 16


@dataclass(frozen=True)
class Polish(Pass):
    """Simulator-confirmed moves of compute in front of exposed waits (module docstring).

    ``candidates``: compute nodes tried per exposed wait; ``max_work``: simulations times
    nodes spent at most (60k: 60 trials at 1k nodes, 6 at 10k, none from 60k nodes on), and
    a quarter of it again on pairs of moves (up to about 940 nodes).
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
    that helped, the first kind again with what is left of its budget; last, on small graphs
    and with a budget of their own, pairs of moves (:meth:`_Descent.descend_pairs`).
    """
    n = len(graph)
    trials = min(400, max_work // max(1, n))
    if trials <= 0 or not graph.collectives():
        return list(order)
    search = _Descent(graph, order, ctx, candidates)
    left = search.descend(_advances, trials)
    if search.descend(_delays, trials) < trials and search.moved:
        search.descend(_advances, left)
    pair_trials = min(_PAIR_TRIALS, max_work // (_PAIR_COST * n))
    if pair_trials >= _PAIR_MIN_TRIALS:
        search.descend_pairs(pair_trials)
    return search.current


class _Descent:
    """First-improvement descent on the simulator: the current order, its simulation and
    the moves tried so far (each (node, position) pair is tried once, until a pair of moves
    leads to a new order)."""

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

    def descend_pairs(self, trials: int) -> int:
        """Take confirmed pairs of moves (:meth:`find_pair`) while one is found within
        ``trials`` simulations, each followed by single moves of both kinds again; the
        trials left."""
        while trials > 0:
            trials, found = self.find_pair(trials)
            if not found:
                break
            trials = self.descend(_delays, self.descend(_advances, trials))
        return trials

    def find_pair(self, trials: int) -> tuple[int, bool]:
        """Look for two moves that together shorten the makespan: each neighbour of the
        current order (:meth:`_neighbours`) that is no longer, then each neighbour of that
        (:meth:`_second_move`). Returns the trials left and whether a pair was taken."""
        from commopt.sim import simulate

        if self.sim.makespan_us <= self.floor_us:
            return trials, False
        limit = self.key[0] * (1.0 + 1e-9)
        seen = {tuple(self.current)}
        for first in self._neighbours(self.current, self.sim):
            if trials <= 0:
                break
            if not _unseen(first, seen):
                continue
            trials -= 1
            sim = simulate(self.graph, first, self.ctx.durations_us, compute_slowdown=self.ctx.compute_slowdown)
            if sim.makespan_us <= limit:
                trials, found = self._second_move(first, sim, seen, trials)
                if found:
                    return trials, True
        return trials, False

    def _second_move(self, first: list[int], sim, seen: set, trials: int) -> tuple[int, bool]:
        """Take the first neighbour of ``first`` (simulated as ``sim``) that is shorter than
        the current order and fits (:meth:`_take_shorter`), around the collectives whose
        exposed time ``first`` grew first; the trials left and whether one was taken."""
        from commopt.sim.engine import makespan_us

        target = self.key[0] * (1.0 - 1e-9)
        for cand in self._neighbours(first, sim, self.sim):
            if trials <= 0:
                break
            if not _unseen(cand, seen):
                continue
            trials -= 1
            if makespan_us(self.graph, cand, self.ctx.durations_us,
                           compute_slowdown=self.ctx.compute_slowdown) < target and self._take_shorter(cand):
                return trials, True
        return trials, False

    def _neighbours(self, order: list[int], sim, before=None) -> Iterator[list[int]]:
        """The orders one move of either kind (:func:`_advances`, :func:`_delays`) away
        from ``order`` (simulated as ``sim``), for its most exposed collectives first; with
        ``before`` (the simulation of the order ``order`` is a move away from), those whose
        exposed time that move grew most first: where it made room."""
        graph, n = self.graph, len(self.graph)
        pos = Schedule(order, n).positions
        chain = collective_chain(graph, order, self.ctx.allow_cross_group_reorder)
        chain_prev = {b: a for a, b in chain.items()}
        was = {t.node: t.exposed_us for t in before.collectives} if before is not None else {}
        exposed = sorted((t for t in sim.collectives if t.exposed_us > 0 and t.wait_node is not None),
                         key=lambda t: (was.get(t.node, t.exposed_us) - t.exposed_us, -t.exposed_us,
                                        t.node))[:_WORST]
        for timing in exposed:
            for moves in (_advances, _delays):
                for x, to in moves(graph, order, pos, chain_prev, self.movable, timing, self.candidates):
                    if to != pos[x]:
                        yield _moved(order, pos[x], to)

    def _take_shorter(self, cand: list[int]) -> bool:
        """Take ``cand`` (or, when it exceeds a budget, its :func:`_compacted` form, when that
        keeps the invariants) when it fits the budgets and the simulator confirms a shorter
        makespan."""
        from commopt.invariants import check_order
        from commopt.sim import simulate

        graph, ctx = self.graph, self.ctx
        if not ctx.fits(graph, cand):
            cand = _compacted(graph, cand, ctx.durations_us, ctx.allow_cross_group_reorder, ctx.compute_slowdown)
            # the compaction re-sorts the whole order: it is checked here, not only by the
            # pass manager after the pass (which would end the run), so a slip only loses the pair
            if cand is None or check_order(graph, cand, allow_cross_group_reorder=ctx.allow_cross_group_reorder) \
                    or not ctx.fits(graph, cand):
                return False
        s2 = simulate(graph, cand, ctx.durations_us, compute_slowdown=ctx.compute_slowdown)
        if s2.makespan_us >= self.key[0] * (1.0 - 1e-9):
            return False
        self.current, self.sim, self.key = cand, s2, (s2.makespan_us, s2.exposed_comm_us)
        self.tried.clear()  # a new neighbourhood: single moves tried before may help now
        return True

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
        s2 = simulate(graph, cand, ctx.durations_us, compute_slowdown=ctx.compute_slowdown)
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


def _unseen(order: list[int], seen: set) -> bool:
    """Whether ``order`` is not in ``seen`` yet (it is then added)."""
    key = tuple(order)
    if key in seen:
        return False
    seen.add(key)
    return True


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


def _compacted(graph: Graph, order: list[int], durations_us: Sequence[float],
               allow_cross_group: bool, compute_slowdown: float = 1.0) -> list[int] | None:
    """``order`` with the same timeline holding buffers for less long: each collective that
    queues (its stream or inputs not ready at the issue) issued as late as it still starts
    when it did, each wait as early as its collective has finished (:func:`_late_issues`,
    :func:`_early_waits`). None when nothing moves or the simulator finds the timeline
    changed."""
    from commopt.sim.engine import makespan_us, node_times

    times = node_times(graph, order, durations_us, compute_slowdown=compute_slowdown)
    clock = _clock_before(graph, order, times)
    pos = Schedule(order, len(graph)).positions
    slot = _late_issues(graph, order, pos, times, clock, allow_cross_group)
    slot.update(_early_waits(graph, pos, times, clock, durations_us, slot))
    if not slot:
        return None
    # a moved node goes right before the node at its slot: collectives before waits there
    keyed = sorted(order, key=lambda v: (slot[v], graph.nodes[v].kind is NodeKind.WAIT, pos[v])
                   if v in slot else (pos[v], 2, 0))
    before = makespan_us(graph, order, durations_us, compute_slowdown=compute_slowdown)
    if abs(makespan_us(graph, keyed, durations_us, compute_slowdown=compute_slowdown) - before) \
            > 1e-9 * max(1.0, before):
        return None
    return keyed


def _clock_before(graph: Graph, order: list[int], times) -> list[float]:
    """The compute stream's clock before each position of ``order`` (and after the last)."""
    nodes = graph.nodes
    clock = [0.0] * (len(order) + 1)
    t = 0.0
    for k, v in enumerate(order):
        clock[k] = t
        if nodes[v].kind not in (NodeKind.COLLECTIVE, NodeKind.VIEW):
            t = times.end[v]
    clock[len(order)] = t
    return clock


def _late_issues(graph: Graph, order: list[int], pos: list[int], times, clock: list[float],
                 allow_cross_group: bool) -> dict[int, int]:
    """Per collective that starts after its issue, the last position it may go right before
    and still start then (the clock there no later than its start): not past its users or
    the next collective of its group (nor of any group when groups keep their order), at
    their new place; the latest collectives are placed first."""
    from commopt.passes._common import group_chain

    nexts = [group_chain(graph, order), collective_chain(graph, order, allow_cross_group)]
    out: dict[int, int] = {}
    for c in sorted(graph.collectives(), key=lambda v: -pos[v]):
        start = times.start[c]
        if start <= times.issue[c] + 1e-9:
            continue
        limit = min([out.get(s, pos[s]) for s in graph.succs(c)]
                    + [out.get(ch[c], pos[ch[c]]) for ch in nexts if c in ch] + [len(order)])
        k = pos[c] + 1
        while k < limit and clock[k + 1] <= start:
            k += 1
        if k > pos[c] + 1:
            out[c] = k
    return out


def _early_waits(graph: Graph, pos: list[int], times, clock: list[float],
                 durations_us: Sequence[float], slot: dict[int, int]) -> dict[int, int]:
    """Per wait (of no duration) that the compute stream reaches after its collective has
    finished: the first position it may go right before where the clock has passed that
    end, after its inputs (at their new place, ``slot``); ``pos``: each node's position."""
    out: dict[int, int] = {}
    for w, node in enumerate(graph.nodes):
        if node.kind is not NodeKind.WAIT or durations_us[w] != 0.0:
            continue
        ready = max((times.end[p] for p in graph.preds(w)), default=0.0)
        lo = max((slot.get(p, pos[p] + 1) for p in graph.preds(w)), default=0)
        k = lo
        while k < pos[w] and clock[k] < ready:
            k += 1
        if k < pos[w]:
            out[w] = k
    return out
