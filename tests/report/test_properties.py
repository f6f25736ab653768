"""Property tests: any valid graph and order gives a complete, consistent report."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from commopt.report.build import build_report
from commopt.report.html import report_data
from commopt.report.markdown import render_markdown
from commopt.report.trace import render_trace
from commopt.sim import simulate
from commopt.sim.result import COMPUTE_LANE
from tests.report.samples import sunk_order
from tests.report.test_trace import validate_trace
from tests.strategies import graph_and_durations


@st.composite
def _case(draw):
    g, d = draw(graph_and_durations())
    return g, d, sunk_order(g)  # a second order: every wait as late as its users allow


@settings(max_examples=40)
@given(_case())
def test_report_covers_every_span_and_collective(case):
    g, d, after = case
    r = build_report(g, g.original_order, after, d, estimator_name="t")
    for sched, order in ((r.before, g.original_order), (r.after, after)):
        sim = simulate(g, order, d)
        assert len(sched.events) == len(sim.events)
        assert sum(lane.events for lane in sched.lanes) == len(sim.events)
        assert sched.lanes[0].name == COMPUTE_LANE
        assert sorted(c.node for c in sched.collectives) == sorted(
            g.nodes[i].name for i in g.collectives())
        # spans in one lane row never overlap
        for lane in sched.lanes:
            for row in range(lane.rows):
                spans = sorted((e.start_us, e.end_us) for e in sched.events
                               if e.lane == lane.name and e.row == row)
                assert all(b[0] >= a[1] - 1e-9 for a, b in zip(spans, spans[1:], strict=False))
        exposed = sum(c.exposed_us for c in sched.collectives)
        assert abs(exposed - sched.exposed_comm_us) < 1e-6
    assert all(c.reasons for c in r.after.collectives if c.node in r.top_exposed)
    validate_trace(json.loads(json.dumps(render_trace(r))))
    data = report_data(r)
    assert sum(len(lane["ev"]) // 5 for s in data["schedules"] for lane in s["lanes"]) == (
        len(r.before.events) + len(r.after.events))
    assert render_markdown(r).startswith("## commopt overlap report")
