"""docs/capture.md runs as written: its Python files are written out and every ``$ ...`` line
of its console blocks is executed in order, in a scratch directory, each exiting 0
(:mod:`tests.docs.commands`)."""

from __future__ import annotations

import re

import pytest

from tests.docs.commands import doc_commands, doc_env, run_doc_command

pytestmark = pytest.mark.slow


def doc_files(text: str) -> dict[str, str]:
    """The doc's Python blocks that start with ``# NAME.py``: file name -> content."""
    files = {}
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        first = block.splitlines()[0]
        m = re.fullmatch(r"# (\w+\.py)", first.strip())
        if m:
            files[m.group(1)] = block
    return files


def test_capture_doc_runs_as_written(repo_root, tmp_path, monkeypatch, capsys):
    text = (repo_root / "docs" / "capture.md").read_text(encoding="utf-8")
    files = doc_files(text)
    assert "my_step.py" in files
    for name, content in files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    commands = doc_commands(text)
    assert any(c.startswith("commopt capture") for c in commands)
    env = doc_env([tmp_path], [repo_root])
    for command in commands:
        run_doc_command(command, tmp_path, env, "docs/capture.md", monkeypatch, capsys)
    assert (tmp_path / "tp_step.pt2").is_file()
    assert (tmp_path / "out" / "fsdp_step.pt2").is_file()
    assert sorted(p.name for p in (tmp_path / "prof").iterdir()) == ["trace_rank0.json", "trace_rank1.json"]
