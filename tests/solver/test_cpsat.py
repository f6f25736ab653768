"""The CP-SAT model against brute force: on tiny random graphs, its optimum is the best
makespan over every order that keeps the invariants, and the order read back replays it."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings

from commopt.invariants import check_order
from commopt.sim import simulate
from commopt.solver.problem import PLACED_KINDS, assemble, problem
from tests.strategies import graph_and_durations

pytest.importorskip("ortools.sat.python.cp_model")

from commopt.solver import cpsat  # noqa: E402

#: Brute force enumerates every order of graphs with at most this many placed nodes.
MAX_PLACED = 7


def _valid_orders(graph, limit: int = 50_000):
    """Every topological order of ``graph`` that keeps the invariants (at most ``limit``)."""
    n = len(graph)
    indeg = [len(graph.preds(i)) for i in range(n)]
    used = bytearray(n)
    prefix: list[int] = []
    out: list[list[int]] = []

    def extend() -> None:
        if len(out) >= limit:
            return
        if len(prefix) == n:
            if not check_order(graph, prefix):
                out.append(list(prefix))
            return
        for i in range(n):
            if not used[i] and indeg[i] == 0:
                used[i] = 1
                prefix.append(i)
                for s in graph.succs(i):
                    indeg[s] -= 1
                extend()
                for s in graph.succs(i):
                    indeg[s] += 1
                prefix.pop()
                used[i] = 0

    extend()
    return out


def _optimum(graph, durations):
    prob = problem(graph, durations, allow_cross_group_reorder=False)
    heuristic = graph.original_order
    from commopt.sim.engine import node_times

    times = node_times(graph, heuristic, [float(u) for u in prob.units])
    hint = {i: (int(times.issue[i]) if not prob.on_compute_stream(i) else int(times.start[i]),
                int(times.start[i])) for i in prob.placed}
    horizon = max([1] + [int(times.end[i]) for i in prob.placed])
    return prob, cpsat.solve(prob, prob.placed, hint=hint, horizon=horizon, time_limit_s=10, workers=1)


@settings(max_examples=30)
@given(graph_and_durations(max_steps=8, max_groups=2))
def test_the_model_optimum_is_the_brute_force_optimum(case):
    g, durations = case
    placed = sum(1 for n in g.nodes if n.kind in PLACED_KINDS)
    assume(placed <= MAX_PLACED)
    orders = _valid_orders(g)
    assume(0 < len(orders) < 50_000)
    best = min(simulate(g, o, durations).makespan_us for o in orders)
    prob, sol = _optimum(g, durations)
    assert sol.status == "optimal"
    assert sol.objective == round(best * prob.units_per_us)
    assert sol.bound == sol.objective
    for seq in sol.sequences:
        order = assemble(g, seq)
        assert check_order(g, order) == []
        assert simulate(g, order, durations).makespan_us == pytest.approx(best)


def test_a_wait_never_sits_inside_a_kernel(samples_dir):
    """Zero-length waits take part in the compute stream's no-overlap: the order read back
    replays exactly the solver's makespan on a real sample."""
    from commopt.estimators import resolve
    from commopt.io import load_graph

    g = load_graph(samples_dir / "ws8" / "mesh2d.json")
    durations = resolve("analytical").durations(g)
    prob, sol = _optimum(g, durations)
    assert sol.status == "optimal"
    order = assemble(g, sol.sequences[-1])
    assert check_order(g, order) == []
    makespan = simulate(g, order, durations).makespan_us
    assert makespan * prob.units_per_us <= sol.objective + len(prob.placed)
    assert sol.bound / prob.units_per_us <= makespan
