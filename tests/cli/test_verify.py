"""`commopt verify` and `commopt passes` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commopt.io.json_graph import graph_to_document, save_json_graph
from commopt.schemas.verify import PassList, VerifyReport
from commopt.synth import fsdp_tp_stack
from tests.cli_run import run_cli as _run


@pytest.fixture
def graph_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "g.json"
    save_json_graph(fsdp_tp_stack(2, dp=2, tp=2, hidden=64, tokens=32), path)
    return path


def test_identity_reorder_is_ok(graph_file: Path, capsys):
    assert _run(["verify", str(graph_file), str(graph_file)]) == 0
    assert capsys.readouterr().out.startswith("ok:")


def test_broken_reorder_lists_every_violation_and_exits_1(graph_file: Path, tmp_path: Path, capsys):
    doc = json.loads(graph_file.read_text())
    names = [n["name"] for n in doc["nodes"]]
    nodes = {n["name"]: n for n in doc["nodes"]}
    # the first all-gather's wait moves before the all-gather, and a view is dropped
    i_ag, i_wait = names.index("ag0"), names.index("ag0_wait")
    names[i_ag], names[i_wait] = names[i_wait], names[i_ag]
    names.remove("bwd_gT0")
    doc["nodes"] = [nodes[n] for n in names]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert _run(["verify", str(graph_file), str(bad), "--format", "json"]) == 1
    report = VerifyReport.model_validate_json(capsys.readouterr().out)
    assert [(v.invariant, v.nodes) for v in report.violations] == [
        (0, ["bwd_gT0"]),
        (1, ["ag0", "ag0_wait"]),
    ]
    assert _run(["verify", str(graph_file), str(bad)]) == 1
    captured = capsys.readouterr()
    assert "invariant 1 (topological order): 'ag0_wait' uses 'ag0' but comes before it" in captured.out
    assert "2 invariant violation(s)" in captured.err


def test_reordered_json_from_another_tool(graph_file: Path, tmp_path: Path, capsys):
    from commopt.io import load_graph

    g = load_graph(graph_file)
    order = g.original_order
    i_ar, i_ag1 = g.index_of["tp_ar0"], g.index_of["ag1"]
    # issue ag1 (group dp) before tp_ar0 (group tp): only a cross-group reorder
    order.remove(i_ag1)
    order.insert(order.index(i_ar), i_ag1)
    other = tmp_path / "other.json"
    other.write_text(json.dumps(graph_to_document(g, order)))
    assert _run(["verify", str(graph_file), str(other), "--format", "json"]) == 1
    report = VerifyReport.model_validate_json(capsys.readouterr().out)
    assert not report.ok
    assert [(v.invariant, v.nodes) for v in report.violations] == [(2, ["tp_ar0", "ag1"])]
    assert _run(["verify", str(graph_file), str(other), "--allow-cross-group-reorder"]) == 0


def test_passes_lists_builtins_and_default_pipeline(capsys):
    assert _run(["passes", "--format", "json"]) == 0
    payload = PassList.model_validate_json(capsys.readouterr().out)
    names = [p.name for p in payload.passes]
    assert {"sink-waits", "raise-comms", "compute-overlap"} <= set(names)
    assert payload.default_pipeline == ["compute-overlap", "sink-waits", "raise-comms", "polish"]
    assert all(p.broken is None for p in payload.passes if p.source == "built-in")
