"""advise: each piece of advice appears when the simulation supports it, and only then."""

from __future__ import annotations

from commopt.ir.builder import GraphBuilder
from commopt.report.build import build_report
from commopt.report.explain import BUCKET_MIN_COLLECTIVES, advise
from commopt.sim import simulate
from tests.report.samples import durations, hand_sim, naive_order, naive_sim, two_groups


def _codes(advice) -> list[str]:
    return [a.code for a in advice]


def test_a_different_order_is_advised_only_for_an_order_commopt_did_not_make():
    g = two_groups()
    sim = naive_sim(g)  # makespan 170 us, lower bound 85 us
    assert _codes(advise(g, durations(g), sim, optimized=False)) == ["order"]
    assert "different order" in advise(g, durations(g), sim, optimized=False)[0].text
    assert advise(g, durations(g), sim, optimized=True) == []


def test_report_of_an_optimized_order_never_advises_reordering():
    g = two_groups()
    # the naive order as 'after': above its lower bound, but it is the reordered schedule
    r = build_report(g, g.original_order, naive_order(g), durations(g), estimator_name="t",
                     before_sim=hand_sim(g), after_sim=naive_sim(g))
    assert "order" not in _codes(r.advice)
    single = build_report(g, naive_order(g), None, durations(g), estimator_name="t",
                          before_sim=naive_sim(g))
    assert _codes(single.advice) == ["order"]
    assert "order" not in _codes(build_report(
        g, naive_order(g), None, durations(g), estimator_name="t", before_sim=naive_sim(g),
        optimized=True).advice)


def test_nothing_is_advised_within_the_margin_of_the_lower_bound():
    g = two_groups()
    sim = hand_sim(g)  # makespan 85 us == lower bound, 10 us exposed
    assert advise(g, durations(g), sim, optimized=False) == []


def _one_collective(compute_us: float):
    b = GraphBuilder(name="cb", world_size=4)
    b.group("3", ranks=[0, 1, 2, 3], mesh_dim="tp")
    x = b.input("x", (256, 256))
    ar = b.collective("ar", "all_reduce", "3", x)
    y = b.compute("y", "aten.relu.default", [x], (256, 256))
    z = b.compute("z", "aten.add.Tensor", [y, b.wait("ar_wait", ar)], (256, 256))
    b.output([z])
    g = b.build()
    d = {"ar": 100.0, "y": compute_us, "z": 1.0}
    return g, [d.get(n.name, 0.0) for n in g.nodes]


def test_more_compute_or_faster_links_when_a_stream_outweighs_all_compute():
    g, d = _one_collective(10.0)
    advice = advise(g, d, simulate(g, g.original_order, d), optimized=False)
    assert _codes(advice) == ["comm_bound"]
    assert "tp (4 ranks)" in advice[0].text and "faster links" in advice[0].text
    assert "89.0 us" in advice[0].text  # 100 us of communication, 11 us of compute
    g, d = _one_collective(200.0)
    assert advise(g, d, simulate(g, g.original_order, d), optimized=False) == []


def _many_small(latency_us: float, n: int):
    b = GraphBuilder(name="small", world_size=2)
    b.group("0", ranks=[0, 1])
    d = {}
    last = b.input("x", (4,))
    for k in range(n):
        x = b.input(f"in{k}", ((k + 1) * 16,))
        c = b.collective(f"ar{k}", "all_reduce", "0", x)
        last = b.compute(f"use{k}", "aten.add.Tensor", [last, b.wait(f"w{k}", c)], (4,))
        d[f"ar{k}"] = latency_us + 0.01 * 64 * (k + 1)  # bytes = 64 (k + 1)
        d[f"use{k}"] = 50.0
    b.output([last])
    g = b.build()
    return g, [d.get(nd.name, 0.0) for nd in g.nodes]


def test_bucketing_when_the_latency_of_many_small_collectives_dominates():
    g, d = _many_small(10.0, BUCKET_MIN_COLLECTIVES)
    advice = advise(g, d, simulate(g, g.original_order, d), optimized=True)
    assert _codes(advice) == ["bucketing"]
    assert f"runs {BUCKET_MIN_COLLECTIVES} collectives" in advice[0].text
    # bandwidth-bound collectives, or too few of them: no bucketing
    g, d = _many_small(0.0, BUCKET_MIN_COLLECTIVES)
    assert advise(g, d, simulate(g, g.original_order, d), optimized=True) == []
    g, d = _many_small(10.0, BUCKET_MIN_COLLECTIVES - 1)
    assert advise(g, d, simulate(g, g.original_order, d), optimized=True) == []


def test_schedule_reason_does_not_prescribe():
    g = two_groups()
    r = build_report(g, naive_order(g), None, durations(g), estimator_name="t",
                     before_sim=naive_sim(g))
    texts = [x.text for c in r.before.collectives for x in c.reasons]
    assert texts and not any("better order" in t or "could hide" in t for t in texts)
