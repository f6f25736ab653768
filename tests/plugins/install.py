"""Install an example plug-in package for real (pip, into a scratch site directory) and run
commopt in a subprocess that sees it, so entry-point discovery is exercised end to end
without touching the shared virtual environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def install_plugin(package_dir: str, tmp_path_factory) -> Path:
    """pip-install ``tests/plugins/<package_dir>`` into a new directory; returns it."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build") / "src"
    shutil.copytree(HERE / package_dir, build)  # no build/ or egg-info lands in the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(target), str(build)], check=True)
    return target


def run_commopt(args: list[str], site: Path, cwd: Path) -> subprocess.CompletedProcess:
    """``commopt ARGS`` in a subprocess with ``site`` on its import path."""
    env = dict(os.environ, PYTHONPATH=str(site), NO_COLOR="1")
    code = "import sys; from commopt.cli.main import main; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=cwd)
