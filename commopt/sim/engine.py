"""The discrete-event overlap simulator: one compute stream, one comm stream per group.

Model (DESIGN.md "Simulation"):

- nodes run in ``order`` on one compute stream; compute nodes take their duration;
  inputs, outputs and views take 0;
- a collective is *issued* when the order reaches it (free on the compute stream); it
  *starts* when issued, its inputs are ready and its group's stream is free, and runs its
  duration; collectives of one group queue on that group's stream, groups run in parallel;
- a wait blocks the compute stream until its collective finished; the idle time is the
  collective's exposed time. A wait's own duration (normally 0) runs after that;
- a node that reads a collective's value without a wait (an order the checker rejects)
  still waits for the data: its idle time is also charged to that collective.
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Sequence

from commopt.errors import InvariantViolation
from commopt.ir.graph import Graph, NodeKind
from commopt.ir.schedule import Schedule
from commopt.sim.memory import peak_memory
from commopt.sim.result import COMPUTE_LANE, CollectiveTiming, SimEvent, SimResult, comm_lane

_ZERO_KINDS = (NodeKind.INPUT, NodeKind.OUTPUT, NodeKind.VIEW)


def simulate(graph: Graph, order: Sequence[int], durations_us: Sequence[float]) -> SimResult:
    """Simulate ``order`` (a :class:`~commopt.ir.schedule.Schedule` or any permutation of node
    indices) with per-node ``durations_us``.

    Raises :class:`~commopt.errors.InvariantViolation` when a wait comes before its
    collective; :class:`~commopt.ir.schedule.ScheduleError` when the order is not a
    permutation; ``ValueError`` when the durations do not match the graph.
    """
    nodes = graph.nodes
    n = len(nodes)
    if len(durations_us) != n:
        raise ValueError(f"{len(durations_us)} durations for a graph of {n} nodes")
    order = Schedule.of(graph, order)
    dur = [0.0 if nodes[i].kind in _ZERO_KINDS else float(d) for i, d in enumerate(durations_us)]
    for i, d in enumerate(dur):
        if not d >= 0.0:  # also rejects NaN
            raise ValueError(f"node {nodes[i].name!r} has duration {d!r}; durations are >= 0")

    end = [0.0] * n  # when each node's value is ready
    start = [0.0] * n
    issue = [-1.0] * n  # collectives only
    exposed = [0.0] * n  # per collective
    first_wait = [-1] * n
    first_wait_t = [0.0] * n
    stream_free: dict[str, float] = {}
    comm_by_group: dict[str, float] = {}
    events: list[SimEvent] = []
    issued: list[int] = []
    kind_compute, kind_coll, kind_wait = NodeKind.COMPUTE, NodeKind.COLLECTIVE, NodeKind.WAIT
    kind_view = NodeKind.VIEW
    t = 0.0
    exposed_total = 0.0
    total_compute = 0.0
    for i in order:
        node = nodes[i]
        kind = node.kind
        ins = node.inputs
        ready = 0.0
        for p in ins:
            e = end[p]
            if e > ready:
                ready = e
        if kind is kind_coll:
            group = node.collective.group if node.collective is not None else "?"
            s = stream_free.get(group, 0.0)
            if t > s:
                s = t
            if ready > s:
                s = ready
            e = s + dur[i]
            issue[i] = t
            start[i] = s
            end[i] = e
            stream_free[group] = e
            comm_by_group[group] = comm_by_group.get(group, 0.0) + dur[i]
            issued.append(i)
            events.append(SimEvent(i, comm_lane(group), s, e))
        elif kind is kind_wait:
            c = node.wait_of
            if c is None or issue[c] < 0.0:
                cname = nodes[c].name if c is not None else "?"
                raise InvariantViolation(
                    f"wait {node.name!r} comes before its collective {cname!r} in the order"
                )
            if first_wait[c] < 0:
                first_wait[c] = i
                first_wait_t[c] = t
            s = t
            if ready > s:
                idle = ready - s
                exposed[c] += idle
                exposed_total += idle
                events.append(SimEvent(i, COMPUTE_LANE, s, ready))
                s = ready
            start[i] = s
            t = s + dur[i]
            end[i] = t
            total_compute += dur[i]
        elif kind is kind_view:  # metadata only: never blocks, ready when its source is
            start[i] = t
            end[i] = ready if ready > t else t
        else:
            s = t
            if ready > s:  # a value read before its wait: idle on the collective(s) behind it
                _charge_unwaited(nodes, ins, end, s, exposed)
                exposed_total += ready - s
                s = ready
            start[i] = s
            t = s + dur[i]
            end[i] = t
            if kind is kind_compute:
                total_compute += dur[i]
                events.append(SimEvent(i, COMPUTE_LANE, s, t))

    makespan = t
    for c in issued:
        if end[c] > makespan:
            makespan = end[c]
    total_comm = sum(comm_by_group.values())
    overlap = 1.0 if total_comm <= 0.0 else min(1.0, max(0.0, 1.0 - exposed_total / total_comm))
    timings = [
        CollectiveTiming(
            node=c,
            group=nodes[c].collective.group if nodes[c].collective is not None else "?",
            issue_us=issue[c],
            start_us=start[c],
            end_us=end[c],
            wait_node=first_wait[c] if first_wait[c] >= 0 else None,
            wait_start_us=first_wait_t[c] if first_wait[c] >= 0 else None,
            exposed_us=exposed[c],
        )
        for c in issued
    ]
    cp = critical_path_us(graph, dur)
    busiest = max(comm_by_group.values(), default=0.0)
    peak, curve = peak_memory(graph, order)
    memory_curve: list[tuple[float, int]] = []
    last_live = -1
    for k, i in enumerate(order):
        live = curve[k]
        if live != last_live:
            at = issue[i] if nodes[i].kind is kind_coll else start[i]
            memory_curve.append((at, live))
            last_live = live
    return SimResult(
        makespan_us=makespan,
        total_compute_us=total_compute,
        comm_us_by_group=dict(sorted(comm_by_group.items())),
        exposed_comm_us=exposed_total,
        overlap_ratio=overlap,
        lower_bound_us=max(total_compute, busiest, cp),
        critical_path_us=cp,
        peak_memory_bytes=peak,
        events=events,
        collectives=timings,
        memory_curve=memory_curve,
    )


def _charge_unwaited(nodes, ins, end, t: float, exposed: list[float]) -> None:
    """Charge idle time up to the latest input to the collective(s) that produced it."""
    latest = max(ins, key=lambda p: (end[p], -p))
    exposed_before = end[latest] - t
    src = latest
    while nodes[src].kind is NodeKind.VIEW and nodes[src].inputs:
        src = max(nodes[src].inputs, key=lambda p: (end[p], -p))
    exposed[src] += exposed_before


_EDGE_FLAGS: weakref.WeakKeyDictionary[Graph, array] = weakref.WeakKeyDictionary()
_LAST_CP: weakref.WeakKeyDictionary[Graph, tuple[list[float], float]] = weakref.WeakKeyDictionary()


def _edge_carries_end(graph: Graph) -> array:
    """Per predecessor edge (CSR order): 1 when the successor needs the predecessor *finished*.

    Only edges out of a collective can carry just its issue: those to nodes that neither wait
    for it, read its value, nor queue behind it on its group's stream.
    """
    flags = _EDGE_FLAGS.get(graph)
    if flags is not None:
        return flags
    nodes = graph.nodes
    ptr, idx = graph.pred_arrays()
    flags = array("b", b"\x01" * len(idx))
    kind_coll = NodeKind.COLLECTIVE
    for i, node in enumerate(nodes):
        my_group = node.collective.group if node.kind is kind_coll and node.collective else None
        for k in range(ptr[i], ptr[i + 1]):
            p = idx[k]
            pn = nodes[p]
            if pn.kind is kind_coll and not (
                node.wait_of == p
                or p in node.inputs
                or (my_group is not None and pn.collective is not None and pn.collective.group == my_group)
            ):
                flags[k] = 0
    _EDGE_FLAGS[graph] = flags
    return flags


def critical_path_us(graph: Graph, durations_us: Sequence[float]) -> float:
    """Longest chain of durations through data and ordering edges, order-independent.

    A collective's duration counts on the path to its waits, to nodes reading its value and to
    the next collective of its group (which queues behind it); other ordering edges only
    require it to have been *issued*, so they carry its start, not its end. Index order is a
    topological order of the graph, so one forward sweep suffices. The last result per graph
    is cached (passes simulate many orders with the same durations).
    """
    durations = list(durations_us)
    cached = _LAST_CP.get(graph)
    if cached is not None and cached[0] == durations:
        return cached[1]
    n = len(graph.nodes)
    ptr, idx = graph.pred_arrays()
    flags = _edge_carries_end(graph)
    cp_start = [0.0] * n
    cp_end = [0.0] * n
    best = 0.0
    for i in range(n):
        s = 0.0
        for k in range(ptr[i], ptr[i + 1]):
            p = idx[k]
            v = cp_end[p] if flags[k] else cp_start[p]
            if v > s:
                s = v
        e = s + durations[i]
        cp_start[i] = s
        cp_end[i] = e
        if e > best:
            best = e
    _LAST_CP[graph] = (durations, best)
    return best
