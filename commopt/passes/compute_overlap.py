"""compute-overlap: list scheduling on a simulated clock so compute hides communication.

The scheduler replays the order on the simulator's model (one compute stream, one FIFO
stream per process group) and at every step picks the next node:

1. views and metadata ops as soon as they are ready (they cost nothing);
2. waits whose collective has already finished (they cost nothing either);
3. the next collective of the global order, issued as soon as it is ready unless its
   group's stream stays busy past the next compute step anyway (issuing later starts it at
   the same time and holds its output for less long) or its output does not fit the memory
   budget;
4. compute, preferring nodes the next unissued collectives depend on (so the next
   collective can start while the current one runs), then the input order;
5. only when nothing else is ready, the wait whose collective finishes first.

Memory: the scheduler tracks live bytes (padded, the rules of :mod:`commopt.sim.memory`).
When the next compute node would exceed the budget it takes a ready wait first (a wait
releases its collective's inputs and unblocks the consumers that free storage) and
otherwise follows the input order, which keeps the input's memory profile.

Several collectives can be in flight at once, one stream per group. Priorities are tuples
ending with the node's position in the input order, so the result is deterministic. Time is
O((nodes + edges) log nodes): need-ranks come from one reverse sweep, not ancestor sets.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from commopt.ir.graph import Graph, NodeKind
from commopt.ir.schedule import Schedule
from commopt.passes._common import (
    collective_chain,
    within_budget,
    zero_cost_view_mask,
)
from commopt.passes.base import Pass, PassContext

_INF = float("inf")


@dataclass(frozen=True)
class ComputeOverlap(Pass):
    """Reorders compute around the collectives so each collective runs behind compute.

    ``lookahead``: how many of the next unissued collectives get their dependencies
    scheduled first. The memory budget is enforced on the result with
    :func:`commopt.sim.peak_memory`; when a schedule exceeds it, the scheduler retries with
    an internal budget lowered by the overshoot, and finally keeps the input order.
    """

    name: ClassVar[str] = "compute-overlap"
    summary: ClassVar[str] = "list-schedule on the simulated clock: collectives early, waits late, compute that feeds the next collective first"
    lookahead: int = 1

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int]:
        """The overlapped order (see the module docstring).

        Schedules with each of a few compute priorities (:meth:`_policies`: bottom level or
        the next collectives' needs, with or without a reservation for the input order's
        future peak) and keeps the schedule that finishes first on the scheduler's own
        clock (the simulator's model), stopping early at the lower bound; that one replaces
        the input order only when the simulator confirms it is better (makespan, then
        exposed communication).
        """
        if not graph.collectives():
            return list(order)
        model = _memory_model(graph)
        before = ctx.simulate(graph, order)
        floor_us = before.lower_bound_us * (1.0 + 1e-9)
        best: tuple[tuple[float, float, int], list[int]] | None = None
        for rank, policy in enumerate(self._policies(len(graph))):
            found = self._fitting(graph, order, ctx, policy, model)
            if found is not None:
                cand, makespan_us, exposed_us = found
                key = (makespan_us, exposed_us, rank)
                if best is None or key < best[0]:
                    best = (key, cand)
                if makespan_us <= floor_us:
                    break  # at the lower bound: no other policy can do better
        if best is None:
            return list(order)
        after = ctx.simulate(graph, best[1])
        if (after.makespan_us, after.exposed_comm_us) < (before.makespan_us, before.exposed_comm_us):
            return best[1]
        return list(order)

    def _policies(self, nodes: int) -> list[_Policy]:
        """The compute priorities tried, in the order they most often won on the samples and
        benchmark stacks (see :class:`_Policy`); at most ``max(2, 300k // nodes)`` of them,
        so large graphs stay near-linear."""
        found = [_Policy("bottom-level", 0, memory="frees"),
                 _Policy("need", self.lookahead),
                 _Policy("need", self.lookahead, memory="frees", reserve=True),
                 _Policy("bottom-level", 0, stall=True, memory="frees"),
                 _Policy("bottom-level", 0, stall=True, memory="frees", reserve=True)]
        return list(dict.fromkeys(found))[:max(2, 300_000 // max(1, nodes))]

    def _fitting(self, graph: Graph, order: Sequence[int], ctx: PassContext, policy: _Policy,
                 model) -> tuple[list[int], float, float] | None:
        """The best schedule found within the memory budget (None: none fits).

        The scheduler's own peak follows the simulator's memory rules (padded), so when a
        schedule overshoots, the internal budget is lowered by the overshoot (up to six
        rounds). Greedy issue decisions make the peak non-monotonic in the internal budget,
        so after that it bisects between 0 (the scheduler then follows the input order's
        memory profile, which fits) and the lowest failing budget, keeping the fastest
        schedule that fits. The result is confirmed with :func:`commopt.sim.peak_memory`.
        """
        budget = ctx.memory_budget_bytes
        best: tuple[tuple[float, float], list[int]] | None = None

        def attempt(internal: int | None) -> int:
            nonlocal best
            cand, makespan_us, exposed_us, peak = _schedule(graph, order, ctx, internal, policy, model)
            if budget is None or peak <= budget:
                key = (makespan_us, exposed_us)
                if best is None or key < best[0]:
                    best = (key, cand)
            return peak

        internal = budget
        for _ in range(6):
            peak = attempt(internal)
            if budget is None or peak <= budget:
                break
            internal -= (peak - budget) + budget // 100
            if internal <= 0:
                break
        if best is None and budget is not None:
            lo, hi = 0, max(0, min(internal, budget))
            attempt(lo)
            for _ in range(3):
                mid = (lo + hi) // 2
                if attempt(mid) <= budget:
                    lo = mid
                else:
                    hi = mid
        if best is None or not within_budget(graph, best[1], budget):
            return None
        return best[1], best[0][0], best[0][1]


@dataclass(frozen=True)
class _Policy:
    """How the scheduler picks the next compute node.

    - ``"need"``: compute that one of the next ``lookahead`` unissued collectives depends on
      first, then the input order;
    - ``"bottom-level"``: the longest remaining path first (compute durations, collective
      durations where a successor needs the result, the global collective order), so the
      chain the makespan hangs on runs first and compute with slack fills the gaps while
      collectives are in flight; with ``stall`` the compute stream idles for a wait that
      finishes before the picked compute node would, when the wait's path is longer.
    """

    priority: str
    lookahead: int
    stall: bool = False
    #: under memory pressure: ``"frees"`` runs the ready compute node that frees the most
    #: (net of what it allocates) before stalling on a wait; ``"input"`` takes waits first,
    #: then follows the input order.
    memory: str = "input"
    #: reserve room for the input order's future peak: a node ahead of the input order's
    #: frontier (the first node not yet scheduled) runs without pressure only while the
    #: input order's live bytes, plus what nodes run ahead hold over the input positions
    #: before their own, fit the budget from the frontier up to the node (:class:`_MaxProfile`).
    reserve: bool = False


def bottom_levels_us(graph: Graph, order: Sequence[int], durations_us: Sequence[float],
                     chain: dict[int, int]) -> list[float]:
    """Longest path (us) from the start of each node to the end of the graph.

    A collective's duration counts towards the successors that need it finished (its waits,
    readers of its value, the next collective of its group); its other successors only need
    it issued, as do chain successors (``chain``: the kept global collective order). Inputs,
    outputs and views take no time. One reverse sweep over ``order`` (a topological order).
    """
    nodes = graph.nodes
    n = len(nodes)
    sptr, sidx = graph.succ_arrays()
    zero = (NodeKind.INPUT, NodeKind.OUTPUT, NodeKind.VIEW)
    bl = [0.0] * n
    for i in reversed(order):
        node = nodes[i]
        d = 0.0 if node.kind in zero else float(durations_us[i])
        best = 0.0
        if node.kind is NodeKind.COLLECTIVE:
            group = node.collective.group if node.collective is not None else None
            for k in range(sptr[i], sptr[i + 1]):
                s = sidx[k]
                sn = nodes[s]
                v = bl[s]
                if (sn.wait_of == i or i in sn.inputs
                        or (sn.kind is NodeKind.COLLECTIVE and sn.collective is not None
                            and sn.collective.group == group)):
                    v += d
                if v > best:
                    best = v
            if d > best:
                best = d
        else:
            for k in range(sptr[i], sptr[i + 1]):
                v = bl[sidx[k]]
                if v > best:
                    best = v
            best += d
        b = chain.get(i)
        if b is not None and bl[b] > best:
            best = bl[b]
        bl[i] = best
    return bl


class _MaxProfile:
    """The input order's live-bytes curve plus bytes held early, with range max queries.

    A node run ahead of the input order's frontier holds its bytes over the input
    positions before its own (where the input order did not hold them): ``add(p, b)`` adds
    ``b`` over positions ``[0, p)``; ``max(lo, hi)`` is the largest value over ``[lo, hi)``.
    A segment tree with lazy additions, O(log n) per call.
    """

    def __init__(self, curve: Sequence[int]) -> None:
        n = max(1, len(curve))
        self.n = n
        self.h = n.bit_length()
        self.t = [0] * n + list(curve) + [0] * (n - len(curve))
        self.d = [0] * n
        for p in range(n - 1, 0, -1):
            self.t[p] = max(self.t[2 * p], self.t[2 * p + 1])

    def _apply(self, p: int, value: int) -> None:
        self.t[p] += value
        if p < self.n:
            self.d[p] += value

    def _build(self, p: int) -> None:
        t, d = self.t, self.d
        while p > 1:
            p >>= 1
            t[p] = max(t[2 * p], t[2 * p + 1]) + d[p]

    def _push(self, p: int) -> None:
        d = self.d
        for s in range(self.h, 0, -1):
            i = p >> s
            if i and d[i]:
                self._apply(2 * i, d[i])
                self._apply(2 * i + 1, d[i])
                d[i] = 0

    def add(self, stop: int, value: int) -> None:
        """Add ``value`` over positions ``[0, stop)``."""
        lo, hi = self.n, stop + self.n
        l0, r0 = lo, hi
        while lo < hi:
            if lo & 1:
                self._apply(lo, value)
                lo += 1
            if hi & 1:
                hi -= 1
                self._apply(hi, value)
            lo >>= 1
            hi >>= 1
        self._build(l0)
        self._build(r0 - 1)

    def max(self, start: int, stop: int) -> int:
        """The largest value over positions ``[start, stop)`` (``stop > start``)."""
        lo, hi = start + self.n, stop + self.n
        self._push(lo)
        self._push(hi - 1)
        t = self.t
        best = t[lo]
        while lo < hi:
            if lo & 1:
                best = max(best, t[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                best = max(best, t[hi])
            lo >>= 1
            hi >>= 1
        return best


def _memory_model(graph: Graph) -> tuple[list[int], list[int], list[int], list[list[int]]]:
    """Padded allocation per node, the storage root each node's uses count against, the
    number of uses per root, and the roots each node releases a use of when it runs.

    Same rules as :mod:`commopt.sim.memory` but with padded bytes, so every rank takes the
    same decisions: a storage is freed after its last use, a collective's inputs are used
    until its waits, graph inputs are never freed.
    """
    from commopt.sim.memory import effective_roots

    nodes = graph.nodes
    n = len(nodes)
    roots = effective_roots(graph)
    alloc = [0] * n
    no_alloc = (NodeKind.VIEW, NodeKind.WAIT, NodeKind.OUTPUT)
    for node in nodes:
        i = node.index
        if roots[i] == i and node.outputs and node.kind not in no_alloc:
            alloc[i] = node.padded_nbytes
    freeable = [alloc[i] > 0 and nodes[i].kind is not NodeKind.INPUT for i in range(n)]
    releases: list[tuple[int, ...]] = [()] * n
    uses = [0] * n
    for node in nodes:
        i = node.index
        rs = [roots[p] for p in node.inputs]
        rs.append(roots[i])
        if node.wait_of is not None and node.kind is NodeKind.WAIT:
            rs.extend(roots[p] for p in nodes[node.wait_of].inputs)
        mine = tuple(sorted({r for r in rs if freeable[r]}))
        if mine:
            releases[i] = mine
            for r in mine:
                uses[r] += 1
    return alloc, roots, uses, releases


def _schedule(graph: Graph, order: Sequence[int], ctx: PassContext, budget: int | None,
              policy: _Policy, model) -> tuple[list[int], float, float, int]:
    """One list schedule: the order, its makespan and exposed communication on the
    scheduler's clock (the simulator's model) and its padded peak memory."""
    nodes = graph.nodes
    n = len(nodes)
    dur = ctx.durations_us
    pos = Schedule(order, n).positions
    ptr, idx = graph.pred_arrays()
    sptr, sidx = graph.succ_arrays()
    chain = collective_chain(graph, order, ctx.allow_cross_group_reorder)
    kind = [node.kind for node in nodes]
    viewish = zero_cost_view_mask(graph)
    K_IN, K_OUT, K_COLL, K_WAIT = NodeKind.INPUT, NodeKind.OUTPUT, NodeKind.COLLECTIVE, NodeKind.WAIT

    # sequence number of each collective in the input order, and need[i]: the smallest
    # sequence number of a collective that depends on i (one reverse sweep)
    seq = [-1] * n
    colls: list[int] = []
    for i in order:
        if kind[i] is K_COLL:
            seq[i] = len(colls)
            colls.append(i)
    big = len(colls) + 1
    need = [big] * n
    for i in reversed(order):
        best = seq[i] if seq[i] >= 0 else big
        for k in range(sptr[i], sptr[i + 1]):
            v = need[sidx[k]]
            if v < best:
                best = v
        b = chain.get(i)
        if b is not None and need[b] < best:
            best = need[b]
        need[i] = best

    lookahead = policy.lookahead
    by_level = policy.priority == "bottom-level"
    stall = by_level and policy.stall
    level = bottom_levels_us(graph, order, dur, chain) if by_level else None

    indeg = [ptr[i + 1] - ptr[i] for i in range(n)]
    for b in chain.values():
        indeg[b] += 1

    alloc, _roots, uses0, releases = model
    by_memory = policy.memory == "frees"
    users_of: dict[int, list[int]] = {}
    if by_memory:
        for i in order:
            if kind[i] is NodeKind.COMPUTE:
                for r in releases[i]:
                    users_of.setdefault(r, []).append(i)
    ready = bytearray(n)
    mem_q: list[tuple[int, int, int]] = []
    reserve = policy.reserve and budget is not None
    profile: _MaxProfile | None = None
    if reserve:
        from commopt.sim import peak_memory

        profile = _MaxProfile(peak_memory(graph, order, padded=True)[1])
    ahead = bytearray(n)
    front = 0
    uses = list(uses0)
    exposed = 0.0
    live = sum(alloc[i] for i in range(n) if kind[i] is K_IN)
    peak = live

    out: list[int] = []
    views: list[tuple[int, int]] = []
    colls_q: list[tuple[int, int]] = []
    waits_q: list[tuple[float, int, int]] = []
    comp_need: list[tuple[float, int, int]] = []
    comp_pos: list[tuple[int, int]] = []
    done = bytearray(n)
    coll_end = [0.0] * n
    stream_free: dict[str, float] = {}
    issued = bytearray(len(colls))
    next_seq = 0
    t = 0.0
    output_node = -1

    def push(i: int) -> None:
        k = kind[i]
        p = pos[i]
        if k is K_OUT:
            nonlocal output_node
            output_node = i
        elif k is K_COLL:
            heapq.heappush(colls_q, (p, i))
        elif k is K_WAIT:
            c = nodes[i].wait_of
            heapq.heappush(waits_q, (coll_end[c] if c is not None else 0.0, p, i))
        elif k is K_IN or viewish[i]:
            heapq.heappush(views, (p, i))
        else:
            heapq.heappush(comp_need, (-level[i] if by_level else need[i], p, i))
            heapq.heappush(comp_pos, (p, i))
            if by_memory:
                ready[i] = 1
                heapq.heappush(mem_q, (net_bytes(i), p, i))

    def net_bytes(i: int) -> int:
        freed = 0
        for r in releases[i]:
            if uses[r] == 1:
                freed += alloc[r]
        return alloc[i] - freed

    def finish(i: int) -> None:
        nonlocal live, peak, front
        if live > peak:
            peak = live
        done[i] = 1
        out.append(i)
        if reserve and alloc[i] and kind[i] is not K_IN and pos[i] > front:
            ahead[i] = 1
            profile.add(pos[i], alloc[i])
        for r in releases[i]:
            uses[r] -= 1
            if uses[r] == 0:
                live -= alloc[r]
                if ahead[r]:
                    ahead[r] = 0
                    profile.add(pos[r], -alloc[r])
            elif uses[r] == 1 and by_memory:
                for u in users_of.get(r, ()):
                    if ready[u] and not done[u]:
                        heapq.heappush(mem_q, (net_bytes(u), pos[u], u))
        for k in range(sptr[i], sptr[i + 1]):
            s = sidx[k]
            indeg[s] -= 1
            if indeg[s] == 0:
                push(s)
        b = chain.get(i)
        if b is not None:
            indeg[b] -= 1
            if indeg[b] == 0:
                push(b)
        while front < n and done[order[front]]:
            front += 1

    def reserved(i: int) -> bool:
        """Whether running ``i`` now would eat into the room the input order's future peak
        needs (always False for the frontier itself or without ``reserve``)."""
        return (reserve and pos[i] > front
                and profile.max(front, pos[i]) + alloc[i] > budget)

    def next_compute(pressure: bool) -> int:
        while comp_need and done[comp_need[0][2]]:
            heapq.heappop(comp_need)
        while comp_pos and done[comp_pos[0][1]]:
            heapq.heappop(comp_pos)
        if not comp_pos:
            return -1
        if not pressure and (by_level or (lookahead > 0 and comp_need[0][0] < next_seq + lookahead)):
            return comp_need[0][2]
        return comp_pos[0][1]

    def most_freeing() -> tuple[int, int]:
        """The ready compute node with the smallest net allocation, and that net."""
        while mem_q:
            net, p, i = mem_q[0]
            if done[i]:
                heapq.heappop(mem_q)
                continue
            cur = net_bytes(i)
            if cur != net:
                heapq.heapreplace(mem_q, (cur, p, i))
                continue
            return i, net
        return -1, 0

    def issue(c: int) -> None:
        nonlocal live, next_seq
        heapq.heappop(colls_q)
        group = nodes[c].collective.group
        start = max(t, stream_free.get(group, 0.0))
        coll_end[c] = start + dur[c]
        stream_free[group] = coll_end[c]
        live += alloc[c]
        issued[seq[c]] = 1
        while next_seq < len(colls) and issued[next_seq]:
            next_seq += 1
        finish(c)

    def stall_on_wait() -> None:
        nonlocal t, exposed
        end, _, i = heapq.heappop(waits_q)
        if end > t:
            exposed += end - t
            t = end
        t += dur[i]
        finish(i)

    for i in order:
        if indeg[i] == 0:
            push(i)

    while len(out) < n:
        if views:
            _, i = heapq.heappop(views)
            live += alloc[i] if kind[i] is not K_IN else 0
            finish(i)
            continue
        if waits_q and waits_q[0][0] <= t:
            stall_on_wait()  # already finished: no stall
            continue
        nc = next_compute(False)
        if budget is not None and nc >= 0 and (live + alloc[nc] > budget or reserved(nc)):
            if live + alloc[nc] <= budget:  # only the reservation: the input order's next
                first = next_compute(True)
                if live + alloc[first] <= budget and not reserved(first):
                    nc = first  # compute is not short of memory, it just may not run ahead
                    if colls_q and colls_q[0][0] < pos[nc]:
                        issue(colls_q[0][1])
                        continue
                    live += alloc[nc]
                    t += dur[nc]
                    finish(nc)
                    continue
            # memory is short: compute that frees more than it allocates, waits (they
            # release storage), then the input order (which keeps the input's profile)
            if by_memory:
                m, net = most_freeing()
                if m >= 0 and net <= 0:
                    if colls_q and colls_q[0][0] < pos[m] and live + alloc[colls_q[0][1]] <= budget:
                        issue(colls_q[0][1])
                        continue
                    live += alloc[m]
                    t += dur[m]
                    finish(m)
                    continue
            if waits_q:
                stall_on_wait()
                continue
            nc = next_compute(True)
            if colls_q and colls_q[0][0] < pos[nc]:
                issue(colls_q[0][1])
                continue
            live += alloc[nc]
            t += dur[nc]
            finish(nc)
            continue
        if colls_q:
            c = colls_q[0][1]
            free_at = stream_free.get(nodes[c].collective.group, 0.0)
            horizon = t + (dur[nc] if nc >= 0 else 0.0)
            fits = budget is None or (live + alloc[c] <= budget and not reserved(c))
            if (nc < 0 and not waits_q) or (fits and (free_at <= horizon or nc < 0)):
                issue(c)
                continue
        if stall and nc >= 0 and waits_q:
            end, _, w = waits_q[0]
            if end < t + dur[nc] and level[w] > level[nc]:
                stall_on_wait()  # the wait's path is longer: idle rather than delay it
                continue
        if nc >= 0:
            live += alloc[nc]
            t += dur[nc]
            finish(nc)
            continue
        if waits_q:
            stall_on_wait()
            continue
        if output_node >= 0 and len(out) == n - 1:
            finish(output_node)
            continue
        raise AssertionError("compute-overlap: no node is ready; the graph has a cycle")
    makespan = max([t, *stream_free.values()])
    return out, makespan, exposed, peak
