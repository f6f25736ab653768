"""Export realistic-size, shape-only training-step graphs (``make samples``), no GPU, no memory.

Usage: ``python sample_graphs/make_realistic.py [--only llama3_8b_L2,llama3_8b_L32_ac]``.

Each graph is one training step (forward, loss and backward) of transformers'
``LlamaForCausalLM`` with the Llama-3-8B configuration (hidden 4096, 32 heads, 8 KV heads,
MLP 14336, vocabulary 128256, RoPE theta 500000, untied output head), parallelized the way
torchtitan parallelizes it, on a 64-rank (dp=8, tp=8) device mesh of the fake process group:

- tensor + sequence parallelism with PyTorch's ``parallelize_module`` over ``tp``: embedding
  row-parallel with a sequence-sharded output, q/k/v/gate/up column-parallel, o/down
  row-parallel with sequence-sharded outputs (reduce-scatter), RMSNorms ``SequenceParallel``,
  attention and MLP inputs all-gathered along the sequence (``PrepareModuleInput``), output
  head column-parallel with a replicated (all-gathered) output;
- SimpleFSDP-style FSDP over ``dp``: every parameter's (TP-local) shard is further sharded on
  dim 0 over ``dp`` and kept in float32; in forward it is a ``DTensor`` ``Shard(0)``
  redistributed to ``Replicate()`` in bfloat16 (all-gather) and handed to the TP module as
  ``to_local(grad_placements=[Partial("avg")])``, so autograd turns each all-gather into a
  float32 reduce-scatter of its gradient;
- without activation checkpointing (``llama3_8b_L2``, ``llama3_8b_L32``) the gathered weights
  are kept from forward to backward (``reshard_after_forward=False``); with full activation
  checkpointing per decoder layer (``llama3_8b_L32_ac``, transformers'
  ``gradient_checkpointing_enable``, non-reentrant) backward recomputes each layer's forward,
  all-gathers included, as FSDP with ``reshard_after_forward=True`` and torchtitan's full AC do.

The step is traced with ``make_fx(tracing_mode="fake")`` (the DTensor recipe of
``make_samples._llama_tp``): the model is built on the ``meta`` device and every parameter
and input is a fake tensor, so nothing the size of the model is ever allocated. The traced
graph is exported with ``torch.export`` (fake parameters, so parameters keep their role) and
converted by commopt's own loader path (:func:`commopt.io.pt2.graph_from_torch`). Such graphs
carry no weights, so only the JSON graph is written, with the process groups inside it.

Each graph is exported in a fresh subprocess (process-group names start from a clean world);
``realistic/MANIFEST.json`` lists model, configuration, parallelism, node and collective
counts and groups.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT_DIR = HERE / "realistic"
#: Exit status of a subprocess that needs a package that is not installed.
MISSING_PACKAGE = 3

#: Llama-3-8B (meta-llama/Meta-Llama-3-8B config.json), layers set per graph.
LLAMA3_8B = {
    "vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 8192,
    "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
}
MESH = {"dp": 8, "tp": 8}
#: name -> (decoder layers, sequence length, local batch per dp rank, activation checkpointing)
GRAPHS = {
    "llama3_8b_L2": (2, 4096, 1, False),
    "llama3_8b_L32": (32, 4096, 1, False),
    "llama3_8b_L32_ac": (32, 4096, 1, True),
}


def _tp_plan(layers: int) -> dict:
    """torchtitan's Llama TP+SP plan, spelled with transformers' module names."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
    )

    # The residual stream stays a sequence-sharded DTensor (use_local_output=False), so the
    # model sees global shapes (RoPE positions and the causal mask cover the whole sequence).
    plan = {
        "model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1),
                                              use_local_output=False),
        "model.norm": SequenceParallel(),
        "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    }
    for i in range(layers):
        p = f"model.layers.{i}."
        plan.update({
            p + "input_layernorm": SequenceParallel(),
            p + "self_attn": PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                                desired_input_kwarg_layouts={"hidden_states": Replicate()}),
            p + "self_attn.q_proj": ColwiseParallel(),
            p + "self_attn.k_proj": ColwiseParallel(),
            p + "self_attn.v_proj": ColwiseParallel(),
            p + "self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
            p + "post_attention_layernorm": SequenceParallel(),
            p + "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            p + "mlp.gate_proj": ColwiseParallel(),
            p + "mlp.up_proj": ColwiseParallel(),
            p + "mlp.down_proj": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
        })
    return plan


def build(name: str):
    """(ExportedProgram, DeviceMesh, config dict) of graph ``name``; needs the fake process
    group initialised at world size dp*tp."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
    from torch.distributed.tensor.parallel import parallelize_module
    from torch.func import functional_call
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.utils import parametrize

    try:
        from transformers import LlamaConfig, LlamaForCausalLM
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    except ImportError:
        print("make_realistic.py needs the transformers package: pip install transformers", file=sys.stderr)
        raise SystemExit(MISSING_PACKAGE) from None

    layers, seq, batch, ac = GRAPHS[name]
    dp, tp = MESH["dp"], MESH["tp"]
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    dp_mesh, tp_mesh = mesh["dp"], mesh["tp"]
    cfg = LlamaConfig(num_hidden_layers=layers, attn_implementation="sdpa", **LLAMA3_8B)
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    model.model.rotary_emb = LlamaRotaryEmbedding(cfg)  # inv_freq: 64 real floats, needed for values
    parallelize_module(model, tp_mesh, _tp_plan(layers))
    model.train()
    if ac:  # full activation checkpointing per decoder layer, as torchtitan's "full" AC
        with warnings.catch_warnings():  # renamed in transformers 5; the old name works everywhere
            warnings.simplefilter("ignore", FutureWarning)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    dtensors = dict(model.named_parameters())
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    with fake:
        ids = torch.empty((batch, seq), dtype=torch.long)

    class ReplicateComputation(torch.nn.Module):
        """SimpleFSDP's parametrization: the stored (dp, tp)-local shard is all-gathered over dp
        in bf16 when the module reads its weight; the gradient comes back Partial(avg), which
        autograd reduce-scatters to the shard in float32; the result is the TP DTensor."""

        def __init__(self, placements) -> None:
            super().__init__()
            self.placements = placements

        def forward(self, shard):
            full = DTensor.from_local(shard, dp_mesh, [Shard(0)], run_check=False).redistribute(
                dp_mesh, [Replicate()], forward_dtype=torch.bfloat16, backward_dtype=torch.float32)
            return DTensor.from_local(full.to_local(grad_placements=[Partial("avg")]), tp_mesh,
                                      self.placements, run_check=False)

    for fqn, p in dtensors.items():
        owner, _, attr = fqn.rpartition(".")
        parametrize.register_parametrization(model.get_submodule(owner), attr,
                                             ReplicateComputation(p.placements), unsafe=True)
    names = [n for n, _ in model.named_parameters()]  # ...parametrizations.weight.original
    with fake:
        shards = []
        for p in dtensors.values():
            local = p.to_local().shape
            if local[0] % dp:
                raise SystemExit(f"{name}: dim 0 of a {tuple(local)} shard does not split over dp={dp}")
            shards.append(torch.empty((local[0] // dp, *local[1:]), dtype=torch.float32))

    class TrainStep(torch.nn.Module):
        """Loss and gradients in one forward, so that backward (and the recompute of
        checkpointed layers in it) still sees the shards functional_call put in."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids, labels, leaves):
            out = self.model(ids, labels=labels, use_cache=False)
            loss = out.loss.to_local() if isinstance(out.loss, DTensor) else out.loss
            return (loss, *torch.autograd.grad(loss, leaves))

    train_step = TrainStep()

    def step(ids, labels, *local):
        leaves = [t.requires_grad_(True) for t in local]
        params = {f"model.{n}": t for n, t in zip(names, leaves, strict=True)}
        return functional_call(train_step, params, (ids, labels, leaves))

    gm = make_fx(step, tracing_mode="fake", _allow_non_fake_inputs=True)(ids, ids, *shards)

    class LlamaStep(torch.nn.Module):
        """The traced step with the shards as parameters under the model's own names."""

        def __init__(self) -> None:
            super().__init__()
            self.step = gm
            for fqn, t in zip(dtensors, shards, strict=True):
                owner = self
                *path, attr = fqn.split(".")
                for part in path:
                    if not hasattr(owner, part):
                        owner.add_module(part, torch.nn.Module())
                    owner = getattr(owner, part)
                owner.register_parameter(attr, torch.nn.Parameter(t, requires_grad=False))

        def forward(self, ids, labels):
            return self.step(ids, labels, *(self.get_parameter(fqn) for fqn in dtensors))

    with fake:
        module = LlamaStep()
    config = {"layers": layers, "seq_len": seq, "local_batch": batch, "activation_checkpointing": ac,
              **{k: v for k, v in LLAMA3_8B.items() if k != "max_position_embeddings"}}
    return torch.export.export(module, (ids, ids)), mesh, config


def export_one(name: str, out_dir: Path) -> dict:
    """Export graph ``name`` in this process, write ``<name>.json``; returns its manifest entry."""
    import torch
    import torch.distributed as dist
    import transformers
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from commopt.io.groups import record_process_groups
    from commopt.io.json_graph import save_json_graph
    from commopt.io.pt2 import graph_from_torch

    world = MESH["dp"] * MESH["tp"]
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        ep, mesh, config = build(name)
        graph = graph_from_torch(ep, groups=record_process_groups(mesh), name=name)
    finally:
        dist.destroy_process_group()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    save_json_graph(graph, path)
    kinds: dict[str, int] = {}
    colls: dict[str, int] = {}
    for n in graph.nodes:
        kinds[n.kind.label] = kinds.get(n.kind.label, 0) + 1
        if n.collective is not None:
            key = f"{n.collective.type}@{n.collective.group}"
            colls[key] = colls.get(key, 0) + 1
    return {
        "name": name,
        "file": path.name,
        "bytes": path.stat().st_size,
        "model": "transformers LlamaForCausalLM, Llama-3-8B configuration (random init on the meta device)",
        "config": config,
        "parallelism": "FSDP (SimpleFSDP-style: DTensor Shard(0) -> Replicate, bf16 all-gather, fp32 "
                       "reduce-scatter) over dp x TP+SP (parallelize_module) over tp; "
                       + ("full activation checkpointing per decoder layer: backward re-gathers "
                          "each layer's weights" if config["activation_checkpointing"] else
                          "no activation checkpointing: gathered weights kept for backward"),
        "step": "forward + cross-entropy loss + backward (joint trace)",
        "exported_with": {"torch": torch.__version__, "transformers": transformers.__version__},
        "dtype": {"parameters": "float32", "compute": "bfloat16", "gradient reduction": "float32"},
        "world_size": graph.world_size,
        "mesh": graph.mesh,
        "nodes": len(graph.nodes),
        "kinds": dict(sorted(kinds.items())),
        "collectives": dict(sorted(colls.items())),
        "groups": [{"name": g.name, "size": g.size, "ranks": list(g.ranks) if g.ranks else None,
                    "mesh_dim": g.mesh_dim}
                   for g in sorted(graph.groups.values(), key=lambda g: (len(g.name), g.name))],
    }


def main(argv: list[str] | None = None) -> int:
    """Export every requested graph in a subprocess each, then write realistic/MANIFEST.json."""
    parser = argparse.ArgumentParser(prog="make_realistic.py")
    parser.add_argument("--only", default=",".join(GRAPHS), help="comma-separated graph names")
    parser.add_argument("--out", default=str(OUT_DIR))
    parser.add_argument("--one", nargs=2, metavar=("NAME", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(export_one(args.one[0], Path(args.one[1]))))
        return 0
    out = Path(args.out)
    manifest_path = out / "MANIFEST.json"
    entries: dict[str, dict] = {}
    if manifest_path.exists():
        entries = {e["name"]: e for e in json.loads(manifest_path.read_text())["graphs"]}
    env = dict(os.environ, PYTHONHASHSEED="0")
    for name in args.only.split(","):
        if name not in GRAPHS:
            print(f"unknown graph {name!r}; known: {', '.join(GRAPHS)}", file=sys.stderr)
            return 2
        print(f"exporting realistic/{name}", file=sys.stderr, flush=True)
        res = subprocess.run([sys.executable, __file__, "--one", name, str(out)],
                             capture_output=True, text=True, env=env, check=False)
        if res.returncode == MISSING_PACKAGE:
            sys.stderr.write(res.stderr.strip().splitlines()[-1] + f"; kept realistic/{name} as it was\n")
            continue
        if res.returncode != 0:
            sys.stderr.write(res.stderr)
            return 1
        entries[name] = json.loads(res.stdout.strip().splitlines()[-1])
    manifest = {
        "about": "Realistic-size, shape-only graphs exported by sample_graphs/make_realistic.py "
                 "(make samples) from transformers' Llama with the fake process group and fake "
                 "tensors: no weights, JSON only, process groups inside each file.",
        "graphs": [entries[k] for k in sorted(entries)],
    }
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
