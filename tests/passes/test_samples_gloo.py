"""Done-when of the passes: every sample optimized by `commopt optimize` computes exactly
what the original computes, with real collectives (gloo, one process per rank)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import commopt
from commopt.check import verify_reordered
from tests.distributed import run_archives, run_gloo

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs"


def _samples(ws_dir: str) -> list[tuple[str, int]]:
    manifest = json.loads((SAMPLES / "MANIFEST.json").read_text())
    return [(s["name"], s["world_size"]) for s in manifest["samples"]
            if any(f.startswith(ws_dir + "/") for f in s["files"])]


def _run(rank: int, world_size: int, paths: list[str]) -> list[list]:
    return run_archives(paths)


def _optimize_all(names: list[str], tmp_path: Path) -> list[str]:
    paths = []
    for name in names:
        src = SAMPLES / "ws2" / f"{name}.pt2"
        result = commopt.optimize(src, output_dir=tmp_path / name, timings=False)
        assert result.order != result.graph.original_order, f"{name}: nothing was reordered"
        assert result.summary.after.makespan_us < result.summary.before.makespan_us
        out = tmp_path / name / f"{name}.pt2"
        assert verify_reordered(result.graph, commopt.load_graph(out)) == []
        paths += [str(src), str(out)]
    return paths


def _assert_pairs_equal(results: list[list[list]], names: list[str]) -> None:
    import torch

    for rank, outs in enumerate(results):
        for k, name in enumerate(names):
            original, optimized = outs[2 * k], outs[2 * k + 1]
            assert len(original) == len(optimized), name
            for a, b in zip(original, optimized, strict=True):
                if a is None:
                    assert b is None
                    continue
                assert torch.equal(a, b), f"{name}: rank {rank} outputs differ"


@pytest.mark.slow
@pytest.mark.parametrize("world_size", sorted({ws for _, ws in _samples("ws2")}))
def test_optimized_samples_match_the_originals_with_gloo(world_size: int, tmp_path: Path):
    names = [n for n, ws in _samples("ws2") if ws == world_size]
    paths = _optimize_all(names, tmp_path)
    _assert_pairs_equal(run_gloo(_run, world_size, paths), names)


@pytest.mark.parametrize("name", [n for n, _ in _samples("ws8")])
def test_world_size_8_samples_optimize_and_verify(name: str, tmp_path: Path):
    src = SAMPLES / "ws8" / f"{name}.pt2"
    result = commopt.optimize(src, output_dir=tmp_path, timings=False)
    s = result.summary
    assert s.after.exposed_comm_us < s.before.exposed_comm_us
    assert s.after.peak_memory_bytes <= s.memory_budget_bytes
    assert verify_reordered(result.graph, commopt.load_graph(tmp_path / f"{name}.pt2")) == []
