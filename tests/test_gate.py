"""The CI gate: thresholds, baseline regressions, verdict and annotations."""

import dataclasses
import json
from types import SimpleNamespace

import pytest

from commopt import gate
from commopt.errors import CommoptError, OptionError
from commopt.schemas.check import CheckMetrics


def _m(exposed=100.0, makespan=1000.0, overlap=0.8, peak=1 << 20, digest=None):
    return CheckMetrics(makespan_us=makespan, exposed_comm_us=exposed, overlap_ratio=overlap, peak_memory_bytes=peak,
                        graph_digest=digest)


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


@pytest.mark.parametrize("kwargs, option", [
    ({"max_exposed_comm_us": float("nan")}, "--max-exposed-comm-us"),
    ({"min_overlap": float("nan")}, "--min-overlap"),
    ({"max_peak_memory": float("inf")}, "--max-peak-memory"),
    ({"max_exposed_comm_us": -1.0}, "--max-exposed-comm-us"),
    ({"min_overlap": 1.5}, "--min-overlap"),
    ({"max_gap_to_optimal": float("nan")}, "--max-gap-to-optimal"),
    ({"max_gap_to_optimal": -1.0}, "--max-gap-to-optimal"),
])
def test_thresholds_that_cannot_be_compared_are_option_errors(kwargs, option):
    with pytest.raises(OptionError) as err:
        gate.evaluate(_m(), **kwargs)
    assert err.value.field == option


def test_max_regression_needs_a_baseline():
    with pytest.raises(OptionError, match="--baseline"):
        gate.evaluate(_m(), max_regression=5)
    assert gate.evaluate(_m(), baseline=_m(), max_regression=5)[0].passed


def test_graph_identity_ignores_order_sizes_and_timings_but_not_the_program(samples_dir):
    from commopt.io import load_graph

    g = load_graph(samples_dir / "ws2" / "ddp.json")
    bigger = [dataclasses.replace(n, duration_us=3.0, collective=dataclasses.replace(
        n.collective, in_bytes=n.collective.in_bytes * 1000) if n.collective else None) for n in g.nodes]
    same = SimpleNamespace(nodes=bigger[::-1])  # another order, other sizes and timings
    assert gate.graph_identity(same) == gate.graph_identity(g)
    renamed = SimpleNamespace(nodes=[dataclasses.replace(bigger[0], name="other"), *bigger[1:]])
    assert gate.graph_identity(renamed) != gate.graph_identity(g)
    assert gate.graph_identity(load_graph(samples_dir / "ws2" / "fsdp.json")) != gate.graph_identity(g)


def test_a_baseline_of_another_graph_is_refused_and_an_old_one_without_identity_is_compared():
    with pytest.raises(OptionError, match="another graph"):
        gate.evaluate(_m(digest="a" * 64), baseline=_m(digest="b" * 64))
    assert gate.evaluate(_m(digest="a" * 64), baseline=_m())[0].passed


def test_a_baseline_simulated_with_another_compute_slowdown_is_refused(tmp_path):
    with pytest.raises(OptionError, match="estimated another way \\(compute slowdown 'none' there, '1.2x' here"):
        gate.evaluate(_m().model_copy(update={"compute_slowdown": 1.2}), baseline=_m())
    s = tmp_path / "summary.json"
    s.write_text(json.dumps({"after": {"makespan_us": 10, "exposed_comm_us": 2, "overlap_ratio": 0.5,
                                       "peak_memory_bytes": 7}, "compute_slowdown": {"factor": 1.3, "source": "x"}}))
    baseline = gate.load_baseline(s)
    assert baseline.compute_slowdown == 1.3
    with pytest.raises(OptionError, match="compute slowdown '1.3x' there, 'none' here"):
        gate.evaluate(_m(), baseline=baseline)
    assert gate.evaluate(_m(makespan=10).model_copy(update={"compute_slowdown": 1.3}), baseline=baseline,
                         max_regression=5.0)


def test_a_baseline_of_another_estimator_or_hardware_is_refused(tmp_path):
    def m(**update):
        return _m().model_copy(update=update)

    with pytest.raises(OptionError, match="estimator 'analytical' there, 'profile,analytical' here"):
        gate.evaluate(m(estimator="profile,analytical", hardware="h100"),
                      baseline=m(estimator="analytical", hardware="h100"))
    with pytest.raises(OptionError, match="hardware 'a100' there, 'h100' here"):
        gate.evaluate(m(estimator="analytical", hardware="h100"), baseline=m(estimator="analytical", hardware="a100"))
    # a hardware file by its name (paths differ between checkouts); unrecorded: not compared
    assert all(o.passed for o in gate.evaluate(m(hardware="/ci/repo/hw.json"), baseline=m(hardware="/home/me/repo/hw.json")))
    assert all(o.passed for o in gate.evaluate(m(estimator="analytical"), baseline=_m()))
    # both recorded by a summary.json and by a check result, also one from before metrics named them
    s = tmp_path / "summary.json"
    s.write_text(json.dumps({"after": {"makespan_us": 10, "exposed_comm_us": 2, "overlap_ratio": 0.5,
                                       "peak_memory_bytes": 7}, "estimator": "analytical", "hardware": "a100"}))
    assert (gate.load_baseline(s).estimator, gate.load_baseline(s).hardware) == ("analytical", "a100")
    old = json.loads(gate.result("g", "table,analytical", True, _m(), [], None).model_dump_json())
    del old["metrics"]["estimator"]
    c = tmp_path / "check.json"
    c.write_text(json.dumps(old))
    assert gate.load_baseline(c).estimator == "table,analytical"


@pytest.mark.parametrize("text, field", [
    ('{"after": {"makespan_us": "x", "exposed_comm_us": 1, "overlap_ratio": 0, "peak_memory_bytes": 1}}',
     "after.makespan_us"),
    ('{"after": {"makespan_us": -1, "exposed_comm_us": 1, "overlap_ratio": 0, "peak_memory_bytes": 1}}',
     "after.makespan_us"),
    ('{"after": {"makespan_us": 1, "exposed_comm_us": 1, "overlap_ratio": 0, "peak_memory_bytes": 1},'
     ' "lower_bound_us": -5}', "lower_bound_us"),
])
def test_baseline_numbers_are_checked_naming_the_field(tmp_path, text, field):
    p = tmp_path / "base.json"
    p.write_text(text)
    with pytest.raises(CommoptError) as err:
        gate.load_baseline(p)
    assert err.value.field == field and err.value.file == str(p)


@pytest.mark.parametrize("data, message", [
    (b'{"after": NaN}', "NaN"), (b'{"after": "\xff"}', "not UTF-8"), (b"", "empty"),
])
def test_unreadable_baselines_are_user_errors(tmp_path, data, message):
    p = tmp_path / "base.json"
    p.write_bytes(data)
    with pytest.raises(CommoptError, match=message):
        gate.load_baseline(p)


def test_gap_to_optimal_is_makespan_over_the_proven_bound():
    m = CheckMetrics(makespan_us=1030.0, exposed_comm_us=0.0, overlap_ratio=1.0, peak_memory_bytes=1,
                     lower_bound_us=1000.0)
    (ok,) = gate.evaluate(m, max_gap_to_optimal=3.5)
    (bad,) = gate.evaluate(m, max_gap_to_optimal=2.0)
    assert ok.passed and ok.value == pytest.approx(3.0)
    assert not bad.passed and "within 3.00% of optimal" in bad.message
    with pytest.raises(OptionError, match="lower bound"):
        gate.evaluate(_m(), max_gap_to_optimal=1.0)
