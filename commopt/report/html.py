"""The HTML report: one self-contained file (inline CSS, SVG drawn by a small inline script).

Before and after timelines share one time scale: a compute lane and one lane per process
group (sub-rows where spans overlap), a live-memory curve, hover details, zoom (buttons or
ctrl+wheel) and scrolling. Only the visible window is drawn and spans narrower than a
pixel or two are merged into one aggregate, so 100,000-node graphs stay responsive.
Nothing is fetched from the network and nothing varies between runs (no timestamps), so
re-running gives a byte-identical file.
"""

from __future__ import annotations

import html
import json
import os
from importlib import resources
from typing import Any

from commopt import atomic
from commopt.report import fmt, tables
from commopt.schemas.report import OverlapReport, ScheduleReport

_KIND_CODE = {"compute": 0, "collective": 1, "wait": 2}


def _asset(name: str) -> str:
    return resources.files("commopt.report").joinpath("assets", name).read_text(encoding="utf-8")


def _r(x: float) -> float:
    return round(x, 3)


def report_data(report: OverlapReport) -> dict[str, Any]:
    """The plain data the page's script draws: node table, lanes of flat event arrays."""
    index = {n.name: k for k, n in enumerate(report.nodes)}
    ops = sorted({n.op for n in report.nodes})
    op_index = {op: k for k, op in enumerate(ops)}
    nodes = {
        "name": [n.name for n in report.nodes],
        "op": [op_index[n.op] for n in report.nodes],
        "kind": [_KIND_CODE.get(n.kind, 0) for n in report.nodes],
        "bytes": [n.bytes for n in report.nodes],
        "group": [n.group or "" for n in report.nodes],
    }
    schedules = [report.before] + ([report.after] if report.after is not None else [])
    span_us = max((s.makespan_us for s in schedules), default=0.0) or 1.0
    return {
        "span_us": _r(span_us),
        "mem_peak": max(s.peak_memory_bytes for s in schedules),
        "ops": ops,
        "nodes": nodes,
        "schedules": [_schedule_data(s, index) for s in schedules],
    }


def _schedule_data(s: ScheduleReport, index: dict[str, int]) -> dict[str, Any]:
    by_lane: dict[str, list[float | int]] = {lane.name: [] for lane in s.lanes}
    for e in s.events:  # already sorted by lane, start, step
        by_lane[e.lane].extend((_r(e.start_us), _r(e.end_us), index[e.node], e.row,
                                1 if e.exposed else 0))
    mem: list[float | int] = []
    for p in s.memory_curve:
        mem.extend((_r(p.time_us), p.live_bytes))
    return {
        "label": s.label,
        "makespan_us": _r(s.makespan_us),
        "peak_bytes": s.peak_memory_bytes,
        "lanes": [{"name": lane.name, "rows": lane.rows, "events": lane.events,
                   "ev": by_lane[lane.name]} for lane in s.lanes],
        "mem": mem,
    }


def _json_for_script(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), sort_keys=True)
    # inside <script> only "</" and "<!--" matter; escaping every '<', '>' and '&' is simplest
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _table(headers: list[str], rows: list[list[str]], numeric: tuple[str, ...] = (),
           cls: dict[str, str] | None = None) -> str:
    e = html.escape
    cls = cls or {}

    def attr(h: str) -> str:
        c = "num" if h in numeric else cls.get(h, "")
        return f' class="{c}"' if c else ""

    head = "".join(f"<th{attr(h)}>{e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td{attr(h)}>{e(c)}</td>" for h, c in zip(headers, row, strict=True))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _section(s: ScheduleReport) -> str:
    e = html.escape
    stats = (f"makespan {fmt.us(s.makespan_us)} · exposed communication "
             f"{fmt.us(s.exposed_comm_us)} · overlap {fmt.pct(s.overlap_ratio)} · peak memory "
             f"{fmt.nbytes(s.peak_memory_bytes)} · {sum(lane.events for lane in s.lanes)} spans "
             f"on {len(s.lanes)} lanes")
    return (f'<section class="schedule" id="sched-{e(s.label)}" data-label="{e(s.label)}" '
            f'data-lanes="{len(s.lanes)}">'
            f"<h2>{e(s.label)}</h2><p class=\"sub\">{e(stats)}</p>"
            '<div class="panel"><div class="labels"></div><div class="scroll"></div></div>'
            "</section>")


def render_html(report: OverlapReport) -> str:
    """The complete, self-contained HTML page of ``report``."""
    e = html.escape
    world = report.world_size if report.world_size is not None else "?"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>commopt overlap report: {e(report.graph)}</title>",
        f"<style>{_asset('report.css')}</style></head><body>",
        f"<h1>commopt overlap report: {e(report.graph)}</h1>",
        f'<p class="sub">{report.node_count} nodes, world size {e(str(world))}. Times are '
        f"estimates from the <b>{e(report.estimator)}</b> estimator.</p>",
    ]
    headers, rows = tables.summary_rows(report)
    parts.append(_table(headers, rows, numeric=("before", "after", "change")))
    for note in report.notes:
        parts.append(f'<p class="sub">note: {e(note)}</p>')
    parts.append(
        '<div class="controls"><button id="zoom-out" title="zoom out">&minus;</button>'
        '<button id="zoom-in" title="zoom in (or ctrl + wheel)">+</button>'
        '<button id="zoom-fit">fit</button><span id="zoom">1x</span>'
        '<span class="legend"><span><i style="background:var(--compute)"></i>compute</span>'
        '<span><i style="background:var(--comm)"></i>collective</span>'
        '<span><i style="background:var(--exposed)"></i>exposed wait</span>'
        '<span><i style="background:var(--compute);opacity:.6"></i>short spans, merged (lighter)</span>'
        '<span><i style="background:#6a4fb3"></i>live memory</span></span></div>'
        "<noscript><p>The timelines are drawn by a script; the tables work without it.</p>"
        "</noscript>"
    )
    parts.append(_section(report.before))
    if report.after is not None:
        parts.append(_section(report.after))
    headers, rows = tables.top_rows(report)
    parts.append(f"<h2>Most exposed collectives ({e(report.final.label)})</h2>")
    parts.append(_table(headers, rows, numeric=("#", "bytes", "duration", "exposed"),
                        cls={"why not hidden": "why"}) if rows
                 else "<p>No exposed collectives.</p>")
    headers, rows = tables.group_rows(report)
    if rows:
        parts.append("<h2>Communication by process group</h2>")
        parts.append(_table(headers, rows, numeric=tuple(headers[1:])))
    parts.append('<div id="tip"></div>')
    parts.append('<script type="application/json" id="commopt-data">'
                 + _json_for_script(report_data(report)) + "</script>")
    parts.append(f"<script>{_asset('report.js')}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_html(report: OverlapReport, path: str | os.PathLike[str]) -> None:
    """Write the HTML report to ``path``, atomically."""
    atomic.write_text(path, render_html(report))
