"""docs/capture.md runs as written: its Python files are written out and every ``$ ...`` line
of its console blocks is executed in order, in a scratch directory, each exiting 0."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

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


def doc_commands(text: str) -> list[str]:
    """The ``$ `` lines of the doc's console blocks, in order."""
    commands: list[str] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        commands += [line[2:].strip() for line in block.splitlines() if line.startswith("$ ")]
    return commands


def test_capture_doc_runs_as_written(repo_root, tmp_path):
    text = (repo_root / "docs" / "capture.md").read_text(encoding="utf-8")
    files = doc_files(text)
    assert "my_step.py" in files
    for name, content in files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    commands = doc_commands(text)
    assert any(c.startswith("commopt capture") for c in commands)
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", ""), str(repo_root)])
    for command in commands:
        argv = shlex.split(command)
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"docs/capture.md command failed: {command}\n{proc.stdout}\n{proc.stderr}"
    assert (tmp_path / "tp_step.pt2").is_file()
    assert (tmp_path / "out" / "fsdp_step.pt2").is_file()
    assert sorted(p.name for p in (tmp_path / "prof").iterdir()) == ["trace_rank0.json", "trace_rank1.json"]
