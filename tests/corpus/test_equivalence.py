"""Every runnable corpus graph: under real gloo (one process per rank) the archive
`commopt.optimize` wrote computes bitwise what the original computes.

Both archives run eagerly in the torchrun launch of their world size that also runs the
generated runners (:func:`tests.corpus.conftest.runner_launch`): process start-up and loading
the archives dominate on 2 cores, and that launch runs the original archive anyway. Each
graph's outputs (or its error) are kept apart so one graph's failure names it.
"""

from __future__ import annotations

import pytest

from tests.corpus.conftest import runner_launch
from tests.corpus.graphs import CorpusGraph, runnable

pytestmark = pytest.mark.slow

CASES = [g for ws in (2, 4) for g in runnable(ws)]


@pytest.mark.parametrize("graph", CASES, ids=[g.id for g in CASES])
def test_optimized_archive_computes_bitwise_the_same(graph: CorpusGraph, tmp_path_factory) -> None:
    import torch

    work, statuses = runner_launch(graph.world_size, tmp_path_factory)
    for rank in range(graph.world_size):
        original_file = work / f"{graph.id}_eager{rank}.pt"
        optimized_file = work / f"{graph.id}_reordered{rank}.pt"
        for f in (original_file, optimized_file):
            assert f.exists(), f"{graph.id} rank {rank}: no {f.name}: {statuses[graph.id][rank]}"
        original, optimized = torch.load(original_file), torch.load(optimized_file)
        assert len(original) == len(optimized)
        for k, (a, b) in enumerate(zip(original, optimized, strict=True)):
            if a is None:
                assert b is None
                continue
            assert torch.equal(a, b), f"{graph.id}: rank {rank} output {k} differs from the original"
