"""The report's tables as plain rows of strings, shared by the terminal, Markdown and HTML.

Each renderer decides how to draw; what is shown (and how numbers read) is decided once here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress
from typing import NamedTuple

from commopt.ir.graph import ProcessGroup
from commopt.report import fmt
from commopt.schemas.report import (
    CollectiveReport,
    GroupInfo,
    OverlapReport,
    ScheduleReport,
)


def group_title(group: GroupInfo | ProcessGroup, *, ambiguous: bool = False) -> str:
    """How a process group reads in the reports: its mesh dimension and size, ``tp (4 ranks)``.

    A group without a recorded mesh dimension reads ``group 0 (8 ranks)`` (its c10d name);
    ``ambiguous`` adds the c10d name to a mesh-dimension title another group shares.
    """
    ranks = f"{group.size} rank" + ("" if group.size == 1 else "s")
    if group.mesh_dim is None:
        return f"group {group.name} ({ranks})"
    if ambiguous:
        return f"{group.mesh_dim} ({ranks}, group {group.name})"
    return f"{group.mesh_dim} ({ranks})"


def group_titles(report: OverlapReport) -> dict[str, str]:
    """The title of every process group of the report, by c10d name (see :func:`group_title`)."""
    plain = [group_title(g) for g in report.groups]
    return {g.name: group_title(g, ambiguous=plain.count(t) > 1)
            for g, t in zip(report.groups, plain, strict=True)}


def lane_titles(report: OverlapReport) -> dict[str, str]:
    """Lane name (``compute``, ``comm:<group>``) to the title the timelines show."""
    titles = {"compute": "compute"}
    by_group = group_titles(report)
    for s in (report.before, report.after):
        for lane in s.lanes if s is not None else ():
            if lane.group is not None:
                titles[lane.name] = by_group.get(lane.group, f"group {lane.group}")
    return titles


def is_single(report: OverlapReport) -> bool:
    """Whether the report shows one schedule (no before/after comparison)."""
    return report.after is None


def about(report: OverlapReport) -> str:
    """What a section about the final schedule adds to its title: ' (after)', or nothing
    when the report has one schedule (it is then neither 'before' nor 'after')."""
    return "" if is_single(report) else f" ({report.final.label})"


def summary_rows(report: OverlapReport) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the summary: one value column for one schedule; before, after and
    change for two."""
    b, a = report.before, report.after
    headers = ["metric"] + (["before", "after", "change"] if a is not None else ["value"])

    def row(label: str, get, show, diff=fmt.change) -> list[str]:
        cells = [label, show(get(b))]
        if a is not None:
            cells += [show(get(a)), diff(get(b), get(a))]
        return cells

    # numbers derived from data-dependent sizes say so where they are read
    on = " (assumed sizes)" if report.data_dependent is not None else ""
    rows = [
        row("makespan" + on, lambda s: s.makespan_us, fmt.us),
        row("exposed communication" + on, lambda s: s.exposed_comm_us, fmt.us),
        row("overlap" + on, lambda s: s.overlap_ratio, fmt.pct, fmt.points),
        row("peak memory", lambda s: s.peak_memory_bytes, fmt.nbytes),
        row("lower bound", lambda s: s.lower_bound_us, fmt.us),
        row("makespan / lower bound", lambda s: _ratio(s), lambda v: f"{v:.3f}x",
            lambda x, y: f"{y - x:+.3f}"),
        row("compute", lambda s: s.total_compute_us, fmt.us),
        row("communication", lambda s: s.total_comm_us, fmt.us),
    ]
    f = report.footprint
    if f is not None:  # what the runner holds: its arenas for the whole step + the other tensors
        rows.append(["runner footprint", fmt.nbytes(f.before_bytes)]
                    + ([fmt.nbytes(f.after_bytes), fmt.change(f.before_bytes, f.after_bytes)]
                       if a is not None else []))
        rows.append(["  of which arenas", fmt.nbytes(f.arena_before_bytes)]
                    + ([fmt.nbytes(f.arena_after_bytes), fmt.change(f.arena_before_bytes, f.arena_after_bytes)]
                       if a is not None else []))
    rows.append(["estimator", report.estimator] + (["", ""] if a is not None else []))
    return headers, rows


def robustness_lines(report: OverlapReport) -> list[str]:
    """How the makespan moves when every estimate is off by up to +-30% (one line, or none)."""
    r = report.robustness
    if r is None:
        return []
    what = f"with every cost off by up to {r.cost_error:.0%} ({len(r.scenarios)} scenarios) the makespan is "
    if report.after is None:
        return [what + f"{fmt.us(r.before_min_us)} to {fmt.us(r.before_max_us)}"]
    worst = f"; worst case {r.after_max_us / r.before_max_us - 1:+.1%}" if r.before_max_us > 0 else ""
    return [what + f"{fmt.us(r.before_min_us)} to {fmt.us(r.before_max_us)} before, "
            f"{fmt.us(r.after_min_us)} to {fmt.us(r.after_max_us)} after{worst}"]


def data_dependent_rows(report: OverlapReport) -> tuple[list[str], list[list[str]], list[str]]:
    """Headers and rows of the result at multiples of the assumed data-dependent sizes, and
    the lines naming what was assumed (all empty when every size is static)."""
    entry = report.data_dependent
    if entry is None:
        return [], [], []
    headers = ["sizes", "makespan before", "makespan after", "exposed after", "overlap after"]
    rows = [[f"{sc.scale:g}x" + (" (assumed)" if sc.scale == 1.0 else ""),
             fmt.us(sc.before.makespan_us), fmt.us(sc.after.makespan_us),
             fmt.us(sc.after.exposed_comm_us), fmt.pct(sc.after.overlap_ratio)]
            for sc in entry.scenarios]
    lines = [entry.statement] + [
        f"{s.symbol} = {s.assumed} ({s.basis}: {s.reason}); computed by {s.defined_by}"
        for s in entry.sizes[:12]]
    if len(entry.sizes) > 12:
        lines.append(f"... {len(entry.sizes) - 12} more (summary.json lists every one)")
    return headers, rows, lines


def _ratio(s: ScheduleReport) -> float:
    return s.makespan_us / s.lower_bound_us if s.lower_bound_us > 0 else 1.0


def group_rows(report: OverlapReport) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of communication per process group (exposed before/after, or exposed
    for a report of one schedule). A group reads by its title (:func:`group_title`)."""
    single = is_single(report)
    headers = ["group", "c10d", "size", "collectives", "comm time",
               "exposed" if single else "exposed before"]
    if not single:
        headers.append("exposed after")
    titles = group_titles(report)
    rows = []
    for g in report.groups:
        colls = [c for c in report.before.collectives if c.group == g.name]
        if not colls:
            continue
        row = [titles[g.name], g.name, str(g.size), str(len(colls)),
               fmt.us(report.before.comm_us_by_group.get(g.name, 0.0)),
               fmt.us(sum(c.exposed_us for c in colls))]
        if report.after is not None:
            row.append(fmt.us(sum(c.exposed_us for c in report.after.collectives
                                  if c.group == g.name)))
        rows.append(row)
    return headers, rows


def group_causes(report: OverlapReport, *, limit: int = 3) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of each group's exposed time in the final schedule and its top causes.

    A cause is the primary (first) reason of an explained collective; its time is the
    exposed time of the collectives it explains, largest first, at most ``limit`` of them.
    Exposed time of collectives that were not explained reads as "not explained".
    """
    headers = ["group", "exposed", "collectives exposed", "top causes"]
    titles = group_titles(report)
    rows = []
    for g in report.groups:
        colls = [c for c in report.final.collectives if c.group == g.name]
        if not colls:
            continue
        exposed = [c for c in colls if c.exposed_us > 0]
        total = sum(c.exposed_us for c in exposed)
        by_code: dict[str, tuple[float, int]] = {}
        rest = 0.0
        for c in exposed:
            if c.reasons:
                us_, n = by_code.get(c.reasons[0].code, (0.0, 0))
                by_code[c.reasons[0].code] = (us_ + c.exposed_us, n + 1)
            else:
                rest += c.exposed_us
        causes = sorted(by_code.items(), key=lambda kv: (-kv[1][0], kv[0]))[:limit]
        words = [f"{code.replace('_', ' ')} {fmt.us(t)} ({n})" for code, (t, n) in causes]
        if rest > 0:
            words.append(f"not explained {fmt.us(rest)}")
        rows.append([titles[g.name], fmt.us(total), f"{len(exposed)} of {len(colls)}",
                     ", ".join(words) if words else "none exposed"])
    return headers, rows


def certificate_lines(report: OverlapReport) -> list[str]:
    """How far from optimal the last schedule is proven to be at most (one line, or none)."""
    from commopt.certificate import words

    return [words(report.certificate)] if report.certificate is not None else []


def advice_lines(report: OverlapReport) -> list[str]:
    """What would help, one line per piece of advice, or one line saying nothing would.

    The advice itself is decided once, by the simulator's numbers
    (:func:`commopt.report.explain.advise`); this only words its absence.
    """
    if report.advice:
        return [a.text for a in report.advice]
    s = report.final
    if s.exposed_comm_us <= 0:
        return ["nothing to hide: no communication is exposed"]
    return [f"nothing the simulator can point to: makespan is {_ratio(s):.3f}x its lower bound"
            + ("" if is_single(report) else ", and this is already the reordered schedule")]


class BlockingWait(NamedTuple):
    """The exposed span of a wait that blocked the compute stream: its node and start."""

    node: str
    start_us: float


def blocking_waits(s: ScheduleReport) -> dict[str, BlockingWait]:
    """Per collective of ``s`` that blocked the compute stream, the exposed span of its first
    wait (in the schedule's order) that did: the wait a timeline links it to (else its first
    wait)."""
    cols = s.events.columns
    names, starts = cols["node"], cols["start_us"]
    at = list(compress(range(len(names)), cols["exposed"]))
    exposed = dict(zip(map(names.__getitem__, at), at, strict=True))
    return {c: BlockingWait(w, starts[exposed[w]])
            for c, w in _first_waits(s, exposed.__contains__).items()}


def blocking_wait_nodes(s: ScheduleReport) -> dict[str, str]:
    """The node of each :func:`blocking_waits` span, by collective: what the trace links, with
    no span made per collective."""
    cols = s.events.columns
    return _first_waits(s, set(compress(cols["node"], cols["exposed"])).__contains__)


def _first_waits(s: ScheduleReport, blocked: Callable[[str], bool]) -> dict[str, str]:
    """Per collective of ``s`` with a wait that ``blocked``, the first such wait."""
    out: dict[str, str] = {}
    for c in s.collectives:
        for w in c.waits:
            if blocked(w):
                out[c.node] = w
                break
    return out


def top_exposed(report: OverlapReport) -> list[CollectiveReport]:
    """The explained collectives of the final schedule, worst first."""
    by_name = {c.node: c for c in report.final.collectives}
    return [by_name[name] for name in report.top_exposed]


def top_rows(report: OverlapReport, *, with_reasons: bool = True) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the most exposed collectives, each with its reasons (last column)."""
    headers = ["#", "collective", "group", "type", "bytes", "duration", "exposed"]
    if with_reasons:
        headers.append("why not hidden")
    titles = group_titles(report)
    rows = []
    for k, c in enumerate(top_exposed(report), 1):
        row = [str(k), c.node, titles.get(c.group, c.group), c.type, fmt.nbytes(c.bytes),
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


def timeline(schedule: ScheduleReport, groups: list[str], limit: int = 0, *,
             titles: dict[str, str] | None = None) -> tuple[list[TimelineRow], int]:
    """The first ``limit`` steps of the schedule (0: all), and how many steps there are.

    Each row has the collectives in flight in each group: ``+name`` marks an issue, ``name``
    a collective still in flight, ``-name`` its wait; several collectives may be in flight
    in one group and in several groups at once. An issue names its group by ``titles``
    (:func:`group_titles`) when given. Inputs, views and the output cost nothing
    and are left out.
    """
    rows: dict[int, tuple[float, float, str]] = {}
    cols = schedule.events.columns
    for node, lane, step, start, end, exposed in zip(
            cols["node"], cols["lane"], cols["step"], cols["start_us"], cols["end_us"],
            cols["exposed"], strict=True):
        if lane == "compute":
            rows[step] = (start, end, f"{node} (exposed wait)" if exposed else node)
    spans: list[tuple[int, int, str, str]] = []
    for c in schedule.collectives:
        on = titles.get(c.group, c.group) if titles else c.group
        rows[c.issue_step] = (c.issue_us, c.issue_us, f"{c.node} [{c.type} on {on}]")
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
