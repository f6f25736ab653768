"""The HTML report without a browser: self-contained, deterministic, escaped, complete data."""

from __future__ import annotations

import json
import re

from commopt.ir.builder import GraphBuilder
from commopt.report.build import build_report
from commopt.report.html import render_html, report_data, timeline_data, write_html
from commopt.schemas.summary import MemoryFootprint
from tests.report.samples import durations, hand_sim, naive_order, naive_sim, two_groups


def _report():
    g = two_groups()
    return build_report(g, naive_order(g), g.original_order, durations(g),
                        estimator_name="table", before_sim=naive_sim(g), after_sim=hand_sim(g))


def _data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="commopt-data">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_page_is_deterministic(tmp_path):
    write_html(_report(), tmp_path / "a.html")
    write_html(_report(), tmp_path / "b.html")
    assert (tmp_path / "a.html").read_bytes() == (tmp_path / "b.html").read_bytes()


def test_page_fetches_nothing():
    page = render_html(_report())
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    assert "<link" not in page and "<script src" not in page
    # the only URL is the SVG namespace the script passes to createElementNS
    assert set(re.findall(r"https?://[^\s\"')]+", page)) == {"http://www.w3.org/2000/svg"}


def test_embedded_data_holds_every_lane_and_event():
    r = _report()
    data = _data(render_html(r))
    assert [s["label"] for s in data["schedules"]] == ["before", "after"]
    after = data["schedules"][1]
    assert [lane["name"] for lane in after["lanes"]] == ["compute", "comm:dp", "comm:tp"]
    assert [len(lane["ev"]) // 5 for lane in after["lanes"]] == [5, 2, 1]
    names = data["nodes"]["name"]
    dp = after["lanes"][1]["ev"]
    assert [names[dp[k + 2]] for k in range(0, len(dp), 5)] == ["ag_a", "ag_b"]
    assert data == report_data(r)


def test_timelines_rendered_before_the_summary_is_final_give_the_same_page():
    """The optimize command renders the timelines while the runner's child still computes the
    footprint the summary table shows: they must not depend on it (or on the notes)."""
    r = _report()
    final = r.model_copy(update={
        "footprint": MemoryFootprint(budget_bytes=300, before_bytes=200, after_bytes=250,
                                     arena_before_bytes=20, arena_after_bytes=30),
        "notes": [*r.notes, "a note added at the end"]})
    early = timeline_data(r)
    assert render_html(final, early) == render_html(final)
    assert "250 B" in render_html(final, early) and "a note added at the end" in render_html(final, early)


def test_tables_are_in_the_page():
    page = render_html(_report())
    assert "<td>makespan</td><td class=\"num\">170.0 us</td>" in page
    assert "Most exposed collectives (after)" in page
    assert page.index('id="sched-before"') < page.index('id="sched-after"')


def test_hostile_node_names_are_escaped():
    b = GraphBuilder(name="<b>g</b>", world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (4,))
    evil = "</script><img src=x onerror=alert(1)>"
    c = b.collective(evil, "all_reduce", "g", x)
    w = b.wait("w", c)
    b.output([w])
    g = b.build()
    r = build_report(g, g.original_order, None, [0.0, 5.0, 0.0, 0.0], estimator_name="t")
    page = render_html(r)
    assert evil not in page and "<b>g</b>" not in page
    assert _data(page)["nodes"]["name"][0] == evil


def test_glossary_advice_and_group_causes_are_in_the_page():
    page = render_html(_report())
    glossary = page[page.index('id="glossary"'):]
    for term in ("makespan", "exposed", "overlap", "lower bound"):
        assert f"<dt>{term}</dt>" in glossary, term
    assert "<h2 id=\"advice\">What would help</h2>" in page
    assert "already the reordered schedule" in page  # no advice for the optimized order
    assert "<h2>Exposed time by process group (after)</h2>" in page
    assert "<td>group dp (2 ranks)</td>" in page


def test_single_schedule_page_has_no_before():
    g = two_groups()
    r = build_report(g, naive_order(g), None, durations(g), estimator_name="t",
                     before_sim=naive_sim(g))
    page = render_html(r)
    shown = re.sub(r"<script.*?</script>", "", page[:page.index('id="glossary"')], flags=re.S)
    assert "before" not in shown and "after" not in shown
    assert 'id="sched-schedule"' in page and "<th class=\"num\">value</th>" in page
    assert "a different order could hide more" in page


def test_every_collective_is_linked_to_its_wait_in_the_data():
    r = _report()
    data = _data(render_html(r))
    names = data["nodes"]["name"]
    for sched, shown in zip((r.before, r.after), data["schedules"], strict=True):
        links = shown["links"]
        rows = [links[k:k + 6] for k in range(0, len(links), 6)]
        assert [(names[row[0]], names[row[1]]) for row in rows] == [
            (c.node, c.wait) for c in sched.collectives]
        for row, c in zip(rows, sched.collectives, strict=True):
            assert row[2:] == [c.issue_us, c.start_us, c.end_us, c.wait_start_us]
    assert [lane["title"] for lane in data["schedules"][1]["lanes"]] == [
        "compute", "group dp (2 ranks)", "group tp (2 ranks)"]


def test_page_script_has_memory_scale_pan_zoom_and_links():
    """The drawing code is exercised in a browser by test_browser.py; here: it is wired."""
    page = render_html(_report())
    assert 'id="find"' in page and "drag to pan" in page and "ctrl+wheel" in page
    for hook in ("drawMemAxis", "showLink", "startDrag", "zoomTo", "findNode", "dblclick"):
        assert hook in page, hook
