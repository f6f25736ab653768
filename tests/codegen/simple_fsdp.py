"""Export a SimpleFSDP-style MLP training step (``python -m tests.codegen.simple_fsdp OUT.pt2
WORLD [bf16|fp32]``), with the fake process group, saved with its process groups.

As in SimpleFSDP, every parameter is a DTensor sharded on dim 0 and is ``redistribute``d to
Replicate in forward (an all_gather; its backward is a reduce_scatter of the gradient); with
mixed precision the shard is cast to bf16 first, so a ``_to_copy`` produces each all_gather's
input. The step (loss and gradients through DTensor) is traced with make_fx on this rank's
local shards and the flat graph exported, as sample_graphs/make_samples.py does for llama_tp.
"""

from __future__ import annotations

import sys


def export(path: str, world: int, dtype: str) -> None:
    """Write the step's archive (and its process-group record) to ``path``."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from commopt.io.groups import save_with_groups

    cast = {"bf16": torch.bfloat16, "fp32": None}[dtype]
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
        torch.manual_seed(0)
        sizes, tokens = [16, 32, 32, 8], 8
        shards = [torch.randn(b, a).chunk(world)[0] / a**0.5
                  for a, b in zip(sizes, sizes[1:], strict=False)]

        def step(x, target, *local):
            ws = [DTensor.from_local(t.requires_grad_(True), mesh, [Shard(0)], run_check=False)
                  for t in local]
            h = x if cast is None else x.to(cast)
            for k, w in enumerate(ws):
                full = (w if cast is None else w.to(cast)).redistribute(mesh, [Replicate()])
                h = h @ full.to_local().t()
                if k + 1 < len(ws):
                    h = torch.relu(h)
            loss = ((h.float() - target) ** 2).mean()
            grads = torch.autograd.grad(loss, ws)
            return (loss, *[g.to_local() for g in grads])

        x, target = torch.randn(tokens, sizes[0]), torch.randn(tokens, sizes[-1])
        gm = make_fx(step, tracing_mode="fake", _allow_non_fake_inputs=True)(x, target, *shards)

        class SimpleFSDPStep(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.step = gm
                self.shards = torch.nn.ParameterList(
                    torch.nn.Parameter(t.clone(), requires_grad=False) for t in shards)

            def forward(self, x, target):
                return self.step(x, target, *self.shards)

        ep = torch.export.export(SimpleFSDPStep(), (x, target))
        save_with_groups(ep, path, mesh=mesh)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    export(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "bf16")
