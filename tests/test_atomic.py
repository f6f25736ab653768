"""commopt.atomic: recognisable temporary files, cleaning the ones a killed run left, and OS
write failures as one-line OutputErrors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from commopt import atomic
from commopt.errors import OutputError


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def test_the_temporary_file_has_commopts_name_and_is_gone_after(tmp_path: Path):
    seen = []
    with atomic.atomic_path(tmp_path / "plan.json") as tmp:
        seen.append(tmp.name)
        tmp.write_text("{}")
    assert atomic.is_temp_file(seen[0]) and f".commopt-{os.getpid()}-" in seen[0]
    assert seen[0].startswith(".plan.json.") and seen[0].endswith(".tmp")
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_clean_removes_only_temp_files_of_processes_that_are_gone(tmp_path: Path):
    dead = _dead_pid()
    orphan = tmp_path / f".g.json.commopt-{dead}-k2j4a_8z.tmp"
    live = tmp_path / f".g.json.commopt-{os.getppid()}-aaaaaaaa.tmp"  # the parent is running
    users = [".g.json.tmp", "g.json.commopt-1-abc.tmp", ".notes.commopt-x-abc.tmp", "draft.tmp"]
    for p in [orphan, live, *(tmp_path / u for u in users)]:
        p.write_text("x")
    (tmp_path / f".d.commopt-{dead}-abcdefgh.tmp").mkdir()  # not a file: left alone
    assert atomic.clean_temp_files(tmp_path) == [orphan]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, *users, f".d.commopt-{dead}-abcdefgh.tmp"])
    assert atomic.clean_temp_files(tmp_path / "missing") == []


def test_a_path_under_a_regular_file_names_that_file(tmp_path: Path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputError) as info:
        atomic.write_text(tmp_path / "afile" / "sub" / "o.json", "{}")
    assert str(info.value) == (f"{tmp_path / 'afile' / 'sub' / 'o.json'}: cannot write: "
                               f"{tmp_path / 'afile'} is not a directory")


def test_a_failure_while_writing_keeps_the_old_file_and_removes_the_temp(tmp_path: Path):
    final = tmp_path / "o.json"
    final.write_text("old")
    with pytest.raises(OutputError, match="o.json: cannot write: Not a directory"):
        with atomic.atomic_path(final) as tmp:
            tmp.write_text("half")
            (tmp / "x").write_text("a real OS error: the temp file is not a directory")
    assert final.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["o.json"]


def test_a_target_that_is_a_directory_is_an_output_error(tmp_path: Path):
    (tmp_path / "o.json").mkdir()
    with pytest.raises(OutputError, match="o.json: cannot write: Is a directory"):
        atomic.write_text(tmp_path / "o.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["o.json"]
