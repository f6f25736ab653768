"""The terminal report (rich): summary, groups with their exposed time and its causes, top
exposed collectives with reasons, what would help, timeline.

Colour and box-drawing only on a colour terminal; plain ASCII tables otherwise (pipes, CI
logs, ``NO_COLOR``), so the output is stable enough to snapshot. On a terminal, tables fit
its width (long cells wrap); anywhere else (a pipe, a file) a table is printed at its full
width, never cut to the 80 columns rich assumes when it cannot ask a terminal.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

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
    for r in rows:  # cells are plain text: a node name like 'x[0]' is not rich markup
        t.add_row(*(Text(c) for c in r))
    return t


def print_table(console: Console, table: Table) -> None:
    """Print ``table``: fitted to a terminal, at its full width anywhere else.

    Rich assumes 80 columns when the output is not a terminal and would fold or cut cells to
    fit; piped output (``| less``, ``> file``, CI logs) must show every cell whole.
    """
    if console.is_terminal:
        console.print(table)
        return
    wide = console.options.update(width=1 << 20)
    natural = Measurement.get(console, wide, table).maximum
    if natural <= console.width:
        console.print(table)
        return
    lines = console.render_lines(table, console.options.update(width=natural), new_lines=True)
    console.print(Segments([seg for line in lines for seg in line if seg != Segment("")]),
                  crop=False)


def _line(console: Console, text: str) -> None:
    console.print(text, markup=False, highlight=False)


def render_text(report: OverlapReport, console: Console, *,
                timeline_rows: int = TIMELINE_ROWS) -> None:
    """Print the report on ``console``: summary, groups and the causes of their exposed time,
    top exposed collectives with reasons, what would help, timeline.

    ``timeline_rows`` limits the timeline listing of the final schedule (0: every step).
    """
    after = report.after
    world = report.world_size if report.world_size is not None else "?"
    _line(console, f"{report.graph}: {report.node_count} nodes, world size {world}; "
                   f"times are estimates from the {report.estimator} estimator")
    headers, rows = tables.summary_rows(report)
    print_table(console, _table(console, "overlap " + ("before / after" if after else "(one schedule)"),
                           headers, rows, right=("value", "before", "after", "change")))
    headers, rows, about_sizes = tables.data_dependent_rows(report)
    if rows:
        for text in about_sizes:
            _line(console, text)
        print_table(console, _table(console, "data-dependent sizes: the result at multiples of "
                                    "the assumed values (orders not re-optimized)", headers, rows,
                                    right=tuple(headers[1:])))
    headers, rows = tables.group_rows(report)
    if rows:
        print_table(console, _table(console, "communication by process group", headers, rows,
                               right=tuple(headers[2:])))
    about = tables.about(report)
    headers, rows = tables.group_causes(report)
    if rows:
        print_table(console, _table(console, f"exposed time by process group{about}", headers, rows,
                               right=("exposed", "collectives exposed")))
    top = tables.top_exposed(report)
    titles = tables.group_titles(report)
    if top:
        headers = ["#", "collective", "group", "type", "bytes", "exposed of duration"]
        rows = [[str(k), c.node, titles.get(c.group, c.group), c.type, fmt.nbytes(c.bytes),
                 f"{c.exposed_us:,.1f} of {fmt.us(c.end_us - c.start_us)}"]
                for k, c in enumerate(top, 1)]
        print_table(console, _table(console, f"most exposed collectives{about}", headers, rows,
                               right=("#", "bytes", "exposed of duration")))
        _line(console, "why they are not hidden:")
        for k, c in enumerate(top, 1):
            _line(console, f"  {k}. {c.node}: {tables.reasons_text(c)}")
    else:
        _line(console, f"no exposed collectives{about}")
    for text in [*tables.certificate_lines(report), *tables.robustness_lines(report)]:
        _line(console, text)
    _line(console, "what would help:")
    for text in tables.advice_lines(report):
        _line(console, f"  - {text}")
    for note in report.notes:
        _line(console, f"note: {note}")
    _timeline(report, console, timeline_rows)


def _timeline(report: OverlapReport, console: Console, limit: int) -> None:
    schedule = report.final
    groups = [g.name for g in report.groups
              if any(c.group == g.name for c in schedule.collectives)]
    titles = tables.group_titles(report)
    shown, total = tables.timeline(schedule, groups, limit, titles=titles)
    headers = ["step", "start", "end", "node"] + [f"in flight: {titles[g]}" for g in groups]
    body = [
        [str(r.step), f"{r.start_us:,.1f}", f"{r.end_us:,.1f}", r.what]
        + [r.in_flight.get(g, "") for g in groups]
        for r in shown
    ]
    which = "" if tables.is_single(report) else f"{schedule.label}; "
    title = f"timeline ({which}us; +issue, -wait; inputs and views left out)"
    print_table(console, _table(console, title, headers, body, right=("step", "start", "end")))
    if len(shown) < total:
        _line(console, f"... {total - len(shown)} more steps (--timeline-rows 0 shows all)")
    _line(console, f"makespan {fmt.us(schedule.makespan_us)}, exposed "
                   f"{fmt.us(schedule.exposed_comm_us)}, overlap {fmt.pct(schedule.overlap_ratio)}")
