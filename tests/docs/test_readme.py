"""The README's worked example runs as written, so it cannot rot.

Every ``$ ...`` line of the ```console block is executed in order, in a scratch directory that
links to the repository's sample graphs, with the virtual environment's ``bin`` first on PATH
(so ``torchrun`` is the installed one; ``commopt`` lines run through the console script's
entry point in this process, :mod:`tests.docs.commands`, and the installed ``commopt`` script
answers ``--version``). Each must exit 0.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.docs.commands import doc_commands, doc_env, run_doc_command


def readme_commands(repo: Path) -> list[str]:
    """The ``$ `` lines of the README's console blocks, in order."""
    return doc_commands((repo / "README.md").read_text(encoding="utf-8"))


def test_readme_has_the_two_commands(repo_root):
    text = (repo_root / "README.md").read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text


@pytest.mark.slow
def test_readme_worked_example_runs(repo_root, tmp_path, monkeypatch, capsys):
    commands = readme_commands(repo_root)
    assert any(c.startswith("commopt optimize") for c in commands)
    (tmp_path / "sample_graphs").symlink_to(repo_root / "sample_graphs")
    env = doc_env([], [])
    env["PYTHONPATH"] = str(repo_root)  # the runner's tests helpers are not needed, commopt is
    installed = subprocess.run(["commopt", "--version"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=120)
    assert installed.returncode == 0, f"the commopt console script: {installed.stderr}"
    for command in commands:
        run_doc_command(command, tmp_path, env, "README", monkeypatch, capsys)
    assert (tmp_path / "out" / "fsdp" / "report.md").read_text().strip()
