"""The README's worked example runs as written, so it cannot rot.

Every ``$ ...`` line of the ```console block is executed in order, in a scratch directory that
links to the repository's sample graphs, with the virtual environment's ``bin`` first on PATH
(so ``commopt`` and ``torchrun`` are the installed ones). Each must exit 0.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest


def readme_commands(repo: Path) -> list[str]:
    """The ``$ `` lines of the README's console blocks, in order."""
    text = (repo / "README.md").read_text(encoding="utf-8")
    commands: list[str] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        commands += [line[2:].strip() for line in block.splitlines() if line.startswith("$ ")]
    return commands


def test_readme_has_the_two_commands(repo_root):
    text = (repo_root / "README.md").read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text


@pytest.mark.slow
def test_readme_worked_example_runs(repo_root, tmp_path):
    commands = readme_commands(repo_root)
    assert any(c.startswith("commopt optimize") for c in commands)
    (tmp_path / "sample_graphs").symlink_to(repo_root / "sample_graphs")
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(repo_root)  # the runner's tests helpers are not needed, commopt is
    for command in commands:
        argv = shlex.split(command)
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"README command failed: {command}\n{proc.stdout}\n{proc.stderr}"
    assert (tmp_path / "out" / "fsdp" / "report.md").read_text().strip()
