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


def _unnamed(tmp_path: Path, data: bytes):
    from commopt.forked import _unnamed_file

    fh = _unnamed_file(tmp_path)
    fh.write(data)
    fh.seek(0)
    return fh


def test_an_unnamed_file_is_given_its_name_without_a_copy_where_the_system_allows(tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "trace.json").write_bytes(b"old")
    source = _unnamed(out, b"rendered bytes")
    atomic.write_from(out / "trace.json", source, mode=0o755)
    assert (out / "trace.json").read_bytes() == b"rendered bytes"
    assert (out / "trace.json").stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in out.iterdir()) == ["trace.json"]  # no temporary left
    if hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd"):
        assert (out / "trace.json").stat().st_ino == os.fstat(source.fileno()).st_ino
    source.close()
    assert (out / "trace.json").read_bytes() == b"rendered bytes"  # closing it keeps the file


@pytest.mark.parametrize("kind", ["named", "tempfile", "moved"])
def test_any_other_source_is_copied(tmp_path: Path, kind: str):
    """A named file is never linked (changing it later would change the output), nor a
    ``tempfile`` one or one read from elsewhere than its start: their bytes are copied."""
    import tempfile

    if kind == "named":
        (tmp_path / "src").write_bytes(b"xyrendered")
        source = open(tmp_path / "src", "rb")
    elif kind == "tempfile":
        source = tempfile.TemporaryFile(dir=tmp_path)
        source.write(b"xyrendered")
    else:
        source = _unnamed(tmp_path, b"xyrendered")
    source.seek(2 if kind == "moved" else 0)
    atomic.write_from(tmp_path / "out.json", source)
    expected = b"rendered" if kind == "moved" else b"xyrendered"
    assert (tmp_path / "out.json").read_bytes() == expected
    assert (tmp_path / "out.json").stat().st_ino != os.fstat(source.fileno()).st_ino
    source.close()
