"""Build the :class:`~commopt.schemas.report.OverlapReport` every renderer reads.

``build_report`` simulates (or takes the simulations of) the order before and after a
reorder, turns them into lanes of events, collective timings and a memory curve, and
explains the most exposed collectives of the final schedule. Renderers never look at the
graph again: the report is the whole picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from itertools import compress, repeat
from operator import add, itemgetter, le, not_, sub
from typing import Any

import numpy as np

from commopt.certificate import certify
from commopt.errors import GraphError
from commopt.gc_freeze import collector_paused, freeze_long_lived
from commopt.ir.graph import CollectiveInfo, Graph, Node, NodeKind
from commopt.ir.schedule import Schedule
from commopt.passes._common import node_kinds
from commopt.report.explain import advise, explain_exposed
from commopt.schemas.report import (
    CollectiveReport,
    EventColumns,
    MemoryPoint,
    NodeColumns,
    OverlapReport,
    ReportEvent,
    ScheduleReport,
)
from commopt.schemas.summary import Certificate
from commopt.sim.result import COMPUTE_LANE, SimResult, comm_lane
from commopt.trusted import maker

#: The memory curve keeps at most this many points (each bucket keeps its peak).
MEMORY_POINTS = 4096
#: Collectives whose exposure is explained, worst first.
TOP_EXPOSED = 10
#: Also explained: this many of the most exposed collectives of each group, so every group's
#: exposed time has causes.
TOP_PER_GROUP = 3
#: Label of the schedule of a report that shows only one.
SINGLE_LABEL = "schedule"

_HIDDEN_KINDS = (NodeKind.INPUT, NodeKind.OUTPUT, NodeKind.VIEW)
#: A lane's timeline spans as a schedule is built from them, by start and step: their
#: starts, steps, ends, node names and whether each is an exposed wait.
_LaneSpans = tuple[list[float], list[int], list[float], list[str], list[bool]]
_KIND_LABEL = {k: k.label for k in NodeKind}
# the report's many rows are valid by construction (every value converted here)
_collective = maker(CollectiveReport)
_memory_point = maker(MemoryPoint)


# the report is 100,000s of small objects that all live on: no collection scans them while
# they are built, and inside a command they are frozen before the collector resumes
@collector_paused()
def build_report(
    graph: Graph,
    before_order: Sequence[int],
    after_order: Sequence[int] | None,
    durations_us: Sequence[float],
    *,
    estimator_name: str,
    before_sim: SimResult | None = None,
    after_sim: SimResult | None = None,
    top: int = TOP_EXPOSED,
    memory_budget_bytes: int | None = None,
    notes: Sequence[str] = (),
    optimized: bool | None = None,
    certificate: Certificate | None = None,
    data_dependent: Any = None,
    footprint: Any = None,
    robustness: Any = None,
    before_graph: Graph | None = None,
    before_durations_us: Sequence[float] | None = None,
) -> OverlapReport:
    """The overlap report of ``graph`` in ``before_order`` and, when given, ``after_order``.

    ``durations_us`` holds one estimate per node (from the estimator chain named
    ``estimator_name``). Simulations are run with :func:`commopt.sim.simulate` unless passed
    in (the optimize command already has them). ``top`` collectives of the final schedule,
    most exposed first, get reasons (:mod:`commopt.report.explain`), and so do the worst
    :data:`TOP_PER_GROUP` of each group.

    The schedules are labelled ``before`` and ``after``, or ``schedule`` when there is only
    one. ``optimized`` says whether the final order is already a reordering (commopt's output
    or a reordered file); by default it is when ``after_order`` is given. An optimized order
    is never advised to be reordered (:func:`commopt.report.explain.advise`).
    ``certificate``: the final schedule's (:func:`commopt.certificate.certify`; by default
    from the cheap bounds of its simulation).
    ``data_dependent`` (a :class:`~commopt.schemas.summary.DataDependentSizes`) states the
    values assumed for data-dependent sizes; every renderer shows it next to the numbers.
    ``footprint`` (a :class:`~commopt.schemas.summary.MemoryFootprint`) and ``robustness``
    (a :class:`~commopt.schemas.summary.Robustness`) are the summary's entries, shown beside
    the peak memory and the makespan. ``before_graph`` (with ``before_durations_us``): the
    program ``before_order`` orders when a pass rewrote it into ``graph`` (bucketing); the
    report's nodes are then those of both programs, by name.
    """
    n = len(graph)
    if len(durations_us) != n:
        raise ValueError(f"durations_us has {len(durations_us)} entries for {n} nodes")
    g0 = graph if before_graph is None else before_graph
    d0 = durations_us if before_durations_us is None else before_durations_us
    before_order = Schedule.of(g0, before_order)
    if after_order is not None:
        after_order = Schedule.of(graph, after_order)
    if before_sim is None:
        before_sim = _simulate(g0, before_order, d0)
    if after_order is not None and after_sim is None:
        after_sim = _simulate(graph, after_order, durations_us)
    # each schedule is validated as soon as it is complete (the final one once its top
    # collectives are explained): one schedule's plain data is alive at a time, not both
    before = _schedule(g0, before_order, before_sim,
                       "before" if after_order is not None else SINGLE_LABEL)
    if after_order is None:
        after = None
        final_sim = before_sim
        top_names = _explain_top(graph, before, before_order, before_sim, durations_us, top,
                                 memory_budget_bytes)
        before = _validated(before)
    else:
        before = _validated(before)
        after = _schedule(graph, after_order, after_sim, "after")
        final_sim = after_sim
        top_names = _explain_top(graph, after, after_order, after_sim, durations_us, top,
                                 memory_budget_bytes)
        after = _validated(after)
    if optimized is None:
        optimized = after_order is not None
    advice = [a.model_dump() for a in advise(graph, durations_us, final_sim, optimized=optimized)]
    if after is None:
        node_columns = _node_columns(g0, d0, _shown(g0, [before_sim]))
    elif g0 is graph:  # one program: its nodes are described once
        node_columns = _node_columns(graph, durations_us, _shown(graph, [before_sim, after_sim]))
    else:
        node_columns = _merged(g0, d0, _shown(g0, [before_sim]),
                               graph, durations_us, _shown(graph, [after_sim]))
    # the schedules and nodes are models already and are taken as they are
    report = OverlapReport.model_validate({
        "graph": graph.name,
        "source": graph.source_path,
        "node_count": n,
        "world_size": graph.world_size,
        "estimator": estimator_name,
        "groups": [
            {"name": g.name, "size": g.size, "ranks": list(g.ranks) if g.ranks is not None else None,
             "mesh_dim": g.mesh_dim}
            for g in sorted(graph.groups.values(), key=lambda g: g.name)
        ],
        "nodes": NodeColumns(node_columns),
        "before": before,
        "after": after,
        "top_exposed": top_names,
        "advice": advice,
        "notes": list(notes),
        "certificate": certificate if certificate is not None else certify(final_sim),
        "data_dependent": data_dependent.model_dump() if data_dependent is not None else None,
        "footprint": footprint.model_dump() if footprint is not None else None,
        "robustness": robustness.model_dump() if robustness is not None else None,
    })
    freeze_long_lived()  # the renderers read it next
    return report


def _shown(graph: Graph, sims: Sequence[SimResult]) -> list[int]:
    """The nodes the timelines of ``sims`` show (their spans, collectives and the waits of
    those), in index order."""
    used = np.zeros(len(graph), dtype=bool)
    waits_of = graph.waits_of
    for sim in sims:
        used[[ev.node for ev in sim.events]] = True
        used[[t.node for t in sim.collectives]] = True
        used[[w for t in sim.collectives for w in waits_of(t.node)]] = True
    return np.flatnonzero(used).tolist()


def _node_columns(graph: Graph, durations_us: Sequence[float],
                  shown: list[int]) -> dict[str, list[Any]]:
    """The report's node columns (:class:`NodeInfo`'s fields) of ``graph``'s nodes
    ``shown``, in that order, a column at a time."""
    all_nodes = graph.nodes
    nodes = list(map(all_nodes.__getitem__, shown))
    colls = [node.collective for node in nodes]
    wait_kind = NodeKind.WAIT
    # a wait is described by its collective's group and type
    owners = [c if c is not None or node.wait_of is None else all_nodes[node.wait_of].collective
              for node, c in zip(nodes, colls, strict=True)]
    columns = {
        "name": [node.name for node in nodes],
        "op": [node.op for node in nodes],
        "kind": [_KIND_LABEL[node.kind] for node in nodes],
        "duration_us": [0.0 if node.kind is wait_kind else float(durations_us[i])
                        for node, i in zip(nodes, shown, strict=True)],
        "bytes": _node_bytes(nodes, colls),
        "group": [c.group if c is not None else None for c in owners],
        "collective_type": [c.type if c is not None else None for c in owners],
    }
    return columns


def _node_bytes(nodes: list[Node], colls: list[CollectiveInfo | None]) -> list[int]:
    """The bytes of each node: a collective's message size (``colls``: each node's), else
    what it produces, computed once per tuple of outputs (loaders share one among the nodes
    that look alike: a handful per graph)."""
    produced: dict[int, int] = {}
    out: list[int] = []
    for node, c in zip(nodes, colls, strict=True):
        if c is not None:
            out.append(int(c.bytes))
        else:
            size = produced.get(id(node.outputs))
            if size is None:
                size = produced[id(node.outputs)] = int(node.nbytes)
            out.append(size)
    return out


def _merged(first: Graph, first_durations_us: Sequence[float], first_shown: list[int],
            second: Graph, second_durations_us: Sequence[float],
            second_shown: list[int]) -> dict[str, list[Any]]:
    """The node columns of the nodes ``first_shown`` of ``first`` and ``second_shown`` of
    ``second``, by name: a node of both reads as in ``second``, at its place in ``first``;
    the others of ``second`` follow, in their order. Each node is described once."""
    at_second = {second.nodes[i].name: k for k, i in enumerate(second_shown)}
    first_nodes = first.nodes
    firsts = [at_second.get(first_nodes[i].name) for i in first_shown]
    only_first = [i for i, k in zip(first_shown, firsts, strict=True) if k is None]
    # rows numbered as in first's own columns followed by second's
    base = len(only_first)
    own = iter(range(base))
    rows = [next(own) if k is None else base + k for k in firsts]
    in_first = bytearray(len(second_shown))
    for k in firsts:
        if k is not None:
            in_first[k] = 1
    rows += [base + k for k in range(len(second_shown)) if not in_first[k]]
    a = _node_columns(first, first_durations_us, only_first)
    b = _node_columns(second, second_durations_us, second_shown)
    return {name: list(map((a[name] + b[name]).__getitem__, rows)) for name in a}


def match_order(graph: Graph, reordered: Graph, *, file: str | None = None) -> list[int]:
    """The order of ``graph``'s nodes as they appear in ``reordered`` (matched by name).

    Both graphs must hold the same node names; anything else is a user error naming the
    first node that does not match.
    """
    order: list[int] = []
    seen = bytearray(len(graph))
    for node in reordered.nodes:
        i = graph.index_of.get(node.name)
        if i is None:
            raise GraphError("node is not in the original graph", file=file, node=node.name)
        if graph.nodes[i].op != node.op:
            raise GraphError(
                f"op {node.op!r} differs from the original's {graph.nodes[i].op!r}",
                file=file, node=node.name, field="op",
            )
        seen[i] = 1
        order.append(i)
    if len(order) != len(graph):
        missing = next(nd.name for nd in graph.nodes if not seen[nd.index])
        raise GraphError("node of the original graph is missing from the reordered one",
                         file=file, node=missing)
    return order


def _simulate(graph: Graph, order: Sequence[int], durations_us: Sequence[float]) -> SimResult:
    from commopt.sim import simulate

    return simulate(graph, list(order), list(durations_us))


def _schedule(graph: Graph, order: Schedule, sim: SimResult, label: str) -> dict[str, Any]:
    """The data of one schedule: its events and memory curve as models, its collectives
    as plain data their reasons are added to (:func:`_validated` makes the model)."""
    by_lane = _spans_by_lane(graph, order, sim)
    colls = _collectives(graph, order, sim)
    coll_groups = {c["group"] for c in colls}
    lane_names = [COMPUTE_LANE] + sorted(
        {comm_lane(g) for g in graph.groups if g in coll_groups} | by_lane.keys() - {COMPUTE_LANE}
    )
    lanes, events = _lanes(lane_names, by_lane)
    return {
        "label": label,
        "makespan_us": sim.makespan_us,
        "total_compute_us": sim.total_compute_us,
        "total_comm_us": sim.total_comm_us,
        "comm_us_by_group": dict(sorted(sim.comm_us_by_group.items())),
        "exposed_comm_us": sim.exposed_comm_us,
        "overlap_ratio": sim.overlap_ratio,
        "lower_bound_us": sim.lower_bound_us,
        "critical_path_us": sim.critical_path_us,
        "peak_memory_bytes": sim.peak_memory_bytes,
        "lanes": lanes,
        "events": events,
        "collectives": colls,
        "memory_curve": [_memory_point({"time_us": float(t), "live_bytes": int(b)})
                         for t, b in downsample_peaks(sim.memory_curve, MEMORY_POINTS)],
    }


def _validated(schedule: dict[str, Any]) -> ScheduleReport:
    """The model of a schedule from :func:`_schedule` once its collectives' reasons are in."""
    schedule["collectives"] = [_collective(c) for c in schedule["collectives"]]
    return ScheduleReport.model_validate(schedule)


def _spans_by_lane(graph: Graph, order: Schedule, sim: SimResult) -> dict[str, _LaneSpans]:
    """The timeline's spans of each lane that has any, as columns, each lane's by start and
    step (inputs, outputs and views are not shown)."""
    if not sim.events:
        return {}
    # SimEvent's fields, a column each
    node_of, lane_of, start_of, end_of = (list(map(itemgetter(k), sim.events)) for k in range(4))
    nodes = graph.nodes
    node = np.array(node_of, dtype=np.int64)
    kinds = node_kinds(graph)[node]
    shown = ~np.isin(kinds, _HIDDEN_KINDS)
    # a wait's span is the compute stream idle on communication
    exposed = kinds == NodeKind.WAIT
    step = np.array(order.positions, dtype=np.int64)[node]
    start = np.array(start_of, dtype=np.float64)
    end = np.array(end_of, dtype=np.float64)
    lanes = sorted(set(lane_of))
    code = dict(zip(lanes, range(len(lanes)), strict=True))
    lane = np.fromiter(map(code.__getitem__, lane_of), dtype=np.int64, count=len(lane_of))
    by_lane: dict[str, _LaneSpans] = {}
    for k, name in enumerate(lanes):
        on = np.flatnonzero((lane == k) & shown)
        if len(on):
            on = on[np.lexsort((end[on], step[on], start[on]))]
            at = node[on].tolist()
            spans = on.tolist()
            # the simulation's own numbers (the report keeps them: no copies made here)
            by_lane[name] = (list(map(float, map(start_of.__getitem__, spans))),
                             step[on].tolist(),
                             list(map(float, map(end_of.__getitem__, spans))),
                             [nodes[i].name for i in at], exposed[on].tolist())
    return by_lane


def _collectives(graph: Graph, order: Schedule, sim: SimResult) -> list[dict[str, Any]]:
    """The plain data of each collective's timing, in the schedule's order."""
    nodes = graph.nodes
    pos = order.positions
    colls: list[dict[str, Any]] = []
    for t in sorted(sim.collectives, key=lambda t: pos[t.node]):
        node = nodes[t.node]
        info = node.collective
        waits = graph.waits_of(t.node)
        if len(waits) > 1:  # coalesced
            waits = sorted(waits, key=pos.__getitem__)
        wait = t.wait_node if t.wait_node is not None else (waits[0] if waits else None)
        colls.append({
            "node": node.name,
            "group": t.group,
            "type": info.type if info is not None else "unknown",
            "bytes": int(info.bytes if info is not None else node.nbytes),
            "issue_step": pos[t.node],
            "wait_step": pos[wait] if wait is not None else None,
            "issue_us": float(t.issue_us),
            "start_us": float(t.start_us),
            "end_us": float(t.end_us),
            "wait": nodes[wait].name if wait is not None else None,
            "waits": [nodes[w].name for w in waits],
            "wait_start_us": float(t.wait_start_us) if t.wait_start_us is not None else None,
            "exposed_us": float(t.exposed_us),
            "reasons": [],
        })
    return colls


def _lanes(lane_names: list[str],
           by_lane: dict[str, _LaneSpans]) -> tuple[list[dict[str, Any]], EventColumns]:
    """The plain data of the lanes named ``lane_names`` and their events, lane by lane, each
    lane's by start and step: a span goes to the first row of its lane free by then."""
    lanes: list[dict[str, Any]] = []
    columns: dict[str, list[Any]] = {name: [] for name in ReportEvent.model_fields}
    count = 0
    for lane in lane_names:
        spans = by_lane.get(lane)
        if spans is not None:
            starts, steps, ends, names, exposed = spans
            count = len(starts)
            rows, row_count = _rows(starts, ends)
            # summed in span order, as the timeline adds them up
            busy = reduce(add, compress(map(sub, ends, starts), map(not_, exposed)), 0.0)
            for name, values in (("node", names), ("lane", [lane] * count), ("row", rows),
                                 ("step", steps), ("start_us", starts), ("end_us", ends),
                                 ("exposed", exposed)):
                columns[name] += values
        else:
            count, row_count, busy = 0, 0, 0.0
        group = None if lane == COMPUTE_LANE else lane.split(":", 1)[1]
        lanes.append({"name": lane, "group": group, "rows": max(1, row_count),
                      "events": count, "busy_us": busy})
    return lanes, EventColumns(columns)


#: Spans closer than this (microseconds) do not overlap: float noise of the simulation.
_ROW_EPS = 1e-9


def _rows(starts: Sequence[float], ends: Sequence[float]) -> tuple[list[int], int]:
    """The sub-row of each span of one lane (by start, then step) and how many rows there
    are: each span goes to the first row free by its start."""
    # the common case, a lane whose spans never overlap: one row
    if all(map(le, ends, map(add, starts[1:], repeat(_ROW_EPS)))):
        return [0] * len(starts), 1
    row_ends: list[float] = []
    rows: list[int] = []
    for start, end in zip(starts, ends, strict=True):
        row = next((k for k, e in enumerate(row_ends) if e <= start + _ROW_EPS), len(row_ends))
        if row == len(row_ends):
            row_ends.append(end)
        else:
            row_ends[row] = end
        rows.append(row)
    return rows, len(row_ends)


def downsample_peaks(points: Sequence[tuple[float, int]], limit: int) -> list[tuple[float, int]]:
    """At most ``limit`` points of a step curve: the first, the last and each bucket's peak."""
    if len(points) <= limit:
        return list(points)
    inner = limit - 2
    out = [points[0]]
    n = len(points) - 2
    for b in range(inner):
        lo = 1 + b * n // inner
        hi = 1 + (b + 1) * n // inner
        if hi > lo:
            out.append(max(points[lo:hi], key=lambda p: p[1]))
    out.append(points[-1])
    return out


def _explain_top(graph: Graph, final: dict[str, Any], order: Sequence[int], sim: SimResult,
                 durations_us: Sequence[float], top: int, budget: int | None) -> list[str]:
    exposed = [c for c in final["collectives"] if c["exposed_us"] > 0]
    exposed.sort(key=lambda c: (-c["exposed_us"], c["issue_step"]))
    names = [c["node"] for c in exposed[:top]]
    per_group: dict[str, int] = {}
    chosen = []
    for k, c in enumerate(exposed):
        seen = per_group.get(c["group"], 0)
        per_group[c["group"]] = seen + 1
        if k < top or seen < TOP_PER_GROUP:
            chosen.append(c)
    timing_of = {t.node: t for t in sim.collectives}
    timings = [timing_of[graph.index_of[c["node"]]] for c in chosen]
    explained = explain_exposed(graph, order, durations_us, timings, sim,
                                memory_budget_bytes=budget)
    for c, reasons in zip(chosen, explained, strict=True):
        c["reasons"] = list(reasons)
    return names


def write_json(report: OverlapReport, path) -> None:
    """Write the report as indented JSON (the ``OverlapReport`` schema), atomically."""
    from commopt import atomic

    atomic.write_text(path, report.model_dump_json(indent=2) + "\n")
