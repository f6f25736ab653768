"""`commopt estimate` and `commopt calibrate` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commopt.io.json_graph import save_json_graph
from commopt.schemas.estimate import EstimateReport
from commopt.schemas.profile import ProfileModel
from commopt.synth import fsdp_tp_stack
from tests.cli_run import run_cli as _run
from tests.estimators.traces import SHARED_TRACES, new_format_trace, write


@pytest.fixture
def graph_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no commopt.toml from the repository applies
    path = tmp_path / "g.json"
    save_json_graph(fsdp_tp_stack(2, dp=4, tp=2, hidden=256, tokens=512), path)
    return path


def test_estimate_json(graph_file, capsys):
    assert _run(["estimate", str(graph_file), "--format", "json", "--top", "3", "--hardware", "a100"]) == 0
    rep = EstimateReport.model_validate_json(capsys.readouterr().out)
    assert rep.estimator == "analytical" and rep.hardware == "NVIDIA A100 80GB SXM"
    assert len(rep.top) == 3 and rep.top[0].duration_us >= rep.top[-1].duration_us
    assert len(rep.durations) == rep.nodes
    assert rep.total_us_by_kind["compute"] == pytest.approx(
        sum(d.duration_us for d in rep.durations if d.kind == "compute"))
    assert set(rep.comm_us_by_group) == {"dp", "tp"}


def test_estimate_text(graph_file, capsys):
    assert _run(["estimate", str(graph_file), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "estimates from analytical on NVIDIA H100 SXM" in out and "original order (simulated)" in out


def test_calibrate_then_estimate_with_the_profile(graph_file, tmp_path, capsys):
    trace = write(tmp_path / "t.json.gz", new_format_trace(), gz=True)
    out = tmp_path / "profile.json"
    assert _run(["calibrate", str(trace), "-o", str(out)]) == 0
    model = ProfileModel.model_validate_json(out.read_text())
    assert model.collectives[0].type == "all_reduce"
    capsys.readouterr()
    assert _run(["estimate", str(graph_file), "--profile", str(out), "--format", "json"]) == 0
    captured = capsys.readouterr()
    rep = EstimateReport.model_validate_json(captured.out)
    assert rep.estimator == "profile,analytical"  # implied by --profile
    assert "no all_reduce over 2 ranks" not in captured.err


@pytest.mark.parametrize("argv, message", [
    (["--estimator", "profle"], "did you mean 'profile'"),
    (["--hardware", "h1000"], "unknown hardware 'h1000'"),
    (["--estimator", "profile"], "needs --profile"),
])
def test_bad_options_are_one_line_and_exit_2(graph_file, capsys, argv, message):
    assert _run(["estimate", str(graph_file), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_bad_hardware_file(graph_file, tmp_path, capsys):
    hw = tmp_path / "hw.json"
    hw.write_text(json.dumps({"name": "x", "peak_tflops": {"float32": 1}}))
    assert _run(["estimate", str(graph_file), "--hardware", str(hw)]) == 2
    assert "field memory_bandwidth_gbps: field required" in capsys.readouterr().err


def test_calibrate_rejects_what_is_not_a_trace(tmp_path, capsys):
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    assert _run(["calibrate", str(bad), "-o", str(tmp_path / "p.json")]) == 2
    assert "not a Kineto trace" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


def test_calibrate_without_collectives_warns_and_falls_back(tmp_path, capsys):
    data = new_format_trace()
    data["traceEvents"] = [e for e in data["traceEvents"] if "nccl" not in e["name"]]
    trace = write(tmp_path / "t.json", data)
    assert _run(["calibrate", str(trace), "-o", str(tmp_path / "p.json")]) == 0
    assert "no NCCL kernels in the trace; collectives use the analytical estimator" in capsys.readouterr().err


def test_list_estimators(capsys):
    assert _run(["estimate", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("analytical", "profile", "table", "benchmark"):
        assert name in out


@pytest.mark.slow
def test_outputs_are_byte_identical_under_any_hash_seed(graph_file, tmp_path):
    import os
    import subprocess
    import sys

    trace = write(tmp_path / "t.json", new_format_trace())
    code = "import sys; from commopt.cli.main import main; main(sys.argv[1:])"
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, NO_COLOR="1")
        prof = tmp_path / f"p{seed}.json"
        est = subprocess.run([sys.executable, "-c", code, "estimate", str(graph_file), "--profile", str(trace),
                              "--format", "json"], capture_output=True, env=env, cwd=tmp_path, check=True)
        subprocess.run([sys.executable, "-c", code, "calibrate", str(trace), "-o", str(prof)],
                       capture_output=True, env=env, cwd=tmp_path, check=True)
        outs.append((est.stdout, prof.read_bytes()))
    assert outs[0] == outs[1]


def test_calibrate_on_a_directory_of_rank_traces_and_a_file(tmp_path, capsys):
    ranks = tmp_path / "profile"
    ranks.mkdir()
    write(ranks / "trace_rank0.json", new_format_trace())
    write(ranks / "trace_rank1.json.gz", new_format_trace(), gz=True)
    extra = write(tmp_path / "rank2.json", new_format_trace())
    out = tmp_path / "p.json"
    assert _run(["calibrate", str(ranks), str(extra), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "calibrated on 3 traces (trace_rank0.json, trace_rank1.json.gz, rank2.json)" in text
    assert "all_reduce over 2 ranks: 2 sizes" in text and "least-squares line over 2 sizes)" in text
    # three traces of the same rank cannot be matched: a lower envelope, and a note why
    assert "lower envelope" in text and "do not name distinct ranks" in captured.err
    model = ProfileModel.model_validate_json(out.read_text())
    assert [p.count for p in model.collectives[0].points] == [3, 3]  # one sample per size per trace


def test_calibrate_says_why_the_latency_is_zero(tmp_path, capsys):
    trace = write(tmp_path / "t.json", new_format_trace())
    assert _run(["calibrate", str(trace), "--steps", "1", "-o", str(tmp_path / "p.json")]) == 0
    assert "latency forced to 0: fewer than 2 sizes)" in capsys.readouterr().out
    assert _run(["calibrate", str(trace), "--steps", "1", "-o", str(tmp_path / "p.json"), "--format", "json"]) == 0
    model = ProfileModel.model_validate_json(capsys.readouterr().out)
    assert model.collectives[0].how == ("lower envelope of the measured durations (not matched across ranks); "
                                        "latency forced to 0: fewer than 2 sizes")


def test_calibrate_refuses_an_empty_directory_and_an_output_among_the_traces(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert _run(["calibrate", str(tmp_path / "empty"), "-o", str(tmp_path / "p.json")]) == 2
    assert "no trace files" in capsys.readouterr().err
    ranks = tmp_path / "profile"
    ranks.mkdir()
    trace = write(ranks / "trace_rank0.json", new_format_trace())
    assert _run(["calibrate", str(ranks), "-o", str(trace)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--output" in err
    assert _run(["calibrate", "-o", str(tmp_path / "p.json")]) == 2  # TRACE... is required


def test_the_estimate_of_a_calibrated_run_shows_waiting_vs_transfer(graph_file, tmp_path, capsys):
    from tests.estimators.traces import rank_trace

    ranks = tmp_path / "profile"
    ranks.mkdir()
    for r, start in ((0, 0), (1, 100)):
        write(ranks / f"trace_rank{r}.json", rank_trace(r, 2, [("allreduce", 1024, start, 150)]))
    out = tmp_path / "p.json"
    assert _run(["calibrate", str(ranks), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "all_reduce: 2 kernels, 200 us measured = 100 us transfer + 100 us waiting (50.0% waiting; " \
           "matched across ranks)" in text
    assert _run(["estimate", str(graph_file), "--profile", str(out), "--format", "json"]) == 0
    rep = EstimateReport.model_validate_json(capsys.readouterr().out)
    assert [(w.type, w.waiting_fraction) for w in rep.collective_waiting] == [("all_reduce", 0.5)]
    assert any("50.0% of the calibration traces' NCCL kernel time was waiting" in n for n in rep.notes)
    assert _run(["estimate", str(graph_file), "--profile", str(out)]) == 0
    assert "waiting vs transfer" in capsys.readouterr().out


@pytest.mark.skipif(not (SHARED_TRACES / "param" / "dlrm_kineto").is_dir(), reason="no real traces (set COMMOPT_TRACES)")
def test_real_traces_calibrate_a_corpus_graph_on_transfer_time(tmp_path, capsys, repo_root):
    out = tmp_path / "p.json"
    assert _run(["calibrate", str(SHARED_TRACES / "param" / "dlrm_kineto"), "-o", str(out)]) == 0
    assert "(transfer matched across 8 ranks;" in capsys.readouterr().out
    graph = repo_root / "sample_graphs" / "ws8" / "ddp.json"
    assert _run(["estimate", str(graph), "--profile", str(out), "--format", "json"]) == 0
    rep = EstimateReport.model_validate_json(capsys.readouterr().out)
    shares = {w.type: w for w in rep.collective_waiting}
    assert set(shares) == {"all_reduce", "all_to_all"} and shares["all_to_all"].waiting_fraction > 0.95
    # the sample's all_reduces are costed by DLRM's transfer times (tens of us), not its kernels'
    ar = [n for n in rep.durations if n.kind == "collective" and n.source == "profile"]
    assert ar and all(n.duration_us < 100 for n in ar)
