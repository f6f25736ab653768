"""Run the ``$ ...`` lines of a doc's console blocks, as a reader would, in a scratch folder.

``commopt ...`` lines run in this process through the console script's own entry point
(:func:`commopt.cli.main.main`, the same argv, the scratch folder as working directory): a
subprocess would spend most of its time importing torch again. Every other line (``python``,
``torchrun``, ``env ...``) runs as a subprocess with the virtual environment's ``bin`` first on
PATH. Each line must exit 0.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_run import run_cli


def doc_commands(text: str) -> list[str]:
    """The ``$ `` lines of the text's console blocks, in order."""
    commands: list[str] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        commands += [line[2:].strip() for line in block.splitlines() if line.startswith("$ ")]
    return commands


def doc_env(first: list[Path], last: list[Path]) -> dict[str, str]:
    """The subprocesses' environment: the venv's ``bin`` first on PATH; PYTHONPATH is
    ``first``, the inherited PYTHONPATH, then ``last``."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join([*map(str, first), env.get("PYTHONPATH", ""), *map(str, last)])
    return env


def run_doc_command(command: str, cwd: Path, env: dict[str, str], doc: str,
                    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Run one ``$`` line of ``doc`` in ``cwd``; fail with its output unless it exits 0."""
    argv = shlex.split(command)
    if argv[0] == "commopt":
        capsys.readouterr()
        with monkeypatch.context() as m:
            m.chdir(cwd)
            m.setattr(sys, "path", [str(cwd), *sys.path])  # `commopt capture my_step:...`
            code = run_cli(argv[1:])
        for name in [n for n, mod in sys.modules.items()
                     if str(getattr(mod, "__file__", "") or "").startswith(str(cwd))]:
            del sys.modules[name]  # the doc's own modules (my_step) die with its folder
        out = capsys.readouterr()
        assert code == 0, f"{doc} command failed: {command}\n{out.out}\n{out.err}"
        return
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{doc} command failed: {command}\n{proc.stdout}\n{proc.stderr}"
