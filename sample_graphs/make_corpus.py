"""Export the real-model corpus (``make samples``): transformers Llama code parallelized with
PyTorch's own parallelism APIs, random weights, fake process group, no GPU, nothing downloaded.

Usage: ``python sample_graphs/make_corpus.py [--sets ws8,ws2] [--only llama_sp2d,...]``.

Every graph is one training step (loss and gradients) or one forward pass of a tiny
transformers ``LlamaForCausalLM`` (hidden 64, vocab 128, sequence 16), traced the way the
``llama_tp`` sample is (make_samples.py): torch.export cannot trace DTensor parameters in
torch 2.13, so the step is traced with make_fx on this rank's local shards (each turned into a
DTensor inside the step) and the flat aten + ``_c10d_functional`` graph is exported with the
shards as its parameters. Parallelism, per graph (``CORPUS``):

- tensor parallel (TP): ``parallelize_module`` with Colwise q/k/v/gate/up, Rowwise o/down;
- sequence parallel (SP), as torchtitan's ``parallelize_llama`` does: embeddings Rowwise with
  a sequence-sharded output, ``SequenceParallel`` norms, ``PrepareModuleInput`` gathering the
  sequence before attention and MLP, o/down Rowwise reduce-scattering back to sequence shards,
  lm_head Colwise on the gathered sequence;
- SimpleFSDP, as torchtitan's ``experiments/simple_fsdp`` does: each parameter is stored as
  this rank's ``Shard(0)`` piece over ``dp`` and, in the step, ``redistribute``d to
  ``Replicate`` (all_gather) with ``to_local(grad_placements=[Partial()])`` so autograd
  reduce-scatters its gradient; mixed precision casts to ``param_dtype`` before the gather
  (``forward_dtype``) and reduces gradients in ``reduce_dtype`` (``backward_dtype``);
  composed with TP on a 2-D (dp, tp) mesh by sharding each TP-local piece over dp.

Each (graph, world size) is exported in a fresh subprocess (process-group names start from a
clean world) and written to ``corpus/ws8/`` (analysis) or ``corpus/ws2/`` (the size the tests
run for real: 2 ranks, 4 for 2-D meshes), with ``corpus/MANIFEST.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_samples  # noqa: E402  (the shared exporter: fake world, id/path stripping, JSON)

OUT = HERE / "corpus"


@dataclass(frozen=True)
class Spec:
    """One corpus graph: how its Llama is parallelized and what the graph computes."""

    description: str
    layers: int = 2
    tp: bool = False          # tensor parallel over the "tp" mesh dimension
    sp: bool = False          # sequence parallel on top of TP
    fsdp: bool = False        # SimpleFSDP over the "dp" mesh dimension
    param_dtype: str = "float32"
    reduce_dtype: str = "float32"
    backward: bool = True     # training step (loss + gradients) or forward only (logits)
    moe: bool = False         # Mixtral mixture of experts, experts sharded over "ep"
    dropless: str = ""        # "qwen3" / "deepseek_v3": transformers' own dropless all-to-all EP


CORPUS = {
    "llama_tp_sp_2d": Spec(
        "transformers Llama (2 layers) with TP+SP over tp (SequenceParallel norms, "
        "PrepareModuleInput, Rowwise o/down reduce-scattering to sequence shards) and "
        "SimpleFSDP over dp on a 2-D (dp, tp) mesh; training step", tp=True, sp=True, fsdp=True),
    "llama_sp": Spec(
        "transformers Llama (2 layers) with TP+SP (torchtitan's parallelize_llama plan on HF "
        "module names) over one tp mesh dimension; training step", tp=True, sp=True),
    "llama_fsdp": Spec(
        "transformers Llama (2 layers) with SimpleFSDP (Shard(0) parameters redistributed to "
        "Replicate: all_gather forward, reduce_scatter of gradients backward), fp32; training step",
        fsdp=True),
    "llama_fsdp_bf16": Spec(
        "transformers Llama (2 layers) with SimpleFSDP mixed precision: param_dtype bf16 "
        "(cast before the all_gather), reduce_dtype fp32 (gradients reduce-scattered in fp32); "
        "training step", fsdp=True, param_dtype="bfloat16"),
    "llama_tp_fsdp_2d": Spec(
        "transformers Llama (2 layers) with TP over tp and SimpleFSDP over dp on a 2-D (dp, tp) "
        "mesh (no SP); training step", tp=True, fsdp=True),
    "llama_tp_L8": Spec(
        "transformers Llama, 8 layers, TP (Colwise q/k/v/gate/up, Rowwise o/down); training step",
        layers=8, tp=True),
    "llama_tp_infer": Spec(
        "transformers Llama (2 layers) with TP, forward only (inference: logits, no loss, no "
        "gradients)", tp=True, backward=False),
    "mixtral_ep": Spec(
        "transformers Mixtral (2 layers, 2 experts per rank, top-2 routing) with expert "
        "parallelism over ep: GShard-style capacity dispatch, all_to_all_single to the ranks "
        "owning the experts and back; the other parameters data-parallel (gradients "
        "all-reduced, avg); training step", moe=True),
    "qwen3_moe_ep": Spec(
        "transformers Qwen3-MoE (2 layers, 2 experts per rank, top-2 routing) with transformers' "
        "own dropless expert parallelism (AllToAllEP over ep): token counts exchanged with "
        "all_to_all_single, split sizes read back with .tolist() (data-dependent, unbacked "
        "sizes), tokens all_to_all'd to the experts' ranks and back; the other parameters "
        "data-parallel (gradients all-reduced, avg); training step", dropless="qwen3"),
    "deepseek_v3_ep": Spec(
        "transformers DeepSeek-V3 (2 layers: one dense, one MoE with a shared expert, MLA "
        "attention, group-limited top-2 routing over 2 experts per rank) with transformers' own "
        "dropless expert parallelism (AllToAllEP over ep): split sizes read back with .tolist() "
        "(data-dependent, unbacked sizes); the other parameters data-parallel (gradients "
        "all-reduced, avg); training step", dropless="deepseek_v3"),
}
SETS = ("ws8", "ws2")


def world_for(name: str, set_name: str) -> int:
    """World size of ``name`` in set ``set_name``: 8 for analysis, 2 (4 for 2-D meshes) to run."""
    spec = CORPUS[name]
    if set_name == "ws8":
        return 8
    return 4 if (spec.tp and spec.fsdp) else 2


def mesh_dims(spec: Spec, world: int) -> dict[str, int]:
    """Mesh dimension sizes of ``spec`` at ``world`` ranks (2-D meshes keep dp = 2)."""
    if spec.tp and spec.fsdp:
        return {"dp": 2, "tp": world // 2}
    return {"tp": world} if spec.tp else {"dp": world}


def _plan(spec: Spec, layers: int) -> dict:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
    )

    plan: dict = {}
    if spec.sp:
        plan["model.embed_tokens"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1))
        plan["model.norm"] = SequenceParallel()
        plan["lm_head"] = ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())
    for i in range(layers):
        p = f"model.layers.{i}."
        plan.update({f"{p}self_attn.{m}": ColwiseParallel() for m in ("q_proj", "k_proj", "v_proj")})
        plan.update({f"{p}mlp.{m}": ColwiseParallel() for m in ("gate_proj", "up_proj")})
        out = Shard(1) if spec.sp else Replicate()
        plan.update({f"{p}self_attn.o_proj": RowwiseParallel(output_layouts=out),
                     f"{p}mlp.down_proj": RowwiseParallel(output_layouts=out)})
        if spec.sp:
            plan[f"{p}input_layernorm"] = SequenceParallel()
            plan[f"{p}post_attention_layernorm"] = SequenceParallel()
            plan[f"{p}self_attn"] = PrepareModuleInput(
                input_kwarg_layouts={"hidden_states": Shard(1)},
                desired_input_kwarg_layouts={"hidden_states": Replicate()})
            plan[f"{p}mlp"] = PrepareModuleInput(input_layouts=(Shard(1),),
                                                 desired_input_layouts=(Replicate(),))
    return plan


def build(name: str, world: int):
    """(ExportedProgram, DeviceMesh) of corpus graph ``name`` at world size ``world``."""
    if CORPUS[name].moe:
        return _build_moe(world)
    if CORPUS[name].dropless:
        return _build_dropless_moe(world, CORPUS[name].dropless)
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
    from torch.distributed.tensor.parallel import parallelize_module
    from torch.func import functional_call

    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        print(f"{name} needs the transformers package: pip install transformers", file=sys.stderr)
        raise SystemExit(make_samples.MISSING_PACKAGE) from None

    spec = CORPUS[name]
    torch.manual_seed(0)
    dims = mesh_dims(spec, world)
    mesh = init_device_mesh("cpu", tuple(dims.values()), mesh_dim_names=tuple(dims))
    tp_mesh = mesh["tp"] if spec.tp else None
    dp_mesh = mesh["dp"] if spec.fsdp else None
    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=spec.layers, num_attention_heads=8, num_key_value_heads=8,
                      max_position_embeddings=64, attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg)
    if spec.tp:
        parallelize_module(model, tp_mesh, _plan(spec, spec.layers))
    names = [n for n, _ in model.named_parameters()]
    params = dict(model.named_parameters())
    placements = {n: (p.placements if isinstance(p, DTensor) else None) for n, p in params.items()}
    tp_local = [p.to_local().detach() if isinstance(p, DTensor) else p.detach() for p in params.values()]
    if spec.fsdp:  # SimpleFSDP storage: this rank's dim-0 piece of each (TP-local) parameter
        dp_rank = dp_mesh.get_local_rank()
        stored = [t.chunk(dims["dp"], 0)[dp_rank].contiguous() for t in tp_local]
    else:
        stored = tp_local
    param_dtype = getattr(torch, spec.param_dtype)
    reduce_dtype = getattr(torch, spec.reduce_dtype)
    seq = 16
    position_ids = torch.arange(seq)[None, :]
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()[None, None].expand(2, 1, seq, seq)

    def materialize(n: str, t: torch.Tensor):
        if spec.fsdp:  # torchtitan simple_fsdp ReplicateComputation, FSDP mode
            t = (DTensor.from_local(t, dp_mesh, [Shard(0)], run_check=False)
                 .redistribute(dp_mesh, [Replicate()], forward_dtype=param_dtype,
                               backward_dtype=reduce_dtype)
                 .to_local(grad_placements=[Partial("sum")]))
        if placements[n] is not None:
            t = DTensor.from_local(t, tp_mesh, placements[n], run_check=False)
        return t

    def step(ids, labels, *local):
        leaves = [t.requires_grad_(spec.backward) for t in local]
        ps = {n: materialize(n, t) for n, t in zip(names, leaves, strict=True)}
        # SP shards the embeddings' output by sequence: RoPE positions are the global ones
        # and a 4-D causal mask over the full sequence (HF would size it by the local shard)
        kwargs = {"use_cache": False, "position_ids": position_ids}
        if spec.sp:
            kwargs["attention_mask"] = causal
        if not spec.backward:
            with torch.no_grad():
                out = functional_call(model, ps, (ids,), kwargs)
            logits = out.logits
            return (logits.full_tensor() if isinstance(logits, DTensor) else logits,)
        out = functional_call(model, ps, (ids,), {"labels": labels, **kwargs})
        loss = out.loss.full_tensor() if isinstance(out.loss, DTensor) else out.loss
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)
        return (loss, *grads)

    ids = torch.randint(0, cfg.vocab_size, (2, seq))
    return make_samples.export_traced_step("LlamaStep", step, ids, stored), mesh


#: Experts each rank of the ep mesh dimension holds (Mixtral's 3-D expert weights, dim 0).
EXPERTS_PER_RANK = 2


def _build_moe(world: int):
    """(ExportedProgram, DeviceMesh) of a Mixtral training step with expert parallelism.

    transformers' ``MixtralExperts`` keeps every expert's weights in 3-D tensors; with expert
    parallelism each rank stores its ``EXPERTS_PER_RANK`` slices and routes tokens to the
    rank that owns their expert. Dispatch is capacity-based (GShard, capacity factor 1, so
    the all_to_all splits are even and sizes are static; tokens over capacity are dropped),
    as in torchtitan's and DeepSpeed's fixed-capacity modes. Non-expert parameters are
    replicated over the same ranks (data parallel): their gradients are all-reduced (avg).
    """
    import math

    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc
    from torch.distributed.device_mesh import init_device_mesh
    from torch.func import functional_call

    try:
        from transformers import MixtralConfig, MixtralForCausalLM
        from transformers.models.mixtral.modeling_mixtral import MixtralExperts
    except ImportError:
        print("mixtral_ep needs the transformers package: pip install transformers", file=sys.stderr)
        raise SystemExit(make_samples.MISSING_PACKAGE) from None

    torch.manual_seed(0)
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("ep",))
    group = mesh.get_group("ep")
    experts = EXPERTS_PER_RANK * world
    cfg = MixtralConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
                        num_local_experts=experts, num_experts_per_tok=2, router_jitter_noise=0.0,
                        attn_implementation="sdpa")
    model = MixtralForCausalLM(cfg)
    rank = dist.get_rank()

    def expert_parallel(self, hidden_states, top_k_index, top_k_weights):
        tokens, hidden = hidden_states.shape
        capacity = math.ceil(tokens * top_k_index.shape[1] / experts)
        choice = torch.nn.functional.one_hot(top_k_index.reshape(-1), experts).to(hidden_states.dtype)
        slot = (choice.cumsum(0) - 1) * choice  # place of each (token, choice) in its expert
        kept = (slot < capacity) & (choice > 0)
        dispatch = (torch.nn.functional.one_hot(slot.clamp(0, capacity - 1).long(), capacity)
                    .to(hidden_states.dtype) * kept[..., None]).reshape(tokens, -1, experts, capacity)
        sent = torch.einsum("tkec,th->ech", dispatch, hidden_states).reshape(experts * capacity, hidden)
        mine = self.gate_up_proj.shape[0]
        received = fc.all_to_all_single_autograd(sent, None, None, group)
        x = received.reshape(world, mine, capacity, hidden).transpose(0, 1).reshape(mine, -1, hidden)
        gate, up = torch.bmm(x, self.gate_up_proj.transpose(1, 2)).chunk(2, dim=-1)
        y = torch.bmm(self.act_fn(gate) * up, self.down_proj.transpose(1, 2))
        y = y.reshape(mine, world, capacity, hidden).transpose(0, 1).reshape(experts * capacity, hidden)
        back = fc.all_to_all_single_autograd(y, None, None, group).reshape(experts, capacity, hidden)
        weights = dispatch * top_k_weights[:, :, None, None].to(hidden_states.dtype)
        return torch.einsum("tkec,ech->th", weights, back)

    names = [n for n, _ in model.named_parameters()]
    is_expert = [".experts." in n for n in names]
    stored = [p.detach()[rank * EXPERTS_PER_RANK:(rank + 1) * EXPERTS_PER_RANK].clone() if ex
              else p.detach() for ex, p in zip(is_expert, model.parameters(), strict=True)]

    def step(ids, labels, *local):
        leaves = [t.requires_grad_(True) for t in local]
        out = functional_call(model, dict(zip(names, leaves, strict=True)), (ids,),
                              {"labels": labels, "use_cache": False})
        grads = torch.autograd.grad(out.loss, leaves, allow_unused=True)
        grads = [g if ex or g is None else fc.wait_tensor(fc.all_reduce(g, "avg", group))
                 for g, ex in zip(grads, is_expert, strict=True)]
        return (out.loss, *grads)

    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    original = MixtralExperts.forward
    MixtralExperts.forward = expert_parallel
    try:
        return make_samples.export_traced_step("MixtralStep", step, ids, stored), mesh
    finally:
        MixtralExperts.forward = original


def _moe_model(family: str, world: int):
    """A tiny transformers MoE causal LM of ``family`` (random weights) with
    ``EXPERTS_PER_RANK * world`` experts, top-2, and its class name for the exported step."""
    common = dict(vocab_size=128, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                  max_position_embeddings=64, num_experts_per_tok=2, norm_topk_prob=True,
                  attn_implementation="sdpa", experts_implementation="batched_mm")
    if family == "qwen3":
        from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

        cfg = Qwen3MoeConfig(head_dim=16, num_experts=EXPERTS_PER_RANK * world, **common)
        return Qwen3MoeForCausalLM(cfg), "Qwen3MoeStep"
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    cfg = DeepseekV3Config(n_routed_experts=EXPERTS_PER_RANK * world, n_shared_experts=1,
                           first_k_dense_replace=1, n_group=2, topk_group=1, q_lora_rank=32,
                           kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
                           **common)
    return DeepseekV3ForCausalLM(cfg), "DeepseekV3Step"


def _build_dropless_moe(world: int, family: str):
    """(ExportedProgram, DeviceMesh) of a Qwen3-MoE or DeepSeek-V3 training step with dropless
    expert parallelism, as transformers runs it (``DistributedConfig(ep_size=...)``).

    The experts are sharded with transformers' own EP plan (``grouped_gemm`` parameters,
    ``ep_dispatch_experts`` module) and reach their tokens through its ``AllToAllEP``: the
    per-expert token counts are exchanged with ``all_to_all_single`` and read back with
    ``.tolist()``, so the split sizes of the token all_to_alls (and every shape after them)
    are data-dependent: unbacked symbols in the exported graph. The mesh is (ep=world, tp=1),
    transformers' layout without TP. Two changes make the step traceable, neither changes
    what it computes: the counts' in-place ``dist.all_to_all_single`` is traced as its
    functional form (torch's own ``traceable_collective_remaps``, as torch.compile does), and
    AllToAllEP's branch for a rank receiving no token tests ``guard_or_false`` (the general
    branch handles zero rows too). Experts use transformers' ``batched_mm`` implementation
    (the eager one loops over a data-dependent list of experts). Non-expert parameters are
    replicated (data parallel): their gradients are all-reduced (avg).
    """
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from torch.func import functional_call
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    try:
        from transformers.distributed import expert_parallel as xp
    except ImportError:
        print("the dropless MoE graphs need the transformers package (5.24 or later): "
              "pip install transformers", file=sys.stderr)
        raise SystemExit(make_samples.MISSING_PACKAGE) from None

    torch.manual_seed(0)
    mesh = init_device_mesh("cpu", (world, 1), mesh_dim_names=("ep", "tp"))
    group = mesh.get_group("ep")
    model, class_name = _moe_model(family, world)
    plan = {}
    for p, _ in model.named_modules():
        if p.endswith(".mlp.experts"):
            plan.update({f"{p}.gate_up_proj": "grouped_gemm", f"{p}.down_proj": "grouped_gemm",
                         p: "ep_dispatch_experts"})

    def traceable_call(self, hidden_states, top_k_index, top_k_weights):
        tokens, expert_ids, weights, state = self._dispatch_tokens(hidden_states, top_k_index,
                                                                   top_k_weights)
        if guard_or_false(tokens.shape[0] == 0):
            expert_output = self.experts_forward(tokens.sum(dim=0, keepdim=True),
                                                 expert_ids.new_zeros((1, 1)),
                                                 weights.new_ones((1, 1)))[:0]
        else:
            expert_output = self.experts_forward(tokens, expert_ids, weights)
        return self._combine_tokens(expert_output, state)

    originals = (xp.AllToAllEP.__call__, xp.all_to_all_single)
    xp.AllToAllEP.__call__ = traceable_call
    xp.all_to_all_single = fc.traceable_collective_remaps[dist.all_to_all_single]
    try:
        xp.apply_expert_parallelism(model, mesh["ep"], mesh["tp"], plan)
        params = dict(model.named_parameters())
        names = list(params)
        is_expert = [isinstance(p, DTensor) for p in params.values()]
        stored = [p.to_local().detach() if isinstance(p, DTensor) else p.detach()
                  for p in params.values()]

        def step(ids, labels, *local):
            leaves = [t.requires_grad_(True) for t in local]
            out = functional_call(model, dict(zip(names, leaves, strict=True)), (ids,),
                                  {"labels": labels, "use_cache": False})
            grads = torch.autograd.grad(out.loss, leaves, allow_unused=True)
            grads = [g if ex or g is None else fc.wait_tensor(fc.all_reduce(g, "avg", group))
                     for g, ex in zip(grads, is_expert, strict=True)]
            return (out.loss, *grads)

        ids = torch.randint(0, model.config.vocab_size, (2, 16))
        return make_samples.export_traced_step(class_name, step, ids, stored), mesh
    finally:
        xp.AllToAllEP.__call__, xp.all_to_all_single = originals


def describe(name: str, world: int) -> dict:
    """Manifest fields of ``name`` at ``world`` besides what the exporter measures."""
    spec = CORPUS[name]
    if spec.dropless:
        cls = {"qwen3": "Qwen3MoeForCausalLM", "deepseek_v3": "DeepseekV3ForCausalLM"}[spec.dropless]
        return {"model_source": f"transformers {_transformers_version()} {cls}, "
                                f"2 layers, {EXPERTS_PER_RANK * world} experts (top-2), hidden 64, "
                                "vocab 128, seq 16, random weights",
                "parallelism": "EP (dropless all-to-all) + DP", "mesh_dims": {"ep": world, "tp": 1},
                "param_dtype": "float32", "reduce_dtype": "float32",
                "step": "training (loss + gradients)",
                "data_dependent": "all_to_all split sizes from .tolist() (unbacked symbols)"}
    if spec.moe:
        return {"model_source": f"transformers {_transformers_version()} MixtralForCausalLM, "
                                f"2 layers, {EXPERTS_PER_RANK * world} experts (top-2), hidden 64, "
                                "vocab 128, seq 16, random weights",
                "parallelism": "EP+DP", "mesh_dims": {"ep": world}, "param_dtype": "float32",
                "reduce_dtype": "float32", "step": "training (loss + gradients)"}
    par = [k for k, on in (("TP", spec.tp), ("SP", spec.sp), ("SimpleFSDP", spec.fsdp)) if on]
    return {"model_source": f"transformers {_transformers_version()} LlamaForCausalLM, "
                            f"{spec.layers} layers, hidden 64, vocab 128, seq 16, random weights",
            "parallelism": "+".join(par), "mesh_dims": mesh_dims(spec, world),
            "param_dtype": spec.param_dtype, "reduce_dtype": spec.reduce_dtype,
            "step": "training (loss + gradients)" if spec.backward else "forward only"}


def _deflate(pt2: Path) -> None:
    """Rewrite archive ``pt2`` with deflate-compressed members (torch.export.load reads them),
    fixed timestamps, same member order: a quarter of the size, still deterministic."""
    import zipfile

    tmp = pt2.with_suffix(".tmp")
    with zipfile.ZipFile(pt2) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)),
                         src.read(info.filename), compress_type=zipfile.ZIP_DEFLATED)
    tmp.replace(pt2)


def _transformers_version() -> str:
    try:
        import transformers
    except ImportError:
        return "?"
    return transformers.__version__


def main(argv: list[str] | None = None) -> int:
    """Export every requested corpus graph in a subprocess each, then write MANIFEST.json."""
    parser = argparse.ArgumentParser(prog="make_corpus.py")
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated: ws8, ws2")
    parser.add_argument("--only", default=",".join(CORPUS), help="comma-separated graph names")
    parser.add_argument("--one", nargs=3, metavar=("NAME", "WORLD", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        name, world, out = args.one
        entry = make_samples.export_one(name, int(world), Path(out), builder=build,
                                        description=CORPUS[name].description)
        entry.update(describe(name, int(world)))
        # JSON copies would double the corpus on disk (load_graph reads the .pt2 directly)
        (Path(out) / f"{name}.json").unlink()
        entry["files"] = [f for f in entry["files"] if f.endswith(".pt2")]
        _deflate(Path(out) / f"{name}.pt2")
        print(json.dumps(entry))
        return 0
    manifest_path = OUT / "MANIFEST.json"
    entries: dict[tuple[str, str], dict] = {}
    if manifest_path.exists():
        for e in json.loads(manifest_path.read_text())["graphs"]:
            entries[(e["files"][0].split("/")[0], e["name"])] = e
    env = dict(os.environ, PYTHONHASHSEED="0")
    for set_name in args.sets.split(","):
        for name in args.only.split(","):
            world = world_for(name, set_name)
            print(f"exporting corpus/{set_name}/{name} (world size {world})", file=sys.stderr, flush=True)
            res = subprocess.run(
                [sys.executable, __file__, "--one", name, str(world), str(OUT / set_name)],
                capture_output=True, text=True, env=env, check=False,
            )
            if res.returncode == make_samples.MISSING_PACKAGE:
                sys.stderr.write(res.stderr.strip().splitlines()[-1] + f"; kept {set_name}/{name} as it was\n")
                continue
            if res.returncode != 0:
                sys.stderr.write(res.stderr)
                return 1
            entries[(set_name, name)] = json.loads(res.stdout.strip().splitlines()[-1])
    manifest = {
        "about": "Real-model corpus exported by sample_graphs/make_corpus.py (make samples) with "
                 "the fake process group: transformers Llama code parallelized with PyTorch's "
                 "DTensor APIs. ws8/ at world size 8 (analysis), ws2/ at the size tests run for "
                 "real with gloo (2 ranks; 4 for 2-D meshes). Process groups are recorded inside "
                 "each .pt2. The llama_tp graph of ../ws2, ../ws8 belongs to the corpus too.",
        "graphs": [entries[k] for k in sorted(entries)],
    }
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
