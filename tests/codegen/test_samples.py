"""End to end: `commopt optimize` on every sample, then its runner on gloo: --verify passes, outputs equal the eager .pt2 run.

One torchrun launch for all 2-rank samples and one for the 2-D mesh (4 ranks): process
start-up dominates on 2 cores. Inside the launch a small wrapper, per sample, first runs the
archive eagerly with the test harness (``tests.distributed``) on the archive's own inputs,
saves those inputs (parameters by state-dict key, user inputs by name), then calls the
runner's ``main()`` with ``--inputs`` so both see the same values.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from commopt.cli.main import cli
from commopt.io import load_graph
from tests.codegen.conftest import REPO, launch_runners

pytestmark = pytest.mark.slow

SAMPLES = REPO / "sample_graphs"

def _samples(world: int) -> list[str]:
    manifest = SAMPLES / "MANIFEST.json"
    if not manifest.exists():
        return []
    doc = json.loads(manifest.read_text(encoding="utf-8"))
    return sorted({s["name"] for s in doc["samples"] if int(s["world_size"]) == world
                   and f"ws2/{s['name']}.pt2" in s["files"]})


def _run_samples(tmp_path: Path, names: list[str], world: int) -> None:
    cases = []
    for name in names:
        # the runner comes from `commopt optimize` itself (the end-to-end path users take)
        archive = SAMPLES / "ws2" / f"{name}.pt2"
        assert load_graph(archive).world_size == world
        out = tmp_path / f"opt_{name}"
        r = CliRunner().invoke(cli, ["-q", "optimize", str(archive), "-o", str(out), "--no-timings"])
        assert r.exit_code == 0, r.output
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        assert summary["after"]["makespan_us"] < summary["before"]["makespan_us"], name
        (runner,) = out.glob("run_*.py")
        cases.append((name, str(archive), str(runner)))
    statuses = launch_runners(cases, world, tmp_path)
    stderr = (tmp_path / "stderr.txt").read_text(encoding="utf-8")
    for name in names:
        assert statuses[name] == ["ok"] * world, f"{name}: {statuses[name]}"
        assert f"[{name}] verify: " in stderr, name
        for r in range(world):
            eager = torch.load(tmp_path / f"{name}_eager{r}.pt")
            got = torch.load(tmp_path / f"{name}_out{r}.pt")
            assert len(got) == len(eager), name
            for k, (a, b) in enumerate(zip(got, eager, strict=True)):
                where = f"{name}: rank {r} output {k}"
                if isinstance(b, torch.Tensor):
                    assert isinstance(a, torch.Tensor), where
                    assert (a.shape, a.dtype) == (b.shape, b.dtype), where
                    assert torch.equal(a, b), f"{where} differs from the eager run"
                else:
                    assert a == b, where
        results = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
        assert results["world_size"] == world and results["buffer_mode"] == "plain"


def test_two_rank_samples_verify_and_match_the_eager_archives(tmp_path: Path) -> None:
    names = _samples(2)
    assert {"ddp", "fsdp", "moe", "tp"} <= set(names)
    _run_samples(tmp_path, names, 2)


def test_mesh2d_sample_on_four_ranks_verifies_and_matches_the_eager_archive(tmp_path: Path) -> None:
    assert _samples(4) == ["mesh2d"]
    _run_samples(tmp_path, ["mesh2d"], 4)
