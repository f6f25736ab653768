"""The terminal report (rich): summary, top exposed collectives with reasons, timeline.

Colour and box-drawing only on a colour terminal; plain ASCII tables otherwise (pipes, CI
logs, ``NO_COLOR``), so the output is stable enough to snapshot.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from commopt.report import fmt, tables
from commopt.schemas.report import OverlapReport

#: Timeline rows shown by default (0 shows every step).
TIMELINE_ROWS = 40


#: Columns that may wrap when the console is narrow; every other column keeps its width.
_WRAP = ("node", "metric", "collective")


def _plain(console: Console) -> bool:
    return not console.is_terminal or console.no_color


def _table(console: Console, title: str, headers: list[str], rows: list[list[str]],
           right: tuple[str, ...] = ()) -> Table:
    plain = _plain(console)
    t = Table(title=title, title_justify="left", box=box.ASCII if plain else box.SIMPLE_HEAVY,
              header_style="" if plain else "bold", title_style="" if plain else "bold")
    for h in headers:
        t.add_column(h, justify="right" if h in right else "left", overflow="fold",
                     no_wrap=not (h in _WRAP or h.startswith("in flight")))
    for r in rows:
        t.add_row(*r)
    return t


def render_text(report: OverlapReport, console: Console, *,
                timeline_rows: int = TIMELINE_ROWS) -> None:
    """Print the report on ``console``: summary, groups, top exposed collectives, timeline.

    ``timeline_rows`` limits the timeline listing of the final schedule (0: every step).
    """
    after = report.after
    world = report.world_size if report.world_size is not None else "?"
    console.print(
        f"{report.graph}: {report.node_count} nodes, world size {world}; "
        f"times are estimates from the {report.estimator} estimator",
        markup=False, highlight=False,
    )
    headers, rows = tables.summary_rows(report)
    console.print(_table(console, "overlap " + ("before / after" if after else "(one schedule)"),
                         headers, rows, right=("before", "after", "change")))
    headers, rows = tables.group_rows(report)
    if rows:
        console.print(_table(console, "communication by process group", headers, rows,
                             right=tuple(headers[1:])))
    top = tables.top_exposed(report)
    label = report.final.label
    if top:
        headers = ["#", "collective", "group", "type", "bytes", "exposed of duration"]
        rows = [[str(k), c.node, c.group, c.type, fmt.nbytes(c.bytes),
                 f"{c.exposed_us:,.1f} of {fmt.us(c.end_us - c.start_us)}"]
                for k, c in enumerate(top, 1)]
        console.print(_table(console, f"most exposed collectives ({label})", headers, rows,
                             right=("#", "bytes", "exposed of duration")))
        console.print("why they are not hidden:", markup=False, highlight=False)
        for k, c in enumerate(top, 1):
            console.print(f"  {k}. {c.node}: {tables.reasons_text(c)}", markup=False,
                          highlight=False)
    else:
        console.print(f"no exposed collectives ({label})", markup=False, highlight=False)
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    _timeline(report, console, timeline_rows)


def _timeline(report: OverlapReport, console: Console, limit: int) -> None:
    schedule = report.final
    groups = [g.name for g in report.groups
              if any(c.group == g.name for c in schedule.collectives)]
    shown, total = tables.timeline(schedule, groups, limit)
    headers = ["step", "start", "end", "node"] + [f"in flight: {g}" for g in groups]
    body = [
        [str(r.step), f"{r.start_us:,.1f}", f"{r.end_us:,.1f}", r.what]
        + [r.in_flight.get(g, "") for g in groups]
        for r in shown
    ]
    title = (f"timeline ({schedule.label}; us; +issue, -wait; inputs and views left out)")
    console.print(_table(console, title, headers, body, right=("step", "start", "end")))
    if len(shown) < total:
        console.print(f"... {total - len(shown)} more steps (--timeline-rows 0 shows all)",
                      markup=False, highlight=False)
    console.print(
        f"makespan {fmt.us(schedule.makespan_us)}, exposed {fmt.us(schedule.exposed_comm_us)}, "
        f"overlap {fmt.pct(schedule.overlap_ratio)}",
        markup=False, highlight=False,
    )
