"""Why a collective stays exposed, derived from the graph and the simulated schedule.

For collective ``c`` with wait ``w``, the compute that could run while ``c`` is in flight is
every compute node that is neither an ancestor of ``c`` (it must run before the issue) nor a
descendant of ``w`` (it must run after the wait). The reasons, most specific first:

- ``queued``: the group's stream was busy with earlier collectives after ``c`` was issued;
- ``no_independent_compute``: all independent compute together is shorter than ``c``;
- ``dependency``: enough independent compute exists, but the part that does not need a
  later collective of the same group (which queues behind ``c``) is shorter than ``c``;
- ``barrier``: a side-effecting node keeps the issue from moving earlier or the wait later;
- ``memory_budget``: issuing ``c`` as soon as its inputs are ready, or waiting just before
  its result is used, would exceed the budget;
- ``schedule``: none of the above; the order simply runs too little compute in the window.

:func:`advise` then names, for the whole schedule, the changes that would help, each only
when the simulated numbers say so: a different order, bucketing, or more compute to hide
behind / faster links.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress

import numpy as np

from commopt.ir.graph import Graph, NodeKind
from commopt.ir.schedule import Schedule
from commopt.passes._common import node_kinds
from commopt.schemas.report import Advice, Reason
from commopt.sim.result import COMPUTE_LANE, CollectiveTiming, SimResult

#: Queueing counts as a reason when it is at least this share of the exposed time.
QUEUED_SHARE = 0.25
#: "A different order" is advised only when the makespan exceeds its lower bound by more
#: than this share (and the order is not already commopt's output).
ORDER_MARGIN = 0.05
#: Bucketing is advised for a group with at least this many collectives whose fixed
#: per-collective latency is at least this share of the group's communication time.
BUCKET_MIN_COLLECTIVES = 8
BUCKET_LATENCY_SHARE = 0.5


#: Collectives whose reachability one pair of sweeps answers: a bit each, twice in the
#: forward sweep's marks, so marks stay 64-bit numbers.
_SWEEP_WIDTH = 32


@dataclass(frozen=True, slots=True)
class _Independent:
    """The compute that may run while one collective is in flight (the module docstring),
    as node indices in index order."""

    #: compute nodes that are neither ancestors of the collective nor after one of its waits
    nodes: list[int]
    #: those of ``nodes`` that come after a wait of a later collective of its group
    blocked: list[int]
    #: whether the collective has a compute ancestor
    pred_compute: bool


def _independence(graph: Graph, timings: Sequence[CollectiveTiming]) -> list[_Independent]:
    """The independent compute of each collective of ``timings``, in their order.

    The graph is swept twice per :data:`_SWEEP_WIDTH` collectives (:func:`_marks`), not a
    few times per collective: explaining many costs little more than explaining one.
    """
    # lists: faster to slice and index than the graph's arrays
    csr = (*(a.tolist() for a in graph.pred_arrays()), *(a.tolist() for a in graph.succ_arrays()))
    compute = np.flatnonzero(node_kinds(graph) == NodeKind.COMPUTE)
    out: list[_Independent] = []
    for k in range(0, len(timings), _SWEEP_WIDTH):
        batch = timings[k : k + _SWEEP_WIDTH]
        before, after = _marks(graph, batch, csr)
        out += _split(np.array(before, dtype=np.uint64)[compute],
                      np.array(after, dtype=np.uint64)[compute], compute, len(batch))
    return out


def _marks(graph: Graph, batch: Sequence[CollectiveTiming],
           csr: tuple[list[int], list[int], list[int], list[int]]) -> tuple[list[int], list[int]]:
    """Reachability of the collectives of ``batch`` as bits per node: bit ``b`` of
    ``before[i]`` is set when node ``i`` is an ancestor of ``batch[b]``; of ``after[i]``, when
    it comes after a wait of ``batch[b]``, and bit ``len(batch) + b`` when it comes after a
    wait of a later collective of its group (one of that group that is not an ancestor).
    One backward and one forward sweep (``csr``: pred ptr, idx, succ ptr, idx lists)."""
    nodes = graph.nodes
    n = len(nodes)
    pred_ptr, pred_idx, succ_ptr, succ_idx = csr
    own = [0] * n
    waits = [0] * n
    of_group: dict[str, int] = {}
    for b, t in enumerate(batch):
        own[t.node] = 1 << b
        for w in graph.waits_of(t.node):
            waits[w] |= 1 << b
        of_group[t.group] = of_group.get(t.group, 0) | 1 << b
    # index order is topological: no node after the last collective is an ancestor of one
    before = _reach_bits(own, succ_ptr, succ_idx, range(max(t.node for t in batch) - 1, -1, -1))
    for j in graph.collectives():
        info = nodes[j].collective
        later = of_group.get(info.group, 0) & ~before[j] & ~own[j] if info is not None else 0
        if later:
            for w in graph.waits_of(j):
                waits[w] |= later << len(batch)
    # and no node up to the first seeded wait comes after one
    return before, _reach_bits(waits, pred_ptr, pred_idx, range(next(compress(range(n), waits), n) + 1, n))


def _reach_bits(seeds: list[int], ptr: Sequence[int], idx: Sequence[int],
                visit: Iterable[int]) -> list[int]:
    """Per node, the OR of ``seeds`` over the nodes it is reached from (not itself) along
    the CSR arrays, which list for each node the nodes it is reached from directly;
    ``visit`` lists each node after all of those (index order is topological), and may
    leave out nodes no seed reaches (they get 0)."""
    marks = [0] * len(seeds)
    reached = seeds.copy()  # marks | seeds: what a node passes on
    for i in visit:
        m = 0
        for j in idx[ptr[i] : ptr[i + 1]]:
            m |= reached[j]
        marks[i] = m
        reached[i] = m | seeds[i]
    return marks


def _split(before: np.ndarray, after: np.ndarray, compute: np.ndarray,
           width: int) -> list[_Independent]:
    """The :class:`_Independent` of each of ``width`` collectives from the :func:`_marks` of
    the ``compute`` nodes (arrays aligned with ``compute``)."""
    independent = ~(before | after) & np.uint64((1 << width) - 1)
    blocked = independent & (after >> np.uint64(width))
    has_pred = int(np.bitwise_or.reduce(before, initial=np.uint64(0)))
    out = []
    for b in range(width):
        bit = np.uint64(1 << b)
        out.append(_Independent(nodes=compute[(independent & bit) != 0].tolist(),
                                blocked=compute[(blocked & bit) != 0].tolist(),
                                pred_compute=bool(has_pred >> b & 1)))
    return out


def _us(x: float) -> str:
    return f"{x:,.1f} us"


def explain_exposed(
    graph: Graph,
    order: Sequence[int],
    durations_us: Sequence[float],
    timings: Sequence[CollectiveTiming],
    sim: SimResult,
    *,
    memory_budget_bytes: int | None = None,
) -> list[list[Reason]]:
    """The reasons each collective of ``timings`` is exposed in ``order`` (one list per
    timing), primary reason first.

    At most two reasons each: ``queued`` when it applies, then the first of the others that
    holds. The graph traversals are shared (:func:`_independence`); beyond them each
    collective costs what its independent compute and its window in ``order`` hold.
    """
    if not timings:
        return []
    order = Schedule.of(graph, order)
    independence = _independence(graph, timings)
    # the compute stream's end of each of its nodes, for the memory reason
    ends = ({e.node: e.end_us for e in sim.events if e.lane == COMPUTE_LANE}
            if memory_budget_bytes is not None else None)
    return [_reasons(graph, order, durations_us, t, ind, sim, ends, memory_budget_bytes)
            for t, ind in zip(timings, independence, strict=True)]


def _reasons(graph: Graph, order: Schedule, durations_us: Sequence[float],
             timing: CollectiveTiming, independent: _Independent, sim: SimResult,
             ends: dict[int, float] | None, memory_budget_bytes: int | None) -> list[Reason]:
    """The reasons of one collective (:func:`explain_exposed`)."""
    reasons: list[Reason] = []
    nodes = graph.nodes
    c = timing.node
    group = timing.group
    coll_us = max(timing.end_us - timing.start_us, durations_us[c])
    queued_us = timing.start_us - timing.issue_us
    if queued_us > 0 and queued_us >= QUEUED_SHARE * timing.exposed_us:
        reasons.append(Reason(
            code="queued",
            text=f"waited {_us(queued_us)} behind earlier collectives on group {group!r} "
                 "before it could start",
        ))
    pos = order.positions
    waits = graph.waits_of(c)
    compute = NodeKind.COMPUTE
    indep_us = sum(durations_us[i] for i in independent.nodes)
    if indep_us < coll_us:
        lead = ("nothing has to run before it and everything else needs its result: "
                if not independent.pred_compute else "")
        reasons.append(Reason(
            code="no_independent_compute",
            text=f"{lead}only {_us(indep_us)} of compute is independent of it, "
                 f"and it takes {_us(coll_us)}",
        ))
        return reasons
    # compute that needs a later collective of the same group cannot finish before this one
    # does: that collective queues behind it on the group's stream
    blocked = set(independent.blocked)
    free_us = sum(durations_us[i] for i in independent.nodes if i not in blocked)
    if free_us < coll_us:
        eg = f" (e.g. {nodes[independent.blocked[0]].name!r})" if independent.blocked else ""
        reasons.append(Reason(
            code="dependency",
            text=f"{_us(indep_us)} of compute is independent of it, but only {_us(free_us)} of "
                 f"that does not wait on a later collective of group {group!r}, which queues "
                 f"behind it{eg}",
        ))
        return reasons
    barrier = _barrier(graph, order, pos, c, waits)
    if barrier is not None:
        reasons.append(Reason(code="barrier", text=barrier))
        return reasons
    if ends is not None:
        mem = _memory(graph, order, pos, c, timing, sim, ends, memory_budget_bytes)
        if mem is not None:
            reasons.append(Reason(code="memory_budget", text=mem))
            return reasons
    lo = pos[c]
    hi = max((pos[wt] for wt in waits), default=lo)
    window_us = sum(durations_us[i] for i in order[lo + 1 : hi] if nodes[i].kind is compute)
    if reasons and window_us >= coll_us:
        return reasons  # the window would hide it: the queueing is the whole story
    reasons.append(Reason(
        code="schedule",
        text=f"{_us(indep_us)} of independent compute exists, but this order runs only "
             f"{_us(window_us)} between its issue and its wait",
    ))
    return reasons


def _barrier(graph: Graph, order: Sequence[int], pos: Sequence[int], c: int,
             waits: Sequence[int]) -> str | None:
    """A side-effecting node that pins the issue of ``c`` or its wait, described."""
    nodes = graph.nodes
    data_ready = max((pos[j] for j in nodes[c].inputs), default=-1)
    for j in graph.preds(c):
        if nodes[j].side_effect and pos[j] > data_ready:
            return (f"side-effecting node {nodes[j].name!r} ({nodes[j].op}) comes after its inputs "
                    "are ready, and a collective cannot be issued before it")
    for wt in waits:
        users = [u for u in graph.succs(wt) if wt in nodes[u].inputs]
        first_use = min((pos[u] for u in users), default=len(order))
        for j in graph.succs(wt):
            if nodes[j].side_effect and pos[j] < first_use:
                return (f"side-effecting node {nodes[j].name!r} ({nodes[j].op}) comes before the "
                        "first use of its result, and a wait cannot move past it")
    return None


def _clock_after(order: Sequence[int], k: int, ends: dict[int, float]) -> float:
    """The compute stream's clock right after position ``k`` of ``order``."""
    for q in range(k, -1, -1):
        if order[q] in ends:
            return ends[order[q]]
    return 0.0


def _peak_between(curve: Sequence[tuple[float, int]], t0: float, t1: float) -> int:
    """Highest live bytes from ``t0`` to ``t1`` (starting with the value in effect at ``t0``)."""
    peak = 0
    for t, b in curve:
        if t > t1:
            break
        peak = b if t < t0 else max(peak, b)
    return peak


def _memory(graph: Graph, order: Sequence[int], pos: Sequence[int], c: int,
            timing: CollectiveTiming, sim: SimResult, ends: dict[int, float],
            budget_bytes: int) -> str | None:
    """Whether widening the window of ``c`` would push live memory over the budget.

    Two ways to widen it: issue ``c`` as soon as its inputs are ready (its output is live
    from then on), or move its wait to just before the first use of its result (its input
    stays live until then).
    """
    nodes = graph.nodes
    preds = list(graph.preds(c))
    ready_us = _clock_after(order, max(pos[j] for j in preds), ends) if preds else 0.0
    if ready_us < timing.issue_us:
        extra = nodes[c].padded_nbytes
        peak = _peak_between(sim.memory_curve, ready_us, timing.issue_us)
        if peak + extra > budget_bytes:
            return (f"issuing it when its inputs are ready ({_us(ready_us)}) would hold "
                    f"{extra:,} more bytes while {peak:,} are live, over the "
                    f"{budget_bytes:,}-byte memory budget")
    waits = graph.waits_of(c)
    if not waits or timing.wait_start_us is None:
        return None
    wt = min(waits, key=lambda w: pos[w])
    users = [u for u in graph.succs(wt) if wt in nodes[u].inputs]
    if not users:
        return None
    first = min(users, key=lambda u: pos[u])
    if pos[first] <= pos[wt] + 1:
        return None
    use_us = _clock_after(order, pos[first] - 1, ends)
    if use_us <= timing.wait_start_us:
        return None
    # an input some later node reads stays live anyway: only the others are held longer
    held = sum(
        nodes[j].padded_nbytes for j in nodes[c].inputs
        if not any(pos[u] > pos[wt] for u in graph.users(j) if u != c)
    )
    if held == 0:
        return None
    peak = _peak_between(sim.memory_curve, timing.wait_start_us, use_us)
    if peak + held > budget_bytes:
        return (f"waiting just before its first use ({nodes[first].name!r}) would keep its "
                f"{held:,}-byte input alive while {peak:,} are live, over the "
                f"{budget_bytes:,}-byte memory budget")
    return None


def _group_title(graph: Graph, name: str) -> str:
    from commopt.report.tables import group_title

    group = graph.groups.get(name)
    return group_title(group) if group is not None else f"group {name}"


def advise(graph: Graph, durations_us: Sequence[float], sim: SimResult, *,
           optimized: bool) -> list[Advice]:
    """What would reduce the exposed communication of the order ``sim`` simulated.

    Each piece of advice is given only when the simulation supports it, so the report never
    recommends what would not help:

    - ``order``: the makespan is more than :data:`ORDER_MARGIN` above its lower bound, some
      communication is exposed, and the order is not ``optimized`` (commopt's own output);
    - ``comm_bound``: a group's stream is busier than all compute together, so no order can
      hide it; more compute per rank to hide behind, or faster links, would;
    - ``bucketing``: a group with exposed communication runs at least
      :data:`BUCKET_MIN_COLLECTIVES` collectives whose fixed latency (fitted per collective
      type from their sizes and durations) is at least :data:`BUCKET_LATENCY_SHARE` of its
      communication time; fewer, larger collectives would pay it less often.
    """
    from commopt.estimators.line_fit import fit_line  # the profile fit's latency/bandwidth line

    out: list[Advice] = []
    if sim.exposed_comm_us <= 0:
        return out
    lb = sim.lower_bound_us
    if not optimized and lb > 0 and sim.makespan_us > lb * (1.0 + ORDER_MARGIN):
        out.append(Advice(
            code="order",
            text=f"makespan {_us(sim.makespan_us)} is {100.0 * (sim.makespan_us / lb - 1.0):.0f}% "
                 f"above its lower bound {_us(lb)}: a different order could hide more "
                 "(commopt optimize searches for one)",
        ))
    busy = sorted(sim.comm_us_by_group.items(), key=lambda kv: (-kv[1], kv[0]))
    if busy and busy[0][1] > sim.total_compute_us:
        name, comm_us = busy[0]
        out.append(Advice(
            code="comm_bound",
            text=f"{_group_title(graph, name)} communicates {_us(comm_us)}, more than all "
                 f"compute ({_us(sim.total_compute_us)}), so no order hides the last "
                 f"{_us(comm_us - sim.total_compute_us)}: more compute to hide behind (e.g. a "
                 "larger batch or sequence per rank) or faster links would",
        ))
    exposed_by_group: dict[str, float] = {}
    samples: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for t in sim.collectives:
        exposed_by_group[t.group] = exposed_by_group.get(t.group, 0.0) + t.exposed_us
        info = graph.nodes[t.node].collective
        ctype = info.type if info is not None else "unknown"
        size = info.bytes if info is not None else graph.nodes[t.node].nbytes
        samples.setdefault((t.group, ctype), []).append((size, float(durations_us[t.node])))
    latency: dict[str, tuple[int, float]] = {}  # group -> (collectives, fixed latency)
    for (group, _), pts in sorted(samples.items()):
        a, _bw = fit_line([p[0] for p in pts], [p[1] for p in pts])
        n, lat = latency.get(group, (0, 0.0))
        latency[group] = (n + len(pts), lat + sum(min(a, d) for _, d in pts))
    for group, (n, lat) in sorted(latency.items()):
        comm_us = sim.comm_us_by_group.get(group, 0.0)
        if (n >= BUCKET_MIN_COLLECTIVES and comm_us > 0 and exposed_by_group.get(group, 0.0) > 0
                and lat >= BUCKET_LATENCY_SHARE * comm_us):
            out.append(Advice(
                code="bucketing",
                text=f"{_group_title(graph, group)} runs {n} collectives whose fixed latency "
                     f"({_us(lat)}) is {100.0 * lat / comm_us:.0f}% of its {_us(comm_us)} of "
                     "communication: bucketing them into fewer, larger collectives would cut it",
            ))
    return out
