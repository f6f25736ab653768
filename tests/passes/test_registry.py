"""Pass registry: built-in names, pipelines, entry-point rules, and a real installed plug-in."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from commopt.errors import OptionError
from commopt.io.json_graph import save_json_graph
from commopt.ir.builder import GraphBuilder
from commopt.passes.base import DEFAULT_PIPELINE
from commopt.passes.registry import BUILTIN, PluginError, discover, parse_pipeline
from tests.plugins.install import install_plugin, run_commopt


def _ep(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group="commopt.passes")


def test_default_pipeline_names_registered_passes():
    assert set(DEFAULT_PIPELINE) <= set(BUILTIN)
    assert parse_pipeline(None) == list(DEFAULT_PIPELINE)
    assert parse_pipeline(" raise-comms , sink-waits ") == ["raise-comms", "sink-waits"]


def test_unknown_and_empty_pass_names_are_option_errors():
    with pytest.raises(OptionError, match="did you mean 'compute-overlap'"):
        parse_pipeline("compute-overlp")
    with pytest.raises(OptionError, match="empty pass name"):
        parse_pipeline("sink-waits,,raise-comms")


def test_a_name_claimed_twice_is_a_broken_entry_not_a_crash():
    """Regression: a clashing pass name made discovery raise, so every optimize and even
    `commopt passes` failed. Now only that name is unusable, and it says why."""
    reg = discover([_ep("sink-waits", "somewhere.else:Sink"),
                    _ep("twin", "pkg_a:Twin"), _ep("twin", "pkg_b:Twin")])
    broken = {b.name: b.error for b in reg.check_all()}
    assert "built-in" in broken["sink-waits"] and "somewhere.else:Sink" in broken["sink-waits"]
    assert "pkg_a:Twin" in broken["twin"] and "pkg_b:Twin" in broken["twin"]
    with pytest.raises(PluginError, match="defined twice"):
        reg.create("sink-waits")
    assert reg.create("raise-comms").name == "raise-comms"


def test_an_exception_in_a_plugin_pass_names_the_pass_and_those_before_it():
    from dataclasses import dataclass
    from typing import ClassVar

    from commopt.errors import PassError
    from commopt.passes.base import Pass, PassContext
    from commopt.passes.manager import PassManager
    from commopt.passes.sink_waits import SinkWaits
    from commopt.synth import fsdp_tp_stack

    @dataclass(frozen=True)
    class Explodes(Pass):
        name: ClassVar[str] = "explodes"

        def run(self, graph, order, ctx):
            raise ZeroDivisionError("plug-in arithmetic")

    g = fsdp_tp_stack(2, dp=2, tp=2, hidden=64, tokens=32)
    ctx = PassContext.for_graph(g, [1.0] * len(g))
    with pytest.raises(PassError) as exc:
        PassManager([SinkWaits(), Explodes()]).run(g, g.original_order, ctx)
    assert str(exc.value) == ("field passes: pass 'explodes' (after sink-waits) failed: "
                              "ZeroDivisionError: plug-in arithmetic")
    assert isinstance(exc.value.__cause__, ZeroDivisionError)


def test_broken_plugins_are_listed_and_loading_them_is_a_plugin_error():
    reg = discover([
        _ep("zz-missing", "no_such_module_anywhere:Pass"),
        _ep("aa-not-a-pass", "commopt.errors:OptionError"),
        _ep("bb-misnamed", "commopt.passes.sink_waits:SinkWaits"),
    ])
    assert reg.names() == ["aa-not-a-pass", "bb-misnamed", "bucket", "compute-overlap", "polish", "raise-comms",
                           "sink-waits", "zz-missing"]
    broken = reg.check_all()
    assert [b.name for b in broken] == ["aa-not-a-pass", "bb-misnamed", "zz-missing"]
    assert "ModuleNotFoundError" in broken[2].error
    assert "registered as 'bb-misnamed'" in broken[1].error
    with pytest.raises(PluginError, match="zz-missing"):
        reg.create("zz-missing")
    assert reg.create("sink-waits").name == "sink-waits"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    return install_plugin("example_pass_plugin", tmp_path_factory)


@pytest.mark.slow
def test_installed_plugin_pass_is_listed_and_runs_in_a_pipeline(plugin_site: Path, tmp_path: Path):
    listed = run_commopt(["passes", "--format", "json"], plugin_site, tmp_path)
    assert listed.returncode == 0, listed.stderr
    by_name = {p["name"]: p for p in json.loads(listed.stdout)["passes"]}
    assert by_name["example-delay-views"]["broken"] is None
    assert "commopt-example-pass-plugin" in by_name["example-delay-views"]["source"]
    assert "ModuleNotFoundError" in by_name["example-broken"]["broken"]

    b = GraphBuilder(name="views", world_size=2)
    b.group("dp", ranks=[0, 1])
    x = b.input("x", (8, 8))
    v = b.view("v", x)  # used only after y: the plug-in moves it down
    y = b.compute("y", "aten.relu.default", [x], (8, 8))
    c = b.collective("ar", "all_reduce", "dp", y)
    w = b.wait("ar_wait", c)
    z = b.compute("z", "aten.add.Tensor", [v, w], (8, 8))
    b.output([z])
    g = tmp_path / "g.json"
    save_json_graph(b.build(), g)
    run = run_commopt(["optimize", str(g), "-o", "out", "--passes", "sink-waits,example-delay-views",
                    "--format", "json"], plugin_site, tmp_path)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert [p["name"] for p in summary["passes"]] == ["sink-waits", "example-delay-views"]
    assert summary["passes"][1]["changed"] is True
    written = json.loads((tmp_path / "out" / "g.json").read_text())
    names = [n["name"] for n in written["nodes"]]
    assert names.index("y") < names.index("v") < names.index("z")

    broken = run_commopt(["optimize", str(g), "-o", "out2", "--passes", "example-broken"], plugin_site, tmp_path)
    assert broken.returncode == 2
    assert broken.stderr.count("\n") == 1 and "example-broken" in broken.stderr
