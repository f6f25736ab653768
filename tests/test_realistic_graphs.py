"""The realistic-size graphs (sample_graphs/realistic/): what the manifest says, and optimizable.

They are Llama-3-8B training steps traced from transformers' code with fake tensors at 64 ranks
(dp=8 x tp=8), so besides the manifest's counts this checks facts of the parallelism itself:
the dp and tp groups are the mesh's slices, every parameter is all-gathered over dp once in
bfloat16 and its gradient reduce-scattered over dp once in float32.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from commopt.bucketing.verify import verify_graph
from commopt.cli.main import cli
from commopt.io import load_graph
from commopt.ir.graph import NodeKind
from tests.conftest import SAMPLES

REALISTIC = SAMPLES / "realistic"
MANIFEST = json.loads((REALISTIC / "MANIFEST.json").read_text(encoding="utf-8"))["graphs"]
BY_NAME = {e["name"]: e for e in MANIFEST}
OUTPUTS = {"buffer_plan.json", "report.html", "trace.json", "summary.json"}


def test_manifest_lists_every_realistic_graph_file():
    on_disk = sorted(p.name for p in REALISTIC.glob("*.json") if p.name != "MANIFEST.json")
    assert on_disk == sorted(e["file"] for e in MANIFEST)
    assert {"llama3_8b_L2", "llama3_8b_L32", "llama3_8b_L32_ac"} <= set(BY_NAME)


def test_realistic_graphs_stay_within_their_size_budget():
    sizes = {p.name: p.stat().st_size for p in REALISTIC.iterdir() if p.is_file()}
    assert max(sizes.values()) < 5 * 1000 * 1000, sizes  # one graph: a few MB of JSON
    assert sum(sizes.values()) < 10 * 1024 * 1024, sizes
    assert all(sizes[e["file"]] == e["bytes"] for e in MANIFEST)


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_graph_is_what_the_manifest_says(name):
    entry = BY_NAME[name]
    g = load_graph(REALISTIC / entry["file"])
    assert (g.world_size, g.mesh) == (64, {"dp": 8, "tp": 8}) == (entry["world_size"], entry["mesh"])
    assert len(g.nodes) == entry["nodes"]
    kinds: dict[str, int] = {}
    colls: dict[str, int] = {}
    for n in g.nodes:
        kinds[n.kind.label] = kinds.get(n.kind.label, 0) + 1
        if n.collective is not None:
            key = f"{n.collective.type}@{n.collective.group}"
            colls[key] = colls.get(key, 0) + 1
    assert kinds == entry["kinds"]
    assert colls == entry["collectives"]
    groups = {gr["mesh_dim"]: gr for gr in entry["groups"]}
    assert set(groups) == {"dp", "tp"}
    assert {k: (gr.name, gr.size, list(gr.ranks), gr.mesh_dim) for k, gr in
            ((p.mesh_dim, p) for p in g.groups.values())} == \
        {k: (gr["name"], gr["size"], gr["ranks"], gr["mesh_dim"]) for k, gr in groups.items()}
    assert list(g.groups[groups["dp"]["name"]].ranks) == list(range(0, 64, 8))  # rank 0's dp slice
    assert list(g.groups[groups["tp"]["name"]].ranks) == list(range(8))


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_every_parameter_is_gathered_in_bf16_and_reduced_in_fp32_over_dp(name):
    entry = BY_NAME[name]
    g = load_graph(REALISTIC / entry["file"])
    dp = next(gr["name"] for gr in entry["groups"] if gr["mesh_dim"] == "dp")
    params = [n for n in g.nodes if n.kind is NodeKind.INPUT and n.attrs.get("role") == "parameter"]
    layers, ac = entry["config"]["layers"], entry["config"]["activation_checkpointing"]
    assert len(params) == 9 * layers + 3  # 7 linears + 2 norms per layer; embedding, norm, head
    assert all(p.outputs[0].dtype == "float32" for p in params)
    dp_colls = [n.collective for n in g.nodes if n.collective is not None and n.collective.group == dp]
    gathers = [c for c in dp_colls if c.type == "all_gather"]
    reduces = [c for c in dp_colls if c.type == "reduce_scatter"]
    assert len(gathers) + len(reduces) == len(dp_colls)
    # one reduce-scatter per parameter; one all-gather, and with activation checkpointing a
    # second one per decoder-layer weight when backward recomputes the layer
    assert len(reduces) == len(params)
    assert len(gathers) == len(params) + (9 * layers if ac else 0)
    # the gathered bytes are the TP-local Llama-3-8B weights at this layer count (bf16), the
    # reduced bytes the same weights once in fp32
    hidden, inter, vocab, kv = 4096, 14336, 128256, 1024
    layer_local = (2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * inter) // 8 + 2 * hidden
    tp_local = layers * layer_local + 2 * vocab * hidden // 8 + hidden
    assert sum(c.in_bytes for c in reduces) == 4 * tp_local
    assert sum(c.out_bytes for c in gathers) == 2 * (tp_local + (layers * layer_local if ac else 0))


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_optimize_writes_every_output_and_reduces_exposed_comm(name, tmp_path):
    src = REALISTIC / BY_NAME[name]["file"]
    r = CliRunner().invoke(cli, ["-q", "optimize", str(src), "-o", str(tmp_path), "--no-timings",
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert OUTPUTS | {src.name, f"run_{summary['graph']}.py"} <= {p.name for p in tmp_path.iterdir()}
    assert all(p.stat().st_size > 0 for p in tmp_path.iterdir())
    before, after = summary["before"], summary["after"]
    assert after["makespan_us"] < before["makespan_us"]
    assert after["exposed_comm_us"] < before["exposed_comm_us"]
    assert after["peak_memory_bytes"] <= summary["memory_budget_bytes"]
    assert verify_graph(load_graph(src), load_graph(tmp_path / src.name)) == []


def test_demo_graph_is_a_realistic_graph(repo_root):
    makefile = (repo_root / "Makefile").read_text(encoding="utf-8")
    demo = next(line.split(":=", 1)[1].strip() for line in makefile.splitlines()
                if line.startswith("DEMO_GRAPH"))
    assert (repo_root / demo).parent == REALISTIC and (repo_root / demo).name in {e["file"] for e in MANIFEST}


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                    reason="re-exporting needs transformers (make samples installs it)")
def test_generator_reproduces_the_checked_in_graph(tmp_path):
    import torch
    import transformers

    made_with = BY_NAME["llama3_8b_L2"]["exported_with"]
    if made_with != {"torch": torch.__version__, "transformers": transformers.__version__}:
        pytest.skip(f"graphs were exported with {made_with}; a different torch or transformers "
                    "traces a different graph")
    res = subprocess.run([sys.executable, str(SAMPLES / "make_realistic.py"), "--only", "llama3_8b_L2",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "llama3_8b_L2.json").read_bytes() == (REALISTIC / "llama3_8b_L2.json").read_bytes()
    fresh = json.loads((tmp_path / "MANIFEST.json").read_text())["graphs"]
    assert fresh == [BY_NAME["llama3_8b_L2"]]
