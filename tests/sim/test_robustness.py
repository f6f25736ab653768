"""commopt.sim.robustness: makespans under perturbed cost estimates, on a corpus graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from commopt.sim import simulate
from commopt.sim.engine import makespan_us
from commopt.sim.robustness import COST_ERROR, makespan_range, perturbations

GRAPH = Path(__file__).resolve().parents[2] / "sample_graphs" / "corpus" / "ws2" / "llama_tp_sp_2d.pt2"


@pytest.fixture(scope="module")
def graph_and_durations():
    from commopt.estimators import resolve
    from commopt.io import load_graph

    g = load_graph(GRAPH)
    return g, resolve("analytical").durations(g)


def test_makespan_only_replay_is_simulates_makespan(graph_and_durations):
    g, d = graph_and_durations
    assert makespan_us(g, g.original_order, d) == simulate(g, g.original_order, d).makespan_us


def test_scenarios_scale_within_the_error_and_are_deterministic(graph_and_durations):
    g, d = graph_and_durations
    first, again = perturbations(g, d), perturbations(g, d)
    assert [n for n, _ in first] == ["comm x0.7", "comm x1.3", "compute x0.7", "compute x1.3",
                                     "random #1", "random #2"]
    assert first == again
    for _, durs in first:
        for base, got in zip(d, durs, strict=True):
            assert base * (1 - COST_ERROR) - 1e-9 <= got <= base * (1 + COST_ERROR) + 1e-9
    comm = {c for c in g.collectives()}
    slow_comm = dict(first)["comm x1.3"]
    assert all(slow_comm[i] == d[i] * 1.3 if i in comm else slow_comm[i] == d[i] for i in range(len(g)))


def test_range_brackets_the_nominal_makespan(graph_and_durations):
    g, d = graph_and_durations
    r = makespan_range(g, g.original_order, d)
    m = dict(r.scenarios)
    assert r.min_us <= r.nominal_us <= r.worst_us
    assert m["comm x0.7"] <= r.nominal_us <= m["comm x1.3"]
    assert m["compute x0.7"] < r.nominal_us < m["compute x1.3"]
    assert r.worst_us == max(m.values())


def test_summary_shows_both_orders_ranges():
    import commopt

    s = commopt.optimize(GRAPH, timings=False).summary
    r = s.robustness
    assert r is not None and len(r.scenarios) == 6 and r.cost_error == COST_ERROR
    assert r.before_min_us <= s.before.makespan_us <= r.before_max_us
    assert r.after_min_us <= s.after.makespan_us <= r.after_max_us
    assert r.after_max_us == max([s.after.makespan_us, *(x.after_us for x in r.scenarios)])
