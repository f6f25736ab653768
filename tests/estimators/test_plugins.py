"""Estimator plug-ins: a real package installed into a temporary directory, and registry rules."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from commopt.errors import OptionError
from commopt.estimators import registry
from commopt.io.json_graph import save_json_graph
from commopt.synth import fsdp_tp_stack
from tests.plugins.install import install_plugin, run_commopt


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    return install_plugin("example_estimator_plugin", tmp_path_factory)


@pytest.mark.slow
def test_installed_plugin_is_listed_used_and_a_broken_one_is_contained(plugin_path, tmp_path):
    g = tmp_path / "g.json"
    save_json_graph(fsdp_tp_stack(1, dp=2, hidden=64, tokens=64), g)
    listed = run_commopt(["estimate", "--list", "--format", "json"], plugin_path, tmp_path)
    assert listed.returncode == 0, listed.stderr
    by_name = {e["name"]: e for e in json.loads(listed.stdout)["estimators"]}
    assert by_name["flat"]["error"] is None and "commopt-example-estimator" in by_name["flat"]["source"]
    assert "failed to import" in by_name["broken"]["error"]
    assert by_name["analytical"]["error"] is None

    used = run_commopt(["estimate", str(g), "--estimator", "flat", "--format", "json"], plugin_path, tmp_path)
    assert used.returncode == 0, used.stderr
    report = json.loads(used.stdout)
    assert report["estimator"] == "flat,analytical"
    compute = [d for d in report["durations"] if d["kind"] == "compute"]
    assert compute and all(d["duration_us"] == 3.25 and d["source"] == "flat" for d in compute)
    assert "flat: every compute node takes 3.25 us" in used.stderr

    broken = run_commopt(["estimate", str(g), "--estimator", "broken"], plugin_path, tmp_path)
    assert broken.returncode == 2
    assert "estimator 'broken'" in broken.stderr and "failed to import" in broken.stderr
    assert "Traceback" not in broken.stderr


def _fake_eps(monkeypatch, eps):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: eps if group else {})


def test_a_name_defined_twice_names_both_sources(monkeypatch):
    _fake_eps(monkeypatch, [
        EntryPoint("twin", "pkg_a.mod:Est", registry.ENTRY_POINT_GROUP),
        EntryPoint("twin", "pkg_b.mod:Est", registry.ENTRY_POINT_GROUP),
    ])
    info = registry.discover()["twin"]
    assert "pkg_a.mod:Est" in info.error and "pkg_b.mod:Est" in info.error
    with pytest.raises(OptionError, match="defined twice"):
        registry.resolve("twin")
    # the rest still works
    assert registry.resolve("analytical").name == "analytical"


def test_a_plugin_may_not_shadow_a_builtin(monkeypatch):
    _fake_eps(monkeypatch, [EntryPoint("analytical", "evil.mod:Est", registry.ENTRY_POINT_GROUP)])
    assert "built-in" in registry.discover()["analytical"].error


def test_plugins_are_discovered_sorted_by_name(monkeypatch):
    _fake_eps(monkeypatch, [
        EntryPoint("zeta", "tests.estimators.test_chain:Fixed", registry.ENTRY_POINT_GROUP),
        EntryPoint("alpha", "tests.estimators.test_chain:Fixed", registry.ENTRY_POINT_GROUP),
    ])
    names = [n for n in registry.discover() if n in ("alpha", "zeta")]
    assert names == ["alpha", "zeta"]
    assert registry.resolve("zeta,alpha").name == "fixed,fixed,analytical"
