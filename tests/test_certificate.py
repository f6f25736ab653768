"""The certificate: the best proven bound, the gap it proves, and how it is worded."""

from __future__ import annotations

import json

import pytest

import commopt
from commopt.certificate import certify, words
from commopt.schemas.summary import SolverRun
from commopt.sim import simulate


def test_summary_and_report_carry_the_certificate(samples_dir, tmp_path):
    r = commopt.optimize(samples_dir / "ws8" / "mesh2d.json", output_dir=tmp_path, timings=False)
    doc = json.loads((tmp_path / "summary.json").read_text())
    cert = doc["certificate"]
    assert cert["source"] == "bounds" and cert["solver"] is None
    assert cert["lower_bound_us"] == doc["lower_bound_us"] == max(cert["bounds_us"].values())
    assert cert["gap_to_optimal"] == pytest.approx(doc["after"]["makespan_us"] / cert["lower_bound_us"] - 1)
    assert r.outputs.report.certificate == r.summary.certificate
    assert "of optimal" in (tmp_path / "report.html").read_text()


def test_a_higher_solver_bound_wins_and_an_optimal_order_says_so(samples_dir):
    r = commopt.optimize(samples_dir / "ws8" / "mesh2d.json", timings=False)
    final = r.pipeline.final
    run = SolverRun(status="optimal", time_limit_seconds=1.0, seconds=None,
                    makespan_us=final.makespan_us, proven_bound_us=final.makespan_us, kept=False)
    cert = certify(final, run)
    assert cert.source == "exact solver" and cert.proven_optimal and cert.gap_to_optimal == 0.0
    assert words(cert).startswith("proven optimal")
    low = run.model_copy(update={"proven_bound_us": 1.0})
    assert certify(final, low).source == "bounds"
    assert "the true gap may be smaller" in words(certify(final, low))


def test_a_bound_above_a_makespan_is_a_bug_not_a_certificate(samples_dir):
    r = commopt.optimize(samples_dir / "ws8" / "mesh2d.json", timings=False)
    final = r.pipeline.final
    run = SolverRun(status="optimal", time_limit_seconds=1.0, seconds=None,
                    makespan_us=final.makespan_us, proven_bound_us=final.makespan_us * 2, kept=False)
    with pytest.raises(RuntimeError, match="a bug"):
        certify(final, run)
    assert simulate(r.graph, r.order, r.durations_us).makespan_us == final.makespan_us
