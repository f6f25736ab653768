"""`commopt check`: exit codes, thresholds, a baseline with a seeded regression, CI outputs."""

import dataclasses
import json
from typing import ClassVar

import pytest
from click.testing import CliRunner

from commopt.cli.main import cli
from commopt.passes.base import Pass


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


# --------------------------------------------------------------------------- bad input: exit 2
def _error_line(r) -> str:
    """The one stderr line of a user error (exit 2, no traceback)."""
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and "internal error" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("commopt: error: "), r.stderr
    return lines[0]


class ExitingEstimator:
    """A plug-in estimator that ends the process with status 0 from estimate()."""

    name = "exits"

    def __init__(self, options):
        pass

    def estimate(self, node, graph):
        raise SystemExit(0)


class ExitingFactory:
    """A plug-in estimator whose constructor ends the process with status 0."""

    name = "exits-early"

    def __init__(self, options):
        raise SystemExit(0)

    def estimate(self, node, graph):
        return None


@pytest.mark.parametrize("target, where", [
    ("tests.cli.test_check:ExitingEstimator", "estimator 'exits' failed: SystemExit"),
    ("tests.cli.test_check:ExitingFactory", "its factory failed: SystemExit"),
])
def test_a_plugin_estimator_raising_system_exit_0_is_a_plugin_error(samples_dir, target, where):
    r = _invoke("check", str(samples_dir / "ws2" / "ddp.json"), "--estimator", target)
    assert where in _error_line(r)
    assert "PASS" not in r.stdout


@dataclasses.dataclass(frozen=True)
class ExitingPass(Pass):
    """A plug-in pass that ends the process with status 0 from run()."""

    name: ClassVar[str] = "exits"

    def run(self, graph, order, ctx):
        raise SystemExit(0)


def test_a_plugin_pass_raising_system_exit_0_is_a_plugin_error(samples_dir, monkeypatch):
    from importlib.metadata import EntryPoint

    from commopt.passes import registry

    real = registry.discover
    ep = EntryPoint("exits", "tests.cli.test_check:ExitingPass", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "discover", lambda entry_points=None: real([ep]))
    registry.get_registry.cache_clear()
    try:
        r = _invoke("check", str(samples_dir / "ws2" / "ddp.json"), "--passes", "exits")
    finally:
        registry.get_registry.cache_clear()
    line = _error_line(r)
    assert "pass 'exits'" in line and "SystemExit" in line


@pytest.mark.parametrize("flag, value", [
    ("--max-exposed-comm-us", "nan"), ("--min-overlap", "nan"), ("--max-exposed-comm-us", "inf"),
])
def test_nan_or_infinite_thresholds_exit_2_naming_the_option(samples_dir, flag, value):
    r = _invoke("check", str(samples_dir / "ws2" / "ddp.json"), flag, value)
    line = _error_line(r)
    assert flag in line and value in line


def test_max_regression_without_a_baseline_is_an_error(samples_dir):
    r = _invoke("check", str(samples_dir / "ws2" / "ddp.json"), "--max-regression", "5")
    line = _error_line(r)
    assert "--max-regression" in line and "--baseline" in line


def test_a_nan_baseline_exits_2_naming_the_file(samples_dir, tmp_path):
    base = _baseline(samples_dir, tmp_path)
    text = base.read_text()
    doc = json.loads(text)
    bad = tmp_path / "nan.json"
    bad.write_text(text.replace(json.dumps(doc["after"]["exposed_comm_us"]), "NaN", 1))
    assert "NaN" in bad.read_text()
    r = _invoke("check", str(samples_dir / "ws8" / "fsdp.json"), "--baseline", str(bad))
    line = _error_line(r)
    assert "nan.json" in line and "NaN" in line


@pytest.mark.parametrize("edit, field", [
    (lambda a: a.update(makespan_us="fast"), "after.makespan_us"),
    (lambda a: a.update(exposed_comm_us=-3.0), "after.exposed_comm_us"),
    (lambda a: a.pop("peak_memory_bytes"), "after.peak_memory_bytes"),
])
def test_a_baseline_with_bad_numbers_exits_2_naming_the_field(samples_dir, tmp_path, edit, field):
    base = _baseline(samples_dir, tmp_path)
    doc = json.loads(base.read_text())
    edit(doc["after"])
    bad = tmp_path / "bad_base.json"
    bad.write_text(json.dumps(doc))
    r = _invoke("check", str(samples_dir / "ws8" / "fsdp.json"), "--baseline", str(bad))
    assert field in _error_line(r)


def test_non_utf8_baseline_exits_2(samples_dir, tmp_path):
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"after": "\xe9"}')
    r = _invoke("check", str(samples_dir / "ws2" / "ddp.json"), "--baseline", str(bad))
    assert "not UTF-8" in _error_line(r)


def test_a_baseline_from_another_graph_is_refused(samples_dir, tmp_path):
    base = _baseline(samples_dir, tmp_path)  # fsdp
    assert json.loads(base.read_text())["graph_digest"]
    r = _invoke("check", str(samples_dir / "ws8" / "ddp.json"), "--baseline", str(base))
    line = _error_line(r)
    assert "--baseline" in line and "another graph" in line


def test_a_check_result_baseline_carries_the_identity_too(samples_dir, tmp_path):
    r = _invoke("check", str(samples_dir / "ws2" / "tp.json"), "--format", "json")
    assert r.exit_code == 0, r.output
    saved = tmp_path / "tp_check.json"
    saved.write_text(r.stdout)
    assert json.loads(r.stdout)["metrics"]["graph_digest"]
    ok = _invoke("check", str(samples_dir / "ws2" / "tp.json"), "--baseline", str(saved))
    assert ok.exit_code == 0, ok.output
    other = _invoke("check", str(samples_dir / "ws2" / "moe.json"), "--baseline", str(saved))
    assert "another graph" in _error_line(other)


def test_max_gap_to_optimal_gates_on_the_certificate(samples_dir):
    graph = str(samples_dir / "ws8" / "mesh2d.json")
    ok = _invoke("check", graph, "--max-gap-to-optimal", "10")
    assert ok.exit_code == 0, ok.output
    bad = _invoke("check", graph, "--max-gap-to-optimal", "0")
    assert bad.exit_code == 1 and "of optimal" in bad.output
