"""``--comm-buffers none``: no persistent buffers. The budget falls back to the live-tensor
peak (said in the summary), and the runner, every collective allocating its result as the
functional op does, still verifies under gloo and holds what commopt predicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import commopt
from commopt.buffers import load_plan
from tests.codegen.conftest import launch_runners
from tests.corpus.graphs import runnable


def _fsdp_ws2():
    (graph,) = [g for g in runnable(2) if g.id == "llama_fsdp-ws2"]
    return graph


def test_none_plans_no_buffer_and_budgets_the_live_tensor_peak(tmp_path: Path):
    result = commopt.optimize(_fsdp_ws2().path, output_dir=tmp_path, comm_buffers="none", timings=False)
    s = result.summary
    assert s.memory_accounting == "live-tensors"
    assert any("no persistent communication buffers" in n for n in s.notes)
    plan = load_plan(tmp_path / "buffer_plan.json")
    assert plan.collective_types == [] and plan.totals.buffers == 0 and plan.totals.arena_bytes == 0
    assert s.after.peak_memory_bytes <= s.memory_budget_bytes


def test_none_cannot_be_combined_with_types(tmp_path: Path):
    with pytest.raises(commopt.errors.OptionError, match="'none' cannot be combined"):
        commopt.optimize(_fsdp_ws2().path, output_dir=tmp_path, comm_buffers="none,all_reduce")


@pytest.mark.slow
def test_runner_without_buffers_verifies_and_holds_the_predicted_peak(tmp_path: Path):
    graph = _fsdp_ws2()
    out = tmp_path / "out"
    commopt.optimize(graph.path, output_dir=out, comm_buffers="none", timings=False)
    (runner,) = out.glob("run_*.py")
    work = tmp_path / "work"
    work.mkdir()
    status = launch_runners([(graph.id, str(graph.path), str(runner))], 2, work)
    assert status[graph.id] == ["ok", "ok"], status
    for r in range(2):
        eager = torch.load(work / f"{graph.id}_eager{r}.pt")
        got = torch.load(work / f"{graph.id}_out{r}.pt")
        assert all(torch.equal(a, b) for a, b in zip(got, eager, strict=True))
    results = json.loads((work / f"{graph.id}.json").read_text(encoding="utf-8"))
    for r in results["memory"]:
        assert r["arena_bytes"] == 0
        assert 0.95 <= r["peak_bytes"] / results["predicted_peak_bytes"] <= 1.05, r
