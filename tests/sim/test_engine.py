"""The simulator on graphs small enough to check by hand, plus properties on random graphs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commopt.errors import InvariantViolation
from commopt.ir.builder import GraphBuilder
from commopt.ir.schedule import ScheduleError
from commopt.sim import COMPUTE_LANE, comm_lane, critical_path_us, simulate


def _durations(graph, **by_name: float) -> list[float]:
    d = [0.0] * len(graph)
    for name, v in by_name.items():
        d[graph.index_of[name]] = v
    return d


def _one_allreduce():
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (4, 8))
    a = b.compute("a", "aten.relu.default", [x], (4, 8))
    c = b.collective("c", "all_reduce", "g", a)
    b.compute("b", "aten.relu.default", [x], (4, 8))
    w = b.wait("w", c)
    d = b.compute("d", "aten.relu.default", [w], (4, 8))
    b.output([d])
    return b.build()


def test_wait_exposes_what_compute_does_not_hide():
    g = _one_allreduce()
    r = simulate(g, g.original_order, _durations(g, a=10, c=30, b=5, d=4))
    # a 0-10; c issued at 10, runs 10-40; b 10-15; w idles 15-40; d 40-44
    assert r.makespan_us == 44
    assert r.exposed_comm_us == 25
    assert r.total_compute_us == 19
    assert r.comm_us_by_group == {"g": 30}
    assert r.overlap_ratio == pytest.approx(5 / 30)
    (ct,) = r.collectives
    assert (ct.issue_us, ct.start_us, ct.end_us) == (10, 10, 40)
    assert ct.wait_node == g.index_of["w"] and ct.wait_start_us == 15 and ct.exposed_us == 25
    assert r.critical_path_us == 44 and r.lower_bound_us == 44


def test_enough_compute_hides_the_collective():
    g = _one_allreduce()
    r = simulate(g, g.original_order, _durations(g, a=10, c=30, b=50, d=4))
    # c runs 10-40 under b (10-60); the wait costs nothing
    assert r.exposed_comm_us == 0 and r.overlap_ratio == 1.0
    assert r.makespan_us == 64
    assert r.lower_bound_us == 64  # total compute
    spans = [(e.node, e.lane, e.start_us, e.end_us) for e in r.events]
    assert (g.index_of["c"], comm_lane("g"), 10, 40) in spans
    assert (g.index_of["b"], COMPUTE_LANE, 10, 60) in spans


def _two_collectives(same_group: bool):
    b = GraphBuilder(world_size=2)
    b.group("g1", ranks=[0, 1])
    b.group("g2", ranks=[0, 1])
    x = b.input("x", (4,))
    c1 = b.collective("c1", "all_reduce", "g1", x)
    c2 = b.collective("c2", "all_reduce", "g1" if same_group else "g2", x)
    b.compute("k", "aten.relu.default", [x], (4,))
    w1 = b.wait("w1", c1)
    w2 = b.wait("w2", c2)
    b.output([w1, w2])
    return b.build()


def test_collectives_of_one_group_queue_on_its_stream():
    g = _two_collectives(same_group=True)
    r = simulate(g, g.original_order, _durations(g, c1=20, c2=20, k=15))
    t1, t2 = r.collectives
    assert (t1.start_us, t1.end_us) == (0, 20)
    assert (t2.issue_us, t2.start_us, t2.end_us) == (0, 20, 40)
    # k 0-15; w1 idles 15-20; w2 idles 20-40
    assert (t1.exposed_us, t2.exposed_us) == (5, 20)
    assert r.makespan_us == 40 and r.exposed_comm_us == 25
    assert r.lower_bound_us == 40  # the busiest stream


def test_groups_run_in_parallel():
    g = _two_collectives(same_group=False)
    r = simulate(g, g.original_order, _durations(g, c1=20, c2=20, k=15))
    t1, t2 = r.collectives
    assert (t1.start_us, t1.end_us) == (t2.start_us, t2.end_us) == (0, 20)
    assert (t1.exposed_us, t2.exposed_us) == (5, 0)
    assert r.makespan_us == 20 and r.comm_us_by_group == {"g1": 20, "g2": 20}


def test_collective_waits_for_its_input_and_views_cost_nothing():
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (4, 8))
    c1 = b.collective("c1", "all_gather", "g", x)
    w1 = b.wait("w1", c1)
    v = b.view("v", w1, (64,))
    c2 = b.collective("c2", "all_reduce", "g", v)
    w2 = b.wait("w2", c2)
    b.output([w2])
    g = b.build()
    r = simulate(g, g.original_order, _durations(g, c1=7, v=100, c2=3))
    assert [(t.start_us, t.end_us) for t in r.collectives] == [(0, 7), (7, 10)]
    assert r.makespan_us == 10 and r.exposed_comm_us == 10


def test_wait_before_its_collective_is_rejected():
    g = _one_allreduce()
    order = g.original_order
    c, w = g.index_of["c"], g.index_of["w"]
    order[c], order[w] = order[w], order[c]
    with pytest.raises(InvariantViolation, match="'w' comes before its collective 'c'"):
        simulate(g, order, [1.0] * len(g))


def test_bad_arguments_are_rejected():
    g = _one_allreduce()
    with pytest.raises(ValueError, match="durations"):
        simulate(g, g.original_order, [1.0])
    with pytest.raises(ScheduleError, match="twice"):
        simulate(g, [0] * len(g), [1.0] * len(g))
    with pytest.raises(ValueError, match=">= 0"):
        simulate(g, g.original_order, _durations(g, a=float("nan")))


def test_ordering_edge_from_a_collective_only_needs_its_issue():
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (4,))
    c = b.collective("c", "all_reduce", "g", x)
    b.compute("rng", "aten.rand.default", [], (4,), side_effect=True)
    w = b.wait("w", c)
    b.output([w])
    g = b.build()
    assert (c, g.index_of["rng"]) in g.ordering_edges
    d = _durations(g, c=50, rng=40)
    assert critical_path_us(g, d) == 50  # c's 50 reaches w; rng follows c's issue only
    r = simulate(g, g.original_order, d)
    assert r.makespan_us == 50 and r.exposed_comm_us == 10


# ---------------------------------------------------------------- properties on random graphs


@st.composite
def graphs_and_orders(draw):
    """A random DAG with collectives over two groups, and a random valid order of it."""
    n_ops = draw(st.integers(2, 14))
    b = GraphBuilder(world_size=4)
    b.group("a", ranks=[0, 1, 2, 3])
    b.group("b", ranks=[0, 1])
    values = [b.input("x", (8, 4))]
    pending: list[int] = []
    for k in range(n_ops):
        choice = draw(st.sampled_from(["compute", "compute", "collective", "wait", "view"]))
        src = values[draw(st.integers(0, len(values) - 1))]
        if choice == "collective":
            grp = draw(st.sampled_from(["a", "b"]))
            pending.append(b.collective(f"c{k}", "all_reduce", grp, src))
        elif choice == "wait" and pending:
            c = pending.pop(draw(st.integers(0, len(pending) - 1)))
            values.append(b.wait(f"w{k}", c))
        elif choice == "view":
            values.append(b.view(f"v{k}", src))
        else:
            other = values[draw(st.integers(0, len(values) - 1))]
            values.append(b.compute(f"k{k}", "aten.add.Tensor", [src, other], (8, 4)))
    for c in pending:
        values.append(b.wait(f"w_end{c}", c))
    b.output(values[1:] or values)
    g = b.build()
    durations = [float(draw(st.integers(0, 20))) for _ in range(len(g))]
    # random topological order over data and ordering edges
    indeg = [len(g.preds(i)) for i in range(len(g))]
    ready = [i for i in range(len(g)) if indeg[i] == 0]
    order = []
    while ready:
        i = ready.pop(draw(st.integers(0, len(ready) - 1)))
        order.append(i)
        for s in g.succs(i):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return g, order, durations


@given(graphs_and_orders())
def test_lower_bound_never_exceeds_the_makespan(case):
    g, order, durations = case
    r = simulate(g, order, durations)
    assert r.lower_bound_us <= r.makespan_us + 1e-9
    assert r.total_compute_us <= r.makespan_us + 1e-9
    assert 0.0 <= r.exposed_comm_us <= r.total_comm_us + 1e-9
    assert r.makespan_us >= r.total_compute_us + r.exposed_comm_us - 1e-9
    assert sum(t.exposed_us for t in r.collectives) == pytest.approx(r.exposed_comm_us)
    # the compute lane never overlaps itself
    lane = sorted((e.start_us, e.end_us) for e in r.events if e.lane == COMPUTE_LANE)
    for k in range(1, len(lane)):
        assert lane[k - 1][1] <= lane[k][0] + 1e-9


@given(graphs_and_orders())
def test_simulation_is_deterministic(case):
    g, order, durations = case
    assert simulate(g, order, durations) == simulate(g, order, durations)


def test_compute_beside_a_collective_runs_slower():
    g = _one_allreduce()
    d = _durations(g, a=10, c=30, b=5, d=4)
    r = simulate(g, g.original_order, d, compute_slowdown=2.0)
    # c runs 10-40; b starts at 10 beside it: 5 us of work take 10-20; d (40-44) is alone
    spans = {e.node: (e.start_us, e.end_us) for e in r.events}
    assert spans[g.index_of["b"]] == (10, 20)
    assert spans[g.index_of["d"]] == (40, 44)
    assert r.makespan_us == 44 and r.exposed_comm_us == 20
    assert (r.compute_slowdown, r.slowed_compute_us, r.total_compute_us) == (2.0, 5.0, 19)


def test_a_kernel_part_beside_communication_is_slowed_for_that_part():
    g = _one_allreduce()
    # b (10-...) has 50 us of work: 30 us beside c (10-40) do 15 of it, the other 35 run alone
    r = simulate(g, g.original_order, _durations(g, a=10, c=30, b=50, d=4), compute_slowdown=2.0)
    assert {e.node: e.end_us for e in r.events if e.lane == COMPUTE_LANE}[g.index_of["b"]] == 75
    assert r.makespan_us == 79 and r.slowed_compute_us == 15


def test_stretched_end_over_gaps_and_overlapping_flights():
    from commopt.sim.model import stretched_end

    assert stretched_end(0, 10, [], 3.0) == 10
    assert stretched_end(0, 0, [(0, 5)], 3.0) == 0
    # flights 2-6 and 4-8 (one busy span 2-8) and 12-20; 10 us of work: 2 alone (0-2), 2 at a
    # third (2-8), 4 alone (8-12), the last 2 at a third (12-18)
    assert stretched_end(0, 10, [(12, 20), (4, 8), (2, 6)], 3.0) == pytest.approx(18.0)
    assert stretched_end(5, 1, [(0, 100)], 1.5) == pytest.approx(6.5)
    assert stretched_end(50, 4, [(0, 40)], 2.0) == 54  # a flight over before the start


@pytest.mark.parametrize("factor", [0.5, float("nan"), float("inf"), True, "2"])
def test_a_slowdown_is_a_finite_factor_of_at_least_one(factor):
    g = _one_allreduce()
    with pytest.raises(ValueError, match="compute slowdown"):
        simulate(g, g.original_order, [1.0] * len(g), compute_slowdown=factor)


@given(graphs_and_orders(), st.sampled_from([1.0, 1.05, 1.5, 3.0]))
def test_slowdown_lengthens_by_at_most_its_factor(case, factor):
    from commopt.sim.engine import makespan_us, node_times

    g, order, durations = case
    base = simulate(g, order, durations)
    slow = simulate(g, order, durations, compute_slowdown=factor)
    # replay times are max-plus in the durations: longer compute never ends anything sooner,
    # and no kernel runs longer than factor x its duration
    assert base.makespan_us - 1e-9 <= slow.makespan_us <= factor * base.makespan_us + 1e-9
    assert base.lower_bound_us <= slow.lower_bound_us <= slow.makespan_us + 1e-9
    assert makespan_us(g, order, durations, compute_slowdown=factor) == slow.makespan_us
    times = node_times(g, order, durations, compute_slowdown=factor)
    assert max(times.end, default=0.0) <= slow.makespan_us
    if factor == 1.0:
        assert slow == base
    lane = sorted((e.start_us, e.end_us) for e in slow.events if e.lane == COMPUTE_LANE)
    for k in range(1, len(lane)):
        assert lane[k - 1][1] <= lane[k][0] + 1e-9


@given(graphs_and_orders())
def test_makespan_only_replay_matches_the_full_one(case):
    """The makespan-only replay runs plain nodes at the clock without reading their inputs
    (:data:`commopt.sim.engine._PLAIN`): the same float as the full replay's makespan."""
    from commopt.sim.engine import makespan_us

    g, order, durations = case
    assert makespan_us(g, order, durations) == simulate(g, order, durations).makespan_us


@given(graphs_and_orders(), st.sampled_from([1.0, 1.25]))
def test_numbers_only_simulation_matches_the_full_one(case, factor):
    """:func:`commopt.sim.simulate_numbers` is :func:`simulate` without the per-event records:
    every number the same float (repr: bit for bit), durations that are not sums of halves."""
    import dataclasses

    from commopt.sim import simulate_numbers

    g, order, durations = case
    durations = [d * 0.1 for d in durations]
    full = simulate(g, order, durations, compute_slowdown=factor)
    numbers = simulate_numbers(g, order, durations, compute_slowdown=factor)
    assert numbers.events == [] and numbers.collectives == [] and numbers.memory_curve == []
    assert repr(numbers) == repr(dataclasses.replace(full, events=[], collectives=[], memory_curve=[]))
