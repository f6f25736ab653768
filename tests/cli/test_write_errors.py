"""A write the operating system refuses is one line naming the path and the reason, exit code
2, no traceback and no temporary file left (issue 21, class 4). The failures are real ones:
a path under a regular file, a directory the kernel refuses files in (/proc), and a file
size limit (RLIMIT_FSIZE) in a child process. Tests run as root, so permission bits would
not stop them."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_run import run_cli as _run


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samples_dir: Path) -> Path:
    """A scratch directory (the current one) with g.json and a regular file ``afile``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    shutil.copy(samples_dir / "ws2" / "tp.json", tmp_path / "g.json")
    (tmp_path / "afile").write_text("a regular file\n")
    return tmp_path


def _one_line(capsys) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("commopt: error:"), captured.err
    assert "Traceback" not in captured.err
    return err[0]


@pytest.mark.parametrize("argv", [
    ["plan", "g.json", "-o", "afile/plan.json"],
    ["codegen", "g.json", "-o", "afile/run.py"],
    ["report", "g.json", "--html", "afile/deeper/r.html"],
    ["check", "g.json", "--markdown", "afile/c.md"],
    ["convert", "g.json", "afile/c.json"],
    ["optimize", "g.json", "-o", "afile/out"],
])
def test_a_path_under_a_regular_file_is_one_line_exit_2(work: Path, capsys, argv):
    assert _run(argv) == 2
    line = _one_line(capsys)
    assert "cannot write: afile is not a directory" in line and argv[-1] in line
    assert (work / "afile").read_text() == "a regular file\n"
    assert sorted(p.name for p in work.iterdir()) == ["afile", "g.json"]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_a_directory_that_refuses_new_files_is_one_line_exit_2(work: Path, capsys):
    target = "/proc/commopt-cannot-be-here.json"
    assert _run(["plan", "g.json", "-o", target]) == 2
    line = _one_line(capsys)
    assert f"{target}: cannot write: " in line
    assert not Path(target).exists()


def _limit_file_size() -> None:  # runs in the child, before exec
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an ignored signal stays ignored across exec
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))


@pytest.mark.slow
def test_file_too_large_is_one_line_exit_2_and_leaves_the_old_file(work: Path):
    old = b'{"an older plan": true}\n'
    (work / "plan.json").write_bytes(old)
    proc = subprocess.run([sys.executable, "-m", "commopt", "plan", "g.json", "-o", "plan.json"],
                          cwd=work, capture_output=True, text=True, timeout=600,
                          preexec_fn=_limit_file_size)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert err == [f"commopt: error: plan.json: cannot write: {os.strerror(errno.EFBIG)}"]
    assert (work / "plan.json").read_bytes() == old  # the old file stays, whole
    assert sorted(p.name for p in work.iterdir()) == ["afile", "g.json", "plan.json"]  # no temp file
