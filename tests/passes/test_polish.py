"""polish: simulator-confirmed moves of independent compute in front of exposed waits."""

from __future__ import annotations

from commopt.invariants import check_order
from commopt.ir.builder import GraphBuilder
from commopt.passes.base import PassContext
from commopt.passes.polish import Polish, _compacted, polish
from commopt.passes.raise_comms import RaiseComms
from commopt.sim import peak_memory, simulate


def _graph():
    """An all-reduce used right away, and independent compute that comes after its use."""
    b = GraphBuilder(world_size=2)
    b.group("dp", ranks=[0, 1])
    x = b.input("x", (64, 64))
    c = b.collective("ar", "all_reduce", "dp", x)
    w = b.wait("ar_wait", c)
    use = b.compute("use", "aten.relu.default", [w], (64, 64))
    y1 = b.compute("y1", "aten.gelu.default", [x], (64, 64))
    y2 = b.compute("y2", "aten.gelu.default", [y1], (64, 64))
    z = b.compute("z", "aten.add.Tensor", [use, y2], (64, 64))
    b.output([z])
    return b.build()


def _durations(graph):
    return [20.0 if n.kind.label == "collective" else 10.0 if n.kind.label == "compute" else 0.0
            for n in graph.nodes]


def _names(graph, order):
    return [graph.nodes[i].name for i in order]


def test_polish_moves_independent_compute_in_front_of_an_exposed_wait():
    g = _graph()
    d = _durations(g)
    ctx = PassContext.for_graph(g, d, max_memory_increase=10.0)
    order = Polish().run(g, g.original_order, ctx)
    names = _names(g, order)
    assert names.index("y1") < names.index("ar_wait")
    assert names.index("y2") < names.index("ar_wait")
    assert names.index("ar_wait") < names.index("use")
    assert check_order(g, order) == []
    assert simulate(g, order, d).exposed_comm_us == 0.0
    assert simulate(g, g.original_order, d).exposed_comm_us == 20.0


def test_polish_keeps_the_order_when_no_move_fits_the_budget():
    g = _graph()
    d = _durations(g)
    ctx = PassContext.for_graph(g, d, max_memory_increase=0.0)
    order = polish(g, g.original_order, ctx)
    assert peak_memory(g, order, padded=True)[0] <= ctx.memory_budget_bytes
    assert simulate(g, order, d).makespan_us <= simulate(g, g.original_order, d).makespan_us


def test_polish_does_nothing_without_effort_budget():
    g = _graph()
    ctx = PassContext.for_graph(g, _durations(g), max_memory_increase=10.0)
    assert polish(g, g.original_order, ctx, max_work=0) == g.original_order


def test_polish_after_raise_comms_hides_what_raising_alone_leaves_exposed():
    g = _graph()
    ctx = PassContext.for_graph(g, _durations(g), max_memory_increase=10.0)
    raised = RaiseComms().run(g, g.original_order, ctx)
    plain = _names(g, raised)
    polished = _names(g, Polish().run(g, raised, ctx))
    assert plain.index("y1") > plain.index("ar_wait")
    assert polished.index("y2") < polished.index("ar_wait")


def _filler_graph():
    """Compute ``f`` that only the end needs sits before the chain feeding an all-reduce."""
    b = GraphBuilder(world_size=2)
    b.group("dp", ranks=[0, 1])
    x = b.input("x", (64, 64))
    f = b.compute("f", "aten.gelu.default", [x], (64, 64))
    a = b.compute("a", "aten.relu.default", [x], (64, 64))
    p = b.compute("p", "aten.relu.default", [a], (64, 64))
    c = b.collective("ar", "all_reduce", "dp", p)
    w = b.wait("ar_wait", c)
    use = b.compute("use", "aten.relu.default", [w], (64, 64))
    z = b.compute("z", "aten.add.Tensor", [use, f], (64, 64))
    b.output([z])
    return b.build()


def test_polish_delays_compute_the_collective_does_not_need_past_its_issue():
    """No compute after the wait can move in front of it and the feeders are already as early
    as they may go: only delaying ``f`` past the issue lets the all-reduce start earlier."""
    g = _filler_graph()
    d = _durations(g)
    ctx = PassContext.for_graph(g, d, max_memory_increase=10.0)
    order = Polish().run(g, g.original_order, ctx)
    names = _names(g, order)
    assert names.index("ar") < names.index("f") < names.index("ar_wait")
    assert check_order(g, order) == []
    assert simulate(g, g.original_order, d).makespan_us == 70.0
    assert simulate(g, order, d).makespan_us == 60.0


def _pair_graph():
    """All-reduces ``a`` -> ``b`` -> ``c`` on one chain; ``f1 -> f2 -> f3`` fill ``a``'s
    flight and feed ``g``, which with ``f4`` fills ``b``'s; nothing fills ``c``'s."""
    b = GraphBuilder(world_size=2)
    b.group("dp", ranks=[0, 1])
    x = b.input("x", (64, 64))
    a = b.collective("a", "all_reduce", "dp", x)
    f1 = b.compute("f1", "aten.gelu.default", [x], (64, 64))
    f2 = b.compute("f2", "aten.gelu.default", [f1], (64, 64))
    f3 = b.compute("f3", "aten.gelu.default", [f2], (64, 64))
    wa = b.wait("a_wait", a)
    q = b.compute("q", "aten.relu.default", [wa], (64, 64))
    cb = b.collective("b", "all_reduce", "dp", q)
    g = b.compute("g", "aten.gelu.default", [f3], (64, 64))
    f4 = b.compute("f4", "aten.gelu.default", [x], (64, 64))
    wb = b.wait("b_wait", cb)
    r = b.compute("r", "aten.relu.default", [wb], (64, 64))
    cc = b.collective("c", "all_reduce", "dp", r)
    wc = b.wait("c_wait", cc)
    s = b.compute("s", "aten.relu.default", [wc], (64, 64))
    b.output([s, g, f4])
    return b.build()


def test_polish_takes_a_pair_of_moves_when_no_single_move_helps():
    """``a``'s flight holds 30 us of compute for 20 us of communication, which delays the
    chain. No single move shortens the order: ``f3`` past ``b``'s issue overfills ``b``'s
    flight, and ``f4`` (or ``g``) into ``c``'s flight alone changes nothing. Both together
    do: 100 -> 90 us, the critical path."""
    g = _pair_graph()
    d = _durations(g)
    ctx = PassContext.for_graph(g, d, max_memory_increase=10.0)
    assert polish(g, g.original_order, ctx, max_work=0) == g.original_order
    order = Polish().run(g, g.original_order, ctx)
    names = _names(g, order)
    assert check_order(g, order) == []
    assert simulate(g, g.original_order, d).makespan_us == 100.0
    assert simulate(g, order, d).makespan_us == 90.0
    assert names.index("b") < names.index("f3") < names.index("b_wait")
    assert names.index("c") < names.index("f4") < names.index("c_wait")


def test_polish_reaches_the_proven_optimum_of_the_mesh2d_sample():
    """The world-size-8 mesh2d sample (bench_exact): single moves stop at 120.0 us, the
    exact solver proves 118.46 us optimal. A pair of moves gets there (``add_6`` into the
    tail's stall, then ``add_5`` past the issue of ``all_gather_into_tensor_5``), and only
    within the memory budget once the order is compacted (:func:`_compacted`)."""
    from pathlib import Path

    import commopt

    sample = Path(__file__).resolve().parents[2] / "sample_graphs" / "ws8" / "mesh2d.json"
    result = commopt.optimize(sample, timings=False)
    assert result.summary.after.makespan_us <= 118.4569 * 1.01
    assert check_order(result.graph, result.order,
                       allow_cross_group_reorder=result.summary.allow_cross_group_reorder) == []


def test_compacting_keeps_the_timeline_and_holds_no_more_memory():
    """Issuing queued collectives late and waits early changes no time and no invariant;
    memory only goes down (both the live-tensor peak and the runner's footprint)."""
    b = GraphBuilder(world_size=2)
    b.group("dp", ranks=[0, 1])
    x = b.input("x", (64, 64))
    a1 = b.collective("a1", "all_reduce", "dp", x)
    a2 = b.collective("a2", "all_reduce", "dp", x)  # queues behind a1 for 20 us
    y1 = b.compute("y1", "aten.gelu.default", [x], (64, 64))
    y2 = b.compute("y2", "aten.gelu.default", [y1], (64, 64))
    y3 = b.compute("y3", "aten.gelu.default", [y2], (64, 64))
    y4 = b.compute("y4", "aten.gelu.default", [y3], (64, 64))
    y5 = b.compute("y5", "aten.gelu.default", [y4], (64, 64))
    w1 = b.wait("a1_wait", a1)  # a1 finished at 20 us, reached at 50 us
    w2 = b.wait("a2_wait", a2)
    z = b.compute("z", "aten.add.Tensor", [w1, w2], (64, 64))
    b.output([z, y5])
    g = b.build()
    d = _durations(g)
    order = list(g.original_order)
    compacted = _compacted(g, order, d, False)
    names = _names(g, compacted)
    assert check_order(g, compacted) == []
    assert names.index("y1") < names.index("a2") < names.index("y3")
    assert names.index("y2") < names.index("a1_wait") < names.index("y3")
    before, after = simulate(g, order, d), simulate(g, compacted, d)
    assert (after.makespan_us, after.exposed_comm_us) == (before.makespan_us, before.exposed_comm_us)
    assert peak_memory(g, compacted, padded=True)[0] <= peak_memory(g, order, padded=True)[0]
