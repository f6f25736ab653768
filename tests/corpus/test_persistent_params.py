"""Persistent parameter buffers on the corpus, run for real: SimpleFSDP fp32 (every parameter
in the arena) and bf16 (none qualifies: casts), optimized with ``persistent_params="all"``.
The runners pass ``--verify`` under torchrun on gloo, equal the eager archive bitwise, copy
the saved parameters no more per step, and the measured footprint (``--memory``) stays
within 5% of the prediction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import commopt
from commopt.buffers import plan_buffers, validate_plan
from commopt.codegen import build_model
from tests.codegen.conftest import launch_runners
from tests.corpus.graphs import CorpusGraph, corpus_graphs

pytestmark = pytest.mark.slow

CASES = [g for g in corpus_graphs()
         if g.path.parent.name == "ws2" and g.name in ("llama_fsdp", "llama_fsdp_bf16")]
_RUN: dict[str, object] = {}


def _launch(tmp_path_factory: pytest.TempPathFactory):
    if not _RUN:
        work = tmp_path_factory.mktemp("persistent_runners")
        cases = []
        for g in CASES:
            out = tmp_path_factory.mktemp(f"opt_persistent_{g.id}")
            _RUN[g.id] = commopt.optimize(g.path, output_dir=out, timings=False, persistent_params="all")
            (runner,) = out.glob("run_*.py")
            cases.append((g.id, str(g.path), str(runner)))
        _RUN["status"] = launch_runners(cases, 2, work)
        _RUN["work"] = work
    return _RUN["work"], _RUN["status"]


@pytest.mark.parametrize("graph", [pytest.param(g, id=g.id) for g in CASES])
def test_runner_with_persistent_parameters_verifies_and_matches_eager(graph: CorpusGraph,
                                                                      tmp_path_factory) -> None:
    work, status = _launch(tmp_path_factory)
    assert status[graph.id] == ["ok", "ok"], status[graph.id]
    for r in range(2):
        eager = torch.load(work / f"{graph.id}_eager{r}.pt")
        got = torch.load(work / f"{graph.id}_out{r}.pt")
        assert len(got) == len(eager)
        for a, b in zip(got, eager, strict=True):
            assert torch.equal(a, b) if isinstance(b, torch.Tensor) else a == b


@pytest.mark.parametrize("graph", [pytest.param(g, id=g.id) for g in CASES])
def test_saved_copies_and_the_measured_footprint(graph: CorpusGraph, tmp_path_factory) -> None:
    """The plan validates, the runner makes exactly the copies the option saves fewer than
    the runner without it on the same order, and what each rank holds is the prediction."""
    work, _ = _launch(tmp_path_factory)
    result = _RUN[graph.id]
    g, order, plan = result.graph, list(result.order), result.plan
    assert validate_plan(g, order, plan) == []
    entry = plan.persistent_params
    summary = result.summary.buffer_plan.persistent_params
    assert summary.params == entry.params and summary.arena_bytes_without == \
        plan_buffers(g, order).totals.arena_bytes
    results = json.loads((work / f"{graph.id}.json").read_text(encoding="utf-8"))
    without = build_model(g, order, plan_buffers(g, order))
    assert results["persistent_params"] == len(entry.params)
    assert results["copies_per_iter"] == without.copies_per_iter - entry.copies_saved_per_step
    if graph.param_dtype == "float32":
        assert len(entry.params) > 0 and entry.not_qualified == []
    else:
        assert entry.params == [] and len(entry.not_qualified) > 0
    for r in results["memory"]:
        ratio = r["peak_bytes"] / results["predicted_peak_bytes"]
        assert 0.95 <= ratio <= 1.05, (graph.id, r, results["predicted_peak_bytes"])
    log = (Path(work) / "stderr.txt").read_text(encoding="utf-8")
    if entry.params:
        assert f"{len(entry.params)} parameter(s) placed in the arena once" in log
