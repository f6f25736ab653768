"""The Markdown summary for CI: summary table, groups and their exposed time's causes, most
exposed collectives, what would help.

``append_step_summary`` adds it to the GitHub Actions job summary when
``$GITHUB_STEP_SUMMARY`` is set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from commopt import atomic
from commopt.report import tables
from commopt.schemas.report import OverlapReport


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(report: OverlapReport) -> str:
    """The report as a Markdown section (GitHub-flavoured tables)."""
    world = report.world_size if report.world_size is not None else "?"
    lines = [
        f"## commopt overlap report: `{_cell(report.graph)}`",
        "",
        f"{report.node_count} nodes, world size {world}. Times are estimates from the "
        f"`{_cell(report.estimator)}` estimator.",
        "",
    ]
    lines += _table(*tables.summary_rows(report))
    headers, rows, about_sizes = tables.data_dependent_rows(report)
    if rows:
        lines += ["", "### Data-dependent sizes (assumed)", ""]
        lines += [f"- {_cell(text)}" for text in about_sizes] + [""] + _table(headers, rows)
    headers, rows = tables.group_rows(report)
    if rows:
        lines += ["", "### Communication by process group", ""] + _table(headers, rows)
    about = tables.about(report)
    headers, rows = tables.group_causes(report)
    if rows:
        lines += ["", f"### Exposed time by process group{about}", ""] + _table(headers, rows)
    headers, rows = tables.top_rows(report)
    lines += ["", f"### Most exposed collectives{about}", ""]
    lines += _table(headers, rows) if rows else ["No exposed collectives."]
    lines += [""] + [_cell(text) for text in [*tables.certificate_lines(report),
                                               *tables.robustness_lines(report)]]
    lines += ["", "### What would help", ""]
    lines += [f"- {_cell(text)}" for text in tables.advice_lines(report)]
    for note in report.notes:
        lines += ["", f"> {_cell(note)}"]
    return "\n".join(lines) + "\n"


def write_markdown(report: OverlapReport, path: str | os.PathLike[str]) -> None:
    """Write the Markdown summary to ``path``, atomically."""
    atomic.write_text(path, render_markdown(report))


def append_step_summary(text: str, env: Mapping[str, str] | None = None) -> Path | None:
    """Append ``text`` to ``$GITHUB_STEP_SUMMARY`` when set; returns the file or None.

    The summary file is GitHub's to own and other steps append to it too, so this appends
    instead of replacing.
    """
    target = (os.environ if env is None else env).get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")
    return path
