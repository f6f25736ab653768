"""plan_buffers on small graphs built with GraphBuilder: what gets a buffer, where, and when."""

from __future__ import annotations

import pytest

from commopt.buffers import compare_plans, order_digest, plan_buffers, validate_plan
from commopt.errors import OptionError
from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import CollectiveInfo, Node, NodeKind, Ref, TensorMeta
from commopt.ir.schedule import ScheduleError
from commopt.synth import fsdp_tp_stack


def _two_allreduces():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4, 8))
    y = b.compute("y", "aten.relu.default", [x], (4, 8))
    c1 = b.collective("ar1", "all_reduce", "0", y)
    w1 = b.wait("ar1_wait", c1)
    z = b.compute("z", "aten.relu.default", [w1], (4, 8))
    c2 = b.collective("ar2", "all_reduce", "0", z)
    w2 = b.wait("ar2_wait", c2)
    b.output([w2])
    return b.build()


def test_buffers_of_sequential_collectives_share_memory():
    plan = plan_buffers(_two_allreduces(), align=128)
    (arena,) = plan.groups
    by_name = {buf.name: buf for buf in arena.buffers}
    assert sorted(by_name) == ["ar1:in0", "ar1:out0", "ar2:in0", "ar2:out0"]
    # ar1's input lives from y (position 1) to ar1's wait (3), its output from 2 to z (4)
    assert (by_name["ar1:in0"].first, by_name["ar1:in0"].last) == (1, 3)
    assert (by_name["ar1:out0"].first, by_name["ar1:out0"].last) == (2, 4)
    assert by_name["ar1:in0"].size_bytes == 128 and by_name["ar1:in0"].local_bytes == 128
    # at most two buffers are live together (e.g. ar1:out0 and ar2:in0 at z)
    assert arena.lower_bound_bytes == 2 * 128
    assert arena.arena_bytes == 2 * 128
    assert arena.per_call_site_bytes == 4 * 128
    assert plan.digest and len(plan.digest) == 64


def _coalesced_graph():
    """A coalesced all_gather of two tensors, shaped like torch.export's: getitem + wait per tensor."""
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4, 8))
    y = b.input("y", (2, 8))
    c = len(b.nodes)
    b.nodes.append(Node(
        index=c, name="agc", kind=NodeKind.COLLECTIVE,
        op="_c10d_functional.all_gather_into_tensor_coalesced.default", inputs=(x, y),
        outputs=(TensorMeta("float32", (8, 8)), TensorMeta("float32", (4, 8))),
        args=([Ref(x), Ref(y)], 2, "0"),
        collective=CollectiveInfo("all_gather", "0", None, 192, 384, coalesced=True),
    ))
    waits = []
    for k in range(2):
        item = b.view(f"agc_{k}", c, (8, 8) if k == 0 else (4, 8), op="getitem", args=(Ref(c), k))
        w = len(b.nodes)
        b.nodes.append(Node(
            index=w, name=f"agc_wait{k}", kind=NodeKind.WAIT, op="_c10d_functional.wait_tensor.default",
            inputs=(item,), outputs=b.nodes[item].outputs, args=(Ref(item),), wait_of=c, alias_of=item,
        ))
        waits.append(w)
    u0 = b.compute("use0", "aten.relu.default", [waits[0]], (8, 8))
    u1 = b.compute("use1", "aten.relu.default", [waits[1]], (4, 8))
    b.output([u0, u1])
    return b.build()


def test_coalesced_collective_gets_one_buffer_per_tensor_with_its_own_lifetime():
    graph = _coalesced_graph()
    plan = plan_buffers(graph, align=64)
    bufs = {buf.name: buf for buf in plan.groups[0].buffers}
    assert sorted(bufs) == ["agc:in0", "agc:in1", "agc:out0", "agc:out1"]
    assert (bufs["agc:in1"].value, bufs["agc:in1"].tensor_index) == ("y", 1)
    assert bufs["agc:out0"].padded_bytes == 256 and bufs["agc:out1"].padded_bytes == 128
    # out0 is last used by use0 (position 7), out1 by use1 (position 8)
    assert bufs["agc:out0"].last == graph.index_of["use0"]
    assert bufs["agc:out1"].last == graph.index_of["use1"]
    # the inputs are graph inputs, never zero-copy: the runner copies them in at the issue, so
    # their buffers live from the collective to its last wait (not from the step's start)
    assert bufs["agc:in0"].first == graph.index_of["agc"]
    assert bufs["agc:in0"].last == graph.index_of["agc_wait1"]
    assert not bufs["agc:in0"].zero_copy
    assert validate_plan(graph, None, plan) == []


def test_in_place_collective_has_one_buffer_living_until_the_last_use_of_its_storage():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4, 8))
    y = b.compute("y", "aten.mul.Tensor", [x, x], (4, 8))
    c = b.collective("ar_", "all_reduce", "0", y, in_place=True)
    w = b.wait("ar_wait", c)
    z = b.compute("z", "aten.relu.default", [w], (4, 8))
    late = b.compute("late", "aten.add.Tensor", [y, z], (4, 8))
    b.output([late])
    graph = b.build()
    plan = plan_buffers(graph)
    (buf,) = plan.groups[0].buffers
    assert (buf.name, buf.role) == ("ar_:inout0", "inout")
    assert (buf.first, buf.last) == (graph.index_of["y"], graph.index_of["late"])
    assert validate_plan(graph, None, plan) == []


def test_uneven_shards_are_padded_to_the_largest_rank():
    b = GraphBuilder(world_size=4)
    b.group("0", ranks=[0, 1, 2, 3])
    x = len(b.nodes)
    # 10 rows over 4 ranks: this rank holds 1 row, the largest rank 3
    b.nodes.append(Node(index=x, name="x", kind=NodeKind.INPUT, op="placeholder",
                        outputs=(TensorMeta("bfloat16", (1, 100), max_shape=(3, 100)),)))
    c = b.collective("ag", "all_gather", "0", x, out_shape=(12, 100))
    w = b.wait("ag_wait", c)
    b.output([w])
    graph = b.build()
    plan = plan_buffers(graph, align=256)
    buf = next(bb for bb in plan.groups[0].buffers if bb.name == "ag:in0")
    assert (buf.local_bytes, buf.padded_bytes, buf.size_bytes) == (200, 600, 768)
    assert buf.max_shape == [3, 100]


def test_each_group_gets_its_own_arena_and_types_can_be_filtered():
    graph = fsdp_tp_stack(2, dp=2, tp=2, hidden=64, tokens=32)
    plan = plan_buffers(graph)
    assert [a.group for a in plan.groups] == ["dp", "tp"]
    assert {b.collective_type for b in plan.groups[1].buffers} == {"all_reduce"}
    only_ar = plan_buffers(graph, collective_types="all_reduce")
    assert [a.group for a in only_ar.groups] == ["tp"]
    assert only_ar.collective_types == ["all_reduce"]
    assert validate_plan(graph, None, only_ar) == []
    assert only_ar.groups[0].buffers == plan.groups[1].buffers


def test_zero_copy_only_for_a_compute_producer_not_read_after_the_wait():
    graph = fsdp_tp_stack(1, dp=2, tp=2, hidden=64, tokens=32)
    plan = plan_buffers(graph)
    bufs = {b.name: b for a in plan.groups for b in a.buffers}
    # the row-parallel matmul feeds only the all_reduce: mm has an out= variant
    assert bufs["tp_ar0:in0"].producer == "fwd_rowmm0" and bufs["tp_ar0:in0"].zero_copy
    # the sharded weight is a graph input
    assert not bufs["ag0:in0"].zero_copy
    assert not any(b.zero_copy for b in bufs.values() if b.role == "output")


def test_zero_copy_refused_when_the_value_is_read_after_the_wait():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4, 8))
    y = b.compute("y", "aten.mm.default", [x, x], (4, 8))
    c = b.collective("ar", "all_reduce", "0", y)
    w = b.wait("ar_wait", c)
    z = b.compute("z", "aten.add.Tensor", [w, y], (4, 8))
    b.output([z])
    graph = b.build()
    (inp,) = [bb for bb in plan_buffers(graph).groups[0].buffers if bb.role == "input"]
    assert not inp.zero_copy
    assert inp.last == graph.index_of["ar_wait"]


def test_bad_options_are_user_errors():
    graph = _two_allreduces()
    with pytest.raises(OptionError, match="power of two"):
        plan_buffers(graph, align=384)
    with pytest.raises(OptionError, match="did you mean 'all_reduce'"):
        plan_buffers(graph, collective_types="all_reduc")
    with pytest.raises(ScheduleError, match="permutation"):
        plan_buffers(graph, [0, 0, 1, 2, 3, 4, 5, 6])


def _sink_waits(graph):
    """Every wait moved to just before its first user: collectives stay in flight longer."""
    order = [i for i in graph.original_order if graph.nodes[i].kind is not NodeKind.WAIT]
    for w in graph.waits():
        order.insert(min(order.index(u) for u in graph.users(w)), w)
    return order


def test_plan_on_a_reordered_graph_validates_only_for_that_order():
    graph = fsdp_tp_stack(3, dp=2, hidden=64, tokens=32)
    sunk = _sink_waits(graph)
    assert sunk != graph.original_order
    plan = plan_buffers(graph, sunk)
    assert validate_plan(graph, sunk, plan) == []
    problems = validate_plan(graph, None, plan)
    assert any("different order" in p for p in problems)



def test_an_order_digested_again_has_the_same_digest():
    graph = fsdp_tp_stack(2, dp=2, hidden=64, tokens=32)
    sunk = _sink_waits(graph)
    first = order_digest(graph, sunk)
    assert order_digest(graph, list(sunk)) == first  # remembered
    assert order_digest(graph, graph.original_order) != first  # another order
    assert order_digest(fsdp_tp_stack(2, dp=2, hidden=64, tokens=32), sunk) == first  # another graph
    assert plan_buffers(graph, sunk).order_sha256 == first


def _independent_allreduces():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4, 8))
    outs = []
    for k in (1, 2):
        y = b.compute(f"y{k}", "aten.relu.default", [x], (4, 8))
        c = b.collective(f"ar{k}", "all_reduce", "0", y)
        w = b.wait(f"ar{k}_wait", c)
        outs.append(b.compute(f"u{k}", "aten.relu.default", [w], (4, 8)))
    b.output(outs)
    return b.build()


def test_compare_plans_reports_what_overlapping_both_collectives_costs():
    graph = _independent_allreduces()
    at = graph.index_of
    # original: y1 ar1 wait1 u1 y2 ar2 wait2 u2 (at most 2 buffers live);
    # overlapped: y1 y2 ar1 ar2 wait1 u1 wait2 u2 (all four live at once)
    overlapped = [at[n] for n in ("x", "y1", "y2", "ar1", "ar2", "ar1_wait", "u1", "ar2_wait", "u2", "output")]
    cmp = compare_plans(graph, None, overlapped, align=128)
    assert cmp.original_arena_bytes == 2 * 128
    assert cmp.arena_bytes == cmp.lower_bound_bytes == 4 * 128
    assert cmp.arena_increase_bytes == 2 * 128
    assert cmp.per_call_site_bytes == 4 * 128
