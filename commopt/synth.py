"""Synthetic graphs of any size, shaped like real distributed training steps.

Used by benchmarks (load, estimation, scheduling and planning at 10k-100k nodes) and tests.
Each layer of the FSDP pattern all-gathers its sharded weight, runs a small forward chain
(matmul, bias, activation, views), and in the backward part runs the gradient matmuls and
reduce-scatters the weight gradient; the TP pattern all-reduces after a row-parallel matmul.
Deterministic for a given seed.
"""

from __future__ import annotations

import heapq
import random

from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import Graph, Ref


def fsdp_tp_stack(
    layers: int,
    *,
    hidden: int = 1024,
    tokens: int = 2048,
    dp: int = 8,
    tp: int = 1,
    dtype: str = "bfloat16",
    extra_elementwise: int = 4,
    seed: int = 0,
    name: str | None = None,
) -> Graph:
    """A training step of ``layers`` layers with FSDP over ``dp`` ranks and TP over ``tp``.

    Nodes per layer grow with ``extra_elementwise`` (elementwise ops and views per layer in
    forward and backward), so ``layers`` and that knob together set the node count:
    ``layers * (14 + 2 * extra_elementwise + (2 if tp > 1 else 0)) + 4`` nodes.
    """
    rng = random.Random(seed)
    world = dp * tp
    b = GraphBuilder(name=name or f"synth_fsdp{dp}_tp{tp}_L{layers}", world_size=world,
                     mesh={"dp": dp, "tp": tp} if tp > 1 else {"dp": dp})
    dp_ranks = [r * tp for r in range(dp)]
    b.group("dp", ranks=dp_ranks, mesh_dim="dp")
    if tp > 1:
        b.group("tp", ranks=list(range(tp)), mesh_dim="tp")
    x = b.input("tokens", (tokens, hidden), dtype)
    acts = []
    shard_rows = -(-hidden // dp)
    weights = []
    for layer in range(layers):
        width = hidden // tp
        w = b.input(f"w{layer}_shard", (shard_rows, width), dtype, role="parameter")
        weights.append(w)
    h = x
    # forward
    for layer in range(layers):
        ag = b.collective(f"ag{layer}", "all_gather", "dp", weights[layer])
        wfull = b.wait(f"ag{layer}_wait", ag)
        wv = b.view(f"w{layer}_view", wfull, (hidden, hidden // tp))
        mm = b.compute(f"fwd_mm{layer}", "aten.mm.default", [h, wv], (tokens, hidden // tp), dtype)
        y = mm
        for k in range(extra_elementwise):
            op = rng.choice(["aten.relu.default", "aten.gelu.default", "aten.mul.Tensor"])
            ins = [y] if op != "aten.mul.Tensor" else [y, mm]
            y = b.compute(f"fwd_ew{layer}_{k}", op, ins, (tokens, hidden // tp), dtype)
        if tp > 1:
            mm2 = b.compute(f"fwd_rowmm{layer}", "aten.mm.default", [y, wv], (tokens, hidden), dtype,
                            args=None)
            ar = b.collective(f"tp_ar{layer}", "all_reduce", "tp", mm2)
            y = b.wait(f"tp_ar{layer}_wait", ar)
        else:
            y = b.compute(f"fwd_proj{layer}", "aten.add.Tensor", [y, h], (tokens, hidden), dtype)
        acts.append((h, wv))
        h = y
    loss = b.compute("loss", "aten.sum.default", [h], (), dtype)
    grad = b.compute("grad_seed", "aten.ones_like.default", [h], (tokens, hidden), dtype)
    outs = [loss]
    # backward
    for layer in reversed(range(layers)):
        a_in, wv = acts[layer]
        g = grad
        for k in range(extra_elementwise):
            if k == 0:  # the activation's gradient, then elementwise steps of one input
                g = b.compute(f"bwd_ew{layer}_{k}", "aten.mul.Tensor", [g, a_in], (tokens, hidden), dtype)
            else:
                g = b.compute(f"bwd_ew{layer}_{k}", "aten.relu.default", [g], (tokens, hidden), dtype)
        gt = b.view(f"bwd_gT{layer}", g, (hidden, tokens), op="aten.t.default", args=[Ref(g)])
        gw = b.compute(f"bwd_wgrad{layer}", "aten.mm.default", [gt, a_in], (hidden, hidden // tp), dtype)
        rs = b.collective(f"rs{layer}", "reduce_scatter", "dp", gw)
        gshard = b.wait(f"rs{layer}_wait", rs)
        outs.append(gshard)
        ag = b.collective(f"bwd_ag{layer}", "all_gather", "dp", weights[layer])
        wfull = b.wait(f"bwd_ag{layer}_wait", ag)
        wv2 = b.view(f"bwd_w{layer}_view", wfull, (hidden, hidden // tp))
        grad = b.compute(f"bwd_dgrad{layer}", "aten.mm.default", [g, wv2], (tokens, hidden), dtype)
    outs.append(grad)
    b.output(outs)
    return b.build()


def graph_with_nodes(target_nodes: int, *, dp: int = 8, tp: int = 1, seed: int = 0) -> Graph:
    """An FSDP(+TP) stack with about ``target_nodes`` nodes (at 100k: over 2,000 collectives)."""
    per_layer = 14 + 2 * 4 + (2 if tp > 1 else 0)  # see fsdp_tp_stack, extra_elementwise=4
    fixed = 4  # tokens, loss, grad seed, output
    layers = max(1, round((target_nodes - fixed) / per_layer))
    return fsdp_tp_stack(layers, dp=dp, tp=tp, seed=seed, hidden=512, tokens=1024)


def late_first_order(graph: Graph) -> list[int]:
    """A topological order of all data and ordering edges that, whenever several nodes are
    ready, runs the one that came last in the original order: far from the original order,
    yet legal (write-back tests and benchmarks use it)."""
    n = len(graph)
    indeg = [len(graph.preds(i)) for i in range(n)]
    ready = [-i for i in range(n) if indeg[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = -heapq.heappop(ready)
        order.append(i)
        for j in graph.succs(i):
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, -j)
    if len(order) != n:
        raise ValueError("graph has a cycle")
    return order
