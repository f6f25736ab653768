"""Every sample graph's optimized runner on gloo: --verify passes, outputs equal the eager .pt2 run.

One torchrun launch per sample (2 ranks; 4 for the 2-D mesh). Inside it a small wrapper first
runs the archive eagerly with the test harness (``tests.distributed``) on the archive's own
inputs, saves those inputs (parameters by state-dict key, user inputs by name), then calls the
runner's ``main()`` with ``--inputs`` so both see the same values.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from commopt.api import optimize
from commopt.buffers import plan_buffers
from commopt.codegen import write_runner
from commopt.io import load_graph
from tests.codegen.conftest import REPO, torchrun

pytestmark = pytest.mark.slow

SAMPLES = REPO / "sample_graphs"

WRAPPER = '''\
import os
import runpy
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, {repo!r})
from tests.distributed import flat_inputs, read_groups_record, recreate_groups, run_exported

rank = int(os.environ["RANK"])
dist.init_process_group("gloo")
archive = {archive!r}
ep = torch.export.load(archive)
mapping = recreate_groups(read_groups_record(archive))
# parameters and buffers by state-dict key, user inputs by placeholder name
specs = ep.graph_signature.input_specs
keys = [spec.target if spec.target else spec.arg.name for spec in specs]
torch.save(dict(zip(keys, flat_inputs(ep))), f"in{{rank}}.pt")
torch.save(run_exported(ep, mapping), f"eager{{rank}}.pt")
runner = runpy.run_path({runner!r}, run_name="runner")
code = runner["main"](["--verify", "--iters", "2", "--warmup", "1", "--inputs", "in{{rank}}.pt",
                       "--dump-outputs", "out{{rank}}.pt", "--out", "results.json"])
dist.destroy_process_group()
sys.exit(code)
'''


def _samples() -> list[tuple[str, int]]:
    manifest = SAMPLES / "MANIFEST.json"
    if not manifest.exists():
        return []
    doc = json.loads(manifest.read_text(encoding="utf-8"))
    return [(s["name"], int(s["world_size"])) for s in doc["samples"]
            if any(f.startswith("ws2/") and f.endswith(".pt2") for f in s["files"])]


@pytest.mark.parametrize(("name", "world"), _samples())
def test_sample_runner_verifies_and_matches_the_eager_archive(tmp_path: Path, name: str,
                                                               world: int) -> None:
    archive = SAMPLES / "ws2" / f"{name}.pt2"
    g = load_graph(archive)
    assert g.world_size == world
    order = optimize(g).order
    assert order != g.original_order
    runner = tmp_path / f"run_{name}.py"
    write_runner(g, runner, order, plan_buffers(g, order))
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER.format(repo=str(REPO), archive=str(archive), runner=str(runner)),
                       encoding="utf-8")
    proc = torchrun(wrapper, world, cwd=tmp_path, timeout_s=400)
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert "identical to the original order on every rank" in proc.stderr
    for r in range(world):
        eager = torch.load(tmp_path / f"eager{r}.pt")
        got = torch.load(tmp_path / f"out{r}.pt")
        assert len(got) == len(eager)
        for k, (a, b) in enumerate(zip(got, eager, strict=True)):
            if isinstance(b, torch.Tensor):
                assert isinstance(a, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                assert torch.equal(a, b), f"rank {r} output {k} differs from the eager run"
            else:
                assert a == b
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert results["world_size"] == world and results["buffer_mode"] == "plain"
