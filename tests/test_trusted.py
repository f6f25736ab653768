"""trusted.maker: report models made without validation are the ones pydantic builds."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, PrivateAttr

from commopt.report.build import build_report
from commopt.schemas.report import OverlapReport, ReportEvent
from commopt.sim.result import CollectiveTiming, SimEvent
from commopt.trusted import maker
from tests.report.samples import durations, hand_sim, two_groups

_VALUES = {"node": "w0", "lane": "compute", "row": 1, "step": 7, "start_us": 1.5,
           "end_us": 4.0, "exposed": True}


def test_made_instance_equals_the_validated_one():
    made = maker(ReportEvent)(dict(_VALUES))
    checked = ReportEvent.model_validate(_VALUES)
    assert made == checked
    assert made.model_dump_json() == checked.model_dump_json()
    assert made.model_fields_set == checked.model_fields_set


def test_assignment_changes_only_its_own_instance():
    make = maker(ReportEvent)
    a, b = make(dict(_VALUES)), make(dict(_VALUES))
    a.row = 3
    assert (a.row, b.row) == (3, 1)
    assert a.model_fields_set is not b.model_fields_set


def test_a_model_with_private_state_is_refused():
    class Private(BaseModel):
        x: int
        _cache: int = PrivateAttr(default=0)

    with pytest.raises(TypeError, match="Private"):
        maker(Private)


def _whole(x):
    return int(x) if isinstance(x, float) and x.is_integer() else x


def test_built_report_is_what_validation_gives():
    # a simulation may hold int times: the builder converts them, as validation would
    g = two_groups()
    sim = hand_sim(g)
    sim.events[:] = [SimEvent(*map(_whole, (e.node, e.lane, e.start_us, e.end_us)))
                     for e in sim.events]
    sim.collectives[:] = [CollectiveTiming(*map(_whole, (
        t.node, t.group, t.issue_us, t.start_us, t.end_us, t.wait_node, t.wait_start_us,
        t.exposed_us))) for t in sim.collectives]
    assert isinstance(sim.events[0].start_us, int)
    report = build_report(g, g.original_order, None, durations(g), estimator_name="table",
                          before_sim=sim)
    # repr tells 0 from 0.0, which the renderers write differently
    assert repr(report.model_dump()) == repr(OverlapReport.model_validate(report.model_dump()).model_dump())
