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


def _long_names_report():
    from commopt.ir.builder import GraphBuilder

    b = GraphBuilder(name="long", world_size=8)
    b.group("5", ranks=[0, 1, 2, 3], mesh_dim="tp")
    x = b.input("x", (64, 64))
    names = [f"layers_{k}_self_attn_o_proj_reduce_scatter_tensor_after_compute_overlap"
             for k in range(3)]
    last = x
    for k, name in enumerate(names):
        c = b.collective(name, "reduce_scatter", "5", last)
        last = b.compute(f"mlp_down_proj_{k}_compute_overlap_candidate_with_a_long_name",
                         "aten.mm.default", [b.wait(f"{name}_wait", c)], (64, 64))
    b.output([last])
    g = b.build()
    d = [30.0 if n.kind.label == "collective" else 5.0 for n in g.nodes]
    return build_report(g, g.original_order, None, d, estimator_name="t"), names


def test_piped_output_is_never_cut_to_80_columns():
    report, names = _long_names_report()
    console, buf = _console(force_terminal=False)
    console.width = 80  # what rich assumes when stdout is a pipe
    render_text(report, console, timeline_rows=0)
    text = buf.getvalue()
    for name in names:  # whole, on one line, in the tables and the timeline
        assert any(f"| {name} " in line for line in text.splitlines()), name
    assert "..." not in text.replace("... ", "") and "\u2026" not in text
    assert max(len(line) for line in text.splitlines()) > 80


def test_terminal_output_fits_the_terminal():
    report, names = _long_names_report()
    console, buf = _console(force_terminal=True, no_color=True)
    console.width = 80
    render_text(report, console, timeline_rows=0)
    lines = buf.getvalue().splitlines()
    tables = [line for line in lines if line.startswith(("|", "+"))]
    assert tables and max(len(line) for line in tables) <= 80


def test_exposed_time_and_causes_per_group():
    console, buf = _console()
    render_text(_before_after(), console)
    lines = buf.getvalue().splitlines()
    at = lines.index(next(line for line in lines
                          if line.startswith("exposed time by process group (after)")))
    dp = next(line for line in lines[at:] if line.startswith("| group dp (2 ranks)"))
    assert "10.0 us" in dp and "queued 10.0 us (1)" in dp
    tp = next(line for line in lines[at:] if line.startswith("| group tp (2 ranks)"))
    assert "none exposed" in tp


def test_single_schedule_says_so_and_advises_what_the_simulator_supports():
    g = two_groups()
    report = build_report(g, naive_order(g), None, durations(g), estimator_name="table",
                          before_sim=naive_sim(g))
    console, buf = _console()
    render_text(report, console)
    text = buf.getvalue()
    assert "before" not in text and "(one schedule)" in text
    assert "a different order could hide more" in text
    console, buf = _console()
    render_text(_before_after(), console)
    text = buf.getvalue()
    assert "different order" not in text and "better order" not in text
    assert "already the reordered schedule" in text


def test_names_that_look_like_markup_are_printed_as_they_are():
    console, buf = _console()  # rich parses markup by default; the report must not
    render_text(_before_after(), console)
    assert "ag_a [all_gather on group dp (2 ranks)]" in buf.getvalue()
