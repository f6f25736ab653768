"""Exact mode end to end: never worse than the heuristic, every order it returns keeps the
invariants and the memory budget, the proven bound reaches the certificate."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import commopt
from commopt.errors import OptionError
from commopt.invariants import check_order
from commopt.passes.base import PassContext
from commopt.passes.manager import PassManager
from commopt.passes.registry import get_registry, parse_pipeline
from tests.cli_run import run_cli
from tests.strategies import graph_and_durations

pytest.importorskip("ortools.sat.python.cp_model")

from commopt import solver  # noqa: E402


def _heuristic(graph, ctx):
    passes = [get_registry().create(n) for n in parse_pipeline(None)]
    return PassManager(passes).run(graph, graph.original_order, ctx)


@settings(max_examples=25)
@given(graph_and_durations(max_steps=25), st.sampled_from([0.0, 0.1, 10.0]), st.booleans())
def test_exact_is_never_worse_and_every_order_verifies(case, increase, cross_group):
    g, durations = case
    ctx = PassContext.for_graph(g, durations, max_memory_increase=increase,
                                allow_cross_group_reorder=cross_group)
    heuristic = _heuristic(g, ctx)
    out = solver.improve(g, heuristic.order, ctx, time_limit_s=2.0, workers=1)
    assert out.sim.makespan_us <= heuristic.final.makespan_us
    assert check_order(g, out.order, allow_cross_group_reorder=cross_group) == []
    if out.run.kept:
        assert out.sim.makespan_us < heuristic.final.makespan_us
        assert ctx.fits(g, out.order)
    if out.run.proven_bound_us is not None:
        assert out.run.proven_bound_us <= out.sim.makespan_us + 1e-6


def test_mesh2d_reaches_the_proven_optimum_within_the_budget(samples_dir, tmp_path):
    """The heuristic's mesh2d order is 3% above the cheap bound; the solver closes it."""
    r = commopt.optimize(samples_dir / "ws8" / "mesh2d.json", solver="exact", time_limit_s=15,
                         output_dir=tmp_path, timings=False)
    heuristic = r.pipeline.records[-2].after.makespan_us
    run = r.summary.certificate.solver
    assert run is not None and run.status == "optimal"
    assert r.pipeline.final.makespan_us <= heuristic
    assert [rec.name for rec in r.pipeline.records][-1] == "exact"
    assert check_order(r.graph, r.order, allow_cross_group_reorder=r.summary.allow_cross_group_reorder) == []
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["certificate"]["solver"]["status"] == "optimal"
    assert doc["certificate"]["gap_to_optimal"] <= 0.031


def test_windows_are_never_worse_and_verify(samples_dir, monkeypatch):
    from commopt.estimators import resolve
    from commopt.io import load_graph

    g = load_graph(samples_dir / "ws8" / "llama_tp.json")
    durations = resolve("analytical").durations(g)
    ctx = PassContext.for_graph(g, durations)
    heuristic = _heuristic(g, ctx)
    monkeypatch.setattr(solver, "WHOLE_GRAPH_NODES", 50)
    out = solver.improve(g, heuristic.order, ctx, time_limit_s=4.0, workers=1)
    assert out.run.status == "windows" and out.run.proven_bound_us is None
    assert "windows" in out.run.note
    assert out.sim.makespan_us <= heuristic.final.makespan_us
    assert check_order(g, out.order) == [] and ctx.fits(g, out.order)


def test_options_are_checked_before_any_work(samples_dir, monkeypatch):
    graph = samples_dir / "ws8" / "ddp.json"
    with pytest.raises(OptionError, match="solver must be"):
        commopt.optimize(graph, solver="best")
    with pytest.raises(OptionError, match="--solver exact"):
        commopt.optimize(graph, time_limit_s=3)
    with pytest.raises(OptionError, match="time limit"):
        commopt.optimize(graph, solver="exact", time_limit_s=0)
    monkeypatch.setitem(__import__("sys").modules, "ortools.sat.python.cp_model", None)
    with pytest.raises(OptionError, match=r"commopt\[exact\]"):
        commopt.optimize(graph, solver="exact", time_limit_s=1)
    with pytest.raises(OptionError, match=r"commopt\[exact\]"):
        commopt.optimize(graph, solver="exact")


def test_cli_solver_exact_and_a_bad_time_limit(samples_dir, tmp_path, capsys):
    graph = str(samples_dir / "ws8" / "ddp.json")
    assert run_cli(["optimize", graph, "-o", str(tmp_path / "o"), "--solver", "exact",
                    "--time-limit", "2"]) == 0
    assert "of optimal" in capsys.readouterr().out
    assert run_cli(["optimize", graph, "-o", str(tmp_path / "p"), "--time-limit", "2"]) == 2
    assert "--solver exact" in capsys.readouterr().err


@pytest.mark.slow
def test_a_corpus_graph_solved_with_a_short_time_limit(repo_root):
    path = repo_root / "sample_graphs" / "corpus" / "ws2" / "llama_tp_L8.pt2"
    r = commopt.optimize(path, solver="exact", time_limit_s=10, timings=False)
    heuristic = r.pipeline.records[-2].after
    assert r.pipeline.final.makespan_us <= heuristic.makespan_us
    assert check_order(r.graph, r.order, allow_cross_group_reorder=r.summary.allow_cross_group_reorder) == []
    cert = r.summary.certificate
    assert cert.solver is not None and cert.lower_bound_us <= r.pipeline.final.makespan_us
