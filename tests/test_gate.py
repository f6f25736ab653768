"""The CI gate: thresholds, baseline regressions, verdict and annotations."""

import json

import pytest

from commopt import gate
from commopt.errors import CommoptError
from commopt.schemas.check import CheckMetrics


def _m(exposed=100.0, makespan=1000.0, overlap=0.8, peak=1 << 20):
    return CheckMetrics(makespan_us=makespan, exposed_comm_us=exposed, overlap_ratio=overlap, peak_memory_bytes=peak)


def test_thresholds_pass_and_fail_independently():
    outs = gate.evaluate(_m(), max_exposed_comm_us=50, min_overlap=0.5, max_peak_memory=2 << 20)
    assert [o.name for o in outs] == ["max-exposed-comm-us", "min-overlap", "max-peak-memory"]
    assert [o.passed for o in outs] == [False, True, True]
    line = gate.verdict_line("m.pt2", outs)
    assert line.startswith("FAIL m.pt2: exposed communication 100.0 us (limit 50.0 us)")


def test_regression_within_allowance_passes_beyond_fails():
    base = _m(exposed=100.0)
    ok = gate.evaluate(_m(exposed=104.0), baseline=base, max_regression=5)
    assert all(o.passed for o in ok)
    bad = gate.evaluate(_m(exposed=106.0), baseline=base, max_regression=5)
    assert [o.name for o in bad if not o.passed] == ["regression:exposed_comm_us"]
    assert "+6.0%" in bad[0].message


def test_zero_baseline_tolerates_only_rounding():
    base = _m(exposed=0.0)
    assert gate.evaluate(_m(exposed=0.2), baseline=base)[0].passed
    assert not gate.evaluate(_m(exposed=3.0), baseline=base)[0].passed


def test_no_checks_is_a_pass_that_says_so():
    assert "no thresholds" in gate.verdict_line("g", [])


def test_annotations_escape_workflow_command_characters():
    res = gate.result("a:b,c.pt2", "analytical", True, _m(), gate.evaluate(_m(), max_exposed_comm_us=1), None)
    (ann,) = gate.github_annotations(res)
    assert ann.startswith("::error file=a%3Ab%2Cc.pt2,title=commopt max-exposed-comm-us::")


def test_baseline_from_summary_and_from_check_result(tmp_path):
    s = tmp_path / "summary.json"
    s.write_text(json.dumps({"after": {"makespan_us": 10, "exposed_comm_us": 2, "overlap_ratio": 0.5,
                                       "peak_memory_bytes": 7}, "lower_bound_us": 9}))
    assert gate.load_baseline(s).exposed_comm_us == 2
    res = gate.result("g", "analytical", True, _m(), [], None)
    c = tmp_path / "check.json"
    c.write_text(res.model_dump_json())
    assert gate.load_baseline(c).makespan_us == 1000.0
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": 1}')
    with pytest.raises(CommoptError, match="not a commopt summary.json"):
        gate.load_baseline(bad)
