"""The terminal report: snapshots of the plain-text output, colour only on terminals.

Snapshots live in ``tests/report/snapshots``; after an intended change rewrite them with
``COMMOPT_UPDATE_SNAPSHOTS=1 pytest tests/report/test_text.py`` and review the diff.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from commopt.report.build import build_report
from commopt.report.text import render_text
from tests.report.samples import durations, hand_sim, naive_order, naive_sim, two_groups

SNAPSHOTS = Path(__file__).parent / "snapshots"


def _console(**kw) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=120, **kw), buf


def _check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("COMMOPT_UPDATE_SNAPSHOTS"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing snapshot {path}; run with COMMOPT_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(encoding="utf-8")


def _before_after():
    g = two_groups()
    return build_report(g, naive_order(g), g.original_order, durations(g),
                        estimator_name="table", before_sim=naive_sim(g), after_sim=hand_sim(g))


def test_before_after_snapshot():
    console, buf = _console()
    render_text(_before_after(), console)
    _check_snapshot("two_groups_before_after.txt", buf.getvalue())


def test_single_schedule_snapshot():
    g = two_groups()
    report = build_report(g, naive_order(g), None, durations(g), estimator_name="table",
                          before_sim=naive_sim(g))
    console, buf = _console()
    render_text(report, console)
    _check_snapshot("two_groups_single.txt", buf.getvalue())


def test_timeline_shows_two_collectives_in_flight_in_one_group():
    console, buf = _console()
    render_text(_before_after(), console)
    lines = buf.getvalue().splitlines()
    mm1 = next(line for line in lines if "| mm1 " in line)
    # ag_a and ag_b are both in flight on dp while ar is in flight on tp
    assert "ag_a ag_b" in mm1 and "| ar " in mm1
    issue_a = next(k for k, line in enumerate(lines) if "+ag_a" in line)
    wait_a = next(k for k, line in enumerate(lines) if "-ag_a" in line)
    wait_b = next(k for k, line in enumerate(lines) if "-ag_b" in line)
    assert issue_a < wait_a < wait_b


def test_plain_output_has_no_escape_codes():
    console, buf = _console(force_terminal=False)
    render_text(_before_after(), console)
    assert "\x1b[" not in buf.getvalue()


@pytest.mark.parametrize("no_color", [False, True])
def test_terminal_gets_styles_unless_no_color(no_color):
    console, buf = _console(force_terminal=True, no_color=no_color, color_system="standard")
    render_text(_before_after(), console)
    text = buf.getvalue()
    assert ("\x1b[" in text) is not no_color
    assert ("+-" in text) is no_color  # ASCII tables when plain


def test_timeline_rows_limit():
    console, buf = _console()
    render_text(_before_after(), console, timeline_rows=3)
    assert "more steps (--timeline-rows 0 shows all)" in buf.getvalue()
