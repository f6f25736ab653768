"""The torch peer harness still runs torch's scheduler and maps its order back to commopt.

Exports a 2-layer FSDP training step with the fake process group, schedules it with
``schedule_overlap_bucketing`` through :mod:`bench.torch_peer`, and checks the order that
comes back with commopt's checker, so the benchmark cannot silently rot when torch changes.
"""

from __future__ import annotations

import pytest

from bench import graphs, torch_peer
from commopt.errors import GraphError
from commopt.estimators import resolve
from commopt.estimators.hardware import load_hardware
from commopt.invariants import check_order
from commopt.io.groups import record_process_groups
from commopt.io.pt2 import graph_from_torch
from commopt.sim import simulate


@pytest.fixture(scope="module")
def tiny():
    """(IR, exported program, estimator chain) of a 2-layer FSDP step at world size 8."""
    graphs.init_fake_pg()
    spec = graphs.GraphSpec("tiny", graphs._fsdp_model, {"layers": 2, "hidden": 256, "tokens": 64})
    ep = graphs.export_program(spec)
    graph = graph_from_torch(ep, groups=record_process_groups())
    yield graph, ep, resolve("analytical", hardware="h100")
    graphs.shutdown_fake_pg()


def _run(graph, ep, chain, bucketing):
    hw = load_hardware("h100")
    return torch_peer.run_torch_scheduler(
        ep.graph_module, torch_peer.estimation_for_module(graph, chain), bucketing=bucketing,
        dram_gbps=hw.memory_bandwidth_gbps, peak_tflops=hw.peak_tflops["bfloat16"])


def test_torch_order_maps_to_a_checked_permutation(tiny):
    graph, ep, chain = tiny
    run = _run(graph, ep, chain, bucketing=False)
    assert not run.changed_graph
    order = torch_peer.order_from_names(graph, run.names)
    assert sorted(order) == graph.original_order
    # torch may issue collectives of one group in another order than the input (safe for it:
    # every rank runs the same deterministic schedule); commopt's invariant 2 forbids that,
    # so those are the only violations the checker may report, nothing else
    collectives = {graph.nodes[c].name for c in graph.collectives()}
    for v in check_order(graph, order):
        assert v.invariant in (1, 2) and set(v.nodes) <= collectives, str(v)
    # torch really reordered: the input waits for layer 0's second weight before the first
    # mm; torch issues that all-gather, runs the mm, then waits
    pos = {i: k for k, i in enumerate(order)}
    second_gather = [c for c in graph.collectives() if graph.nodes[c].collective.type == "all_gather"][1]
    wait = graph.waits_of(second_gather)[0]
    first_mm = next(n.index for n in graph.nodes if n.op.startswith("aten.mm"))
    assert wait < first_mm
    assert pos[second_gather] < pos[first_mm] < pos[wait]


def test_custom_estimation_hands_torch_commopt_durations_in_ms(tiny):
    graph, ep, chain = tiny
    durations = chain.durations(graph)
    estimate = torch_peer.custom_estimation(graph, durations, torch_peer.collective_time_at(chain, graph))
    fx_nodes = {n.name: n for n in ep.graph_module.graph.nodes}
    mm = next(n for n in graph.nodes if n.op.startswith("aten.mm"))
    coll = graph.collectives()[0]
    assert estimate(fx_nodes[mm.name], None) == pytest.approx(durations[mm.index] / 1e3)
    latency_ms = estimate(fx_nodes[graph.nodes[coll].name], 0)
    assert 0 < latency_ms < durations[coll] / 1e3


def test_bucketed_module_loads_back_and_simulates(tiny):
    graph, ep, chain = tiny
    run = _run(graph, ep, chain, bucketing=True)
    assert run.changed_graph
    bucketed = graph_from_torch(run.gm, groups=record_process_groups())
    assert len(bucketed.collectives()) < len(graph.collectives())
    assert check_order(bucketed, bucketed.original_order) == []
    sim = simulate(bucketed, bucketed.original_order, chain.durations(bucketed))
    assert sim.makespan_us >= sim.lower_bound_us > 0


def test_unknown_node_name_is_a_graph_error(tiny):
    graph, _, _ = tiny
    names = [n.name for n in graph.nodes]
    with pytest.raises(GraphError, match="does not"):
        torch_peer.order_from_names(graph, [*names[:-1], "not_in_the_ir"])
    with pytest.raises(GraphError, match="lists"):
        torch_peer.order_from_names(graph, names[:-1])


def _two_reduce_scatters(first: str, second: str):
    """A graph issuing reduce_scatters named ``first`` then ``second`` on one group."""
    from commopt.ir.builder import GraphBuilder

    b = GraphBuilder(world_size=2)
    b.group("dp", ranks=[0, 1])
    x = b.input("x", (8, 8))
    outs = []
    for name in (first, second):
        g = b.compute(f"grad_{name}", "aten.relu.default", [x], (8, 8))
        outs.append(b.wait(f"{name}_wait", b.collective(name, "reduce_scatter", "dp", g)))
    b.output(outs)
    return b.build()


def test_a_bucketed_graph_is_checked_against_the_original_group_order():
    """torch+bucketing's graph is its own original, so checking it against itself always
    passed; its unmerged collectives are compared with the loaded graph's order instead."""
    from bench.bench_vs_torch import unmerged_group_order_breaks

    original = _two_reduce_scatters("rs_a", "rs_b")
    assert unmerged_group_order_breaks(original, _two_reduce_scatters("rs_a", "rs_b")) == 0
    assert unmerged_group_order_breaks(original, _two_reduce_scatters("rs_b", "rs_a")) == 1
    assert unmerged_group_order_breaks(original, _two_reduce_scatters("rs_b", "rs_merged")) == 0


def test_a_bucketed_graph_is_checked_for_the_data_dependencies_it_kept():
    """A torch+bucketing graph that runs a kept node before the node it reads is counted,
    one that keeps the order is not (merged collectives are left out: they have new names)."""
    from bench.bench_vs_torch import shared_data_breaks

    original = _two_reduce_scatters("rs_a", "rs_b")
    assert shared_data_breaks(original, _two_reduce_scatters("rs_a", "rs_b")) == 0
    assert shared_data_breaks(original, _two_reduce_scatters("rs_b", "rs_a")) == 0  # a group's order only
    assert shared_data_breaks(_chain("p", "q"), _chain("q", "p")) == 1
    assert shared_data_breaks(_chain("p", "q"), _chain("p", "q")) == 0


def _chain(first: str, second: str):
    """x -> ``first`` -> ``second``: the second reads the first."""
    from commopt.ir.builder import GraphBuilder

    b = GraphBuilder(world_size=2)
    x = b.input("x", (8, 8))
    y = b.compute(first, "aten.relu.default", [x], (8, 8))
    b.output([b.compute(second, "aten.relu.default", [y], (8, 8))])
    return b.build()
