"""The larger benchmark graphs: real ``torch.export`` graphs of distributed training steps.

Every graph is a full training step (forward, then a hand-written backward) of a layer
stack whose collectives are functional collectives (``_c10d_functional.*`` + ``wait_tensor``),
exported at world size 8 with the fake process group (no GPUs, no real communication) and
decomposed to core ATen (``aten.mm``, not ``aten.matmul``) so torch's scheduler recognises
its compute nodes. Under tracing a functional collective already returns its waited result
(export inserts the ``wait_tensor``); an explicit extra ``wait_tensor`` would add a wait on a
wait, which commopt's loader rejects. Parameters and inputs live on the ``meta`` device: export only needs
shapes, and nothing the size of a model is allocated.

Exports are cached as ``.pt2`` under ``bench/_work/`` (git-ignored), keyed by the graph's
spec, the source of the model code and the torch version, so a changed model re-exports
itself (and replaces its stale archive). The
process groups are recorded inside each archive (:func:`commopt.io.groups.save_with_groups`).

Process groups (created once per process by :func:`init_fake_pg`, in this order, so their
c10d names are stable): ``"0"`` the world (8 ranks), ``"1"`` TP pair ``[0, 1]``,
``"2"`` DP group ``[0, 2, 4, 6]`` (:data:`GROUP_RANKS`).

:func:`stacked_graph_module` builds the very large graphs of the scaling table (up to 100k
nodes) by exporting one FSDP layer once and stitching copies of its forward and backward
FX subgraphs into one graph, because exporting a 2,500-layer model takes tens of minutes.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORK_DIR = ROOT / "bench" / "_work"
SAMPLES_DIR = ROOT / "sample_graphs" / "ws8"
REALISTIC_DIR = ROOT / "sample_graphs" / "realistic"
WORLD_SIZE = 8

#: c10d group name -> global ranks, as created by :func:`init_fake_pg` (rank 0's view).
GROUP_RANKS: dict[str, list[int]] = {
    "0": list(range(WORLD_SIZE)),
    "1": [0, 1],
    "2": [0, 2, 4, 6],
}
WORLD, TP_PAIR, DP_QUAD = "0", "1", "2"
#: The mesh the TP pairs and DP quads are slices of, row-major (rank = 2 * dp + tp): the 2-D
#: stacks record it, as a model built on a DeviceMesh would, so that commopt can prove that
#: every rank runs their program in one order (docs/process-groups.md).
MESH_2D: dict[str, int] = {"dp": 4, "tp": 2}
MESH_DIM_OF: dict[str, str] = {TP_PAIR: "tp", DP_QUAD: "dp"}

_GROUPS: dict[str, Any] = {}


def init_fake_pg() -> dict[str, Any]:
    """Initialise torch.distributed with the fake backend at world size 8 (idempotent).

    Returns the process groups by c10d name. torch's scheduler needs an initialised
    default group (it asks for the world size), and export needs the group objects.
    """
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD_SIZE)
    if not _GROUPS:
        _GROUPS[WORLD] = dist.group.WORLD
        for name in (TP_PAIR, DP_QUAD):
            pg = dist.new_group(GROUP_RANKS[name])
            if pg.group_name != name:
                raise RuntimeError(
                    f"fake process group got c10d name {pg.group_name!r}, expected {name!r}: "
                    "groups were created before bench.graphs.init_fake_pg()"
                )
            _GROUPS[name] = pg
    return _GROUPS


def shutdown_fake_pg() -> None:
    """Destroy the fake process groups (tests call this so later tests start clean)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    _GROUPS.clear()


# ---------------------------------------------------------------------------- layer bodies
def _rms_norm(x, eps: float = 1e-6):
    import torch

    scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * scale, scale


def _gather(w, group):
    import torch.distributed._functional_collectives as fc

    return fc.all_gather_tensor(w, 0, group)


def _reduce_scatter(g, group):
    import torch.distributed._functional_collectives as fc

    return fc.reduce_scatter_tensor(g, "sum", 0, group)


def _all_reduce(t, group):
    import torch.distributed._functional_collectives as fc

    return fc.all_reduce(t, "sum", group)


def _all_to_all(t, group):
    import torch.distributed._functional_collectives as fc

    return fc.all_to_all_single(t, None, None, group)


def _mlp_forward(x, w1, w2):
    """RMS-norm, up-projection, GELU, down-projection. Returns (y, saved for backward)."""
    import torch

    xn, scale = _rms_norm(x)
    a = xn @ w1
    b = torch.nn.functional.gelu(a)
    y = b @ w2
    return y, (xn, scale, a, b)


def _mlp_backward(g, saved, w1, w2):
    """Gradients of :func:`_mlp_forward`: (grad of the normed input, grad w1, grad w2)."""
    import torch

    xn, scale, a, b = saved
    gw2 = b.t() @ g
    gb = g @ w2.t()
    ga = torch.ops.aten.gelu_backward(gb, a)
    gw1 = xn.t() @ ga
    gxn = ga @ w1.t()
    return gxn * scale, gw1, gw2


def _fsdp_layer(x, w1s, w2s, dp):
    w1, w2 = _gather(w1s, dp), _gather(w2s, dp)
    y, saved = _mlp_forward(x, w1, w2)
    return x + y, saved


def _fsdp_layer_backward(g, saved, w1s, w2s, dp):
    w1, w2 = _gather(w1s, dp), _gather(w2s, dp)
    gx, gw1, gw2 = _mlp_backward(g, saved, w1, w2)
    return g + gx, _reduce_scatter(gw1, dp), _reduce_scatter(gw2, dp)


# ---------------------------------------------------------------------------- models
def _params(shapes: list[tuple[int, ...]]):
    import torch

    return torch.nn.ParameterList(
        torch.nn.Parameter(torch.empty(*s, dtype=torch.bfloat16)) for s in shapes
    )


def _fsdp_model(layers: int, hidden: int, tokens: int):
    """FSDP over the world: weights sharded on dim 0 over 8 ranks, gathered per use."""
    import torch

    groups = init_fake_pg()
    dp = groups[WORLD]
    ffn = 4 * hidden

    class FSDPStack(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = _params([(hidden // WORLD_SIZE, ffn)] * layers)
            self.w2 = _params([(ffn // WORLD_SIZE, hidden)] * layers)

        def forward(self, x):
            saved = []
            for i in range(layers):
                x, s = _fsdp_layer(x, self.w1[i], self.w2[i], dp)
                saved.append(s)
            loss = x.pow(2).mean()
            g = x * (2.0 / x.numel())
            grads = []
            for i in reversed(range(layers)):
                g, gw1, gw2 = _fsdp_layer_backward(g, saved[i], self.w1[i], self.w2[i], dp)
                grads += [gw1, gw2]
            return loss, g, *grads

    return FSDPStack(), (torch.empty(tokens, hidden, dtype=torch.bfloat16),)


def _tp_model(layers: int, hidden: int, tokens: int):
    """Megatron-style tensor parallelism over the world: column- then row-parallel MLP."""
    import torch

    groups = init_fake_pg()
    tp = groups[WORLD]
    ffn = 4 * hidden // WORLD_SIZE

    class TPStack(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = _params([(hidden, ffn)] * layers)
            self.w2 = _params([(ffn, hidden)] * layers)

        def forward(self, x):
            saved = []
            for i in range(layers):
                y, s = _mlp_forward(x, self.w1[i], self.w2[i])
                x = x + _all_reduce(y, tp)
                saved.append(s)
            loss = x.pow(2).mean()
            g = x * (2.0 / x.numel())
            grads = []
            for i in reversed(range(layers)):
                gx, gw1, gw2 = _mlp_backward(g, saved[i], self.w1[i], self.w2[i])
                g = g + _all_reduce(gx, tp)
                grads += [gw1, gw2]
            return loss, g, *grads

    return TPStack(), (torch.empty(tokens, hidden, dtype=torch.bfloat16),)


def _mesh2d_model(layers: int, hidden: int, tokens: int):
    """2-D mesh: TP over pairs (group "1") and FSDP over the DP quad (group "2")."""
    import torch

    groups = init_fake_pg()
    tp, dp = groups[TP_PAIR], groups[DP_QUAD]
    tp_size, dp_size = len(GROUP_RANKS[TP_PAIR]), len(GROUP_RANKS[DP_QUAD])
    ffn = 4 * hidden // tp_size

    class Mesh2D(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = _params([(hidden // dp_size, ffn)] * layers)
            self.w2 = _params([(ffn // dp_size, hidden)] * layers)

        def forward(self, x):
            saved = []
            for i in range(layers):
                w1, w2 = _gather(self.w1[i], dp), _gather(self.w2[i], dp)
                y, s = _mlp_forward(x, w1, w2)
                x = x + _all_reduce(y, tp)
                saved.append(s)
            loss = x.pow(2).mean()
            g = x * (2.0 / x.numel())
            grads = []
            for i in reversed(range(layers)):
                w1, w2 = _gather(self.w1[i], dp), _gather(self.w2[i], dp)
                gx, gw1, gw2 = _mlp_backward(g, saved[i], w1, w2)
                g = g + _all_reduce(gx, tp)
                grads += [_reduce_scatter(gw1, dp), _reduce_scatter(gw2, dp)]
            return loss, g, *grads

    return Mesh2D(), (torch.empty(tokens, hidden, dtype=torch.bfloat16),)


def _moe_model(layers: int, hidden: int, tokens: int, experts_per_rank: int = 2, top_k: int = 2):
    """MoE stack, expert parallel over the world: an FSDP dense projection per layer, a
    top-k router, token dispatch and combine with all_to_all, experts as batched matmuls."""
    import torch

    groups = init_fake_pg()
    ep = groups[WORLD]
    experts = experts_per_rank * WORLD_SIZE
    ffn = 2 * hidden
    routed = tokens * top_k

    class MoEStack(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wd = _params([(hidden // WORLD_SIZE, hidden)] * layers)
            self.router = _params([(hidden, experts)] * layers)
            self.e1 = _params([(experts_per_rank, hidden, ffn)] * layers)
            self.e2 = _params([(experts_per_rank, ffn, hidden)] * layers)

        def forward(self, x):
            saved = []
            for i in range(layers):
                xn, scale = _rms_norm(x)
                wd = _gather(self.wd[i], ep)
                d = xn @ wd
                probs = torch.softmax(d @ self.router[i], dim=-1)
                top_p, top_i = torch.topk(probs, top_k, dim=-1)
                perm = torch.argsort(top_i.flatten(), stable=True)
                tok = d.unsqueeze(1).expand(tokens, top_k, hidden).reshape(routed, hidden)
                sent = _all_to_all(tok.index_select(0, perm), ep)
                h_in = sent.view(experts_per_rank, routed // experts_per_rank, hidden)
                a = torch.bmm(h_in, self.e1[i])
                b = torch.nn.functional.gelu(a)
                out = torch.bmm(b, self.e2[i]).view(routed, hidden)
                back = _all_to_all(out, ep)
                unperm = torch.argsort(perm)
                comb = back.index_select(0, unperm).view(tokens, top_k, hidden)
                y = (comb * top_p.unsqueeze(-1)).sum(1)
                x = x + y
                saved.append((xn, scale, d, wd, perm, unperm, top_p, h_in, a, b))
            loss = x.pow(2).mean()
            g = x * (2.0 / x.numel())
            grads = []
            for i in reversed(range(layers)):
                xn, scale, d, wd, perm, unperm, top_p, h_in, a, b = saved[i]
                gcomb = g.unsqueeze(1) * top_p.unsqueeze(-1)
                gback = gcomb.reshape(routed, hidden).index_select(0, perm)
                gout = _all_to_all(gback, ep).view(experts_per_rank, routed // experts_per_rank, hidden)
                ge2 = torch.bmm(b.transpose(1, 2), gout)
                gb = torch.bmm(gout, self.e2[i].transpose(1, 2))
                ga = torch.ops.aten.gelu_backward(gb, a)
                ge1 = torch.bmm(h_in.transpose(1, 2), ga)
                gh = torch.bmm(ga, self.e1[i].transpose(1, 2)).view(routed, hidden)
                gtok = _all_to_all(gh, ep)
                gd = gtok.index_select(0, unperm).view(tokens, top_k, hidden).sum(1)
                wd_b = _gather(self.wd[i], ep)
                gwd = xn.t() @ gd
                g = g + (gd @ wd_b.t()) * scale
                grads += [_reduce_scatter(gwd, ep), ge1, ge2]
            return loss, g, *grads

    return MoEStack(), (torch.empty(tokens, hidden, dtype=torch.bfloat16),)


# ---------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class GraphSpec:
    """One generated benchmark graph: its builder, the builder's arguments, and whether
    it belongs to the quick set."""

    name: str
    build: Callable[..., Any]
    kwargs: dict[str, int]
    quick: bool = False
    on_mesh: bool = False  # its groups are slices of MESH_2D


SPECS: dict[str, GraphSpec] = {
    s.name: s
    for s in (
        GraphSpec("fsdp_L8", _fsdp_model, {"layers": 8, "hidden": 2048, "tokens": 1024}, quick=True),
        GraphSpec("fsdp_L32", _fsdp_model, {"layers": 32, "hidden": 2048, "tokens": 1024}),
        GraphSpec("fsdp_L64", _fsdp_model, {"layers": 64, "hidden": 2048, "tokens": 1024}),
        GraphSpec("tp_L8", _tp_model, {"layers": 8, "hidden": 4096, "tokens": 4096}, quick=True),
        GraphSpec("tp_L32", _tp_model, {"layers": 32, "hidden": 4096, "tokens": 4096}),
        GraphSpec("tp_L64", _tp_model, {"layers": 64, "hidden": 4096, "tokens": 4096}),
        GraphSpec("mesh2d_dp4tp2_L32", _mesh2d_model, {"layers": 32, "hidden": 4096, "tokens": 2048},
                  on_mesh=True),
        GraphSpec("moe_ep8_L16", _moe_model, {"layers": 16, "hidden": 2048, "tokens": 2048}),
    )
}


@dataclass(frozen=True)
class BenchGraph:
    """A benchmark graph on disk: its name and path, a ``.pt2`` archive (process groups
    recorded inside by :func:`commopt.io.groups.save_with_groups`) or, for the shape-only
    realistic graphs, a JSON graph (groups inside the file)."""

    name: str
    path: Path
    generated: bool


def _source_digest(spec: GraphSpec) -> str:
    """Digest of what an export depends on: the spec, the source of the model code and the
    torch version (editing anything else in this file keeps the cache)."""
    import inspect

    import torch

    code = [_rms_norm, _gather, _reduce_scatter, _all_reduce, _all_to_all, _mlp_forward,
            _mlp_backward, _fsdp_layer, _fsdp_layer_backward, _params, spec.build, export_program]
    h = hashlib.sha256(repr(sorted(spec.kwargs.items())).encode())
    h.update(repr((spec.on_mesh, MESH_2D, MESH_DIM_OF) if spec.on_mesh else ()).encode())
    for fn in code:
        h.update(inspect.getsource(fn).encode())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:12]


def export_program(spec: GraphSpec):
    """Export ``spec``'s model with the fake process group; returns the ExportedProgram
    decomposed to core ATen."""
    import torch

    with torch.device("meta"):
        model, example = spec.build(**spec.kwargs)
    ep = torch.export.export(model, example)
    return ep.run_decompositions()


def ensure_graph(name: str) -> BenchGraph:
    """The cached ``.pt2`` of generated graph ``name``, exported first when missing or stale."""

    from commopt.io.groups import save_with_groups

    spec = SPECS[name]
    path = WORK_DIR / f"{name}-{_source_digest(spec)}.pt2"
    if not path.exists():
        init_fake_pg()
        save_with_groups(export_program(spec), path, groups=_groups_record(spec))
        for stale in WORK_DIR.glob(f"{name}-*.pt2"):
            if stale != path:
                stale.unlink()
    return BenchGraph(name, path, generated=True)


def _groups_record(spec: GraphSpec):
    """The live fake groups, labelled with :data:`MESH_2D`'s dimensions for a 2-D stack."""
    from commopt.io.groups import record_process_groups

    doc = record_process_groups()
    if not spec.on_mesh:
        return doc
    labelled = [r.model_copy(update={"mesh_dim": MESH_DIM_OF.get(r.name)}) for r in doc.groups]
    return doc.model_copy(update={"mesh": dict(MESH_2D), "groups": labelled})


def sample_graphs() -> list[BenchGraph]:
    """The checked-in samples at world size 8 (``sample_graphs/ws8/*.pt2``), by name."""
    return [BenchGraph(f"sample:{p.stem}", p, generated=False)
            for p in sorted(SAMPLES_DIR.glob("*.pt2"))]


def realistic_graphs(quick: bool = False) -> list[BenchGraph]:
    """The realistic-size, shape-only graphs (``sample_graphs/realistic/``, listed in its
    MANIFEST.json): Llama-3-8B steps at 64 ranks, JSON only (they carry no weights, so
    nothing that needs an FX graph, such as torch's own scheduler, can run on them).
    ``quick`` keeps the smallest one."""
    import json

    entries = json.loads((REALISTIC_DIR / "MANIFEST.json").read_text(encoding="utf-8"))["graphs"]
    entries.sort(key=lambda e: (e["nodes"], e["name"]))
    return [BenchGraph(f"realistic:{e['name']}", REALISTIC_DIR / e["file"], generated=False)
            for e in (entries[:1] if quick else entries)]


def benchmark_graphs(quick: bool) -> list[BenchGraph]:
    """Samples plus generated graphs (only the quick ones when ``quick``), exported as needed."""
    init_fake_pg()
    generated = [ensure_graph(n) for n, s in SPECS.items() if s.quick or not quick]
    return sample_graphs() + generated


def corpus_peer_graphs() -> list[BenchGraph]:
    """The real-model corpus graphs the comparison with torch's scheduler runs on: every one
    at world size 8, and the ones whose collectives use more than one process group (2-D
    meshes) at world size 4 too (``sample_graphs/corpus/MANIFEST.json``)."""
    import json

    corpus = ROOT / "sample_graphs" / "corpus"
    doc = json.loads((corpus / "MANIFEST.json").read_text(encoding="utf-8"))
    out = []
    for e in sorted(doc["graphs"], key=lambda e: (-e["world_size"], e["name"])):
        multi_group = len({k.split("@")[1] for k in e["collectives"]}) > 1
        if e["world_size"] == 8 or (e["world_size"] == 4 and multi_group):
            out.append(BenchGraph(f"corpus/ws{e['world_size']}:{e['name']}", corpus / e["files"][0],
                                  generated=False))
    return out


# ---------------------------------------------------------------------------- scaling graphs
def _layer_programs(hidden: int, tokens: int):
    """Export one FSDP layer's forward and backward as two separate FX graphs."""
    import torch

    dp = init_fake_pg()[WORLD]

    class Fwd(torch.nn.Module):
        def forward(self, x, w1s, w2s):
            y, saved = _fsdp_layer(x, w1s, w2s, dp)
            return (y, *saved)

    class Bwd(torch.nn.Module):
        def forward(self, g, xn, scale, a, b, w1s, w2s):
            return _fsdp_layer_backward(g, (xn, scale, a, b), w1s, w2s, dp)

    ffn = 4 * hidden
    with torch.device("meta"):
        bf = torch.bfloat16
        x = torch.empty(tokens, hidden, dtype=bf)
        w1s = torch.empty(hidden // WORLD_SIZE, ffn, dtype=bf)
        w2s = torch.empty(ffn // WORLD_SIZE, hidden, dtype=bf)
        fwd = torch.export.export(Fwd(), (x, w1s, w2s)).run_decompositions()
        fx_out = fwd.module()(x, w1s, w2s)
        bwd = torch.export.export(Bwd(), (x, *fx_out[1:], w1s, w2s)).run_decompositions()
    return fwd, bwd


def stacked_graph_module(target_nodes: int, *, hidden: int = 1024, tokens: int = 2048):
    """An FX GraphModule of an FSDP training step with about ``target_nodes`` nodes.

    One layer's exported forward and backward graphs are copied ``layers`` times into a new
    graph (``Graph.graph_copy``, which keeps each node's ``meta["val"]``), forward in layer
    order then backward in reverse, exactly as export lays out a stacked model.
    """
    import torch
    import torch.fx as fx

    fwd, bwd = _layer_programs(hidden, tokens)
    fg, bg = fwd.graph_module.graph, bwd.graph_module.graph
    per_layer = sum(1 for n in fg.nodes if n.op == "call_function") + sum(
        1 for n in bg.nodes if n.op == "call_function") + 2
    layers = max(1, math.ceil(target_nodes / per_layer))
    graph = fx.Graph()
    fph = [n for n in fg.nodes if n.op == "placeholder"]
    bph = [n for n in bg.nodes if n.op == "placeholder"]

    def placeholder(name: str, like: fx.Node) -> fx.Node:
        node = graph.placeholder(name)
        node.meta = dict(like.meta)
        return node

    x = placeholder("x", fph[0])
    weights = [(placeholder(f"w1_{i}", fph[1]), placeholder(f"w2_{i}", fph[2])) for i in range(layers)]
    saved = []
    for i in range(layers):
        out = graph.graph_copy(fg, {fph[0]: x, fph[1]: weights[i][0], fph[2]: weights[i][1]})
        out = out[0] if isinstance(out, tuple) and len(out) == 1 else out
        x, *rest = out
        saved.append(rest)
    g = x
    outputs = [g]
    for i in reversed(range(layers)):
        env = {bph[0]: g, **{p: v for p, v in zip(bph[1:5], saved[i], strict=True)},
               bph[5]: weights[i][0], bph[6]: weights[i][1]}
        out = graph.graph_copy(bg, env)
        g, gw1, gw2 = out
        outputs += [gw1, gw2]
    outputs[0] = g
    graph.output(tuple(outputs))
    graph.lint()
    return fx.GraphModule(torch.nn.Module(), graph)
