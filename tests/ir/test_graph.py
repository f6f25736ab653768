"""The IR's derived structure: ordering edges, storage roots, validation errors."""

import pytest

from commopt.errors import GraphError
from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import NodeKind


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
