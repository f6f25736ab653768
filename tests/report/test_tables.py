"""The renderers' shared pieces: which wait a timeline links each collective to."""

from __future__ import annotations

from commopt.report.build import build_report
from commopt.report.tables import blocking_waits
from commopt.schemas.report import ScheduleReport
from tests.report.samples import durations, hand_sim, naive_sim, two_groups


def _schedules():
    g = two_groups()
    r = build_report(g, g.original_order, g.original_order, durations(g), estimator_name="t",
                     before_sim=naive_sim(g), after_sim=hand_sim(g))
    return r.before, r.after


def test_the_blocking_wait_is_the_exposed_span_of_the_wait():
    naive, hand = _schedules()
    assert {c: (e.node, e.start_us) for c, e in blocking_waits(naive).items()} == {
        "ag_a": ("ag_a_wait", 0.0), "ag_b": ("ag_b_wait", 40.0), "ar": ("ar_wait", 70.0)}
    # only ag_b's wait blocked the compute stream in the hand-scheduled order
    assert {c: e.node for c, e in blocking_waits(hand).items()} == {"ag_b": "ag_b_wait"}


def test_a_collective_with_several_waits_links_to_the_first_that_blocked():
    naive, _ = _schedules()
    # ag_b completed by two waits, listed in the schedule's order: ar_wait blocked first
    data = naive.model_dump()
    for c in data["collectives"]:
        if c["node"] == "ag_b":
            c["waits"] = ["mm1", "ar_wait", "ag_b_wait"]
    s = ScheduleReport.model_validate(data)
    assert blocking_waits(s)["ag_b"].node == "ar_wait"
    for c in data["collectives"]:
        if c["node"] == "ag_b":
            c["waits"] = ["mm1"]
    assert "ag_b" not in blocking_waits(ScheduleReport.model_validate(data))
