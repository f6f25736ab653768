"""commopt.capture on DTensor models: a TP step (parallelize_module) and a SimpleFSDP step are
captured inside a real 2-rank gloo job, optimized, and the optimized archive computes what the
eager step computes on every rank."""

from __future__ import annotations

import pytest

from tests.distributed import read_groups_record, recreate_groups, run_exported, run_gloo

HIDDEN, FFN, TOKENS = 16, 64, 8


def _mlp():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(HIDDEN, FFN), torch.nn.GELU(),
                               torch.nn.Linear(FFN, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, FFN), torch.nn.GELU(),
                               torch.nn.Linear(FFN, HIDDEN))


def tp_model_and_step(world_size: int):
    """An MLP made tensor-parallel with parallelize_module (Colwise then Rowwise, twice) and its
    training step: (step, params, x, target)."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )
    from torch.func import functional_call

    mesh = init_device_mesh("cpu", (world_size,), mesh_dim_names=("tp",))
    model = parallelize_module(_mlp(), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel(),
                                              "4": ColwiseParallel(), "6": RowwiseParallel()})
    params = dict(model.named_parameters())

    def step(params, x, target):
        loss = ((functional_call(model, params, (x,)) - target) ** 2).mean()
        return loss, torch.autograd.grad(loss, list(params.values()))

    torch.manual_seed(1)  # TP: every rank sees the same batch
    return step, params, torch.randn(TOKENS, HIDDEN), torch.randn(TOKENS, HIDDEN)


def fsdp_model_and_step(world_size: int):
    """An MLP whose parameters are stored SimpleFSDP-style (this rank's Shard(0) piece, a
    DTensor parameter) and gathered in the step: (step, params, x, target)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
    from torch.func import functional_call

    mesh = init_device_mesh("cpu", (world_size,), mesh_dim_names=("dp",))
    model = _mlp()
    params = {n: torch.nn.Parameter(distribute_tensor(p.detach(), mesh, [Shard(0)]))
              for n, p in model.named_parameters()}

    def step(params, x, target):
        full = {n: p.redistribute(mesh, [Replicate()]).to_local(grad_placements=[Partial()])
                for n, p in params.items()}
        loss = ((functional_call(model, full, (x,)) - target) ** 2).mean()
        return loss, torch.autograd.grad(loss, list(params.values()))

    torch.manual_seed(10 + dist.get_rank())  # data parallel: each rank its own batch
    return step, params, torch.randn(TOKENS, HIDDEN), torch.randn(TOKENS, HIDDEN)


MODELS = {"tp": tp_model_and_step, "fsdp": fsdp_model_and_step}


def _capture_optimize_run(rank: int, world_size: int, kind: str, out_dir: str):
    import torch
    import torch.utils._pytree as pytree
    from torch.distributed.tensor import DTensor

    import commopt

    step, params, x, target = MODELS[kind](world_size)
    eager = [t.to_local() if isinstance(t, DTensor) else t
             for t in pytree.tree_leaves(step(params, x, target))]
    captured = commopt.capture(step, params, x, target)
    result = commopt.optimize(captured, output_dir=f"{out_dir}/rank{rank}", timings=False)
    archive = f"{out_dir}/rank{rank}/captured.pt2"
    mapping = recreate_groups(read_groups_record(archive))
    optimized = run_exported(torch.export.load(archive), mapping)
    original = run_exported(captured.program)
    graph = captured.commopt_graph()
    return {"eager": [t.detach() for t in eager], "original": original, "optimized": optimized,
            "moved": list(result.order) != list(graph.original_order),
            "collectives": sorted({n.collective.type for n in graph.nodes if n.collective}),
            "groups": [(g.name, g.ranks, g.mesh_dim) for g in graph.groups.values()]}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["tp", "fsdp"])
def test_captured_step_optimized_computes_the_eager_step(kind, tmp_path):
    import torch

    ranks = run_gloo(_capture_optimize_run, 2, kind, str(tmp_path))
    for rank, r in enumerate(ranks):
        assert r["moved"], f"{kind}: optimize left the captured order as it was: nothing was tested"
        expected = {"tp": ["all_reduce"], "fsdp": ["all_gather", "reduce_scatter"]}
        assert r["collectives"] == expected[kind]
        assert r["groups"] == [("0", (0, 1), "tp" if kind == "tp" else "dp")]
        assert len(r["eager"]) == len(r["optimized"]) == len(r["original"])
        for k, (e, o, opt) in enumerate(zip(r["eager"], r["original"], r["optimized"], strict=True)):
            assert torch.equal(o, opt), f"{kind} rank {rank}: output {k}: optimized != captured"
            assert torch.equal(e, o), f"{kind} rank {rank}: output {k}: captured != eager step"
