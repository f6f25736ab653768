"""`commopt check`: exit codes, thresholds, a baseline with a seeded regression, CI outputs."""

import json

from click.testing import CliRunner

from commopt.cli.main import cli


def _invoke(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def _baseline(samples_dir, tmp_path):
    out = tmp_path / "base"
    r = _invoke("optimize", str(samples_dir / "ws8" / "fsdp.json"), "-o", str(out), "--no-timings")
    assert r.exit_code == 0, r.output
    return out / "summary.json"


def test_same_graph_passes_against_its_own_baseline(samples_dir, tmp_path):
    base = _baseline(samples_dir, tmp_path)
    r = _invoke("check", str(samples_dir / "ws8" / "fsdp.json"), "--baseline", str(base))
    assert r.exit_code == 0, r.output
    assert r.output.startswith("PASS ")


def test_seeded_regression_fails_with_exit_1_and_names_it(samples_dir, tmp_path):
    base = _baseline(samples_dir, tmp_path)
    doc = json.loads((samples_dir / "ws8" / "fsdp.json").read_text())
    for node in doc["nodes"]:  # the regression: every collective moves 1000x the bytes
        if node.get("collective"):
            node["collective"]["in_bytes"] *= 1000
            node["collective"]["out_bytes"] *= 1000
    regressed = tmp_path / "fsdp_regressed.json"
    regressed.write_text(json.dumps(doc))
    summary_md = tmp_path / "step_summary.md"
    r = _invoke("check", str(regressed), "--baseline", str(base), "--max-regression", "5",
                env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary_md)})
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("::error file=") and "regression:exposed_comm_us" in lines[0]
    assert lines[-1].startswith("FAIL ") and "exposed_comm_us" in lines[-1]
    assert "**FAIL**" in summary_md.read_text()


def test_thresholds_and_json_output(samples_dir, tmp_path):
    g = str(samples_dir / "ws8" / "fsdp.json")
    r = _invoke("check", g, "--min-overlap", "1.0", "--format", "json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["passed"] is False and doc["checks"][0]["name"] == "min-overlap"
    r = _invoke("check", g, "--max-peak-memory", str(1 << 40), "--markdown", str(tmp_path / "c.md"))
    assert r.exit_code == 0
    assert "commopt check" in (tmp_path / "c.md").read_text()


def test_bad_input_exits_2(tmp_path):
    r = _invoke("check", str(tmp_path / "missing.pt2"))
    assert r.exit_code == 2
    bad = tmp_path / "b.json"
    bad.write_text("{}")
    r = _invoke("check", str(bad))
    assert r.exit_code == 2
