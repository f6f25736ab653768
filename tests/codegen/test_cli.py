"""`commopt codegen` from the command line: files, plans, payloads and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commopt.io.json_graph import save_json_graph
from commopt.schemas.codegen import CodegenResult
from tests.cli_run import run_cli as _run
from tests.codegen.conftest import tiny_graph


@pytest.fixture
def graph_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no commopt.toml from the repository applies
    path = tmp_path / "tiny.json"
    save_json_graph(tiny_graph(), path)
    return path


def test_codegen_writes_the_default_name_and_says_how_to_run_it(graph_file: Path, tmp_path: Path,
                                                                 capsys) -> None:
    before = graph_file.read_bytes()
    assert _run(["codegen", str(graph_file)]) == 0
    script = tmp_path / "run_tiny.py"
    compile(script.read_text(encoding="utf-8"), str(script), "exec")
    err = capsys.readouterr().err
    assert "wrote run_tiny.py" in err and "torchrun --nproc-per-node 2 run_tiny.py" in err
    assert graph_file.read_bytes() == before


def test_codegen_uses_a_plan_file_from_commopt_plan(graph_file: Path, tmp_path: Path,
                                                     capsys) -> None:
    plan = tmp_path / "plan.json"
    assert _run(["plan", str(graph_file), "-o", str(plan)]) == 0
    capsys.readouterr()
    out = tmp_path / "gen" / "run.py"
    assert _run(["codegen", str(graph_file), "--plan", str(plan), "-o", str(out),
                 "--format", "json"]) == 0
    result = CodegenResult.model_validate_json(capsys.readouterr().out)
    digest = json.loads(plan.read_text(encoding="utf-8"))["digest"]
    assert result.plan_digest == digest and result.path == str(out)
    assert (result.buffers, result.copies_per_iter, result.emulated) == (3, 0, 1)
    assert repr(digest) in out.read_text(encoding="utf-8")


def test_no_plan_gives_no_arenas(graph_file: Path, capsys) -> None:
    assert _run(["codegen", str(graph_file), "--no-plan", "--format", "json", "-o", "r.py"]) == 0
    result = CodegenResult.model_validate_json(capsys.readouterr().out)
    assert result.plan_digest is None and result.arena_bytes == 0 and result.buffers == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--plan", "missing.json"], "missing.json: no such file"),
    (["--plan", "bad.json"], "not a buffer plan"),
    (["--plan", "bad.json", "--no-plan"], "exclude each other"),
])
def test_bad_plans_are_one_line_user_errors(graph_file: Path, tmp_path: Path, capsys,
                                            args: list[str], message: str) -> None:
    (tmp_path / "bad.json").write_text('{"format": "commopt-buffer-plan"}', encoding="utf-8")
    assert _run(["codegen", str(graph_file), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run_tiny.py").exists()


def test_plan_for_another_graph_order_is_refused(graph_file: Path, tmp_path: Path, capsys) -> None:
    from commopt.buffers import plan_buffers
    from tests.codegen.conftest import TINY_REORDERED

    plan = plan_buffers(tiny_graph(), TINY_REORDERED)
    (tmp_path / "p.json").write_text(plan.model_dump_json(), encoding="utf-8")
    assert _run(["codegen", str(graph_file), "--plan", "p.json"]) == 2
    assert "different order" in capsys.readouterr().err
