"""Node classification from op schemas: kinds, aliasing, mutation, side effects, collectives."""

from __future__ import annotations

import operator

import pytest

from commopt.io.pt2 import graph_from_torch
from commopt.ir.graph import NodeKind


def _hand_graph():
    """An FX graph with the op shapes export rarely emits (in-place, RNG, legacy c10d)."""
    import torch

    aten, c10d = torch.ops.aten, torch.ops._c10d_functional
    g = torch.fx.Graph()

    def call(name, target, args, kwargs=None):
        return g.create_node("call_function", target, args, kwargs or {}, name=name)

    x = g.placeholder("x")
    y = call("relu", aten.relu.default, (x,))
    v = call("view", aten.view.default, (y, [-1]))
    a = call("add_", aten.add_.Tensor, (y, 1.0))
    ar = call("all_reduce_", c10d.all_reduce_.default, (a, "sum", "0"))
    w = call("wait_tensor", c10d.wait_tensor.default, (ar,))
    parts = call("split", aten.split.Tensor, (w, 2))
    p0 = call("getitem", operator.getitem, (parts, 0))
    r = call("rand", aten.rand.default, ([2],), {"dtype": torch.float32})
    co = call("all_gather_into_tensor_coalesced", c10d.all_gather_into_tensor_coalesced.default,
              ([p0, r], 2, "1"))
    c0 = call("getitem_1", operator.getitem, (co, 0))
    c1 = call("getitem_2", operator.getitem, (co, 1))
    w0 = call("wait_tensor_1", c10d.wait_tensor.default, (c0,))
    w1 = call("wait_tensor_2", c10d.wait_tensor.default, (c1,))
    g.output((v, w0, w1))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_schema_decides_kind_alias_and_mutation():
    graph = graph_from_torch(_hand_graph())
    n = {node.name: node for node in graph.nodes}
    assert n["x"].kind is NodeKind.INPUT and n["x"].attrs["role"] == "user_input"
    assert n["relu"].kind is NodeKind.COMPUTE and not n["relu"].side_effect
    assert n["view"].kind is NodeKind.VIEW and n["view"].alias_of == n["relu"].index
    # add_ writes relu's storage and returns it
    assert n["add_"].kind is NodeKind.COMPUTE
    assert n["add_"].mutates == (n["relu"].index,) and n["add_"].alias_of == n["relu"].index
    # the in-place all_reduce_ writes its input, then the wait aliases the collective
    ar = n["all_reduce_"]
    assert ar.kind is NodeKind.COLLECTIVE and ar.collective.in_place
    assert ar.collective.type == "all_reduce" and ar.collective.reduce_op == "sum"
    assert ar.mutates == (n["add_"].index,)
    assert n["wait_tensor"].kind is NodeKind.WAIT and n["wait_tensor"].wait_of == ar.index
    assert n["split"].kind is NodeKind.VIEW and n["getitem"].kind is NodeKind.VIEW
    assert n["rand"].rng and not n["rand"].side_effect and n["rand"].kind is NodeKind.COMPUTE
    assert graph.storage_root[n["view"].index] == n["relu"].index


def test_coalesced_collective_is_waited_per_tensor_through_getitem():
    graph = graph_from_torch(_hand_graph())
    co = graph.node("all_gather_into_tensor_coalesced")
    assert co.collective.coalesced and co.collective.group == "1"
    waits = [graph.nodes[w].name for w in graph.waits_of(co.index)]
    assert waits == ["wait_tensor_1", "wait_tensor_2"]


def test_an_rng_op_does_not_pin_collectives():
    """Communication draws no random numbers: a collective may cross an RNG op (dropout, CPU
    flash attention), which only keeps its place among RNG ops and side effects."""
    graph = graph_from_torch(_hand_graph())
    rand, co = graph.index_of["rand"], graph.index_of["all_gather_into_tensor_coalesced"]
    wait0 = graph.index_of["wait_tensor"]
    assert (wait0, rand) not in graph.ordering_edges  # a barrier would follow every earlier wait
    assert rand in graph.preds(co)  # the all_gather reads it: a data edge, nothing more


def test_seeded_ops_are_rng_not_barriers():
    import torch

    from commopt.io.classify import classify

    for op in (torch.ops.aten.rand.default, torch.ops.aten.native_dropout.default,
               torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
               torch.ops.aten.bernoulli_.float):
        facts = classify(op)
        assert facts.rng and not facts.side_effect, op


def test_args_keep_refs_and_symbols():
    from commopt.ir.args import Symbol
    from commopt.ir.graph import Ref

    graph = graph_from_torch(_hand_graph())
    rand = graph.node("rand")
    assert rand.kwargs == {"dtype": Symbol("dtype", "float32")}
    view = graph.node("view")
    assert view.args == (Ref(graph.index_of["relu"]), [-1])
    assert view.op == "aten.view.default"


def test_unknown_group_sizes_and_ranks_are_warned_about():
    graph = graph_from_torch(_hand_graph())
    warnings = " ".join(graph.meta["load_warnings"])
    assert "'0'" in warnings and "--groups" in warnings
    assert graph.groups["1"].size == 2  # proven by the coalesced all_gather's group_size


def test_legacy_c10d_op_is_a_barrier_that_writes_its_tensors():
    import torch

    from commopt.io.classify import classify

    facts = classify(torch.ops.c10d.allreduce_.default)
    assert facts.side_effect and facts.legacy_c10d and "tensors" in facts.writes
    assert facts.kind is NodeKind.COMPUTE


@pytest.mark.parametrize(
    "op, kind",
    [("aten.mm.default", NodeKind.COMPUTE), ("aten.t.default", NodeKind.VIEW),
     ("aten.expand.default", NodeKind.VIEW), ("aten.native_dropout.default", NodeKind.COMPUTE),
     ("_c10d_functional.wait_tensor.default", NodeKind.WAIT),
     ("_c10d_functional.all_to_all_single.default", NodeKind.COLLECTIVE)],
)
def test_classify_by_overload(op, kind):
    import torch

    from commopt.io.classify import classify

    ns, name, overload = op.split(".")
    target = getattr(getattr(getattr(torch.ops, ns), name), overload)
    assert classify(target).kind is kind


def test_exported_program_roles_and_message_bytes(fake_pg):
    import torch
    import torch.distributed._functional_collectives as fc

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(2, 8))
            self.register_buffer("scale", torch.ones(8))

        def forward(self, x):
            w = fc.all_gather_tensor(self.w, 0, fake_pg)
            y = fc.all_reduce(x @ w.t(), "avg", fake_pg)
            return (y * 2,)

    ep = torch.export.export(M(), (torch.randn(3, 4, dtype=torch.float32).repeat(1, 2),))
    graph = graph_from_torch(ep)
    roles = {n.name: n.attrs["role"] for n in graph.nodes if n.kind is NodeKind.INPUT}
    assert roles == {"p_w": "parameter", "b_scale": "buffer", "x": "user_input"}
    ag = next(n for n in graph.nodes if n.collective and n.collective.type == "all_gather")
    assert (ag.collective.in_bytes, ag.collective.out_bytes) == (2 * 8 * 4, 4 * 8 * 4)
    ar = next(n for n in graph.nodes if n.collective and n.collective.type == "all_reduce")
    assert ar.collective.reduce_op == "avg" and ar.collective.bytes == 3 * 4 * 4
    assert graph.groups["0"].size == 2
    assert graph.payload is ep


def test_metadata_assertions_are_not_barriers_but_prints_are():
    import torch

    from commopt.io.classify import classify

    assert not classify(torch.ops.aten._assert_tensor_metadata.default).side_effect
    assert not classify(torch.ops.aten._assert_scalar.default).side_effect
    assert classify(torch.ops.aten._print.default).side_effect
