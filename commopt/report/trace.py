"""Chrome trace-event JSON of the report, for Perfetto and chrome://tracing.

Each schedule is a process (``pid`` 1 and, with a second schedule, 2) with one thread per
lane: the compute stream, then one communication stream per process group, named by its
mesh dimension and size (``tp (4 ranks)``; the c10d name is in the ``thread_name`` event's
args). A lane whose spans overlap gets a thread per sub-row so slices nest. Slices are
complete events (``"ph": "X"``) carrying op, bytes and group, plus a live-memory counter.

Times are microseconds, as the format expects, on a 1 ns grid: every start and end is
rounded once to whole nanoseconds and ``dur`` is the difference of the rounded end and
start, so back-to-back slices on one track touch exactly and never overlap (Perfetto drops a
slice that partially overlaps its neighbour). Slice ends are computed from rounded starts.

Every collective is linked to its issue point and its wait by one flow (Chrome's flow
events v2: ``bind_id`` with ``flow_out`` / ``flow_in`` on the slices themselves): a
zero-length ``issue`` slice on the compute track, the collective's slice on its group's
track, then its wait (the exposed wait slice, or a zero-length ``wait (hidden)`` slice where
the collective had finished in time). Clicking a wait in Perfetto follows the arrow to the
collective it waits for.

The trace is checked structurally by the tests (``tests/report/test_trace.py``); loading it
in Perfetto's own trace processor (the ``perfetto`` pip package) is not part of them, since
that package downloads its binary at run time.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from commopt import atomic
from commopt.report import tables
from commopt.schemas.report import NodeInfo, OverlapReport, ScheduleReport

MEMORY_COUNTER = "live memory"
#: Category of the zero-length slices that mark an issue and a wait that did not block.
ISSUE_CAT = "issue"
HIDDEN_WAIT_CAT = "wait (hidden)"
EXPOSED_WAIT_CAT = "exposed wait"


def _ns(us: float) -> int:
    """A time in microseconds on the trace's 1 ns grid."""
    return round(us * 1000.0)


def _us(ns: int) -> float | int:
    """Whole nanoseconds as microseconds with at most three decimals (ints stay ints)."""
    return ns // 1000 if ns % 1000 == 0 else ns / 1000


class _Track:
    """Slices of one thread, kept as (start, end) in ns, for placing zero-length markers."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def snap(self, t: int) -> int:
        """``t`` moved to the nearer edge of a slice it falls strictly inside, if any.

        Markers sit on a boundary between two steps of the compute stream; rounding noise
        of a nanosecond must not put one inside a neighbouring slice.
        """
        k = bisect.bisect_right(self.starts, t) - 1
        if k >= 0 and self.starts[k] < t < self.ends[k]:
            return self.starts[k] if t - self.starts[k] <= self.ends[k] - t else self.ends[k]
        return t


def _schedule_events(report: OverlapReport, s: ScheduleReport, pid: int,
                     info: dict[str, NodeInfo], flow_base: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
         "args": {"name": f"{s.label}: {report.graph}"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
         "args": {"sort_index": pid}},
    ]
    titles = tables.lane_titles(report)
    tids: dict[tuple[str, int], int] = {}
    for lane in s.lanes:
        title = titles.get(lane.name, lane.name)
        for row in range(lane.rows):
            tid = len(tids) + 1
            tids[(lane.name, row)] = tid
            args: dict[str, Any] = {"name": title if row == 0 else f"{title} #{row + 1}"}
            if lane.group is not None:
                args["c10d_group"] = lane.group
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": args})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                        "args": {"sort_index": tid}})
    coll = {c.node: c for c in s.collectives}
    flow_of = {c.node: flow_base + k for k, c in enumerate(s.collectives)}
    exposed_at = {e.node for e in s.events if e.exposed}
    # a flow ends at the collective's first exposed wait, else at its first wait (a marker)
    wait_flow: dict[str, int] = {}
    for c in s.collectives:
        hit = next((w for w in c.waits if w in exposed_at), None)
        if hit is not None:
            wait_flow[hit] = flow_of[c.node]
    base: dict[str, dict[str, Any]] = {}  # the per-node part of every event's args
    for e in s.events:
        if e.node in base:
            continue
        node = info[e.node]
        args = {"op": node.op, "bytes": node.bytes}
        if node.group is not None:
            args["group"] = node.group
        if node.collective_type is not None:
            args["type"] = node.collective_type
        c = coll.get(e.node)
        if c is not None:
            args["issue_us"] = round(c.issue_us, 3)
            args["exposed_us"] = round(c.exposed_us, 3)
        base[e.node] = args
    compute_tid = tids.get(("compute", 0), 1)
    compute = _Track()
    slices: list[dict[str, Any]] = []
    for e in s.events:
        args = dict(base[e.node])
        args["step"] = e.step
        start = _ns(e.start_us)
        end = max(start, _ns(e.end_us))
        if e.exposed:
            args["exposed_us"] = _us(end - start)
        tid = tids[(e.lane, e.row)]
        ev = {"name": e.node, "cat": EXPOSED_WAIT_CAT if e.exposed else info[e.node].kind,
              "ph": "X", "ts": _us(start), "dur": _us(end - start),
              "pid": pid, "tid": tid, "args": args}
        if e.node in flow_of:  # the collective: the middle of its flow
            ev.update(bind_id=flow_of[e.node], flow_in=True, flow_out=True)
        elif e.node in wait_flow:
            ev.update(bind_id=wait_flow[e.node], flow_in=True)
        if tid == compute_tid:
            compute.starts.append(start)
            compute.ends.append(end)
        slices.append(ev)
    order = sorted(range(len(compute.starts)), key=compute.starts.__getitem__)
    compute.starts = [compute.starts[k] for k in order]
    compute.ends = [compute.ends[k] for k in order]
    markers: list[dict[str, Any]] = []
    for c in s.collectives:
        t = compute.snap(_ns(c.issue_us))
        markers.append({"name": f"issue {c.node}", "cat": ISSUE_CAT, "ph": "X", "ts": _us(t),
                        "dur": 0, "pid": pid, "tid": compute_tid,
                        "args": {"collective": c.node, "group": c.group, "step": c.issue_step},
                        "bind_id": flow_of[c.node], "flow_out": True})
        if c.wait is not None and not any(w in wait_flow for w in c.waits):
            when = c.wait_start_us if c.wait_start_us is not None else c.end_us
            t = compute.snap(_ns(when))
            markers.append({"name": c.wait, "cat": HIDDEN_WAIT_CAT, "ph": "X", "ts": _us(t),
                            "dur": 0, "pid": pid, "tid": compute_tid,
                            "args": {"collective": c.node, "group": c.group,
                                     "step": c.wait_step, "exposed_us": 0},
                            "bind_id": flow_of[c.node], "flow_in": True})
    # zero-length markers first among slices starting at the same time, so a viewer that
    # keeps file order for equal timestamps never nests a marker inside the next slice
    slices += markers
    slices.sort(key=lambda ev: (ev["tid"], ev["ts"], ev["dur"] != 0))
    out += slices
    for p in s.memory_curve:
        out.append({"name": MEMORY_COUNTER, "ph": "C", "ts": _us(_ns(p.time_us)), "pid": pid,
                    "tid": 0, "args": {"bytes": p.live_bytes}})
    return out


def render_trace(report: OverlapReport) -> dict[str, Any]:
    """The trace-event document: ``traceEvents`` plus ``displayTimeUnit`` and ``otherData``."""
    events = [ev for part in _event_parts(report) for ev in part]
    return {**_head(report), "traceEvents": events}


def _head(report: OverlapReport) -> dict[str, Any]:
    return {
        "displayTimeUnit": "ms",
        "otherData": {"generator": "commopt", "graph": report.graph,
                      "estimator": report.estimator, "times": "simulated estimates"},
    }


def _event_parts(report: OverlapReport) -> Iterator[list[dict[str, Any]]]:
    """The trace's events, one list per schedule (a writer holds one schedule's at a time)."""
    info = {n.name: n for n in report.nodes}
    yield _schedule_events(report, report.before, 1, info, 1)
    if report.after is not None:
        yield _schedule_events(report, report.after, 2, info, 1 + len(report.before.collectives))


#: One encoder for every event line (``json.dumps`` with options builds one per call).
_encode_event = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _trace_chunks(head: dict[str, Any], parts: Iterable[list[dict[str, Any]]]) -> Iterator[str]:
    """The trace file's text in pieces: the head, then one event per line."""
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False, sort_keys=True)},")
    lines.append('"traceEvents": [')
    yield "\n".join(lines)
    first = True
    for events in parts:
        if events:
            body = ",\n".join(map(_encode_event, events))
            yield ("\n" if first else ",\n") + body
            first = False
    yield "\n]}\n"


def dumps_trace(doc: dict[str, Any]) -> str:
    """Serialize a trace deterministically, one event per line (diffable, streamable)."""
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    return "".join(_trace_chunks(head, [doc["traceEvents"]]))


def write_trace(report: OverlapReport, path: str | os.PathLike[str]) -> None:
    """Write the Chrome trace JSON of ``report`` to ``path``, atomically; streamed one
    schedule at a time, so the whole document is never held as one string."""
    atomic.write_chunks(path, _trace_chunks(_head(report), _event_parts(report)))
