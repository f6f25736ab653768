"""Every runnable corpus graph: under real gloo (one process per rank) the archive
`commopt.optimize` wrote computes bitwise what the original computes.

One gloo launch per world size runs every graph of that size (process start-up dominates on 2
cores); each archive's outcome (outputs or error) is kept apart so one graph's failure names it.
"""

from __future__ import annotations

import pytest

from tests.corpus.conftest import optimized_dir
from tests.corpus.graphs import CorpusGraph, runnable
from tests.distributed import read_groups_record, recreate_groups, run_exported, run_gloo

pytestmark = pytest.mark.slow

CASES = [g for ws in (2, 4) for g in runnable(ws)]
_RESULTS: dict[int, dict[str, list]] = {}


def _body(rank: int, world_size: int, paths: list[str]) -> list:
    import torch

    mapping = recreate_groups(read_groups_record(paths[0]))  # every graph of a size: same groups
    out = []
    for p in paths:
        try:
            out.append(run_exported(torch.export.load(p), mapping))
        except Exception as exc:  # noqa: BLE001 - reported per archive by the test
            out.append(f"{type(exc).__name__}: {exc}")
    return out


def _launch(world_size: int, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:
    if world_size not in _RESULTS:
        graphs = runnable(world_size)
        paths = []
        for g in graphs:
            paths += [str(g.path), str(optimized_dir(g, tmp_path_factory) / g.path.name)]
        ranks = run_gloo(_body, world_size, paths)
        _RESULTS[world_size] = {g.id: [r[2 * k: 2 * k + 2] for r in ranks] for k, g in enumerate(graphs)}
    return _RESULTS[world_size]


@pytest.mark.parametrize("graph", CASES, ids=[g.id for g in CASES])
def test_optimized_archive_computes_bitwise_the_same(graph: CorpusGraph, tmp_path_factory) -> None:
    import torch

    for rank, (original, optimized) in enumerate(_launch(graph.world_size, tmp_path_factory)[graph.id]):
        assert not isinstance(original, str), f"{graph.id} rank {rank}: original failed: {original}"
        assert not isinstance(optimized, str), f"{graph.id} rank {rank}: optimized failed: {optimized}"
        assert len(original) == len(optimized)
        for k, (a, b) in enumerate(zip(original, optimized, strict=True)):
            if a is None:
                assert b is None
                continue
            assert torch.equal(a, b), f"{graph.id}: rank {rank} output {k} differs from the original"
