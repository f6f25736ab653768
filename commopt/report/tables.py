"""The report's tables as plain rows of strings, shared by the terminal, Markdown and HTML.

Each renderer decides how to draw; what is shown (and how numbers read) is decided once here.
"""

from __future__ import annotations

from dataclasses import dataclass

from commopt.report import fmt
from commopt.schemas.report import CollectiveReport, OverlapReport, ScheduleReport


def summary_rows(report: OverlapReport) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the before/after summary (one column per schedule, then change)."""
    b, a = report.before, report.after
    headers = ["metric", "before"] + (["after", "change"] if a is not None else [])

    def row(label: str, get, show, diff=fmt.change) -> list[str]:
        cells = [label, show(get(b))]
        if a is not None:
            cells += [show(get(a)), diff(get(b), get(a))]
        return cells

    rows = [
        row("makespan", lambda s: s.makespan_us, fmt.us),
        row("exposed communication", lambda s: s.exposed_comm_us, fmt.us),
        row("overlap", lambda s: s.overlap_ratio, fmt.pct, fmt.points),
        row("peak memory", lambda s: s.peak_memory_bytes, fmt.nbytes),
        row("lower bound", lambda s: s.lower_bound_us, fmt.us),
        row("makespan / lower bound", lambda s: _ratio(s), lambda v: f"{v:.3f}x",
            lambda x, y: f"{y - x:+.3f}"),
        row("compute", lambda s: s.total_compute_us, fmt.us),
        row("communication", lambda s: s.total_comm_us, fmt.us),
    ]
    rows.append(["estimator", report.estimator] + (["", ""] if a is not None else []))
    return headers, rows


def _ratio(s: ScheduleReport) -> float:
    return s.makespan_us / s.lower_bound_us if s.lower_bound_us > 0 else 1.0


def group_rows(report: OverlapReport) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of communication per process group (exposed before/after)."""
    headers = ["group", "size", "collectives", "comm time", "exposed before"]
    if report.after is not None:
        headers.append("exposed after")
    rows = []
    for g in report.groups:
        colls = [c for c in report.before.collectives if c.group == g.name]
        if not colls:
            continue
        row = [g.name, str(g.size), str(len(colls)),
               fmt.us(report.before.comm_us_by_group.get(g.name, 0.0)),
               fmt.us(sum(c.exposed_us for c in colls))]
        if report.after is not None:
            row.append(fmt.us(sum(c.exposed_us for c in report.after.collectives
                                  if c.group == g.name)))
        rows.append(row)
    return headers, rows


def top_exposed(report: OverlapReport) -> list[CollectiveReport]:
    """The explained collectives of the final schedule, worst first."""
    by_name = {c.node: c for c in report.final.collectives}
    return [by_name[name] for name in report.top_exposed]


def top_rows(report: OverlapReport, *, with_reasons: bool = True) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the most exposed collectives, each with its reasons (last column)."""
    headers = ["#", "collective", "group", "type", "bytes", "duration", "exposed"]
    if with_reasons:
        headers.append("why not hidden")
    rows = []
    for k, c in enumerate(top_exposed(report), 1):
        row = [str(k), c.node, c.group, c.type, fmt.nbytes(c.bytes),
               fmt.us(c.end_us - c.start_us), fmt.us(c.exposed_us)]
        if with_reasons:
            row.append(reasons_text(c))
        rows.append(row)
    return headers, rows


def reasons_text(c: CollectiveReport) -> str:
    """The reasons of one collective as one line: 'queued: ...; schedule: ...'."""
    return "; ".join(f"{r.code.replace('_', ' ')}: {r.text}" for r in c.reasons)


@dataclass(frozen=True)
class TimelineRow:
    """One step of the timeline listing: a node and what is in flight per group."""

    step: int
    start_us: float
    end_us: float
    what: str
    in_flight: dict[str, str]


def timeline(schedule: ScheduleReport, groups: list[str],
             limit: int = 0) -> tuple[list[TimelineRow], int]:
    """The first ``limit`` steps of the schedule (0: all), and how many steps there are.

    Each row has the collectives in flight in each group: ``+name`` marks an issue, ``name``
    a collective still in flight, ``-name`` its wait; several collectives may be in flight
    in one group and in several groups at once. Inputs, views and the output cost nothing
    and are left out.
    """
    rows: dict[int, tuple[float, float, str]] = {}
    for e in schedule.events:
        if e.lane == "compute":
            what = f"{e.node} (exposed wait)" if e.exposed else e.node
            rows[e.step] = (e.start_us, e.end_us, what)
    spans: list[tuple[int, int, str, str]] = []
    for c in schedule.collectives:
        rows[c.issue_step] = (c.issue_us, c.issue_us, f"{c.node} [{c.type} on {c.group}]")
        if c.wait_step is not None:
            if c.wait_step not in rows:
                t = c.wait_start_us if c.wait_start_us is not None else c.end_us
                rows[c.wait_step] = (t, t, f"{c.wait} (wait, hidden)")
            spans.append((c.issue_step, c.wait_step, c.group, c.node))
        else:
            spans.append((c.issue_step, -1, c.group, c.node))
    steps = sorted(rows)
    total = len(steps)
    if limit > 0:
        steps = steps[:limit]
    out: list[TimelineRow] = []
    by_start = sorted(spans)
    live: list[tuple[int, int, str, str]] = []
    k = 0
    for step in steps:
        while k < len(by_start) and by_start[k][0] <= step:
            live.append(by_start[k])
            k += 1
        marks: dict[str, list[str]] = {g: [] for g in groups}
        still = []
        for issue, wait, group, name in live:
            if issue == step:
                marks.setdefault(group, []).append(f"+{name}")
            elif wait == step:
                marks.setdefault(group, []).append(f"-{name}")
            else:
                marks.setdefault(group, []).append(name)
            if wait != step:
                still.append((issue, wait, group, name))
        live = still
        start, end, what = rows[step]
        out.append(TimelineRow(step, start, end, what, {g: " ".join(v) for g, v in marks.items()}))
    return out, total
