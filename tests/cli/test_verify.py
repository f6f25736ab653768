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


def _optimized_json(graph_file: Path, tmp_path: Path) -> Path:
    assert _run(["optimize", str(graph_file), "-o", str(tmp_path / "out"), "--no-timings"]) == 0
    return tmp_path / "out" / "g.json"


def _mutate(path: Path, node: str, change) -> Path:
    doc = json.loads(path.read_text())
    (nd,) = [n for n in doc["nodes"] if n["name"] == node]
    change(nd, doc)
    bad = path.with_name("mutated.json")
    bad.write_text(json.dumps(doc))
    return bad


def _set(*keys_value):
    *keys, value = keys_value

    def change(nd, doc):
        target = nd
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value
    return change


@pytest.mark.parametrize("node, change, words", [
    ("tp_ar0", _set("collective", "reduce_op", "max"), "'tp_ar0' changed its collective"),
    ("tp_ar0", _set("collective", "group", "dp"), "'tp_ar0' changed its collective"),
    ("ag0", _set("collective", "type", "all_reduce"), "'ag0' changed its collective"),
    ("fwd_mm0", _set("outputs", 0, "dtype", "float32"), "'fwd_mm0' changed its outputs (dtype, shape)"),
    ("fwd_mm0", _set("outputs", 0, "shape", [1, 1]), "'fwd_mm0' changed its outputs (dtype, shape)"),
])
def test_a_changed_computation_is_not_a_reorder(graph_file: Path, tmp_path: Path, capsys, node, change, words):
    """A reorder changes the order only: verify rejects every change to what is computed
    (issue: a 'sum' replaced by 'max' in an optimized graph used to pass)."""
    good = _optimized_json(graph_file, tmp_path)
    assert _run(["verify", str(graph_file), str(good)]) == 0
    capsys.readouterr()
    bad = _mutate(good, node, change)
    code = _run(["verify", str(graph_file), str(bad)])
    out = capsys.readouterr()
    assert code in (1, 2), out
    if code == 1:
        assert words in out.out
    else:  # the loader already refuses it (e.g. a group the graph does not declare)
        assert "mutated.json" in out.err


def test_a_changed_world_or_group_is_not_a_reorder(graph_file: Path, tmp_path: Path, capsys):
    good = _optimized_json(graph_file, tmp_path)
    doc = json.loads(good.read_text())
    doc["world_size"] = 8
    for g in doc["process_groups"]:
        g["ranks"] = [r + 4 for r in g["ranks"]] if g.get("ranks") else g.get("ranks")
    bad = good.with_name("moved.json")
    bad.write_text(json.dumps(doc))
    assert _run(["verify", str(graph_file), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "the world size changed from 4 to 8" in out
    assert "process group" in out


def test_changed_arguments_are_not_a_reorder(graph_file: Path, tmp_path: Path, capsys):
    from commopt.invariants import verify_reordered
    from commopt.io import load_graph

    g0 = load_graph(graph_file)
    g1 = load_graph(_optimized_json(graph_file, tmp_path))
    (node,) = [n for n in g1.nodes if n.kind.label == "view" and n.args][:1]
    node.args = (*node.args[:-1], "changed")
    (v,) = verify_reordered(g0, g1)
    assert v.invariant == 0 and f"{node.name!r} changed its arguments" in v.message
