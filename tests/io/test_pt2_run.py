"""Loading a .pt2 and writing it back in a new order gives exactly the original's outputs,
with real collectives (gloo, one process per rank)."""

from __future__ import annotations

from pathlib import Path

import pytest

from commopt.io import load_graph, save_graph
from tests.distributed import run_archives, run_gloo
from tests.io.orders import late_first_order

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs" / "ws2"


def _run(rank: int, world_size: int, paths: list[str]) -> list[list]:
    return run_archives(paths)


def _resave_all(names: list[str], tmp_path: Path) -> list[str]:
    paths = []
    for name in names:
        src = SAMPLES / f"{name}.pt2"
        graph = load_graph(src)
        dst = tmp_path / f"{name}_reordered.pt2"
        save_graph(graph, dst, late_first_order(graph))
        paths += [str(src), str(dst)]
    return paths


def _assert_pairs_equal(results: list[list[list]], names: list[str]) -> None:
    import torch

    for rank, outs in enumerate(results):
        for k, name in enumerate(names):
            original, reordered = outs[2 * k], outs[2 * k + 1]
            assert len(original) == len(reordered)
            for a, b in zip(original, reordered, strict=True):
                if a is None:
                    assert b is None
                    continue
                assert torch.equal(a, b), f"{name}: rank {rank} outputs differ"
    # the loss is replicated: every rank computed the same value
    for k, name in enumerate(names):
        losses = [outs[2 * k][0] for outs in results]
        assert all(torch.equal(losses[0], x) for x in losses), name


@pytest.mark.slow
def test_reordered_samples_match_the_originals_on_two_gloo_ranks(tmp_path):
    names = ["fsdp", "tp", "ddp", "moe", "llama_tp"]
    paths = _resave_all(names, tmp_path)
    _assert_pairs_equal(run_gloo(_run, 2, paths), names)


@pytest.mark.slow
def test_reordered_mesh2d_matches_the_original_on_four_gloo_ranks(tmp_path):
    paths = _resave_all(["mesh2d"], tmp_path)
    _assert_pairs_equal(run_gloo(_run, 4, paths), ["mesh2d"])
