"""`commopt plan` and `commopt verify-plan` from the command line: files, exit codes, payloads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commopt.io.json_graph import save_json_graph
from commopt.schemas.buffer_plan import BufferPlan, PlanVerification
from commopt.synth import fsdp_tp_stack
from tests.cli_run import run_cli as _run


@pytest.fixture
def graph_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no commopt.toml from the repository applies
    path = tmp_path / "g.json"
    save_json_graph(fsdp_tp_stack(2, dp=2, tp=2, hidden=64, tokens=32), path)
    return path


def test_plan_writes_a_file_that_verifies(graph_file: Path, tmp_path: Path, capsys):
    plan_path = tmp_path / "out" / "plan.json"
    assert _run(["plan", str(graph_file), "-o", str(plan_path), "--align", "256"]) == 0
    plan = BufferPlan.model_validate_json(plan_path.read_text())
    # 16 collective tensors; each backward re-gather reads its forward gather's slot
    assert plan.align_bytes == 256 and plan.totals.buffers == 14
    assert "digest " + plan.digest in capsys.readouterr().out
    assert _run(["verify-plan", str(graph_file), str(plan_path)]) == 0
    assert "valid for" in capsys.readouterr().out


def test_persistent_params_plan_verifies_and_says_what_it_saves(graph_file: Path, tmp_path: Path,
                                                               capsys):
    plan_path = tmp_path / "plan.json"
    assert _run(["plan", str(graph_file), "-o", str(plan_path), "--persistent-params", "dp"]) == 0
    out = capsys.readouterr().out
    plan = BufferPlan.model_validate_json(plan_path.read_text())
    entry = plan.persistent_params
    assert entry.groups == ["dp"] and len(entry.params) == 2
    assert "persistent parameters (groups dp): 2 live in the arena" in out
    assert f"{entry.copies_saved_per_step} copy-in(s) per step saved" in out
    assert _run(["verify-plan", str(graph_file), str(plan_path)]) == 0


def test_json_payloads_follow_the_schemas(graph_file: Path, tmp_path: Path, capsys):
    assert _run(["plan", str(graph_file), "--format", "json", "--comm-buffers", "all_reduce"]) == 0
    plan = BufferPlan.model_validate_json(capsys.readouterr().out)
    assert [a.group for a in plan.groups] == ["tp"]
    path = tmp_path / "p.json"
    path.write_text(plan.model_dump_json())
    assert _run(["verify-plan", str(graph_file), str(path), "--format", "json"]) == 0
    report = PlanVerification.model_validate_json(capsys.readouterr().out)
    assert report.ok and report.problems == []


def test_verify_plan_lists_every_problem_and_exits_1(graph_file: Path, tmp_path: Path, capsys):
    plan_path = tmp_path / "plan.json"
    assert _run(["plan", str(graph_file), "-o", str(plan_path)]) == 0
    raw = json.loads(plan_path.read_text())
    raw["groups"][0]["buffers"][0]["offset_bytes"] += 8
    raw["groups"][1]["buffers"].pop()
    plan_path.write_text(json.dumps(raw))
    capsys.readouterr()
    assert _run(["verify-plan", str(graph_file), str(plan_path)]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("digest mismatch")
    assert any("not a multiple of the alignment" in line for line in lines)
    assert any("missing from the plan" in line for line in lines)
    assert f"{len(lines)} problems in the plan" in captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "{g}", "--align", "100"], "power of two"),
        (["plan", "{g}", "--comm-buffers", "allreduce"], "did you mean 'all_reduce'"),
        (["plan", "{g}", "--persistent-params", "dpp"], "unknown process group 'dpp' (did you mean 'dp'?)"),
        (["plan", "{g}", "--persistent-params", "all,dp"], "cannot be combined"),
        (["plan", "missing.json"], "no such file"),
        (["verify-plan", "{g}", "{g}"], "not a buffer plan"),
        (["verify-plan", "{g}", "nope.json"], "no such plan file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(graph_file: Path, capsys, argv, message):
    assert _run([a.format(g=graph_file) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("commopt: error:") and message in err[0]


def test_input_graph_is_not_modified(graph_file: Path, tmp_path: Path):
    before = graph_file.read_bytes()
    assert _run(["plan", str(graph_file), "-o", str(tmp_path / "p.json")]) == 0
    assert graph_file.read_bytes() == before


@pytest.mark.slow
def test_plan_files_are_byte_identical_under_any_hash_seed(graph_file: Path, tmp_path: Path):
    outputs = []
    for seed in ("1", "4242"):
        out = tmp_path / f"plan_{seed}.json"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", "from commopt.cli.main import main; main()", "plan",
                        str(graph_file), "-o", str(out)],
                       check=True, env=env, capture_output=True, cwd=tmp_path)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
