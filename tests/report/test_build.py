"""build_report: lanes, events, collective timings, reasons, order matching."""

from __future__ import annotations

import gc

import pytest

from commopt.errors import GraphError
from commopt.ir.builder import GraphBuilder
from commopt.ir.schedule import ScheduleError
from commopt.report.build import build_report, downsample_peaks, match_order
from commopt.sim import simulate
from tests.report.samples import durations, hand_sim, naive_order, naive_sim, two_groups


def _report(**kw):
    g = two_groups()
    return g, build_report(g, naive_order(g), g.original_order, durations(g),
                           estimator_name="table", before_sim=naive_sim(g),
                           after_sim=hand_sim(g), **kw)


def test_hand_simulations_match_the_simulator():
    g = two_groups()
    key = lambda e: (e.lane, e.start_us, e.node)  # noqa: E731
    for order, hand in ((g.original_order, hand_sim(g)), (naive_order(g), naive_sim(g))):
        real = simulate(g, order, durations(g))
        assert sorted(real.events, key=key) == sorted(hand.events, key=key)
        assert real.collectives == hand.collectives
        assert real.memory_curve == hand.memory_curve
        assert (real.makespan_us, real.exposed_comm_us, real.lower_bound_us) == (
            hand.makespan_us, hand.exposed_comm_us, hand.lower_bound_us)


def test_lanes_are_compute_then_one_per_group():
    _, r = _report()
    assert [lane.name for lane in r.after.lanes] == ["compute", "comm:dp", "comm:tp"]
    assert [lane.events for lane in r.after.lanes] == [5, 2, 1]
    assert [lane.rows for lane in r.after.lanes] == [1, 1, 1]
    assert r.after.lanes[1].busy_us == 70.0


def test_exposed_wait_is_an_exposed_compute_event():
    _, r = _report()
    waits = [e for e in r.after.events if e.exposed]
    assert [(e.node, e.start_us, e.end_us) for e in waits] == [("ag_b_wait", 60.0, 70.0)]


def test_collective_steps_follow_the_order():
    g, r = _report()
    ag_b = next(c for c in r.after.collectives if c.node == "ag_b")
    assert (ag_b.issue_step, ag_b.wait_step) == (g.index_of["ag_b"], g.index_of["ag_b_wait"])
    assert (ag_b.issue_us, ag_b.start_us, ag_b.exposed_us) == (0.0, 40.0, 10.0)


def test_queued_collective_is_explained_as_queued_first():
    _, r = _report()
    assert r.top_exposed == ["ag_b"]
    ag_b = next(c for c in r.after.collectives if c.node == "ag_b")
    assert [x.code for x in ag_b.reasons][0] == "queued"
    assert "40.0 us" in ag_b.reasons[0].text


def test_first_collective_with_nothing_before_it_has_no_independent_compute():
    g = two_groups()
    r = build_report(g, naive_order(g), None, durations(g), estimator_name="table",
                     before_sim=naive_sim(g))
    assert r.after is None
    assert r.top_exposed == ["ag_a", "ag_b", "ar"]
    ag_a = next(c for c in r.before.collectives if c.node == "ag_a")
    # mm1 and mm2 (50 us) are independent of ag_a: it takes 40 us, so it is the schedule
    assert [x.code for x in ag_a.reasons] == ["schedule"]


def test_no_independent_compute():
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (8, 8))
    c = b.collective("ar", "all_reduce", "g", x)
    w = b.wait("ar_wait", c)
    y = b.compute("y", "aten.relu.default", [w], (8, 8))
    b.output([y])
    g = b.build()
    d = [0.0, 50.0, 0.0, 10.0, 0.0]
    r = build_report(g, g.original_order, None, d, estimator_name="t")
    (coll,) = r.before.collectives
    assert [x.code for x in coll.reasons] == ["no_independent_compute"]
    assert coll.reasons[0].text.startswith("nothing has to run before it")


def test_barrier_pins_the_wait():
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (8, 8))
    c = b.collective("ar", "all_reduce", "g", x)
    w = b.wait("ar_wait", c)
    b.compute("rng", "aten.seed.default", [], None, side_effect=True)
    z = b.compute("z", "aten.relu.default", [x], (8, 8))
    y = b.compute("y", "aten.add.Tensor", [w, z], (8, 8))
    b.output([y])
    g = b.build()
    d = [0.0 if n.kind.label in ("input", "output", "wait") else 30.0 for n in g.nodes]
    r = build_report(g, g.original_order, None, d, estimator_name="t")
    (coll,) = r.before.collectives
    assert coll.exposed_us == 30.0
    assert [x.code for x in coll.reasons] == ["barrier"]
    assert "'rng'" in coll.reasons[0].text


def test_memory_budget_reason_when_early_issue_would_exceed_it():
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (256, 256))
    a = b.compute("a", "aten.relu.default", [x], (256, 256))
    big = b.compute("big", "aten.relu.default", [x], (1024, 256))
    s = b.compute("s", "aten.sum.default", [big], ())
    c = b.collective("ag", "all_gather", "g", a)
    w = b.wait("ag_wait", c)
    z = b.compute("z", "aten.relu.default", [a], (256, 256))
    y = b.compute("y", "aten.add.Tensor", [w, z, s], (512, 256))
    b.output([y])
    g = b.build()
    d = [0.0, 10.0, 10.0, 10.0, 20.0, 0.0, 10.0, 10.0, 0.0]
    r = build_report(g, g.original_order, None, d, estimator_name="t",
                     memory_budget_bytes=1_000_000)
    (coll,) = r.before.collectives
    assert [x.code for x in coll.reasons] == ["memory_budget"]
    r2 = build_report(g, g.original_order, None, d, estimator_name="t")
    assert [x.code for x in r2.before.collectives[0].reasons] == ["schedule"]


def test_match_order_by_name():
    g = two_groups()
    names = [g.nodes[i].name for i in naive_order(g)]
    reordered = _reorder(g, names)
    assert match_order(g, reordered) == naive_order(g)


def _reorder(g, names):
    from commopt.io.json_graph import graph_from_document, graph_to_document

    doc = graph_to_document(g, [g.index_of[n] for n in names])
    return graph_from_document(doc)


def test_match_order_rejects_other_graphs():
    g = two_groups()
    other = GraphBuilder(world_size=2)
    other.group("dp", ranks=[0, 1])
    other.input("nope", (2,))
    with pytest.raises(GraphError, match="not in the original graph") as exc:
        match_order(g, other.build(), file="r.json")
    assert exc.value.node == "nope" and exc.value.file == "r.json"


def test_orders_must_be_permutations():
    g = two_groups()
    with pytest.raises(ScheduleError, match="permutation"):
        build_report(g, [0] * len(g), None, durations(g), estimator_name="t")


def test_downsample_keeps_first_last_and_peak():
    pts = [(float(k), k % 97) for k in range(10_000)]
    out = downsample_peaks(pts, 100)
    assert len(out) <= 100
    assert out[0] == pts[0] and out[-1] == pts[-1]
    assert max(b for _, b in out) == 96
    assert [t for t, _ in out] == sorted(t for t, _ in out)


def test_report_is_identical_across_builds():
    _, r1 = _report()
    _, r2 = _report()
    assert r1.model_dump_json() == r2.model_dump_json()


def test_memory_budget_reason_when_a_later_wait_would_hold_the_input():
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (256, 256))
    a = b.compute("a", "aten.relu.default", [x], (256, 256))
    c = b.collective("ag", "all_gather", "g", a)
    w = b.wait("ag_wait", c)
    big = b.compute("big", "aten.relu.default", [x], (1024, 256))
    s = b.compute("s", "aten.sum.default", [big], ())
    y = b.compute("y", "aten.add.Tensor", [w, s], (512, 256))
    b.output([y])
    g = b.build()
    d = [0.0, 10.0, 20.0, 0.0, 10.0, 10.0, 10.0, 0.0]
    peak = simulate(g, g.original_order, d).peak_memory_bytes
    held = g.nodes[a].padded_nbytes
    tight = build_report(g, g.original_order, None, d, estimator_name="t",
                         memory_budget_bytes=peak + held // 2)
    (coll,) = tight.before.collectives
    assert [x.code for x in coll.reasons] == ["memory_budget"]
    assert "'y'" in coll.reasons[0].text and f"{held:,}-byte input" in coll.reasons[0].text
    roomy = build_report(g, g.original_order, None, d, estimator_name="t",
                         memory_budget_bytes=peak + 2 * held)
    assert [x.code for x in roomy.before.collectives[0].reasons] == ["schedule"]


def test_the_collector_runs_again_after_a_report_is_built_or_fails():
    g = two_groups()
    assert gc.isenabled()
    build_report(g, g.original_order, None, durations(g), estimator_name="t")
    assert gc.isenabled()
    with pytest.raises(ValueError):
        build_report(g, g.original_order, None, durations(g)[:-1], estimator_name="t")
    assert gc.isenabled()
