"""Crash safety: `commopt optimize` killed with SIGKILL while writing never leaves a partial file
under a final name, and never touches its input.

The kill is real (``os.kill(getpid(), SIGKILL)`` at fault-injection points inside the atomic
writer, chosen through ``COMMOPT_FAULT_INJECT``); the process dies without cleanup.
"""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from commopt.atomic import FAULT_ENV

OUTPUTS = ["fsdp.pt2", "buffer_plan.json", "run_fsdp.py", "report.html", "trace.json", "summary.json"]
# (kill point, whether the output directory already holds a previous run's outputs)
KILL_POINTS = [
    ("mid-write:fsdp.pt2", False),
    ("before-rename:buffer_plan.json", True),
    ("after-rename:run_fsdp.py", False),
    ("mid-write:report.html", True),
    ("before-rename:summary.json", True),
]


def _optimize(src: Path, out: Path, *extra: str, fault: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run(
        [sys.executable, "-m", "commopt", "-q", "optimize", str(src), "-o", str(out), "--no-timings", *extra],
        env=env, capture_output=True, text=True, timeout=600,
    )


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in out.iterdir() if p.name in OUTPUTS}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, samples_dir):
    """The input (copied), the complete outputs of two different runs (old and new)."""
    root = tmp_path_factory.mktemp("fault")
    src = root / "fsdp.pt2"
    shutil.copy(samples_dir / "ws2" / "fsdp.pt2", src)
    old, new = root / "old", root / "new"
    assert _optimize(src, old, "--passes", "sink-waits").returncode == 0
    assert _optimize(src, new).returncode == 0
    return src, _snapshot(old), _snapshot(new)


@pytest.mark.slow
@pytest.mark.parametrize("fault, previous", KILL_POINTS)
def test_killed_run_leaves_complete_files_or_none(runs, tmp_path, fault, previous):
    src, old, new = runs
    assert old != new, "the two reference runs must differ for this test to mean anything"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    out = tmp_path / "out"
    out.mkdir()
    if previous:
        for name, data in old.items():
            (out / name).write_bytes(data)
    # the "previous" files are copies without a manifest: not known as commopt's, so --force
    proc = _optimize(src, out, *(["--force"] if previous else []), fault=fault)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    after = _snapshot(out)
    for name, data in after.items():
        allowed = [new[name]] + ([old[name]] if previous else [])
        assert data in allowed, f"{name} is neither the previous nor the new complete file"
    if not previous:
        point, victim = fault.split(":")
        assert victim in after if point == "after-rename" else victim not in after
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest


def test_input_is_never_modified_by_a_successful_run(runs):
    src, _, _ = runs
    before = src.read_bytes()
    with pytest.raises(subprocess.CalledProcessError):
        # writing into the input's own directory would overwrite it: refused, exit 2
        proc = _optimize(src, src.parent)
        proc.check_returncode()
    assert src.read_bytes() == before
