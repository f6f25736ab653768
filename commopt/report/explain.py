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

from collections.abc import Sequence

from commopt.ir.graph import Graph, NodeKind
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


def _reach(start: Sequence[int], ptr: Sequence[int], idx: Sequence[int], n: int) -> bytearray:
    """Marks of every node reachable from ``start`` (exclusive) along the CSR arrays."""
    seen = bytearray(n)
    stack = list(start)
    while stack:
        i = stack.pop()
        for j in idx[ptr[i] : ptr[i + 1]]:
            if not seen[j]:
                seen[j] = 1
                stack.append(j)
    return seen


def csr_lists(graph: Graph) -> tuple[list[int], list[int], list[int], list[int]]:
    """The graph's predecessor and successor CSR arrays as lists (faster to slice and index);
    build once and pass to every :func:`explain_exposed` call on the same graph."""
    pred_ptr, pred_idx = graph.pred_arrays()
    succ_ptr, succ_idx = graph.succ_arrays()
    return list(pred_ptr), list(pred_idx), list(succ_ptr), list(succ_idx)


def _us(x: float) -> str:
    return f"{x:,.1f} us"


def explain_exposed(
    graph: Graph,
    order: Sequence[int],
    durations_us: Sequence[float],
    timing: CollectiveTiming,
    sim: SimResult,
    *,
    memory_budget_bytes: int | None = None,
    csr: tuple[list[int], list[int], list[int], list[int]] | None = None,
) -> list[Reason]:
    """The reasons collective ``timing.node`` is exposed in ``order``, primary reason first.

    At most two reasons: ``queued`` when it applies, then the first of the others that
    holds. Costs a few graph traversals, so callers explain only the most exposed ones
    (passing ``csr=csr_lists(graph)`` built once).
    """
    reasons: list[Reason] = []
    nodes = graph.nodes
    n = len(nodes)
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
    pos = [0] * n
    for p, i in enumerate(order):
        pos[i] = p
    waits = graph.waits_of(c)
    pred_ptr, pred_idx, succ_ptr, succ_idx = csr if csr is not None else csr_lists(graph)
    before = _reach([c], pred_ptr, pred_idx, n)
    after = _reach(list(waits), succ_ptr, succ_idx, n)
    for wt in waits:
        after[wt] = 1
    after[c] = 1
    compute = NodeKind.COMPUTE
    independent = [
        i for i in range(n)
        if nodes[i].kind is compute and not before[i] and not after[i]
    ]
    indep_us = sum(durations_us[i] for i in independent)
    if indep_us < coll_us:
        has_pred_compute = any(before[i] and nodes[i].kind is compute for i in range(n))
        lead = ("nothing has to run before it and everything else needs its result: "
                if not has_pred_compute else "")
        reasons.append(Reason(
            code="no_independent_compute",
            text=f"{lead}only {_us(indep_us)} of compute is independent of it, "
                 f"and it takes {_us(coll_us)}",
        ))
        return reasons
    # compute that needs a later collective of the same group cannot finish before this one
    # does: that collective queues behind it on the group's stream
    later_waits = [
        w for j in range(n)
        if nodes[j].kind is NodeKind.COLLECTIVE and not before[j] and j != c
        and nodes[j].collective is not None and nodes[j].collective.group == group
        for w in graph.waits_of(j)
    ]
    blocked = _reach(later_waits, succ_ptr, succ_idx, n)
    free_us = sum(durations_us[i] for i in independent if not blocked[i])
    if free_us < coll_us:
        example = next((i for i in independent if blocked[i]), None)
        eg = f" (e.g. {nodes[example].name!r})" if example is not None else ""
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
    if memory_budget_bytes is not None:
        mem = _memory(graph, order, pos, c, timing, sim, memory_budget_bytes)
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


def _barrier(graph: Graph, order: Sequence[int], pos: list[int], c: int,
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


def _memory(graph: Graph, order: Sequence[int], pos: list[int], c: int,
            timing: CollectiveTiming, sim: SimResult, budget_bytes: int) -> str | None:
    """Whether widening the window of ``c`` would push live memory over the budget.

    Two ways to widen it: issue ``c`` as soon as its inputs are ready (its output is live
    from then on), or move its wait to just before the first use of its result (its input
    stays live until then).
    """
    nodes = graph.nodes
    ends = {e.node: e.end_us for e in sim.events if e.lane == COMPUTE_LANE}
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
    from commopt.estimators.profile import fit_line  # the profile fit's latency/bandwidth line

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
