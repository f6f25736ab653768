"""--world-size / --mesh / --groups on every command, and the error for a group of unknown size.

The graph is the transformers Llama TP sample re-saved with plain ``torch.export.save``: its
all_reduces carry no group size, so nothing in the file proves how many ranks group '0' has.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_run import run_cli

WS8 = Path(__file__).resolve().parents[2] / "sample_graphs" / "ws8"


@pytest.fixture(scope="module")
def plain_llama(tmp_path_factory) -> Path:
    """``llama_tp.pt2`` saved by plain torch.export.save (no commopt groups record)."""
    import torch

    path = tmp_path_factory.mktemp("plain") / "llama_tp.pt2"
    torch.export.save(torch.export.load(str(WS8 / "llama_tp.pt2")), str(path))
    return path


def _commands(graph: Path, out: Path) -> dict[str, list[str]]:
    return {
        "optimize": ["optimize", str(graph), "-o", str(out / "opt")],
        "check": ["check", str(graph), "--max-exposed-comm-us", "1"],
        "report": ["report", str(graph)],
        "estimate": ["estimate", str(graph)],
        "plan": ["plan", str(graph), "-o", str(out / "plan.json")],
        "codegen": ["codegen", str(graph), "-o", str(out / "run.py")],
        "convert": ["convert", str(graph), str(out / "g.json")],
        "verify": ["verify", str(graph), str(WS8 / "llama_tp.pt2")],
    }


@pytest.mark.parametrize("command", ["optimize", "check", "report", "estimate", "plan", "codegen",
                                     "convert", "verify"])
def test_unknown_group_size_is_a_one_line_error(plain_llama, tmp_path, capsys, command):
    argv = _commands(plain_llama, tmp_path)[command]
    assert run_cli(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "size of process group(s) '0' unknown" in lines[0]
    for remedy in ("--world-size N", "--mesh", "--groups FILE", "save_with_groups"):
        assert remedy in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing half-written


@pytest.mark.parametrize("supply", [["--world-size", "8"], ["--mesh", "tp=8"]])
def test_supplied_world_size_costs_the_all_reduces(plain_llama, tmp_path, capsys, supply):
    out = tmp_path / "opt"
    assert run_cli(["optimize", str(plain_llama), "-o", str(out), *supply]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["before"]["exposed_comm_us"] > 100.0
    capsys.readouterr()
    assert run_cli(["check", str(plain_llama), "--max-exposed-comm-us", "1", *supply]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_supplied_size_matches_the_recorded_one(plain_llama, tmp_path):
    for graph, extra, name in ((WS8 / "llama_tp.pt2", [], "rec"),
                               (plain_llama, ["--world-size", "8"], "ws")):
        assert run_cli(["optimize", str(graph), "-o", str(tmp_path / name), "--no-timings", *extra]) == 0
    rec, ws = (json.loads((tmp_path / n / "summary.json").read_text()) for n in ("rec", "ws"))
    assert rec["before"] == ws["before"] and rec["after"] == ws["after"]


def test_world_size_contradicting_the_record_is_an_option_error(capsys):
    assert run_cli(["estimate", str(WS8 / "llama_tp.pt2"), "--world-size", "4"]) == 2
    assert "--world-size 4 contradicts the world size 8" in capsys.readouterr().err


def test_inspect_warns_and_succeeds(plain_llama, capsys):
    assert run_cli(["inspect", str(plain_llama), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert any("size of process group(s) '0' unknown" in w for w in report["warnings"])
    assert {c["group_size"] for c in report["collectives"]} == {None}  # not a made-up 1


def test_load_warnings_reach_terminal_summary_and_report(tmp_path, capsys):
    import torch

    plain = tmp_path / "mesh2d.pt2"  # group sizes proven by its ops, ranks unknown
    torch.export.save(torch.export.load(str(WS8 / "mesh2d.pt2")), str(plain))
    out = tmp_path / "opt"
    assert run_cli(["-q", "optimize", str(plain), "-o", str(out)]) == 0
    wanted = "ranks of process group(s) '1', '5' unknown"
    assert wanted in capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert any(wanted in n for n in summary["notes"])
    assert "ranks of process group(s) &#x27;1&#x27;, &#x27;5&#x27; unknown" in (out / "report.html").read_text()
    assert run_cli(["report", str(plain), "--format", "json"]) == 0
    assert any(wanted in n for n in json.loads(capsys.readouterr().out)["notes"])
    assert run_cli(["estimate", str(plain)]) == 0
    assert wanted in capsys.readouterr().err
