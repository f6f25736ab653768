"""Chrome trace-event JSON of the report, for Perfetto and chrome://tracing.

Each schedule is a process (``pid`` 1 before, 2 after) with one thread per lane (the compute
stream, one communication stream per process group; a lane whose spans overlap gets a
thread per sub-row so slices nest), complete events (``"ph": "X"``) carrying op, bytes and
group, and a live-memory counter track. Times are microseconds, as the format expects.
"""

from __future__ import annotations

import json
import os
from typing import Any

from commopt import atomic
from commopt.schemas.report import NodeInfo, OverlapReport, ScheduleReport

MEMORY_COUNTER = "live memory"


def _r(x: float) -> float:
    return round(x, 3)


def _schedule_events(report: OverlapReport, s: ScheduleReport, pid: int,
                     info: dict[str, NodeInfo]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
         "args": {"name": f"{s.label}: {report.graph}"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
         "args": {"sort_index": pid}},
    ]
    tids: dict[tuple[str, int], int] = {}
    for lane in s.lanes:
        for row in range(lane.rows):
            tid = len(tids) + 1
            tids[(lane.name, row)] = tid
            name = lane.name if row == 0 else f"{lane.name} #{row + 1}"
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                        "args": {"name": name}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                        "args": {"sort_index": tid}})
    coll = {c.node: c for c in s.collectives}
    base: dict[str, dict[str, Any]] = {}  # the per-node part of every event's args
    for e in s.events:
        if e.node in base:
            continue
        node = info[e.node]
        args: dict[str, Any] = {"op": node.op, "bytes": node.bytes}
        if node.group is not None:
            args["group"] = node.group
        if node.collective_type is not None:
            args["type"] = node.collective_type
        c = coll.get(e.node)
        if c is not None:
            args["issue_us"] = round(c.issue_us, 3)
            args["exposed_us"] = round(c.exposed_us, 3)
        base[e.node] = args
    for e in s.events:
        args = dict(base[e.node])
        args["step"] = e.step
        dur = round(e.end_us - e.start_us, 3)
        if e.exposed:
            args["exposed_us"] = dur
        out.append({
            "name": e.node, "cat": "exposed wait" if e.exposed else info[e.node].kind, "ph": "X",
            "ts": round(e.start_us, 3), "dur": dur,
            "pid": pid, "tid": tids[(e.lane, e.row)], "args": args,
        })
    for p in s.memory_curve:
        out.append({"name": MEMORY_COUNTER, "ph": "C", "ts": _r(p.time_us), "pid": pid,
                    "tid": 0, "args": {"bytes": p.live_bytes}})
    return out


def render_trace(report: OverlapReport) -> dict[str, Any]:
    """The trace-event document: ``traceEvents`` plus ``displayTimeUnit`` and ``otherData``."""
    info = {n.name: n for n in report.nodes}
    events = _schedule_events(report, report.before, 1, info)
    if report.after is not None:
        events += _schedule_events(report, report.after, 2, info)
    return {
        "displayTimeUnit": "ms",
        "otherData": {"generator": "commopt", "graph": report.graph,
                      "estimator": report.estimator, "times": "simulated estimates"},
        "traceEvents": events,
    }


def dumps_trace(doc: dict[str, Any]) -> str:
    """Serialize a trace deterministically, one event per line (diffable, streamable)."""
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False, sort_keys=True)},")
    events = doc["traceEvents"]
    lines.append('"traceEvents": [')
    for k, ev in enumerate(events):
        sep = "," if k + 1 < len(events) else ""
        lines.append(json.dumps(ev, ensure_ascii=False, separators=(",", ":")) + sep)
    lines.append("]}")
    return "\n".join(lines) + "\n"


def write_trace(report: OverlapReport, path: str | os.PathLike[str]) -> None:
    """Write the Chrome trace JSON of ``report`` to ``path``, atomically."""
    atomic.write_text(path, dumps_trace(render_trace(report)))
