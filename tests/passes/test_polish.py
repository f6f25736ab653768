"""polish: simulator-confirmed moves of independent compute in front of exposed waits."""

from __future__ import annotations

from commopt.invariants import check_order
from commopt.ir.builder import GraphBuilder
from commopt.passes.base import PassContext
from commopt.passes.polish import Polish, polish
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
