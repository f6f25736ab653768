"""advise: each piece of advice appears when the simulation supports it, and only then;
the reachability the reasons rest on, computed for many collectives at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from commopt.estimators import resolve
from commopt.io import load_graph
from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import NodeKind
from commopt.report.build import build_report
from commopt.report.explain import _SWEEP_WIDTH, BUCKET_MIN_COLLECTIVES, _independence, advise
from commopt.sim import simulate
from tests.report.samples import durations, hand_sim, naive_order, naive_sim, two_groups

REPO = Path(__file__).resolve().parents[2]


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


def _reached(graph, starts, step) -> set[int]:
    """Every node reached from ``starts`` (not themselves) through ``step`` (preds or succs)."""
    seen: set[int] = set()
    stack = list(starts)
    while stack:
        for j in step(stack.pop()):
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return seen


def _independent_one_by_one(graph, timing) -> tuple[list[int], list[int], bool]:
    """The independent compute of one collective, blocked part and whether it has compute
    ancestors, from one traversal per question (the definitions, spelled out)."""
    c = timing.node
    before = _reached(graph, [c], graph.preds)
    after = _reached(graph, graph.waits_of(c), graph.succs)
    later = [w for j in graph.collectives() if j != c and j not in before
             and graph.nodes[j].collective.group == timing.group for w in graph.waits_of(j)]
    blocked = _reached(graph, later, graph.succs)
    compute = [nd.index for nd in graph.nodes if nd.kind is NodeKind.COMPUTE]
    independent = [i for i in compute if i not in before and i not in after]
    return (independent, [i for i in independent if i in blocked],
            any(i in before for i in compute))


@pytest.mark.parametrize("name", ["realistic/llama3_8b_L2.json", "ws2/mesh2d.json", "ws2/ddp.json"])
def test_independence_of_all_collectives_at_once_matches_one_by_one(name):
    g = load_graph(REPO / "sample_graphs" / name)
    timings = simulate(g, g.original_order, resolve(None).durations(g)).collectives
    got = _independence(g, timings)
    assert len(got) == len(timings)
    for t, ind in zip(timings, got, strict=True):
        assert (ind.nodes, ind.blocked, ind.pred_compute) == _independent_one_by_one(g, t)


def test_the_realistic_sample_spans_several_sweeps_and_blocked_compute():
    g = load_graph(REPO / "sample_graphs" / "realistic" / "llama3_8b_L2.json")
    timings = simulate(g, g.original_order, resolve(None).durations(g)).collectives
    assert len(timings) > 2 * _SWEEP_WIDTH
    assert any(ind.blocked for ind in _independence(g, timings))
