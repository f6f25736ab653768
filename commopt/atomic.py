"""Crash-safe output: every file commopt writes goes to a temporary file that is renamed into
place, so a reader (or a killed run) never sees a half-written file under the final name."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: Fault injection for crash-safety tests: ``<point>:<file name>`` kills the process with
#: SIGKILL at that point while writing that file. Points: ``mid-write`` (half the bytes in
#: the temporary file), ``before-rename``, ``after-rename``.
FAULT_ENV = "COMMOPT_FAULT_INJECT"


def _maybe_die(point: str, name: str) -> None:
    spec = os.environ.get(FAULT_ENV)
    if spec and spec == f"{point}:{name}":
        os.kill(os.getpid(), signal.SIGKILL)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it onto ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        _maybe_die("before-rename", final.name)
        os.replace(tmp, final)
        _maybe_die("after-rename", final.name)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        if os.environ.get(FAULT_ENV) == f"mid-write:{Path(path).name}":
            with open(tmp, "wb") as fh:
                fh.write(data[: len(data) // 2])
                fh.flush()
            _maybe_die("mid-write", Path(path).name)
        tmp.write_bytes(data)
