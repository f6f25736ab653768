"""`commopt optimize` end to end: every sample, the full output set, byte-identical re-runs."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from commopt.cli.main import cli
from commopt.io import load_graph

EXPECTED = {"buffer_plan.json", "report.html", "trace.json", "summary.json"}


@pytest.mark.parametrize("fmt", ["pt2", "json"])
def test_optimize_every_ws8_sample_writes_the_full_set(samples_dir, tmp_path, fmt):
    for src in sorted((samples_dir / "ws8").glob(f"*.{fmt}")):
        out = tmp_path / src.stem
        r = CliRunner().invoke(cli, ["-q", "optimize", str(src), "-o", str(out), "--no-timings",
                                     "--format", "json"])
        assert r.exit_code == 0, (src, r.output)
        summary = json.loads(r.stdout)
        names = {p.name for p in out.iterdir()}
        assert EXPECTED | {src.name, f"run_{summary['graph']}.py"} <= names, src
        assert summary["outputs"][-1] == "summary.json"
        assert summary["after"]["makespan_us"] <= summary["before"]["makespan_us"] + 1e-6
        assert summary["after"]["exposed_comm_us"] < summary["before"]["exposed_comm_us"], src
        assert summary["after"]["peak_memory_bytes"] <= summary["memory_budget_bytes"], src
        assert summary["buffer_plan"]["arena_bytes"] >= summary["buffer_plan"]["lower_bound_bytes"]
        reordered = load_graph(out / src.name)
        assert sorted(n.name for n in reordered.nodes) == sorted(n.name for n in load_graph(src).nodes)
        r = CliRunner().invoke(cli, ["verify", str(src), str(out / src.name)])
        assert r.exit_code == 0, r.output


@pytest.mark.slow
def test_reruns_in_fresh_processes_are_byte_identical(samples_dir, tmp_path):
    src = samples_dir / "ws8" / "mesh2d.pt2"
    outs = []
    for seed in ("1", "4242"):
        out = tmp_path / f"run{seed}"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-m", "commopt", "-q", "optimize", str(src), "-o", str(out),
                               "--no-timings"], env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
    files = sorted(p.name for p in outs[0].iterdir())
    assert files == sorted(p.name for p in outs[1].iterdir()) and len(files) == 7  # with manifest.json
    for name in files:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
