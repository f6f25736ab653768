"""Each built-in pass on small hand-built graphs: where nodes land, "this, then this"."""

from __future__ import annotations

from commopt.ir.builder import GraphBuilder
from commopt.passes.base import PassContext
from commopt.passes.compute_overlap import ComputeOverlap
from commopt.passes.raise_comms import RaiseComms
from commopt.passes.registry import BUILTIN, get_registry
from commopt.passes.sink_waits import SinkWaits
from commopt.sim import simulate


def _durations(graph, compute_us=10.0, comm_us=30.0):
    out = []
    for node in graph.nodes:
        k = node.kind.label
        out.append(compute_us if k == "compute" else comm_us if k == "collective" else 0.0)
    return out


def _names(graph, order):
    return [graph.nodes[i].name for i in order]


def _before(names, a, b):
    return names.index(a) < names.index(b)


def test_registry_keys_match_pass_names():
    reg = get_registry()
    for name in BUILTIN:
        assert reg.load(name).name == name


def _wait_view_graph():
    b = GraphBuilder(world_size=2)
    b.group("dp", ranks=[0, 1])
    x = b.input("x", (64, 64))
    c = b.collective("ag", "all_gather", "dp", x)
    w = b.wait("ag_wait", c)
    v = b.view("ag_view", w, (64, 128))
    m = b.compute("meta", "aten.sym_size.int", [v], None)
    a1 = b.compute("a1", "aten.relu.default", [x], (64, 64))
    a2 = b.compute("a2", "aten.relu.default", [a1], (64, 64))
    use = b.compute("use", "aten.mm.default", [v, a2], (64, 64))
    b.output([use, m])
    return b.build()


def test_sink_waits_moves_wait_past_views_to_first_real_use():
    g = _wait_view_graph()
    ctx = PassContext.for_graph(g, _durations(g))
    names = _names(g, SinkWaits().run(g, g.original_order, ctx))
    # the view and the metadata op are not uses: the wait sinks below a2, then the view, then use
    assert _before(names, "a2", "ag_wait")
    assert _before(names, "ag_wait", "ag_view")
    assert _before(names, "ag_view", "use")
    assert names[-1] == "output"


def test_sink_waits_stops_at_a_side_effect_barrier():
    b = GraphBuilder(world_size=2)
    b.group("dp", ranks=[0, 1])
    x = b.input("x", (8, 8))
    c = b.collective("ar", "all_reduce", "dp", x)
    w = b.wait("ar_wait", c)
    b.compute("barrier", "aten._print.default", [x], None, side_effect=True)
    y = b.compute("y", "aten.relu.default", [x], (8, 8))
    z = b.compute("z", "aten.add.Tensor", [w, y], (8, 8))
    b.output([z])
    g = b.build()
    ctx = PassContext.for_graph(g, _durations(g))
    names = _names(g, SinkWaits().run(g, g.original_order, ctx))
    assert names == ["x", "ar", "ar_wait", "barrier", "y", "z", "output"]


def _fsdp_graph(layers=4):
    """Each layer all-gathers a 1 MiB weight shard and uses it right away."""
    b = GraphBuilder(world_size=4)
    b.group("dp", ranks=[0, 1, 2, 3])
    h = b.input("h", (16, 16))
    shards = [b.input(f"w{k}", (64, 1024), role="parameter") for k in range(layers)]
    for k in range(layers):
        ag = b.collective(f"ag{k}", "all_gather", "dp", shards[k])
        w = b.wait(f"ag{k}_wait", ag)
        h = b.compute(f"mm{k}", "aten.mm.default", [h, w], (16, 16))
    b.output([h])
    return b.build()


def test_raise_comms_raises_all_gathers_when_memory_allows():
    g = _fsdp_graph()
    ctx = PassContext.for_graph(g, _durations(g), max_memory_increase=10.0)
    names = _names(g, RaiseComms().run(g, g.original_order, ctx))
    # unbounded: every all-gather rises to the inputs, still in their original order
    assert names.index("ag3") < names.index("mm0")
    assert _before(names, "ag0", "ag1") and _before(names, "ag2", "ag3")


def test_raise_comms_respects_the_memory_budget():
    g = _fsdp_graph()
    ctx = PassContext.for_graph(g, _durations(g), max_memory_increase=0.6)
    order = RaiseComms().run(g, g.original_order, ctx)
    names = _names(g, order)
    from commopt.sim import peak_memory

    assert peak_memory(g, order, padded=True)[0] <= ctx.memory_budget_bytes
    # one layer of prefetch fits in +60%, not all four
    assert names.index("ag3") > names.index("mm0")
    assert names.index("ag1") < names.index("mm0")


def test_compute_overlap_hides_communication_with_two_groups_in_flight():
    b = GraphBuilder(world_size=4)
    b.group("dp", ranks=[0, 1, 2, 3])
    b.group("tp", ranks=[0, 1, 2, 3])
    x = b.input("x", (16, 16))
    c1 = b.collective("c1", "all_reduce", "dp", x)
    w1 = b.wait("w1", c1)
    c2 = b.collective("c2", "all_reduce", "tp", x)
    w2 = b.wait("w2", c2)
    y = x
    for k in range(4):
        y = b.compute(f"y{k}", "aten.relu.default", [y], (16, 16))
    z = b.compute("z", "aten.add.Tensor", [w1, w2, y], (16, 16))
    b.output([z])
    g = b.build()
    durs = _durations(g, compute_us=10.0, comm_us=30.0)
    ctx = PassContext.for_graph(g, durs)
    order = ComputeOverlap().run(g, g.original_order, ctx)
    names = _names(g, order)
    assert _before(names, "c1", "c2") and _before(names, "c2", "y0")
    assert _before(names, "y2", "w1")  # w1 lands once c1 has finished, for free
    before = simulate(g, g.original_order, durs)
    after = simulate(g, order, durs)
    assert before.exposed_comm_us == 60.0
    assert after.exposed_comm_us == 0.0  # both groups' streams run under the 40 us of compute
