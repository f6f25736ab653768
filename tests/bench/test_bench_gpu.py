"""The GPU benchmark's parts that run without a GPU: the recorded results and their table, and
the exported-module peer's device retargeting."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from bench import bench_gpu
from bench.cuda_exported_step import _on_device

ROOT = Path(__file__).resolve().parents[2]


def test_recorded_results_render_every_sample():
    doc = json.loads(bench_gpu.RECORDED.read_text(encoding="utf-8"))
    text = bench_gpu.render(doc, live=False)
    assert "recorded by the last run on a machine with CUDA" in text
    for name in bench_gpu.SAMPLES:
        assert f"| {name} |" in text
    assert all(r["verified"] for r in doc["samples"]), "a recorded GPU run failed --verify"


def test_failures_are_listed_not_tabled():
    doc = json.loads(bench_gpu.RECORDED.read_text(encoding="utf-8"))
    broken = dict(doc["samples"][0], exported_error="RuntimeError: device mismatch")
    doc["samples"] = [broken, {"sample": "x", "error": "runner: NCCL error"}]
    text = bench_gpu.render(doc, live=True)
    assert "- x: runner: NCCL error" in text
    assert f"- {broken['sample']}: the exported module did not run on CUDA: RuntimeError" in text
    assert "| x |" not in text


def test_device_keywords_are_pointed_at_the_target():
    ep = torch.export.load(ROOT / "sample_graphs" / "ws2" / "moe.pt2")
    made = [n for n in ep.graph_module.graph.nodes if n.op == "call_function" and "device" in n.kwargs]
    assert made, "the sample no longer makes tensors with a device keyword"
    gm = _on_device(ep.graph_module, torch.device("meta"))
    assert all(n.kwargs["device"] == torch.device("meta") for n in gm.graph.nodes
               if n.op == "call_function" and "device" in n.kwargs)
