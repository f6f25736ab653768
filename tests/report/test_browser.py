"""The HTML report in a real headless Chromium (driven through chromedriver).

Skipped when chromium or chromedriver is missing (``make browser-deps`` installs them).
Checks the lanes and spans the page draws, hover details, zoom, no console errors, and saves
a screenshot (to ``$COMMOPT_SCREENSHOT`` when set, e.g. to refresh ``docs/report.png``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from commopt.io import load_graph
from commopt.io.json_graph import save_json_graph
from commopt.report.build import build_report
from commopt.report.compare import compare_graphs
from commopt.report.html import write_html
from commopt.synth import fsdp_tp_stack, graph_with_nodes
from tests.report.webdriver import Browser, find_browser

pytestmark = [pytest.mark.browser, pytest.mark.slow]

BROWSER = find_browser()
SAMPLE = Path(__file__).resolve().parents[2] / "sample_graphs" / "ws8" / "mesh2d.json"

LANES_JS = """
return Array.from(document.querySelectorAll('section.schedule')).map(s => ({
  label: s.dataset.label,
  lanes: Array.from(s.querySelectorAll('g.lane')).map(g => ({
    name: g.dataset.lane, events: +g.dataset.events,
    rects: g.querySelectorAll('rect').length,
    covered: Array.from(g.querySelectorAll('rect')).reduce((a, r) => a + +r.dataset.n, 0)}))}));
"""


@pytest.fixture(scope="module")
def browser():
    if BROWSER is None:
        pytest.skip("chromium and chromedriver are not installed (make browser-deps)")
    with Browser(*BROWSER) as b:
        yield b


@pytest.fixture(scope="module")
def page_20k(tmp_path_factory):
    """A 20,000-node synthetic stack's report (original order) and its page's URI, built once
    per module."""
    from commopt.estimators import resolve

    g = graph_with_nodes(20000)
    report = build_report(g, g.original_order, None, resolve(None).durations(g),
                          estimator_name="analytical")
    page = tmp_path_factory.mktemp("report20k") / "20k.html"
    write_html(report, page)
    return report, page.as_uri()


def _optimized(tmp_path: Path):
    from commopt.estimators import resolve
    from commopt.passes import DEFAULT_PIPELINE, PassContext
    from commopt.passes.manager import PassManager
    from commopt.passes.registry import get_registry

    g = load_graph(SAMPLE)
    durations = resolve("analytical").durations(g)
    registry = get_registry()
    result = PassManager([registry.create(n) for n in DEFAULT_PIPELINE]).run(
        g, g.original_order, PassContext.for_graph(g, durations))
    out = tmp_path / "mesh2d.reordered.json"
    save_json_graph(g, out, result.order)
    return g, load_graph(out)


def _drawn(browser, report):
    shown = browser.execute(LANES_JS)
    schedules = [report.before] + ([report.after] if report.after else [])
    assert [s["label"] for s in shown] == [s.label for s in schedules]
    for page, sched in zip(shown, schedules, strict=True):
        assert [lane["name"] for lane in page["lanes"]] == [lane.name for lane in sched.lanes]
        assert [lane["events"] for lane in page["lanes"]] == [lane.events for lane in sched.lanes]
    return shown


def _no_console_errors(browser):
    entries = browser.console_log()
    assert [e for e in entries if e.get("level") in ("SEVERE", "WARNING")] == []


def test_sample_report_in_chromium(browser, tmp_path):
    graph, reordered = _optimized(tmp_path)
    report = compare_graphs(graph, reordered)
    page = tmp_path / "report.html"
    write_html(report, page)
    browser.get(page.as_uri())
    assert browser.execute("return document.body.dataset.ready") == "1"
    shown = _drawn(browser, report)
    for sched in shown:  # at 1x every span is drawn, alone or inside a merged run
        assert all(lane["covered"] == lane["events"] for lane in sched["lanes"])
    assert [len(s["lanes"]) for s in shown] == [1 + len(report.groups)] * 2
    first = report.after.collectives[0]
    tip = browser.execute(
        "const r = document.querySelector('#sched-after g.lane[data-lane=\"comm:' + arguments[0]"
        " + '\"] rect');"
        "r.dispatchEvent(new MouseEvent('mouseover', {bubbles: true, clientX: 50, clientY: 50}));"
        "return document.getElementById('tip').textContent;", first.group)
    assert first.node in tip and "bytes" in tip and "duration" in tip
    _no_console_errors(browser)
    shot = Path(os.environ.get("COMMOPT_SCREENSHOT", tmp_path / "report.png"))
    browser.execute("window.scrollTo(0, document.querySelector('.controls').offsetTop - 8);"
                    "return 1;")
    png = browser.screenshot(shot)
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_ten_thousand_nodes_are_merged_and_zoomable(browser, tmp_path):
    g = fsdp_tp_stack(480, hidden=256, tokens=256)
    d = [30.0 if n.kind.label == "collective" else 4.0 if n.kind.label == "compute" else 0.0
         for n in g.nodes]
    report = build_report(g, g.original_order, None, d, estimator_name="test")
    assert len(g) > 10_000
    page = tmp_path / "big.html"
    write_html(report, page)
    browser.get(page.as_uri())
    shown = _drawn(browser, report)[0]["lanes"]
    compute = shown[0]
    assert compute["covered"] == compute["events"] > 5_000
    assert compute["rects"] < compute["events"] // 4  # tiny spans merged at 1x
    for _ in range(6):
        browser.execute("document.getElementById('zoom-in').click(); return 1;")
    zoomed = browser.execute(LANES_JS)[0]["lanes"][0]
    assert browser.execute("return document.getElementById('zoom').textContent") == "64x"
    assert 0 < zoomed["covered"] < compute["events"]  # only the visible window is drawn
    browser.execute("document.getElementById('zoom-fit').click(); return 1;")
    assert browser.execute(LANES_JS)[0]["lanes"][0]["covered"] == compute["events"]
    _no_console_errors(browser)


def test_twenty_thousand_nodes_zoom_and_pan_to_single_nodes(browser, page_20k):
    report, uri = page_20k
    browser.get(uri)
    assert browser.execute("return document.body.dataset.ready") == "1"
    compute = report.before.lanes[0]
    target = next(e for e in report.before.events[compute.events // 2:]
                  if e.lane == "compute" and not e.exposed)
    node = [n.name for n in report.nodes].index(target.node)
    one = ("const r = document.querySelector('g.lane[data-lane=\"compute\"] rect[data-node=\"'"
           " + arguments[0] + '\"]'); return r ? [+r.dataset.n, +r.getAttribute('width')] : null;")
    assert browser.execute(one, node) is None  # at 1x it is merged with its neighbours
    # find it by name: the view zooms until that one node is a span of its own
    browser.execute("const f = document.getElementById('find'); f.value = arguments[0];"
                    "f.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'})); return 1;",
                    target.node)
    drawn = browser.execute(one, node)
    assert drawn is not None and drawn[0] == 1 and drawn[1] >= 1.5
    zoom = browser.execute("return document.getElementById('zoom').textContent")
    assert int(zoom.rstrip("x")) > 100
    assert browser.execute("return document.querySelectorAll('rect.found').length") == 1
    # drag to pan: the view moves by what the mouse moved
    moved = browser.execute(
        "const s = document.querySelector('.scroll'), r = s.querySelector('rect.ev');"
        "const before = s.scrollLeft;"
        "r.dispatchEvent(new MouseEvent('mousedown', {bubbles: true, button: 0, clientX: 600}));"
        "window.dispatchEvent(new MouseEvent('mousemove', {clientX: 400}));"
        "window.dispatchEvent(new MouseEvent('mouseup', {clientX: 400}));"
        "return s.scrollLeft - before;")
    assert moved == 200
    # double-click a span: zoom to it
    browser.execute("document.getElementById('zoom-fit').click();"
                    "for (let k = 0; k < 6; k++) document.getElementById('zoom-in').click();"
                    "return 1;")
    assert browser.execute("return document.getElementById('zoom').textContent") == "64x"
    browser.execute("const r = document.querySelector('g.lane[data-lane=\"comm:dp\"] "
                    "rect[data-n=\"1\"]');"
                    "r.dispatchEvent(new MouseEvent('dblclick', {bubbles: true})); return 1;")
    zoom = browser.execute("return document.getElementById('zoom').textContent")
    assert int(zoom.rstrip("x")) > 64
    _no_console_errors(browser)


def test_hover_links_a_collective_and_its_wait_and_memory_has_a_scale(browser, tmp_path):
    g = load_graph(SAMPLE)
    report = compare_graphs(g)
    page = tmp_path / "single.html"
    write_html(report, page)
    browser.get(page.as_uri())
    exposed = next(c for c in report.before.collectives if c.exposed_us > 0)
    names = [n.name for n in report.nodes]
    coll, wait = names.index(exposed.node), names.index(exposed.wait)
    hover = ("const r = document.querySelector('rect[data-node=\"' + arguments[0] + '\"]');"
             "r.dispatchEvent(new MouseEvent('mouseover', {bubbles: true, clientX: 50,"
             " clientY: 50}));"
             "const l = document.querySelector('polyline.link');"
             "return [Array.from(document.querySelectorAll('rect.linked'))"
             ".map(x => +x.dataset.node).sort((a, b) => a - b),"
             " l ? l.getAttribute('points').split(' ').length : 0];")
    for node in (coll, wait):  # hover either one: both lit, link issue -> comm -> wait
        lit, points = browser.execute(hover, node)
        assert lit == sorted([coll, wait]) and points == 4
    browser.execute("document.querySelector('rect.linked').dispatchEvent("
                    "new MouseEvent('mouseout', {bubbles: true})); return 1;")
    assert browser.execute("return document.querySelectorAll('rect.linked, polyline.link')"
                           ".length") == 0
    labels = browser.execute("return Array.from(document.querySelectorAll('g.mem-axis text'))"
                             ".map(t => t.textContent);")
    assert labels[0] == "0 B" and labels[-1].endswith(("KiB", "MiB", "GiB")) and len(labels) == 3
    _no_console_errors(browser)


def test_console_errors_are_seen(browser, tmp_path):
    """The console check is live: a page that throws is reported."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>throw new Error('boom')</script></body></html>")
    browser.get(page.as_uri())
    entries = browser.console_log()
    assert any("boom" in e.get("message", "") for e in entries)


def test_skips_cleanly_without_chromium(monkeypatch):
    from tests.report import webdriver

    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert webdriver.find_browser() is None


def test_far_out_zoom_levels_cover_every_visible_span_once(browser, page_20k):
    """Far out, a lane of many spans is drawn from summed bins (levels): at every zoom the
    rects drawn still stand for exactly the spans in view, each once, and single spans wide
    enough to see are drawn on their own."""
    browser.get(page_20k[1])
    in_view = """
      const D = JSON.parse(document.getElementById('commopt-data').textContent);
      const s = document.querySelector('.scroll'), W = +s.querySelector('svg').getAttribute('width');
      const px = W / D.span_us, t0 = s.scrollLeft / px, t1 = (s.scrollLeft + s.clientWidth) / px;
      return D.schedules[0].lanes.map(l => {
        let n = 0;
        for (let k = 0; k < l.ev.length; k += 5) if (l.ev[k] <= t1 && l.ev[k + 1] >= t0) n++;
        return n; });"""
    browser.execute("document.getElementById('zoom-fit').click(); return 1;")
    for step in range(9):
        shown = browser.execute(LANES_JS)[0]["lanes"]
        assert [lane["covered"] for lane in shown] == browser.execute(in_view), f"zoom step {step}"
        browser.execute("const s = document.querySelector('.scroll');"
                        "s.scrollLeft = (s.scrollWidth - s.clientWidth) * 0.37;"
                        "s.dispatchEvent(new Event('scroll'));"
                        "document.getElementById('zoom-in').click(); return 1;")
    _no_console_errors(browser)
