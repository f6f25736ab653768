"""The discrete-event overlap simulator: one compute stream, one comm stream per group.

Model (docs/design.md, "Simulating an order"; the rules live in :mod:`commopt.sim.model`):

- nodes run in ``order`` on one compute stream; compute nodes take their duration;
  inputs, outputs and views take 0;
- a collective is *issued* when the order reaches it (free on the compute stream); it
  *starts* when issued, its inputs are ready and its group's stream is free, and runs its
  duration; collectives of one group queue on that group's stream, groups run in parallel;
- a wait blocks the compute stream until its collective finished; the idle time is the
  collective's exposed time. A wait's own duration (normally 0) runs after that;
- a node that reads a collective's value without a wait (an order the checker rejects)
  still waits for the data: its idle time is also charged to that collective;
- with a ``compute_slowdown`` factor above 1 (an estimator option, off by default), a compute
  node runs that many times as long while any collective is in flight
  (:func:`commopt.sim.model.stretched_end`). Every collective that can overlap a compute node
  was issued before it in the order, so its flight is known when the node is replayed.
  Durations only grow, so every lower bound stays valid.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from commopt.errors import InvariantViolation
from commopt.ir.graph import Graph, NodeKind
from commopt.ir.schedule import Schedule
from commopt.sim.bounds import lower_bounds
from commopt.sim.memory import peak_memory
from commopt.sim.model import check_compute_slowdown, step_durations, stream_of, stretched_end
from commopt.sim.result import COMPUTE_LANE, CollectiveTiming, SimEvent, SimResult, comm_lane

#: Makes a named tuple (:class:`SimEvent`, :class:`CollectiveTiming`) from a tuple of all its
#: fields, in order: ``_new_tuple(SimEvent, (node, lane, start, end))`` is the same value as
#: ``SimEvent(node, lane, start, end)``, without the generated ``__new__`` (keyword handling,
#: defaults), which takes about twice as long; a replay of 100k nodes makes ~85k of them.
_new_tuple = tuple.__new__


def simulate(graph: Graph, order: Sequence[int], durations_us: Sequence[float], *,
             compute_slowdown: float = 1.0) -> SimResult:
    """Simulate ``order`` (a :class:`~commopt.ir.schedule.Schedule` or any permutation of node
    indices) with per-node ``durations_us``; compute runs ``compute_slowdown`` times as long
    beside communication (module docstring).

    Raises :class:`~commopt.errors.InvariantViolation` when a wait comes before its
    collective; :class:`~commopt.ir.schedule.ScheduleError` when the order is not a
    permutation; ``ValueError`` when the durations do not match the graph.
    """
    order = Schedule.of(graph, order)
    dur = step_durations(graph, durations_us)
    replay = _Replay(graph, dur, compute_slowdown)
    replay.run(order)
    return replay.result(order)


def simulate_numbers(graph: Graph, order: Sequence[int], durations_us: Sequence[float], *,
                     compute_slowdown: float = 1.0) -> SimResult:
    """:func:`simulate`'s result of ``order`` without its per-event records: every number
    (makespan, compute and communication totals, exposed communication, overlap, lower
    bounds, peak memory, slowed compute) bit for bit as :func:`simulate` gives it, but
    ``events``, ``collectives`` and ``memory_curve`` empty. For orders whose numbers alone
    are shown (the pass manager's intermediate orders): the events, timings and memory curve
    are most of a full result's cost (100k nodes: about a third of it).

    Raises like :func:`simulate`."""
    order = Schedule.of(graph, order)
    dur = step_durations(graph, durations_us)
    if compute_slowdown != 1.0:  # the stretched replay needs the flights: the full clock
        replay = _Replay(graph, dur, compute_slowdown)
        replay.run(order)
        return replay.result(order, records=False)
    makespan, exposed = _makespan(graph, order, dur)
    total_compute, comm_by_group = _totals(graph, order, dur)
    return _summed(graph, order, dur, 1.0, makespan=makespan, total_compute=total_compute,
                   comm_by_group=comm_by_group, exposed=exposed, slowed=0.0)


def _totals(graph: Graph, order: Schedule, dur: list[float]) -> tuple[float, dict[object, float]]:
    """The compute total and per-stream communication totals :class:`_Replay` adds up along
    ``order``, in its order of additions (float sums depend on it): the waits' durations,
    then the compute nodes' as a second running sum added to them; per stream (in order of
    its first collective) its collectives' durations, in order."""
    lanes = _lanes(graph)
    at = np.asarray(order.order, dtype=np.int64)
    steps = np.asarray(dur, dtype=float)[at]
    codes = np.frombuffer(lanes.codes, dtype=np.uint8)[at]
    waits = _running_sum(steps[codes == _WAIT])
    compute = _running_sum(steps[np.frombuffer(lanes.compute, dtype=np.uint8)[at] > 0])
    lane = lanes.lane
    comm: dict[object, float] = {}
    for c in at[codes == _COLL].tolist():
        g = lane[c]
        comm[g] = comm.get(g, 0.0) + dur[c]
    return waits + compute, comm


def _running_sum(values: np.ndarray) -> float:
    """``0.0 + values[0] + values[1] + ...`` left to right, as a loop adds them (numpy's
    accumulate keeps that order; ``sum`` and ``np.sum`` do not promise it)."""
    return float(np.add.accumulate(np.concatenate(([0.0], values)))[-1])


@dataclass(frozen=True)
class NodeTimes:
    """Per node of one replayed order: its start and end, and for a collective its issue
    (the compute stream's clock when the order reached it; -1 for other nodes)."""

    start: list[float]
    end: list[float]
    issue: list[float]


def node_times(graph: Graph, order: Sequence[int], durations_us: Sequence[float], *,
               compute_slowdown: float = 1.0) -> NodeTimes:
    """Every node's times in the replay of ``order`` (the same replay as :func:`simulate`),
    e.g. to warm-start a solver with a known schedule."""
    order = Schedule.of(graph, order)
    replay = _Replay(graph, step_durations(graph, durations_us), compute_slowdown)
    replay.run(order)
    return NodeTimes(list(replay.start), list(replay.end), list(replay.issue))


def makespan_us(graph: Graph, order: Sequence[int], durations_us: Sequence[float], *,
                compute_slowdown: float = 1.0) -> float:
    """The makespan :func:`simulate` gives ``order``, without the rest of its result (lower
    bound, memory, timings): for callers that replay one order under many cost variants
    (:mod:`commopt.sim.robustness`)."""
    return makespan_and_exposed_us(graph, order, durations_us, compute_slowdown=compute_slowdown)[0]


def makespan_and_exposed_us(graph: Graph, order: Sequence[int], durations_us: Sequence[float], *,
                            compute_slowdown: float = 1.0) -> tuple[float, float]:
    """The makespan and the exposed communication :func:`simulate` gives ``order``, without
    the rest of its result: for a pass that only compares an order with another (a full
    result costs about 5x as much)."""
    order = Schedule.of(graph, order)
    dur = step_durations(graph, durations_us)
    if compute_slowdown != 1.0:
        replay = _Replay(graph, dur, compute_slowdown)
        replay.run(order)
        return replay.makespan(), replay.exposed_total
    return _makespan(graph, order, dur)


@dataclass(frozen=True, eq=False)
class _Lanes:
    """Per node, what a makespan-only replay reads (cached per graph): its kind as a small
    code (:data:`_COLL`, :data:`_WAIT`, :data:`_VIEW`, :data:`_PLAIN`, :data:`_PLAIN_VIEW`,
    else another compute-stream node), its inputs, a collective's stream (a wait's
    collective), and 1 for compute nodes (the full replay draws their spans)."""

    codes: bytes
    inputs: list[tuple[int, ...]]
    lane: list[object]
    compute: bytes


_COLL, _WAIT, _VIEW = 1, 2, 3
#: A compute-stream node (not a wait) or a view none of whose inputs can end after the clock
#: reaches it: its inputs are compute-stream nodes (done by then: durations are >= 0, so the
#: clock never goes back) or such views, never a collective or a view of one. Every replay
#: runs a plain node at the clock (a view: ends there) without reading its inputs.
_PLAIN, _PLAIN_VIEW = 4, 5
_LANES: weakref.WeakKeyDictionary[Graph, _Lanes] = weakref.WeakKeyDictionary()


def _lanes(graph: Graph) -> _Lanes:
    cached = _LANES.get(graph)
    if cached is None:
        code = {NodeKind.COLLECTIVE: _COLL, NodeKind.WAIT: _WAIT, NodeKind.VIEW: _VIEW}
        nodes = graph.nodes
        codes = bytearray([code.get(n.kind, 0) for n in nodes])
        inputs = [n.inputs for n in nodes]
        late = bytearray(len(nodes))  # may end after the clock reaches a reader: collectives and their views
        for i, ins in enumerate(inputs):  # index order is topological: a view's sources are classified first
            c = codes[i]
            if c == _COLL:
                late[i] = 1
                continue
            for p in ins:
                if late[p]:
                    late[i] = c == _VIEW
                    break
            else:
                if c == 0 or c == _VIEW:
                    codes[i] = _PLAIN if c == 0 else _PLAIN_VIEW
        kind_coll, kind_compute = NodeKind.COLLECTIVE, NodeKind.COMPUTE
        cached = _Lanes(bytes(codes), inputs,
                        [stream_of(n) if n.kind is kind_coll else n.wait_of for n in nodes],
                        bytes([n.kind is kind_compute for n in nodes]))
        _LANES[graph] = cached
    return cached


def collective_mask(graph: Graph) -> np.ndarray:
    """True for the graph's collectives, as a whole-graph numpy mask (from the cached lanes)."""
    return np.frombuffer(_lanes(graph).codes, dtype=np.uint8) == _COLL


def _makespan(graph: Graph, order: Schedule, dur: list[float]) -> tuple[float, float]:
    """:meth:`_Replay.makespan` and ``exposed_total`` after :meth:`_Replay.run`, with the same
    arithmetic but none of the bookkeeping (events, per-collective times) they do not
    depend on."""
    lanes = _lanes(graph)
    codes, inputs, lane = lanes.codes, lanes.inputs, lanes.lane
    n = len(codes)
    end = [0.0] * n
    issued = bytearray(n)
    stream_free: dict[object, float] = {}
    t = 0.0
    comm_end = 0.0
    exposed = 0.0
    for i in order:
        code = codes[i]
        if code == _PLAIN:  # its inputs are ready by ``t`` (see :data:`_PLAIN`)
            t = end[i] = t + dur[i]
            continue
        if code == _PLAIN_VIEW:
            end[i] = t
            continue
        ready = 0.0
        for p in inputs[i]:
            if end[p] > ready:
                ready = end[p]
        if code == _COLL:
            s = max(stream_free.get(lane[i], 0.0), t, ready)
            e = end[i] = stream_free[lane[i]] = s + dur[i]
            issued[i] = 1
            if e > comm_end:
                comm_end = e
        elif code == _WAIT:
            c = lane[i]
            if c is None or not issued[c]:
                raise _wait_first(graph.nodes, i)
            if ready > t:
                exposed += ready - t
                t = ready
            t = end[i] = t + dur[i]
        elif code == _VIEW:
            end[i] = ready if ready > t else t
        else:
            if ready > t:  # a value read before its wait
                exposed += ready - t
                t = ready
            t = end[i] = t + dur[i]
    return max(t, comm_end), exposed


class _Replay:
    """The clock of one simulation: each node's start and end, collectives' issue times and
    exposed time, the events drawn in reports. :meth:`run` advances it through an order
    (rules in the module docstring); :meth:`result` sums it up."""

    def __init__(self, graph: Graph, dur: list[float], compute_slowdown: float = 1.0) -> None:
        n = len(graph.nodes)
        self.graph, self.nodes, self.dur = graph, graph.nodes, dur
        self.slowdown = check_compute_slowdown(compute_slowdown)
        self.flights: list[tuple[float, float]] = []  # issued collectives not yet known to be over
        self.slowed_us = 0.0  # compute time added by the slowdown
        self.end = [0.0] * n  # when each node's value is ready
        self.start = [0.0] * n
        self.issue = [-1.0] * n  # collectives only
        self.exposed = [0.0] * n  # per collective
        self.first_wait = [-1] * n
        self.first_wait_t = [0.0] * n
        self.stream_free: dict[str, float] = {}
        self.comm_by_group: dict[str, float] = {}
        self.events: list[SimEvent] = []
        self.issued: list[int] = []
        self.group_of = _lanes(graph).lane  # a collective's stream (:func:`stream_of`)
        self.lane_names: dict[str, str] = {}  # comm_lane(group), made once per group
        self.t = self.exposed_total = self.total_compute = 0.0

    def run(self, order: Schedule) -> None:
        """Advance the clock through ``order`` (compute inline: it is most of the nodes)."""
        nodes, dur, end, start, events = self.nodes, self.dur, self.end, self.start, self.events
        kind_coll, kind_wait, kind_view, kind_compute = (
            NodeKind.COLLECTIVE, NodeKind.WAIT, NodeKind.VIEW, NodeKind.COMPUTE)
        lanes = _lanes(self.graph)
        codes, computes = lanes.codes, lanes.compute
        add_event = events.append
        new = _new_tuple  # a local: the loop makes most of the events
        t = 0.0
        total_compute = 0.0
        slow = self.slowdown != 1.0
        for i in order:
            code = codes[i]
            if code == _PLAIN:  # ready by ``t``: nothing to charge (see :data:`_PLAIN`)
                start[i] = t
                if computes[i]:
                    s = t
                    t = end[i] = self._stretched(s, dur[i]) if slow else s + dur[i]
                    total_compute += dur[i]
                    add_event(new(SimEvent, (i, COMPUTE_LANE, s, t)))
                else:
                    t = end[i] = t + dur[i]
                continue
            if code == _PLAIN_VIEW:
                start[i] = end[i] = t
                continue
            node = nodes[i]
            kind = node.kind
            ready = 0.0
            for p in node.inputs:
                if end[p] > ready:
                    ready = end[p]
            if kind is kind_coll:
                self._issue(i, self.group_of[i], ready, t)
            elif kind is kind_wait:
                t = self._wait(i, node, ready, t)
            elif kind is kind_view:  # metadata only: never blocks, ready when its source is
                start[i] = t
                end[i] = ready if ready > t else t
            else:
                s = t
                if ready > s:  # a value read before its wait: idle on the collective(s) behind it
                    _charge_unwaited(nodes, node.inputs, end, s, self.exposed)
                    self.exposed_total += ready - s
                    s = ready
                start[i] = s
                t = end[i] = self._stretched(s, dur[i]) if slow and kind is kind_compute else s + dur[i]
                if kind is kind_compute:
                    total_compute += dur[i]
                    add_event(new(SimEvent, (i, COMPUTE_LANE, s, t)))
        self.t = t
        self.total_compute += total_compute

    def _stretched(self, s: float, work: float) -> float:
        """End of a compute node of ``work`` started at ``s``, slowed beside the flights
        (those over by ``s`` are dropped: later compute starts later still)."""
        flights = self.flights = [f for f in self.flights if f[1] > s]
        e = stretched_end(s, work, flights, self.slowdown)
        self.slowed_us += e - s - work
        return e

    def _issue(self, i: int, group: str, ready: float, t: float) -> None:
        """Issue collective ``i`` at ``t``: it starts when its inputs are ready and its stream
        is free."""
        s = max(self.stream_free.get(group, 0.0), t, ready)
        e = s + self.dur[i]
        self.issue[i], self.start[i], self.end[i] = t, s, e
        self.stream_free[group] = e
        self.comm_by_group[group] = self.comm_by_group.get(group, 0.0) + self.dur[i]
        self.issued.append(i)
        lane = self.lane_names.get(group)
        if lane is None:
            lane = self.lane_names[group] = comm_lane(group)
        self.events.append(_new_tuple(SimEvent, (i, lane, s, e)))
        if self.slowdown != 1.0:
            self.flights.append((s, e))

    def _wait(self, i: int, node, ready: float, t: float) -> float:
        """Wait ``i`` at ``t``: the compute stream blocks until the collective finished (the
        idle time is exposed); returns the clock after the wait."""
        c = node.wait_of
        if c is None or self.issue[c] < 0.0:
            raise _wait_first(self.nodes, i)
        if self.first_wait[c] < 0:
            self.first_wait[c] = i
            self.first_wait_t[c] = t
        s = t
        if ready > s:
            self.exposed[c] += ready - s
            self.exposed_total += ready - s
            self.events.append(_new_tuple(SimEvent, (i, COMPUTE_LANE, s, ready)))
            s = ready
        self.start[i] = s
        self.end[i] = s + self.dur[i]
        self.total_compute += self.dur[i]
        return self.end[i]

    def makespan(self) -> float:
        """When the last node of the replayed order ends (compute or communication)."""
        end = self.end
        return max([self.t, *(end[c] for c in self.issued)])

    def result(self, order: Schedule, *, records: bool = True) -> SimResult:
        """The :class:`SimResult` of the replayed order; without its events, collective
        timings and memory curve unless ``records`` (:func:`simulate_numbers`)."""
        return _summed(self.graph, order, self.dur, self.slowdown, makespan=self.makespan(),
                       total_compute=self.total_compute, comm_by_group=self.comm_by_group,
                       exposed=self.exposed_total, slowed=self.slowed_us,
                       replay=self if records else None)

    def _timings(self) -> list[CollectiveTiming]:
        """Each issued collective's timing, in issue order."""
        group, issue, start, end = self.group_of, self.issue, self.start, self.end
        first_wait, first_wait_t, exposed = self.first_wait, self.first_wait_t, self.exposed
        out = []
        for c in self.issued:
            w = first_wait[c]
            out.append(_new_tuple(CollectiveTiming, (c, group[c], issue[c], start[c], end[c],
                                                     w if w >= 0 else None,
                                                     first_wait_t[c] if w >= 0 else None, exposed[c])))
        return out

    def _memory_curve(self, order: Schedule, curve) -> list[tuple[float, int]]:
        """(time, live bytes) at each change of the live bytes along ``order`` (``curve``:
        live bytes per position); a collective's time is its issue, any other node's its
        start. Whole-array steps: one result per simulated order."""
        n = len(order)
        if n == 0:
            return []
        live = np.asarray(curve, dtype=np.int64).reshape(n)
        changed = np.flatnonzero(live != np.concatenate(([-1], live[:-1])))
        at_node = np.where(collective_mask(self.graph),
                           np.asarray(self.issue, dtype=float), np.asarray(self.start, dtype=float))
        nodes_at = np.asarray(order.order, dtype=np.int64).reshape(n)[changed]
        return list(zip(at_node[nodes_at].tolist(), live[changed].tolist(), strict=True))


def _summed(graph: Graph, order: Schedule, dur: list[float], slowdown: float, *, makespan: float,
            total_compute: float, comm_by_group: dict, exposed: float, slowed: float,
            replay: _Replay | None = None) -> SimResult:
    """The :class:`SimResult` of a replayed order from its totals (``comm_by_group`` in
    order of first issue: the overlap's total adds them in that order), the lower bounds and
    the order's peak memory; the events, collective timings and memory curve from ``replay``
    (None: left empty)."""
    total_comm = sum(comm_by_group.values())
    overlap = 1.0 if total_comm <= 0.0 else min(1.0, max(0.0, 1.0 - exposed / total_comm))
    bounds = lower_bounds(graph, dur, slowdown)
    peak, curve = peak_memory(graph, order)
    return SimResult(
        makespan_us=makespan,
        total_compute_us=total_compute,
        comm_us_by_group=dict(sorted(comm_by_group.items())),
        exposed_comm_us=exposed,
        overlap_ratio=overlap,
        lower_bound_us=bounds.value,
        critical_path_us=bounds.critical_path_us,
        peak_memory_bytes=peak,
        events=replay.events if replay is not None else [],
        collectives=replay._timings() if replay is not None else [],
        memory_curve=replay._memory_curve(order, curve) if replay is not None else [],
        lower_bounds=bounds,
        compute_slowdown=slowdown,
        slowed_compute_us=slowed,
    )


def _wait_first(nodes, i: int) -> InvariantViolation:
    """The error for wait ``i`` replayed before its collective was issued."""
    c = nodes[i].wait_of
    cname = nodes[c].name if c is not None else "?"
    return InvariantViolation(f"wait {nodes[i].name!r} comes before its collective {cname!r} in the order")


def _charge_unwaited(nodes, ins, end, t: float, exposed: list[float]) -> None:
    """Charge idle time up to the latest input to the collective(s) that produced it."""
    latest = max(ins, key=lambda p: (end[p], -p))
    exposed_before = end[latest] - t
    src = latest
    while nodes[src].kind is NodeKind.VIEW and nodes[src].inputs:
        src = max(nodes[src].inputs, key=lambda p: (end[p], -p))
    exposed[src] += exposed_before
