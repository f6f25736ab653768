"""`commopt optimize` from the command line: outputs, payloads, bad input, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commopt.io import load_graph
from commopt.io.json_graph import save_json_graph
from commopt.ir.builder import GraphBuilder
from commopt.passes.base import DEFAULT_PIPELINE
from commopt.schemas.summary import Summary
from commopt.synth import fsdp_tp_stack
from tests.cli_run import run_cli as _run


@pytest.fixture
def graph_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no commopt.toml from the repository applies
    path = tmp_path / "g.json"
    save_json_graph(fsdp_tp_stack(3, dp=4, tp=2, hidden=256, tokens=512), path)
    return path


def test_optimize_writes_graph_and_summary_that_verify(graph_file: Path, tmp_path: Path, capsys):
    before = graph_file.read_bytes()
    out = tmp_path / "out"
    assert _run(["optimize", str(graph_file), "-o", str(out), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert summary == Summary.model_validate_json((out / "summary.json").read_text())
    assert summary.output == "g.json" and (out / "g.json").is_file()
    assert summary.after.makespan_us <= summary.before.makespan_us
    assert summary.after.peak_memory_bytes <= summary.memory_budget_bytes
    assert [p.name for p in summary.passes] == list(DEFAULT_PIPELINE)
    assert summary.estimator == "analytical" and summary.optimizer_seconds is not None
    assert graph_file.read_bytes() == before  # the input is never modified
    written = load_graph(out / "g.json")
    assert len(written) == (summary.bucketing.nodes_after if summary.bucketing else summary.nodes)
    assert len(written.collectives()) == (summary.bucketing.collectives_after if summary.bucketing
                                          else summary.collectives)
    assert _run(["verify", str(graph_file), str(out / "g.json")]) == 0


def test_no_timings_reruns_are_byte_identical(graph_file: Path, tmp_path: Path):
    for d in ("a", "b"):
        assert _run(["-q", "optimize", str(graph_file), "-o", str(tmp_path / d), "--no-timings"]) == 0
    for name in ("g.json", "summary.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["optimizer_seconds"] is None


def test_jobs_2_writes_the_same_files_with_forked_renderers(graph_file: Path, tmp_path: Path,
                                                           monkeypatch):
    monkeypatch.setattr("commopt.forked.FORK_MIN_NODES", 0)  # this small graph forks too
    for d, jobs in (("a", "1"), ("b", "2")):
        assert _run(["-q", "optimize", str(graph_file), "-o", str(tmp_path / d), "--no-timings",
                     "--jobs", jobs]) == 0
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_jobs_below_one_is_one_line_exit_2(graph_file: Path, tmp_path: Path, capsys, value):
    assert _run(["optimize", str(graph_file), "-o", str(tmp_path / "o"), f"--jobs={value}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--jobs" in err[0]
    assert not (tmp_path / "o").exists()


def test_passes_option_selects_the_pipeline(graph_file: Path, tmp_path: Path):
    assert _run(["optimize", str(graph_file), "-o", str(tmp_path / "o"), "--passes", "sink-waits"]) == 0
    summary = Summary.model_validate_json((tmp_path / "o" / "summary.json").read_text())
    assert [p.name for p in summary.passes] == ["sink-waits"]


def test_unknown_pass_suggests_the_closest(graph_file: Path, tmp_path: Path, capsys):
    assert _run(["optimize", str(graph_file), "-o", str(tmp_path / "o"), "--passes", "sink-wait"]) == 2
    err = capsys.readouterr().err
    assert "no pass 'sink-wait'" in err and "did you mean 'sink-waits'" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("value", ["-1", "1000", "nan"])
def test_memory_increase_out_of_range_is_one_line_exit_2(graph_file: Path, tmp_path: Path, capsys, value):
    assert _run(["optimize", str(graph_file), "-o", str(tmp_path / "o"), f"--max-memory-increase={value}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "max_memory_increase" in err[0]


def test_graph_without_collectives_is_written_unchanged(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    b = GraphBuilder(name="plain")
    x = b.input("x", (8, 8))
    y = b.compute("y", "aten.relu.default", [x], (8, 8))
    b.output([y])
    src = tmp_path / "plain.json"
    save_json_graph(b.build(), src)
    assert _run(["optimize", str(src), "-o", str(tmp_path / "o")]) == 0
    captured = capsys.readouterr()
    assert "no collectives" in captured.out and "no collectives" in captured.err
    assert (tmp_path / "o" / "plain.json").read_bytes() == src.read_bytes()


def test_output_onto_the_input_is_refused(graph_file: Path, tmp_path: Path, capsys):
    assert _run(["optimize", str(graph_file), "-o", str(tmp_path)]) == 2
    assert "would overwrite the input" in capsys.readouterr().err


@pytest.mark.slow
def test_outputs_are_byte_identical_under_any_hash_seed(tmp_path: Path):
    import os
    import subprocess
    import sys

    src = tmp_path / "g.json"
    save_json_graph(fsdp_tp_stack(3, dp=4, tp=2, hidden=256, tokens=512), src)
    code = "import sys; from commopt.cli.main import main; main(sys.argv[1:])"
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-c", code, "-q", "optimize", str(src), "-o",
                               str(tmp_path / seed), "--no-timings"], env=env, cwd=tmp_path,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    for name in ("g.json", "summary.json"):
        assert (tmp_path / "0" / name).read_bytes() == (tmp_path / "12345" / name).read_bytes()


@pytest.mark.parametrize("value, says", [("0.5", "factor >= 1"), ("calibrated", "needs --profile")])
def test_a_compute_slowdown_that_cannot_apply_is_one_line_exit_2(graph_file: Path, tmp_path: Path, capsys,
                                                                 value, says):
    assert _run(["optimize", str(graph_file), "-o", str(tmp_path / "o"), "--compute-slowdown", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and "--compute-slowdown" in err[0]
    assert not (tmp_path / "o").exists()
