"""Every ws2 sample computes exactly the same outputs, with real collectives (gloo, one process
per rank), in three forms: the original archive, the archive re-saved by commopt in another
legal order (the .pt2 writer), and the archive `commopt.optimize` wrote (the passes).

One gloo launch per world size runs all of them: process start-up dominates on 2 cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import commopt
from commopt.invariants import verify_reordered
from commopt.io import load_graph, save_graph
from commopt.synth import late_first_order
from tests.distributed import run_archives, run_gloo

SAMPLES = Path(__file__).resolve().parent.parent / "sample_graphs"
FORMS = ("original", "re-saved in another order", "optimized")


def _samples(world_size: int) -> list[str]:
    manifest = json.loads((SAMPLES / "MANIFEST.json").read_text())
    return sorted(s["name"] for s in manifest["samples"]
                  if s["world_size"] == world_size and f"ws2/{s['name']}.pt2" in s["files"])


def _run(rank: int, world_size: int, paths: list[str]) -> list[list]:
    return run_archives(paths)


def _variants(name: str, tmp_path: Path) -> list[str]:
    src = SAMPLES / "ws2" / f"{name}.pt2"
    graph = load_graph(src)
    resaved = tmp_path / f"{name}_resaved.pt2"
    save_graph(graph, resaved, late_first_order(graph))
    result = commopt.optimize(src, output_dir=tmp_path / name, timings=False)
    assert result.order != result.graph.original_order, f"{name}: nothing was reordered"
    assert result.summary.after.makespan_us < result.summary.before.makespan_us
    optimized = tmp_path / name / f"{name}.pt2"
    assert verify_reordered(result.graph, load_graph(optimized)) == []
    return [str(src), str(resaved), str(optimized)]


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [2, 4])
def test_samples_compute_the_same_in_every_form(world_size: int, tmp_path: Path):
    import torch

    names = _samples(world_size)
    assert names, f"no ws2 samples at world size {world_size}"
    paths = [p for name in names for p in _variants(name, tmp_path)]
    results = run_gloo(_run, world_size, paths)
    for rank, outs in enumerate(results):
        for k, name in enumerate(names):
            original = outs[len(FORMS) * k]
            for f in range(1, len(FORMS)):
                other = outs[len(FORMS) * k + f]
                assert len(other) == len(original), (name, FORMS[f])
                for a, b in zip(original, other, strict=True):
                    if a is None:
                        assert b is None
                        continue
                    assert torch.equal(a, b), f"{name}: rank {rank}, {FORMS[f]} differs from the original"
