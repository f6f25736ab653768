"""The runner's --profile output round-trips: a corpus graph is optimized, its runner profiled
on 2 gloo ranks, ``commopt calibrate`` fits a profile on that directory, and ``commopt report
--measured`` shows each rank's measured exposed communication beside the simulated numbers."""

from __future__ import annotations

import json

import pytest

from commopt.api import optimize
from tests.cli_run import run_cli
from tests.codegen.conftest import torchrun
from tests.corpus.graphs import CORPUS

pytestmark = pytest.mark.slow

GRAPH = CORPUS / "ws2" / "llama_fsdp.pt2"
ITERS = 3


def test_profile_calibrate_report_measured_vs_simulated(tmp_path, capsys):
    out = tmp_path / "out"
    result = optimize(GRAPH, output_dir=out, timings=False)
    proc = torchrun(out / "run_llama_fsdp.py", 2, "--iters", str(ITERS), "--warmup", "1",
                    "--profile", str(tmp_path / "prof"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert run_cli(["calibrate", str(tmp_path / "prof"), "-o", str(tmp_path / "profile.json"),
                    "--format", "json"]) == 0
    fits = json.loads(capsys.readouterr().out)
    assert {f["type"] for f in fits["collectives"]} >= {"all_gather"} and fits["compute"]
    assert all(f["how"] for f in fits["collectives"])  # each fit says how it was made
    assert run_cli(["report", str(GRAPH), "--reordered", str(out / "llama_fsdp.pt2"),
                    "--estimator", "profile,analytical", "--profile", str(tmp_path / "profile.json"),
                    "--measured", str(tmp_path / "prof"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    m = doc["measured"]
    assert [r["rank"] for r in m["ranks"]] == [0, 1]
    n_colls = len(result.graph.collectives())
    for r in m["ranks"]:
        assert r["steps"] == ITERS and r["collectives"] == ITERS * n_colls
        assert 0 < r["exposed_comm_us"] <= r["comm_us"] and r["compute_us"] > 0
    assert m["simulated_before_exposed_us"] == doc["before"]["exposed_comm_us"]
    assert m["simulated_after_exposed_us"] == doc["after"]["exposed_comm_us"]
    assert doc["estimator"] == m["estimator"] == "profile,analytical"
    assert run_cli(["report", str(out / "llama_fsdp.pt2"), "--measured", str(tmp_path / "prof"),
                    "--timeline-rows", "1"]) == 0
    text = capsys.readouterr().out
    assert "measured (per step) vs simulated (analytical)" in text and "trace_rank1.json" in text
