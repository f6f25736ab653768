"""The invariant checker: each invariant caught on a hand-built order, and clean orders pass."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from commopt.invariants import check_order
from commopt.ir.builder import GraphBuilder
from tests.strategies import graphs


def _two_group_graph():
    b = GraphBuilder(world_size=2)
    b.group("a", ranks=[0, 1])
    b.group("b", ranks=[0, 1])
    x = b.input("x", (4, 8))
    y = b.compute("y", "aten.relu.default", [x], (4, 8))
    c1 = b.collective("c1", "all_reduce", "a", y)
    w1 = b.wait("w1", c1)
    v1 = b.view("v1", w1)
    c2 = b.collective("c2", "all_reduce", "b", x)
    w2 = b.wait("w2", c2)
    z = b.compute("z", "aten.add.Tensor", [v1, w2], (4, 8))
    b.output([z])
    return b.build()


def _invariants(graph, order, **kw):
    return [v.invariant for v in check_order(graph, order, **kw)]


def test_original_order_is_clean():
    g = _two_group_graph()
    assert check_order(g, g.original_order) == []


def test_missing_and_repeated_nodes_are_invariant_0():
    g = _two_group_graph()
    order = g.original_order
    order[3] = order[2]
    vs = check_order(g, order)
    assert [v.invariant for v in vs if v.invariant == 0] == [0, 0]
    assert {v.nodes for v in vs if v.invariant == 0} == {("c1",), ("w1",)}


def test_use_before_wait_is_invariant_4_naming_wait_then_user():
    g = _two_group_graph()
    i = g.index_of
    # z before w2: z reads w2 directly
    order = [i["x"], i["y"], i["c1"], i["w1"], i["v1"], i["c2"], i["z"], i["w2"], i["output"]]
    vs = check_order(g, order)
    assert [(v.invariant, v.nodes) for v in vs] == [(4, ("w2", "z"))]


def test_view_of_unwaited_result_is_not_a_use():
    g = _two_group_graph()
    i = g.index_of
    # v1 is a view of w1; moving a view never reads data, so only order edges matter
    order = [i["x"], i["y"], i["c1"], i["w1"], i["c2"], i["w2"], i["v1"], i["z"], i["output"]]
    assert check_order(g, order) == []


def test_cross_group_order_is_kept_unless_allowed():
    g = _two_group_graph()
    i = g.index_of
    order = [i["x"], i["c2"], i["y"], i["c1"], i["w1"], i["v1"], i["w2"], i["z"], i["output"]]
    vs = check_order(g, order)
    assert [(v.invariant, v.nodes) for v in vs] == [(2, ("c1", "c2"))]
    assert check_order(g, order, allow_cross_group_reorder=True) == []


def test_same_group_order_is_always_kept():
    b = GraphBuilder(world_size=2)
    b.group("a", ranks=[0, 1])
    x = b.input("x", (4,))
    c1 = b.collective("c1", "all_reduce", "a", x)
    c2 = b.collective("c2", "all_reduce", "a", x)
    w1 = b.wait("w1", c1)
    w2 = b.wait("w2", c2)
    b.output([w1, w2])
    g = b.build()
    order = [x, c2, c1, w1, w2, 5]
    vs = check_order(g, order, allow_cross_group_reorder=True)
    assert [v.invariant for v in vs] == [1, 2]
    assert vs[1].nodes == ("c1", "c2")


def test_write_to_input_while_in_flight_is_invariant_5():
    b = GraphBuilder(world_size=2)
    b.group("a", ranks=[0, 1])
    x = b.input("x", (4,))
    y = b.compute("y", "aten.relu.default", [x], (4,))
    c = b.collective("c", "all_reduce", "a", y)
    w = b.wait("w", c)
    m = b.compute("m", "aten.add_.Tensor", [y], (4,), mutates=[y], alias_of=y)
    b.output([w, m])
    g = b.build()
    order = [x, y, c, m, w, 5]
    vs = check_order(g, order)
    kinds = [(v.invariant, v.nodes) for v in vs]
    # the ordering edge wait -> write is broken (1) and the write lands in flight (5)
    assert (1, ("w", "m")) in kinds
    assert (5, ("m", "c")) in kinds


def test_side_effect_barrier_is_not_crossed():
    b = GraphBuilder(world_size=2)
    b.group("a", ranks=[0, 1])
    x = b.input("x", (4,))
    c = b.collective("c", "all_reduce", "a", x)
    s = b.compute("s", "aten.print", [x], None, side_effect=True)
    w = b.wait("w", c)
    b.output([w])
    g = b.build()
    vs = check_order(g, [x, s, c, w, 4])
    assert [(v.invariant, v.nodes) for v in vs] == [(1, ("c", "s"))]


def test_verify_reordered_matches_by_name_and_reports_missing_and_extra():
    from commopt.invariants import verify_reordered

    g = _two_group_graph()
    b = GraphBuilder(world_size=2)
    b.group("a", ranks=[0, 1])
    b.group("b", ranks=[0, 1])
    x = b.input("x", (4, 8))
    c2 = b.collective("c2", "all_reduce", "b", x)  # issued before c1: cross-group reorder
    y = b.compute("y", "aten.relu.default", [x], (4, 8))
    c1 = b.collective("c1", "all_reduce", "a", y)
    w1 = b.wait("w1", c1)
    w2 = b.wait("w2", c2)
    extra = b.compute("extra", "aten.neg.default", [w2], (4, 8))
    z = b.compute("z", "aten.add.Tensor", [w1, extra], (4, 8))
    b.output([z])
    other = b.build()
    vs = verify_reordered(g, other, allow_cross_group_reorder=False)
    summary = [(v.invariant, v.nodes) for v in vs]
    assert (0, ("extra",)) in summary  # added
    assert (0, ("z",)) in summary  # reads extra instead of v1, w2
    assert (0, ("v1",)) in summary  # missing
    assert (2, ("c1", "c2")) in summary
    assert all(v.invariant != 2 for v in verify_reordered(g, other, allow_cross_group_reorder=True))
    # by default the rule optimize applies: both groups hold every rank (SPMD), so allowed
    assert all(v.invariant != 2 for v in verify_reordered(g, other))


def _changed_node_fields():
    """A different value for every Node field verify compares, on node 'y' of the two-group graph."""
    from commopt.ir.graph import CollectiveInfo, NodeKind, TensorMeta

    g = _two_group_graph()
    i = g.index_of
    return g, {
        "kind": NodeKind.VIEW,
        "op": "aten.neg.default",
        "inputs": (i["c2"],),
        "outputs": (TensorMeta("float16", (4, 8)),),
        "args": ("x",),
        "kwargs": {"alpha": 1},
        "collective": CollectiveInfo("all_reduce", "a", "sum"),
        "wait_of": i["c1"],
        "alias_of": i["x"],
        "mutates": (i["x"],),
        "side_effect": True,
        "rng": True,
        "attrs": {"role": "parameter"},
    }


def test_verify_compares_every_node_field_but_the_listed_ones():
    """A field added to Node is compared unless listed in NODE_FIELDS_NOT_COMPARED (this test
    then fails until it gets a changed value here, so the choice is explicit)."""
    from dataclasses import fields, replace

    from commopt.invariants import NODE_FIELDS_NOT_COMPARED, node_difference
    from commopt.ir.graph import Node

    g, changes = _changed_node_fields()
    assert set(changes) == {f.name for f in fields(Node)} - set(NODE_FIELDS_NOT_COMPARED)
    y = g.node("y")
    for name, value in changes.items():
        diff = node_difference(g, y, g, replace(y, **{name: value}))
        assert diff is not None and diff[0].split("[")[0].split(".")[0] == name, (name, diff)
    assert node_difference(g, y, g, replace(y, index=0, duration_us=12.5)) is None


def test_verify_compares_every_graph_attribute_but_the_listed_ones():
    import inspect

    from commopt.invariants import GRAPH_FIELDS_NOT_COMPARED
    from commopt.ir.graph import Graph

    params = set(inspect.signature(Graph.__init__).parameters) - {"self"}
    assert set(GRAPH_FIELDS_NOT_COMPARED) <= params
    assert params - set(GRAPH_FIELDS_NOT_COMPARED) == {"groups", "world_size", "mesh"}


def test_a_changed_process_group_is_reported_by_field():
    from commopt.invariants import verify_reordered
    from commopt.ir.graph import ProcessGroup

    g = _two_group_graph()
    other = _two_group_graph()
    other.groups["b"] = ProcessGroup("b", 2, (1, 0))
    other.world_size = 4
    assert [v.message for v in verify_reordered(g, other)] == [
        "process group 'b' changed its ranks[0]: 0 -> 1",
        "the graph changed its world_size: 2 -> 4",
    ]


def test_first_difference_compares_type_and_value():
    import math

    from commopt.invariants import first_difference

    assert first_difference((1, [2.0, math.nan]), [1, (2.0, math.nan)], "v") is None
    assert first_difference([1], [True], "v") == ("v[0]", 1, True)
    assert first_difference({"a": 1.0}, {"a": 1}, "kw") == ("kw['a']", 1.0, 1)
    assert first_difference([1, 2], [1, 2, 3], "s") == ("s", [1, 2], [1, 2, 3])


@given(graphs(max_steps=25), st.randoms(use_true_random=False))
def test_orders_keeping_the_wait_before_use_edges_keep_invariant_4(graph, rng):
    from commopt.invariants import wait_before_use_edges

    extra = wait_before_use_edges(graph)
    succs = {i: list(graph.succs(i)) for i in range(len(graph))}
    indeg = [len(graph.preds(i)) for i in range(len(graph))]
    for w, u in extra:
        succs[w].append(u)
        indeg[u] += 1
    ready = [i for i, d in enumerate(indeg) if d == 0]
    order = []
    while ready:
        i = ready.pop(rng.randrange(len(ready)))
        order.append(i)
        for s in succs[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    assert len(order) == len(graph)
    assert [v for v in check_order(graph, order, allow_cross_group_reorder=True) if v.invariant == 4] == []


def test_a_reader_of_a_view_of_the_collective_itself_follows_its_wait():
    from commopt.invariants import wait_before_use_edges
    from commopt.ir.graph import Graph

    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (4,))
    c = b.collective("c", "all_reduce", "g", x)
    v = b.view("v", c)
    w = b.wait("w", c)
    u = b.compute("u", "aten.relu.default", [v], (4,))
    b.output([u, w])
    # loaders refuse this graph (GraphError); a graph made in code without validation is checked
    g = Graph(list(b.nodes), dict(b.groups), name="unvalidated", source_format="json", world_size=2)
    assert wait_before_use_edges(g) == [(w, u)]
    early = [x, c, v, u, w, g.index_of["output"]]
    assert [v.invariant for v in check_order(g, early)] == [4]


def test_array_checks_report_what_the_node_by_node_checks_report():
    """check_order's whole-array pre-check only decides whether the worded loops run: on a
    real graph, orders with one moved node (often breaking invariants 1, 2 or 4) get exactly
    the loops' violations, with and without cross-group reordering."""
    import random

    from commopt.invariants import _check_each
    from commopt.io import load_graph

    g = load_graph("sample_graphs/ws8/mesh2d.json")
    rng = random.Random(0)
    broken = 0
    for _ in range(60):
        order = list(g.original_order)
        node = order.pop(rng.randrange(len(order)))
        order.insert(rng.randrange(len(order) + 1), node)
        for allow in (False, True):
            got = check_order(g, order, allow_cross_group_reorder=allow)
            assert got == _check_each(g, order, allow)
            broken += bool(got)
    assert broken > 0
