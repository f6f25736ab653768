"""commopt.sim.robustness: makespans under perturbed cost estimates, on a corpus graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from commopt.sim import simulate
from commopt.sim.engine import makespan_us
from commopt.sim.robustness import (
    COST_ERROR,
    makespan_range,
    makespans,
    perturbations,
    robustness_summary,
)

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


def test_summary_takes_the_before_orders_makespans_when_already_simulated(graph_and_durations):
    """A process beside the passes simulates the input order's scenarios
    (commopt.api._input_order_beside): given them, the entry is the one computed here;
    given other numbers, it shows those (they are used, not recomputed)."""
    g, durs = graph_and_durations
    before = simulate(g, g.original_order, durs).makespan_us
    after_order = g.original_order
    computed = robustness_summary(g, g.original_order, after_order, durs, before, before)
    spans = makespans(g, g.original_order, [d for _, d in perturbations(g, durs)])
    assert robustness_summary(g, g.original_order, after_order, durs, before, before,
                              before_makespans=spans) == computed
    given = robustness_summary(g, g.original_order, after_order, durs, before, before,
                               before_makespans=[1.0] * len(spans))
    assert [x.before_us for x in given.scenarios] == [1.0] * len(spans)
    assert [x.after_us for x in given.scenarios] == [x.after_us for x in computed.scenarios]


def _shuffled_order(g, rng):
    """A random permutation with every wait after its collective (all the engine requires):
    nodes read values before they are ready, views of values in flight, waits far away."""
    order = [n.index for n in g.nodes if n.wait_of is None]
    rng.shuffle(order)
    for n in g.nodes:
        if n.wait_of is not None:
            order.insert(rng.randint(order.index(n.wait_of) + 1, len(order)), n.index)
    return order


@pytest.mark.parametrize("name", ["llama_tp_sp_2d", "llama_fsdp", "mixtral_ep"])
def test_scenario_makespans_are_the_engines(name):
    """makespans() (the engine's event-free replay) gives each scenario the makespan of the
    full simulation, under random valid orders."""
    import random

    from commopt.estimators import resolve
    from commopt.io import load_graph
    from commopt.sim.robustness import makespans

    g = load_graph(GRAPH.with_name(f"{name}.pt2"))
    d = resolve("analytical").durations(g)
    lists = [durs for _, durs in perturbations(g, d)] + [d]
    rng = random.Random(7)
    orders = [g.original_order]
    orders += [_shuffled_order(g, rng) for _ in range(8)]
    for order in orders:
        assert makespans(g, order, lists) == [simulate(g, order, x).makespan_us for x in lists]


def test_scenario_makespans_refuse_a_wait_before_its_collective(graph_and_durations):
    from commopt.errors import InvariantViolation
    from commopt.sim.robustness import makespans

    g, d = graph_and_durations
    w = next(n.index for n in g.nodes if n.wait_of is not None)
    order = [w] + [i for i in g.original_order if i != w]
    with pytest.raises(InvariantViolation):
        makespans(g, order, [d])
