"""The IR's derived structure: ordering edges, storage roots, validation errors."""

import pytest

from commopt.errors import GraphError
from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import CollectiveInfo, NodeKind


def _tiny():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4, 8))
    y = b.compute("y", "aten.relu.default", [x], (4, 8))
    c = b.collective("ar", "all_reduce", "0", y)
    z = b.compute("z", "aten.add_.Tensor", [y], (4, 8), mutates=[y], alias_of=y)
    w = b.wait("ar_wait", c)
    b.output([w, z])
    return b.build()


def test_write_to_collective_input_waits_for_the_wait():
    g = _tiny()
    ar, z, wt = g.index_of["ar"], g.index_of["z"], g.index_of["ar_wait"]
    # the in-place add writes y, which the all_reduce reads until its wait; the original order
    # has the write before the wait (a racy input), so only the issue-order edge is kept.
    assert ar in g.preds(z)
    assert (wt, z) not in g.ordering_edges
    assert g.storage_root[z] == g.index_of["y"]
    assert g.storage_root[wt] == ar
    assert g.waits_of(ar) == (wt,)


def test_collectives_of_one_group_are_chained():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4,))
    c1 = b.collective("c1", "all_reduce", "0", x)
    c2 = b.collective("c2", "all_reduce", "0", x)
    b.wait("w1", c1)
    b.wait("w2", c2)
    g = b.build()
    assert (c1, c2) in g.ordering_edges


def test_side_effect_is_a_barrier_for_collectives():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4,))
    c1 = b.collective("c1", "all_reduce", "0", x)
    w1 = b.wait("w1", c1)
    bar = b.compute("rng", "aten.rand.default", [], (4,), side_effect=True)
    c2 = b.collective("c2", "all_reduce", "0", x)
    b.wait("w2", c2)
    g = b.build()
    assert (c1, bar) in g.ordering_edges and (w1, bar) in g.ordering_edges
    assert (bar, c2) in g.ordering_edges
    assert g.nodes[bar].kind is NodeKind.COMPUTE


def test_rng_ops_keep_their_order_but_collectives_cross_them():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4,))
    r1 = b.compute("r1", "aten.rand.default", [], (4,), rng=True)
    c1 = b.collective("c1", "all_reduce", "0", x)
    w1 = b.wait("w1", c1)
    r2 = b.compute("r2", "aten.rand.default", [], (4,), rng=True)
    bar = b.compute("print", "aten._print.default", [], None, side_effect=True)
    r3 = b.compute("r3", "aten.rand.default", [], (4,), rng=True)
    b.output([w1, r1, r2, r3])
    g = b.build()
    edges = set(g.ordering_edges)
    assert {(r1, r2), (r2, bar), (bar, r3)} <= edges  # the generator's draws stay in order
    assert not {(r1, c1), (c1, r2), (w1, r2), (r2, c1)} & edges  # communication crosses RNG
    assert {(c1, bar), (w1, bar)} <= edges  # a barrier still pins it


def test_unwaited_collective_is_rejected():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4,))
    b.collective("c1", "all_reduce", "0", x)
    with pytest.raises(GraphError, match="never waited"):
        b.build()


def test_a_wait_on_a_waited_value_completes_the_same_collective():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4,))
    c = b.collective("c", "all_reduce", "0", x)
    w1 = b.wait("w1", c)
    w2 = b._add("w2", NodeKind.WAIT, "_c10d_functional.wait_tensor.default", (w1,),
                outputs=b.nodes[w1].outputs, alias_of=w1)
    g = b.build()
    assert g.nodes[w2].wait_of == c and g.waits_of(c) == (w1, w2)
    assert g.storage_root[w2] == c


def test_a_wait_on_a_computed_value_is_rejected():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4,))
    y = b.compute("y", "aten.relu.default", [x], (4,))
    b._add("w", NodeKind.WAIT, "_c10d_functional.wait_tensor.default", (y,), outputs=b.nodes[y].outputs)
    with pytest.raises(GraphError, match="waits on 'y', which is not a collective"):
        b.build()


def test_neighbours_are_listed_once_in_increasing_order():
    b = GraphBuilder(world_size=2)
    x = b.input("x", (4,))
    y = b.compute("y", "aten.add_.Tensor", [x], (4,), mutates=[x], alias_of=x)
    z = b.compute("z", "aten.relu.default", [x], (4,))
    r = b.compute("r", "aten.add.Tensor", [z, y], (4,))  # y is both its input and the last writer
    g = b.build()
    assert (y, r) in g.ordering_edges
    assert list(g.preds(r)) == [y, z]
    assert list(g.succs(y)) == [z, r]
    assert list(g.succs(x)) == [y, z]
    ptr, idx = g.pred_arrays()
    assert list(ptr) == [0, 0, 1, 3, 5] and list(idx) == [x, x, y, y, z]


def test_a_graph_without_edges():
    b = GraphBuilder(world_size=2)
    b.input("x", (4,))
    g = b.build()
    assert list(g.pred_arrays()[0]) == list(g.succ_arrays()[0]) == [0, 0]
    assert list(g.preds(0)) == list(g.succs(0)) == []


def test_a_write_through_a_view_follows_earlier_reads_of_its_storage():
    b = GraphBuilder(world_size=2)
    x = b.input("x", (4,))
    other = b.input("other", (4,))
    r = b.compute("r", "aten.add.Tensor", [x, other], (4,))
    v = b.view("v", x)
    w = b.compute("w", "aten.zero_.default", [v], (4,), mutates=[v], alias_of=v)
    after = b.compute("after", "aten.mul.Tensor", [x, other], (4,))
    g = b.build()
    assert (r, w) in g.ordering_edges and (w, after) in g.ordering_edges
    assert not any(other in e for e in g.ordering_edges)  # never written: orders nothing


def test_a_collective_shared_by_nodes_is_rejected_at_the_first():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4,))
    bad = CollectiveInfo("all_reduce", "0", "sum", in_bytes=-1, out_bytes=16)
    for name in ("c1", "c2"):
        c = b._add(name, NodeKind.COLLECTIVE, "_c10d_functional.all_reduce.default", (x,),
                   outputs=b.nodes[x].outputs, collective=bad)
        b.wait(f"{name}_wait", c)
    with pytest.raises(GraphError, match=r"c1.*-1 bytes is not an integer"):
        b.build()


def test_a_read_through_views_of_a_collective_names_the_view_it_reads():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4,))
    c = b.collective("ar", "all_reduce", "0", x)
    v1 = b.view("v1", c)
    v2 = b.view("v2", v1)
    b.compute("early", "aten.relu.default", [v2], (4,))
    b.wait("ar_wait", c)
    with pytest.raises(GraphError, match="early.*collective 'ar' through view 'v2' without waiting"):
        b.build()


def test_the_name_index_is_kept_from_validation_and_shared_by_the_group_order_twin():
    g = _tiny()
    assert g.index_of == {n.name: n.index for n in g.nodes}
    assert g.without_group_order().index_of is g.index_of
