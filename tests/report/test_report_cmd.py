"""`commopt report` from the command line: outputs, formats, errors, step summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commopt.cli.main import main
from commopt.io.json_graph import save_json_graph
from commopt.schemas.report import OverlapReport
from commopt.synth import fsdp_tp_stack
from tests.report.test_schema import validate


def _run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code


@pytest.fixture
def graphs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A graph and a reordered copy with every wait sunk to just before its first user."""
    monkeypatch.chdir(tmp_path)  # no commopt.toml from the repository applies
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    g = fsdp_tp_stack(3, dp=2, tp=2, hidden=64, tokens=32)
    path = tmp_path / "g.json"
    save_json_graph(g, path)
    order = [i for i in g.original_order if g.nodes[i].kind.label != "wait"]
    for w in g.waits():
        first_user = min(g.users(w))
        order.insert(order.index(first_user), w)
    reordered = tmp_path / "g.sunk.json"
    save_json_graph(g, reordered, order)
    return path, reordered


def test_text_report_with_all_files(graphs, tmp_path, capsys):
    graph, reordered = graphs
    out = tmp_path / "out"
    code = _run(["report", str(graph), "--reordered", str(reordered),
                 "--html", str(out / "r.html"), "--trace", str(out / "t.json"),
                 "--markdown", str(out / "r.md"), "--timeline-rows", "5"])
    assert code == 0
    captured = capsys.readouterr()
    text = captured.out
    assert text.index("overlap before / after") < text.index("most exposed collectives (after)")
    assert text.index("most exposed collectives") < text.index("timeline (after")
    assert "estimates from the analytical estimator" in text
    assert "\x1b[" not in text  # not a terminal: plain
    assert (out / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert json.loads((out / "t.json").read_text())["traceEvents"]
    assert (out / "r.md").read_text().startswith("## commopt overlap report")
    assert f"wrote {out / 'r.html'}" in captured.err


def test_json_format_validates_and_names_the_estimator(graphs, capsys):
    graph, reordered = graphs
    assert _run(["report", str(graph), "--reordered", str(reordered), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    validate(doc, OverlapReport.model_json_schema())
    report = OverlapReport.model_validate(doc)
    assert report.estimator == "analytical"
    assert report.after is not None
    assert report.after.exposed_comm_us <= report.before.exposed_comm_us


def test_graph_alone_has_no_after(graphs, capsys):
    graph, _ = graphs
    assert _run(["report", str(graph), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["after"] is None


def test_durations_in_the_file_win_over_the_estimator(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    from commopt.ir.builder import GraphBuilder

    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (8, 8))
    c = b.collective("ar", "all_reduce", "g", x, duration_us=123.0)
    w = b.wait("ar_wait", c)
    y = b.compute("y", "aten.relu.default", [w], (8, 8), duration_us=7.0)
    b.output([y])
    save_json_graph(b.build(), tmp_path / "d.json")
    assert _run(["report", str(tmp_path / "d.json"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["before"]["makespan_us"] == 130.0
    assert doc["before"]["exposed_comm_us"] == 123.0


def test_step_summary_is_appended(graphs, tmp_path, monkeypatch, capsys):
    graph, _ = graphs
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert _run(["report", str(graph)]) == 0
    assert summary.read_text().startswith("## commopt overlap report: `synth_fsdp2_tp2_L3`")


def test_reordered_graph_of_another_graph_is_a_user_error(graphs, tmp_path, capsys):
    graph, _ = graphs
    other = tmp_path / "other.json"
    save_json_graph(fsdp_tp_stack(1, dp=2, hidden=64, tokens=32), other)
    assert _run(["report", str(graph), "--reordered", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("commopt: error: ") and str(other) in err and "Traceback" not in err


def test_missing_graph_is_a_user_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _run(["report", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_unknown_estimator_is_a_user_error(graphs, capsys):
    graph, _ = graphs
    assert _run(["report", str(graph), "--estimator", "nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err


@pytest.mark.slow
def test_outputs_are_byte_identical_under_any_hash_seed(graphs, tmp_path):
    import os
    import subprocess
    import sys

    graph, reordered = graphs
    outputs = []
    for seed in ("0", "12345"):
        out = tmp_path / f"seed{seed}"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        env.pop("GITHUB_STEP_SUMMARY", None)
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from commopt.cli.main import main; main(sys.argv[1:])",
             "report", str(graph), "--reordered", str(reordered), "--html", str(out / "r.html"),
             "--trace", str(out / "t.json"), "--markdown", str(out / "r.md"), "--format", "json"],
            check=True, env=env, cwd=tmp_path, capture_output=True,
        )
        outputs.append([(out / name).read_bytes() for name in ("r.html", "t.json", "r.md")]
                       + [done.stdout])
    assert outputs[0] == outputs[1]


def test_commopts_own_output_is_not_advised_to_be_reordered(tmp_path, samples_dir, capsys):
    """Reporting the graph optimize wrote: it is recognized by the manifest beside it, so the
    report does not tell the user that 'a different order could hide more'; the same file
    elsewhere (no manifest) still gets that advice where the simulation supports it."""
    import shutil

    import commopt

    # the 2-rank fsdp sample held to its original memory: its optimized order is 6.4% above
    # the lower bound (120.4 against 113.2 us), room a plain report points at (with the default
    # budget the order reaches the bound)
    result = commopt.optimize(samples_dir / "ws2" / "fsdp.json", output_dir=tmp_path / "out",
                              max_memory_increase=0.0, timings=False)
    written = tmp_path / "out" / result.summary.output
    copy = tmp_path / "copy.json"
    shutil.copy(written, copy)
    reports = {}
    for path in (written, copy):
        assert _run(["report", str(path), "--format", "json"]) == 0
        reports[path] = OverlapReport.model_validate_json(capsys.readouterr().out)
    assert "order" not in [a.code for a in reports[written].advice]
    assert any("written by commopt optimize" in n for n in reports[written].notes)
    assert "order" in [a.code for a in reports[copy].advice]
    written.write_text(written.read_text() + "\n")  # edited since: no longer commopt's file
    assert _run(["report", str(written), "--format", "json"]) == 0
    assert "order" in [a.code for a in OverlapReport.model_validate_json(capsys.readouterr().out).advice]


def test_report_shows_the_runner_footprint_and_the_makespan_range(graphs, tmp_path, capsys):
    """Issue 14: the report shows what the runner holds (arenas + other live tensors) next to
    the live-tensor peak; issue 20: how the makespans move when every cost is off by 30%."""
    graph, reordered = graphs
    md = tmp_path / "r.md"
    assert _run(["report", str(graph), "--reordered", str(reordered), "--markdown", str(md),
                 "--format", "json"]) == 0
    report = OverlapReport.model_validate_json(capsys.readouterr().out)
    f, r = report.footprint, report.robustness
    assert f is not None and f.after_bytes >= f.arena_after_bytes > 0
    assert r is not None and r.before_min_us <= report.before.makespan_us <= r.before_max_us
    assert r.after_min_us <= report.after.makespan_us <= r.after_max_us
    text = md.read_text()
    assert "runner footprint" in text and "of which arenas" in text
    assert "with every cost off by up to 30%" in text


def test_optimize_report_shows_the_runners_exact_footprint(tmp_path, samples_dir):
    import commopt

    result = commopt.optimize(samples_dir / "ws2" / "fsdp.json", output_dir=tmp_path / "out", timings=False)
    report = result.outputs.report
    assert report.footprint == result.summary.footprint and report.robustness == result.summary.robustness
    html = (tmp_path / "out" / "report.html").read_text()
    assert "runner footprint" in html and "with every cost off by up to 30%" in html


def test_a_compute_slowdown_is_in_the_reports_numbers(graphs, capsys):
    from commopt.estimators import resolve
    from commopt.io import load_graph
    from commopt.report.build import match_order
    from commopt.sim import simulate

    graph, reordered = graphs
    assert _run(["report", str(graph), "--reordered", str(reordered), "--compute-slowdown", "1.5",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    g = load_graph(graph)
    durations = resolve().durations(g)
    after = match_order(g, load_graph(reordered))
    assert doc["after"]["makespan_us"] == simulate(g, after, durations, compute_slowdown=1.5).makespan_us
    assert any(n.startswith("compute runs 1.500x as long") for n in doc["notes"])
