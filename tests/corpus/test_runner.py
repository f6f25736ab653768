"""Every runnable corpus graph: the runner `commopt optimize` generates (default options)
passes ``--verify`` under torchrun on gloo, and its outputs equal the eager archive's.

One torchrun launch per world size runs every graph of that size
(:func:`tests.corpus.conftest.runner_launch`): per graph, the archive eagerly on its own
inputs, then the runner's ``main()`` on the same inputs; a graph whose runner raises is
recorded with its error and the launch goes on to the next graph.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.corpus.conftest import runner_launch
from tests.corpus.graphs import CorpusGraph, runnable

pytestmark = pytest.mark.slow

CASES = [g for ws in (2, 4) for g in runnable(ws)]


@pytest.mark.parametrize("graph", [pytest.param(g, id=g.id) for g in CASES])
def test_runner_verifies_and_matches_the_eager_archive(graph: CorpusGraph, tmp_path_factory) -> None:
    work, statuses = runner_launch(graph.world_size, tmp_path_factory)
    for r, status in enumerate(statuses[graph.id]):
        assert status == "ok", f"{graph.id} rank {r}: {status}"
    for r in range(graph.world_size):
        eager = torch.load(work / f"{graph.id}_eager{r}.pt")
        got = torch.load(work / f"{graph.id}_out{r}.pt")
        assert len(got) == len(eager), graph.id
        for k, (a, b) in enumerate(zip(got, eager, strict=True)):
            where = f"{graph.id}: rank {r} output {k}"
            if isinstance(b, torch.Tensor):
                assert (a.shape, a.dtype) == (b.shape, b.dtype), where
                assert torch.equal(a, b), f"{where} differs from the eager run"
            else:
                assert a == b, where
    results = json.loads((work / f"{graph.id}.json").read_text(encoding="utf-8"))
    assert results["world_size"] == graph.world_size


@pytest.mark.parametrize("graph", [pytest.param(g, id=g.id) for g in CASES])
def test_measured_peak_memory_is_the_predicted_footprint(graph: CorpusGraph, tmp_path_factory) -> None:
    """What each rank really holds in the optimized step (arenas, inputs and every tensor the
    step makes, counted by the runner's --memory) is within 5% of commopt's footprint model
    (measured: within 0.4% on every runnable corpus graph)."""
    work, _ = runner_launch(graph.world_size, tmp_path_factory)
    results = json.loads((work / f"{graph.id}.json").read_text(encoding="utf-8"))
    predicted = results["predicted_peak_bytes"]
    assert predicted > 0
    for r in results["memory"]:
        assert r["arena_bytes"] > 0, graph.id
        ratio = r["peak_bytes"] / predicted
        assert 0.95 <= ratio <= 1.05, f"{graph.id} rank {r['rank']}: measured {r['peak_bytes']} vs {predicted}"
