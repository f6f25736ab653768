"""Export the sample graphs (``make samples``) with the fake process group, no GPU needed.

Usage: ``python sample_graphs/make_samples.py [--sets ws8,ws2] [--only fsdp,tp]``.

Each sample is a small, deterministic (seeded) training step or layer written the way the
parallelism is written in real code, exported with ``torch.export`` and saved with its
process groups recorded (:func:`commopt.save_with_groups`), then converted to commopt's JSON:

- ``fsdp``: FSDP-style step: per layer, all-gather of the sharded weight (forward), joint
  forward+backward export, so autograd turns each all-gather into a reduce-scatter of the
  weight gradient;
- ``tp``: Megatron tensor-parallel MLP blocks (column- then row-parallel, all-reduce after the
  row-parallel matmul in forward and of the input gradient in backward), backward written out;
- ``ddp``: an MLP step whose gradients are all-reduced in buckets (flatten, all-reduce,
  unflatten), backward written out, as DDP's reducer does;
- ``mesh2d``: a 2-D (dp, tp) device mesh: FSDP over dp, sequence-parallel TP over tp
  (all-gather before column-parallel, reduce-scatter after row-parallel); joint export;
- ``moe``: a mixture-of-experts layer, one expert per rank: all_to_all_single dispatch and
  combine; joint export.

Every sample is written at world size 8 (``ws8/``, for analysis) and at the size tests run
for real on this machine (``ws2/``: 2 ranks, 4 for the 2-D mesh), with ``MANIFEST.json``.
Each (sample, world size) is exported in a fresh subprocess so process-group names start
from a clean world.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SAMPLES = ("fsdp", "tp", "ddp", "mesh2d", "moe", "llama_tp")
SETS = {"ws8": {"fsdp": 8, "tp": 8, "ddp": 8, "mesh2d": 8, "moe": 8, "llama_tp": 8},
        "ws2": {"fsdp": 2, "tp": 2, "ddp": 2, "mesh2d": 4, "moe": 2, "llama_tp": 2}}
#: Exit status of a subprocess whose sample needs a package that is not installed.
MISSING_PACKAGE = 3
DESCRIPTIONS = {
    "fsdp": "FSDP-style training step: per-layer all-gather of sharded weights in forward, "
            "reduce-scatter of weight gradients in backward (joint forward+backward export)",
    "tp": "Megatron tensor-parallel MLP blocks: column- then row-parallel matmuls, all-reduce "
          "after the row-parallel matmul (forward) and of the input gradient (backward)",
    "ddp": "DDP training step of an MLP: gradients all-reduced in flattened buckets",
    "mesh2d": "2-D (dp, tp) mesh: FSDP all-gather/reduce-scatter over dp, sequence-parallel "
              "TP all-gather/reduce-scatter over tp (joint forward+backward export)",
    "moe": "mixture-of-experts layer, one expert per rank: all_to_all_single dispatch and "
           "combine in forward and backward (joint forward+backward export)",
    "llama_tp": "real model code: a 2-layer transformers Llama (random weights from a tiny config; "
                "embeddings, RoPE, SDPA, RMSNorm, SiLU MLP, cross-entropy loss) made tensor-parallel "
                "with PyTorch's parallelize_module (Colwise q/k/v/gate/up, Rowwise o/down); forward "
                "and backward traced together through DTensor, local shards as parameters",
}


# --------------------------------------------------------------------------- models
def _mesh_dims(name: str, world: int) -> dict[str, int] | None:
    if name == "mesh2d":
        return {"dp": 2, "tp": world // 2}
    return None


def build(name: str, world: int):
    """(ExportedProgram, DeviceMesh or None) of sample ``name`` at world size ``world``."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc
    from torch.export.experimental import _export_forward_backward

    torch.manual_seed(0)
    c10d = torch.ops._c10d_functional
    world_group = dist.group.WORLD
    gname = world_group.group_name

    if name == "fsdp":
        layers, hidden, tokens = 3, 64, 16

        class FSDPStep(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.shards = torch.nn.ParameterList(
                    torch.nn.Parameter(torch.randn(hidden // world, hidden) / hidden**0.5)
                    for _ in range(layers)
                )
                self.bias = torch.nn.ParameterList(
                    torch.nn.Parameter(torch.zeros(hidden)) for _ in range(layers)
                )

            def forward(self, x):
                h = x
                for shard, bias in zip(self.shards, self.bias, strict=True):
                    w = fc.all_gather_tensor_autograd(shard, 0, world_group)
                    h = torch.nn.functional.silu(h @ w.t() + bias) + h
                return ((h.float() ** 2).mean(),)

        ep = torch.export.export(FSDPStep(), (torch.randn(tokens, hidden),))
        return _export_forward_backward(ep), None

    if name == "tp":
        blocks, hidden, ffn, tokens = 2, 64, 256, 16

        def ar(t):
            return c10d.wait_tensor(c10d.all_reduce(t, "sum", gname))

        class TPBlocks(torch.nn.Module):
            """y = x + AllReduce(gelu(x @ W1_col) @ W2_row); backward written out."""

            def __init__(self) -> None:
                super().__init__()
                self.w1 = torch.nn.ParameterList(
                    torch.nn.Parameter(torch.randn(hidden, ffn // world) / hidden**0.5) for _ in range(blocks))
                self.w2 = torch.nn.ParameterList(
                    torch.nn.Parameter(torch.randn(ffn // world, hidden) / ffn**0.5) for _ in range(blocks))

            def forward(self, x):
                saved = []
                h = x
                for w1, w2 in zip(self.w1, self.w2, strict=True):
                    pre = h @ w1
                    act = torch.nn.functional.gelu(pre, approximate="tanh")
                    y = ar(act @ w2)
                    saved.append((h, pre, act))
                    h = h + y
                loss = (h**2).mean()
                dh = 2.0 * h / h.numel()
                grads = []
                for (hin, pre, act), w1, w2 in reversed(list(zip(saved, self.w1, self.w2, strict=True))):
                    dw2 = act.t() @ dh
                    dact = dh @ w2.t()
                    t = torch.tanh(0.7978845608028654 * (pre + 0.044715 * pre**3))
                    dgelu = 0.5 * (1 + t) + 0.5 * pre * (1 - t * t) * 0.7978845608028654 * (
                        1 + 3 * 0.044715 * pre * pre)
                    dpre = dact * dgelu
                    dw1 = hin.t() @ dpre
                    dh = dh + ar(dpre @ w1.t())
                    grads += [dw1, dw2]
                return (loss, *grads, dh)

        ep = torch.export.export(TPBlocks(), (torch.randn(tokens, hidden),)).run_decompositions()
        return ep, None

    if name == "ddp":
        sizes, tokens, bucket_params = [32, 64, 64, 64, 16], 16, 4

        class DDPStep(torch.nn.Module):
            """MLP step; gradients all-reduced in buckets of ``bucket_params`` tensors."""

            def __init__(self) -> None:
                super().__init__()
                self.ws = torch.nn.ParameterList(
                    torch.nn.Parameter(torch.randn(a, b) / a**0.5) for a, b in zip(sizes, sizes[1:], strict=False))
                self.bs = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(b)) for b in sizes[1:])

            def forward(self, x, target):
                acts = [x]
                pres = []
                h = x
                for i, (w, b) in enumerate(zip(self.ws, self.bs, strict=True)):
                    pre = h @ w + b
                    pres.append(pre)
                    h = torch.relu(pre) if i + 1 < len(self.ws) else pre
                    acts.append(h)
                diff = h - target
                loss = (diff**2).mean()
                d = 2.0 * diff / diff.numel()
                grads = []
                for i in reversed(range(len(self.ws))):
                    if i + 1 < len(self.ws):
                        d = d * (pres[i] > 0).to(d.dtype)
                    grads.append(acts[i].t() @ d)
                    grads.append(d.sum(0))
                    if i > 0:
                        d = d @ self.ws[i].t()
                reduced = []
                for start in range(0, len(grads), bucket_params):
                    bucket = grads[start:start + bucket_params]
                    flat = torch.cat([g.reshape(-1) for g in bucket])
                    flat = c10d.wait_tensor(c10d.all_reduce(flat, "sum", gname)) / world
                    offset = 0
                    for g in bucket:
                        reduced.append(flat[offset:offset + g.numel()].view(g.shape))
                        offset += g.numel()
                return (loss, *reduced)

        ep = torch.export.export(DDPStep(), (torch.randn(tokens, sizes[0]), torch.randn(tokens, sizes[-1])))
        return ep.run_decompositions(), None

    if name == "mesh2d":
        from torch.distributed.device_mesh import init_device_mesh

        dims = _mesh_dims(name, world)
        mesh = init_device_mesh("cpu", (dims["dp"], dims["tp"]), mesh_dim_names=("dp", "tp"))
        dp_group, tp_group = mesh.get_group("dp"), mesh.get_group("tp")
        dp, tp = dims["dp"], dims["tp"]
        layers, hidden, ffn, seq = 2, 32, 128, 8 * tp

        class Mesh2D(torch.nn.Module):
            """Per layer: FSDP-gather W1/W2 shards over dp; SP all-gather, MLP, SP reduce-scatter."""

            def __init__(self) -> None:
                super().__init__()
                self.w1 = torch.nn.ParameterList(
                    torch.nn.Parameter(torch.randn(ffn // tp // dp, hidden) / hidden**0.5) for _ in range(layers))
                self.w2 = torch.nn.ParameterList(
                    torch.nn.Parameter(torch.randn(hidden // dp, ffn // tp) / ffn**0.5) for _ in range(layers))

            def forward(self, x_seq_shard):
                h = x_seq_shard
                for s1, s2 in zip(self.w1, self.w2, strict=True):
                    w1 = fc.all_gather_tensor_autograd(s1, 0, dp_group)
                    w2 = fc.all_gather_tensor_autograd(s2, 0, dp_group)
                    full = fc.all_gather_tensor_autograd(h, 0, tp_group)
                    part = torch.nn.functional.gelu(full @ w1.t()) @ w2.t()
                    h = h + fc.reduce_scatter_tensor_autograd(part, "sum", 0, tp_group)
                return ((h**2).mean(),)

        ep = torch.export.export(Mesh2D(), (torch.randn(seq // tp, hidden),))
        return _export_forward_backward(ep), mesh

    if name == "moe":
        hidden, ffn, tokens_per_expert = 32, 64, 4
        tokens = tokens_per_expert * world

        class MoELayer(torch.nn.Module):
            """Tokens sorted by expert are exchanged with all_to_all_single, run through this
            rank's expert, exchanged back and mixed with their gate weights."""

            def __init__(self) -> None:
                super().__init__()
                self.gate = torch.nn.Parameter(torch.randn(hidden, world) / hidden**0.5)
                self.w_in = torch.nn.Parameter(torch.randn(hidden, ffn) / hidden**0.5)
                self.w_out = torch.nn.Parameter(torch.randn(ffn, hidden) / ffn**0.5)

            def forward(self, x):
                probs = torch.softmax(x @ self.gate, dim=-1)
                expert = torch.arange(tokens) // tokens_per_expert
                weight = probs.gather(1, expert[:, None])
                splits = [tokens_per_expert] * world
                recv = fc.all_to_all_single_autograd(x, splits, splits, world_group)
                y = torch.nn.functional.silu(recv @ self.w_in) @ self.w_out
                back = fc.all_to_all_single_autograd(y, splits, splits, world_group)
                out = x + weight * back
                return ((out**2).mean(),)

        ep = torch.export.export(MoELayer(), (torch.randn(tokens, hidden),))
        return _export_forward_backward(ep), None

    if name == "llama_tp":
        return _llama_tp(world)

    raise SystemExit(f"unknown sample {name!r}")


def _llama_tp(world: int):
    """A transformers Llama training step, TP over every rank: (ExportedProgram, DeviceMesh).

    torch.export cannot trace DTensor parameters directly in torch 2.13, so the step (loss and
    gradients through DTensor) is traced with make_fx on this rank's local shards, and the
    resulting flat graph (aten + _c10d_functional ops) is exported with the shards as its
    parameters.
    """
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )
    from torch.func import functional_call

    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        print("llama_tp needs the transformers package: pip install transformers", file=sys.stderr)
        raise SystemExit(MISSING_PACKAGE) from None

    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=64,
                      attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg)
    plan = {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        plan.update({f"{p}self_attn.{m}": ColwiseParallel() for m in ("q_proj", "k_proj", "v_proj")})
        plan.update({f"{p}mlp.{m}": ColwiseParallel() for m in ("gate_proj", "up_proj")})
        plan.update({f"{p}self_attn.o_proj": RowwiseParallel(), f"{p}mlp.down_proj": RowwiseParallel()})
    parallelize_module(model, mesh, plan)  # colwise outputs stay local: each rank runs its heads
    names = [n for n, _ in model.named_parameters()]
    params = dict(model.named_parameters())
    placements = {n: (p.placements if isinstance(p, DTensor) else None) for n, p in params.items()}
    shards = [p.to_local().detach() if isinstance(p, DTensor) else p.detach() for p in params.values()]

    def step(ids, labels, *local):
        ps = {}
        for n, t in zip(names, local, strict=True):
            t = t.requires_grad_(True)
            ps[n] = DTensor.from_local(t, mesh, placements[n], run_check=False) if placements[n] else t
        out = functional_call(model, ps, (ids,), {"labels": labels, "use_cache": False})
        grads = torch.autograd.grad(out.loss, [ps[n] for n in names], allow_unused=True)
        grads = [g.to_local() if isinstance(g, DTensor) else g for g in grads]
        loss = out.loss.to_local() if isinstance(out.loss, DTensor) else out.loss
        return (loss, *grads)

    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    return export_traced_step("LlamaTPStep", step, ids, shards), mesh


def export_traced_step(class_name: str, step, ids, shards):
    """``step(ids, labels, *shards)`` (labels = ids) captured with :func:`commopt.capture`:
    traced with make_fx on fake tensors (DTensor code traces there, torch.export cannot) and
    exported as a module ``class_name`` whose parameters are ``shards``."""
    import torch

    from commopt.integrations.capture import capture

    params = [torch.nn.Parameter(t, requires_grad=False) for t in shards]
    return capture(step, ids, ids, *params, name=class_name).program


def export_one(name: str, world: int, out_dir: Path, builder=None, description: str | None = None) -> dict:
    """Export one sample at one world size in this process; returns its manifest entry.

    ``builder(name, world)`` (default :func:`build`) returns (ExportedProgram, DeviceMesh or
    None); make_corpus.py passes its own.
    """
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from commopt.io import load_graph
    from commopt.io.groups import save_with_groups
    from commopt.io.json_graph import save_json_graph

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        ep, mesh = (builder or build)(name, world)
        root = str(HERE.parent) + os.sep
        for node in ep.graph.nodes:
            # provenance records carry Python object ids: drop them so re-exports are identical
            node.meta.pop("from_node", None)
            if isinstance(node.meta.get("stack_trace"), str):  # no paths of this machine
                node.meta["stack_trace"] = node.meta["stack_trace"].replace(root, "")
        out_dir.mkdir(parents=True, exist_ok=True)
        pt2 = out_dir / f"{name}.pt2"
        save_with_groups(ep, pt2, mesh=mesh)
    finally:
        dist.destroy_process_group()
    graph = load_graph(pt2)
    save_json_graph(graph, out_dir / f"{name}.json")
    kinds: dict[str, int] = {}
    for n in graph.nodes:
        kinds[n.kind.label] = kinds.get(n.kind.label, 0) + 1
    colls: dict[str, int] = {}
    for n in graph.nodes:
        if n.collective is not None:
            key = f"{n.collective.type}@{n.collective.group}"
            colls[key] = colls.get(key, 0) + 1
    return {
        "name": name,
        "world_size": world,
        "mesh": graph.mesh,
        "description": description if description is not None else DESCRIPTIONS[name],
        "files": [f"{out_dir.name}/{name}.pt2", f"{out_dir.name}/{name}.json"],
        "nodes": len(graph.nodes),
        "kinds": dict(sorted(kinds.items())),
        "collectives": dict(sorted(colls.items())),
        "groups": [{"name": g.name, "ranks": list(g.ranks) if g.ranks else None, "mesh_dim": g.mesh_dim}
                   for g in sorted(graph.groups.values(), key=lambda g: (len(g.name), g.name))],
    }


def main(argv: list[str] | None = None) -> int:
    """Export every requested sample in a subprocess each, then write MANIFEST.json."""
    parser = argparse.ArgumentParser(prog="make_samples.py")
    parser.add_argument("--sets", default="ws8,ws2", help="comma-separated: ws8, ws2")
    parser.add_argument("--only", default=",".join(SAMPLES), help="comma-separated sample names")
    parser.add_argument("--out", default=str(HERE))
    parser.add_argument("--one", nargs=3, metavar=("NAME", "WORLD", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        name, world, out = args.one
        print(json.dumps(export_one(name, int(world), Path(out))))
        return 0
    out_root = Path(args.out)
    manifest_path = out_root / "MANIFEST.json"
    entries: dict[tuple[str, str], dict] = {}
    if manifest_path.exists():
        for e in json.loads(manifest_path.read_text())["samples"]:
            entries[(e["files"][0].split("/")[0], e["name"])] = e
    env = dict(os.environ, PYTHONHASHSEED="0")
    for set_name in args.sets.split(","):
        for name in args.only.split(","):
            world = SETS[set_name][name]
            print(f"exporting {set_name}/{name} (world size {world})", file=sys.stderr, flush=True)
            res = subprocess.run(
                [sys.executable, __file__, "--one", name, str(world), str(out_root / set_name)],
                capture_output=True, text=True, env=env, check=False,
            )
            if res.returncode == MISSING_PACKAGE:
                sys.stderr.write(res.stderr.strip().splitlines()[-1] + f"; kept {set_name}/{name} as it was\n")
                continue
            if res.returncode != 0:
                sys.stderr.write(res.stderr)
                return 1
            entries[(set_name, name)] = json.loads(res.stdout.strip().splitlines()[-1])
    manifest = {
        "about": "Sample graphs exported by sample_graphs/make_samples.py (make samples) with the "
                 "fake process group; ws8/ at world size 8, ws2/ at the size tests run for real "
                 "(2 ranks; 4 for mesh2d). Process groups are recorded inside each .pt2.",
        "samples": [entries[k] for k in sorted(entries)],
    }
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
