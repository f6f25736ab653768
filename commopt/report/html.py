"""The HTML report: one self-contained file (inline CSS, SVG drawn by a small inline script).

Before and after timelines (or the one schedule) share one time scale: a compute lane and one
lane per process group, named by mesh dimension and size (sub-rows where spans overlap), a
live-memory curve with a byte scale, hover details, and zoom and pan down to single nodes
(buttons, ctrl+wheel, drag to pan, double-click a span or find a node by name). Hovering a
collective highlights its wait and draws the link issue -> collective -> wait; hovering an
exposed wait does the same for its collective. Only the visible window is drawn and spans
narrower than a pixel or two are merged into one aggregate; far out, a lane of many spans is
drawn from bins summed once when the page loads (levels, each twice as coarse as the one
below), so a view costs what its pixels cost, not what the graph's spans do (100,000-node
graphs stay responsive). A glossary explains the terms (exposed, overlap, lower bound, makespan).
Nothing is fetched from the network and nothing varies between runs (no timestamps), so
re-running gives a byte-identical file.
"""

from __future__ import annotations

import functools
import html
import json
import os
from collections.abc import Iterator
from importlib import resources
from itertools import compress, pairwise, repeat
from operator import add, attrgetter, ne
from typing import Any

import numpy as np

from commopt import atomic
from commopt.report import fmt, tables
from commopt.schemas.report import OverlapReport, ScheduleReport

_KIND_CODE = {"compute": 0, "collective": 1, "wait": 2}


def _asset(name: str) -> str:
    return resources.files("commopt.report").joinpath("assets", name).read_text(encoding="utf-8")


def _r(x: float) -> float:
    return round(x, 3)


#: The glossary at the end of the page: (term, what it means).
GLOSSARY = [
    ("makespan", "the simulated time from the first operation to the last, on any stream: "
                 "one step of the program."),
    ("exposed", "communication the compute stream waits for: the time a wait blocks because "
                "its collective has not finished (red on the timeline)."),
    ("overlap", "the share of communication time hidden behind compute (100% when every "
                "collective finishes before its wait)."),
    ("lower bound", "no order can finish sooner: the largest of total compute, the busiest "
                    "group's communication, the critical path of the graph, and the compute "
                    "and group streams with the time that must pass before and after each "
                    "of their operations (or the exact solver's proven bound, where it ran)."),
    ("issue / wait", "a collective starts on its group's stream when issued (if the stream is "
                     "free) and the compute stream blocks at its wait until it has finished."),
]


def report_data(report: OverlapReport) -> dict[str, Any]:
    """The plain data the page's script draws: node table, lanes of flat event arrays,
    each schedule's collective-to-wait links (the JSON :func:`render_html` embeds, read
    back)."""
    return json.loads(_data_json(report))


class _Json:
    """JSON text :func:`_encode` writes as it is (a large array encoded beforehand)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


#: ``json.dumps`` as the page's data is written: ASCII, compact, keys sorted.
_dumps = functools.partial(json.dumps, ensure_ascii=True, separators=(",", ":"),
                           sort_keys=True)


def _encode(value: Any, out: list[str]) -> None:
    """Append to ``out`` the pieces of the text :func:`_dumps` gives for ``value``, with each
    :class:`_Json` in it (a value of a dict, or in a list of dicts) written as its text: the
    large arrays are joined once, at the end, not copied into each enclosing object's text."""
    if isinstance(value, _Json):
        out.append(value.text)
    elif isinstance(value, dict):
        sep = "{"
        for k in sorted(value):
            out.append(f"{sep}{_dumps(k)}:")
            _encode(value[k], out)
            sep = ","
        out.append("}" if sep == "," else "{}")
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        sep = "["
        for item in value:
            out.append(sep)
            _encode(item, out)
            sep = ","
        out.append("]")
    else:
        out.append(_dumps(value))


def _data_json(report: OverlapReport) -> str:
    """The JSON text of the data the page's script draws (:func:`report_data`)."""
    cols = report.nodes.columns
    index = dict(zip(cols["name"], range(len(cols["name"])), strict=True))
    ops = sorted(set(cols["op"]))
    op_index = {op: k for k, op in enumerate(ops)}
    nodes = {
        "name": list(cols["name"]),
        "op": list(map(op_index.__getitem__, cols["op"])),
        "kind": list(map(_KIND_CODE.get, cols["kind"], repeat(0))),
        "bytes": list(cols["bytes"]),
        "group": [group or "" for group in cols["group"]],
    }
    schedules = [report.before] + ([report.after] if report.after is not None else [])
    titles = tables.lane_titles(report)
    span_us = max((s.makespan_us for s in schedules), default=0.0) or 1.0
    out: list[str] = []
    _encode({
        "span_us": _r(span_us),
        "mem_peak": max(s.peak_memory_bytes for s in schedules),
        "ops": ops,
        "nodes": nodes,
        "schedules": [_schedule_data(s, index, titles) for s in schedules],
    }, out)
    return "".join(out)


def _schedule_data(s: ScheduleReport, index: dict[str, int],
                   titles: dict[str, str]) -> dict[str, Any]:
    cols = s.events.columns
    names = cols["node"]
    # an event in a lane's array: start, end (ms-rounded JSON floats), node index, row,
    # exposed (0/1)
    events, at = fmt.number_rows([
        (fmt.MS, cols["start_us"]), (fmt.MS, cols["end_us"]),
        (fmt.INT, np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))),
        (fmt.INT, cols["row"]), (fmt.INT, cols["exposed"])])
    by_lane: dict[str, _Json] = {lane.name: _Json("[]") for lane in s.lanes}
    lanes = cols["lane"]  # the events are sorted by lane, start, step
    runs = [0, *compress(range(1, len(lanes)), map(ne, lanes[1:], lanes)), len(lanes)] if lanes else []
    for start, end in pairwise(runs):
        by_lane[lanes[start]] = _Json("[" + events[at[start]:at[end] - 1] + "]")
    mem = _Json("[" + fmt.number_rows([(fmt.MS, [p.time_us for p in s.memory_curve]),
                                       (fmt.INT, [p.live_bytes for p in s.memory_curve])])[0][:-1]
                + "]")
    colls = s.collectives
    coll_names = list(map(attrgetter("node"), colls))
    waits = list(map(attrgetter("wait"), colls))
    wait_times = list(map(attrgetter("wait_start_us"), colls))
    blocking = tables.blocking_waits(s)
    for k in compress(range(len(colls)), map(blocking.__contains__, coll_names)):
        waits[k], wait_times[k] = blocking[coll_names[k]]
    # a collective's link: its node, its wait's node (-1: none), issue, start, end (JSON
    # floats) and wait time (-1: none)
    head, at = fmt.number_rows([
        (fmt.INT, list(map(index.__getitem__, coll_names))),
        (fmt.INT, list(map(index.get, waits, repeat(-1)))),
        (fmt.MS, list(map(attrgetter("issue_us"), colls))),
        (fmt.MS, list(map(attrgetter("start_us"), colls))),
        (fmt.MS, list(map(attrgetter("end_us"), colls)))])
    known = iter(fmt.rounded_ms_json([t for t in wait_times if t is not None]))
    links = _Json("[" + ",".join(map(add, map(head.__getitem__, map(slice, at, at[1:])),
                                     ["-1" if t is None else next(known) for t in wait_times]))
                  + "]")
    return {
        "label": s.label,
        "makespan_us": _r(s.makespan_us),
        "peak_bytes": s.peak_memory_bytes,
        "lanes": [{"name": lane.name, "title": titles.get(lane.name, lane.name),
                   "group": lane.group, "rows": lane.rows, "events": lane.events,
                   "ev": by_lane[lane.name]} for lane in s.lanes],
        "mem": mem,
        "links": links,
    }


def _json_for_script(text: str) -> str:
    """JSON ``text`` made safe inside a ``<script>`` element."""
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


def timeline_data(report: OverlapReport) -> str:
    """The page's script data of ``report`` (:func:`report_data`) as :func:`render_html`
    embeds it. It is made from the node table and the schedules only, not from the summary
    above them (footprint, notes), so a caller can render it while the summary's last figures
    are still being computed, and pass it to :func:`render_html`; at 100k nodes it is most of
    the page's cost."""
    return _json_for_script(_data_json(report))


def render_html(report: OverlapReport, timelines: str | None = None) -> str:
    """The complete, self-contained HTML page of ``report``. ``timelines``:
    :func:`timeline_data` of a report with the same nodes and schedules, when the caller
    already has it."""
    return "".join(html_chunks(report, timelines))


def html_chunks(report: OverlapReport, timelines: str | None = None) -> Iterator[str]:
    """:func:`render_html`'s page in pieces, to write without copying it whole once more
    (the timelines are most of it)."""
    for part in _page_parts(report, timelines):
        yield part
        yield "\n"


def _page_parts(report: OverlapReport, timelines: str | None) -> list[str]:
    """The page's parts, one per line of :func:`render_html`'s text."""
    e = html.escape
    world = report.world_size if report.world_size is not None else "?"
    about = tables.about(report)
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
    parts.append(_table(headers, rows, numeric=("value", "before", "after", "change")))
    for text in [*tables.certificate_lines(report), *tables.robustness_lines(report)]:
        parts.append(f'<p class="sub">{e(text)}</p>')
    headers, rows, about_sizes = tables.data_dependent_rows(report)
    if rows:
        parts.append('<h2 id="data-dependent">Data-dependent sizes (assumed)</h2>')
        parts.append("<ul>" + "".join(f"<li>{e(t)}</li>" for t in about_sizes) + "</ul>")
        parts.append(_table(headers, rows, numeric=tuple(headers[1:])))
    for note in report.notes:
        parts.append(f'<p class="sub">note: {e(note)}</p>')
    parts.append(
        '<div class="controls"><button id="zoom-out" title="zoom out">&minus;</button>'
        '<button id="zoom-in" title="zoom in (or ctrl + wheel)">+</button>'
        '<button id="zoom-fit">fit</button><span id="zoom">1x</span>'
        '<input id="find" type="search" placeholder="find node" size="18" '
        'title="zoom to a node by name (Enter)">'
        '<span class="hint">drag to pan · ctrl+wheel to zoom · double-click a span to zoom to '
        'it · hover a collective or an exposed wait to see its partner</span>'
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
    parts.append('<h2 id="advice">What would help</h2><ul class="advice">'
                 + "".join(f"<li>{e(t)}</li>" for t in tables.advice_lines(report)) + "</ul>")
    headers, rows = tables.group_causes(report)
    if rows:
        parts.append(f"<h2>Exposed time by process group{e(about)}</h2>")
        parts.append(_table(headers, rows, numeric=("exposed", "collectives exposed")))
    headers, rows = tables.top_rows(report)
    parts.append(f"<h2>Most exposed collectives{e(about)}</h2>")
    parts.append(_table(headers, rows, numeric=("#", "bytes", "duration", "exposed"),
                        cls={"why not hidden": "why"}) if rows
                 else "<p>No exposed collectives.</p>")
    headers, rows = tables.group_rows(report)
    if rows:
        parts.append("<h2>Communication by process group</h2>")
        parts.append(_table(headers, rows, numeric=tuple(headers[2:])))
    parts.append('<h2 id="glossary">Glossary</h2><dl class="glossary">'
                 + "".join(f"<dt>{e(term)}</dt><dd>{e(text)}</dd>" for term, text in GLOSSARY)
                 + "</dl>")
    parts.append('<div id="tip"></div>')
    parts.append('<script type="application/json" id="commopt-data">'
                 + (timeline_data(report) if timelines is None else timelines) + "</script>")
    parts.append(f"<script>{_asset('report.js')}</script>")
    parts.append("</body></html>")
    return parts


def write_html(report: OverlapReport, path: str | os.PathLike[str]) -> None:
    """Write the HTML report to ``path``, atomically."""
    atomic.write_chunks(path, html_chunks(report))
