"""Crash-safe output: every file commopt writes goes to a temporary file that is renamed into
place, so a reader (or a killed run) never sees a half-written file under the final name.

A write the operating system refuses (permission denied, a path under a regular file, disk
full, file too large, read-only file system) is an :class:`~commopt.errors.OutputError`
naming the path and the reason: one line and exit code 2 on the command line, never a
traceback. The temporary file has a name only commopt gives
(``.<name>.commopt-<pid>-<random>.tmp``), so the ones a killed run left behind can be told
from the user's own files and removed (:func:`clean_temp_files`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from commopt.errors import OutputError

#: Fault injection for crash-safety tests: ``<point>:<file name>`` kills the process with
#: SIGKILL at that point while writing that file. Points: ``mid-write`` (half the bytes in
#: the temporary file), ``before-rename``, ``after-rename``; :mod:`commopt.outputs` adds
#: ``after-remove`` (an old file of the output set was just removed).
FAULT_ENV = "COMMOPT_FAULT_INJECT"

#: Marks a temporary file as commopt's: ``.<final name>.commopt-<pid>-<random>.tmp``.
TEMP_MARK = ".commopt-"
TEMP_SUFFIX = ".tmp"
_TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.commopt-(?P<pid>\d+)-[A-Za-z0-9_]+\.tmp$", re.S)


def fault_point(point: str, name: str) -> None:
    """Die with SIGKILL here when :data:`FAULT_ENV` is ``<point>:<name>`` (crash tests only)."""
    spec = os.environ.get(FAULT_ENV)
    if spec and spec == f"{point}:{name}":
        os.kill(os.getpid(), signal.SIGKILL)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def output_error(exc: OSError, path: str | os.PathLike[str]) -> OutputError:
    """The one-line user error for an OS error while writing ``path``.

    A path under a regular file (``-o /etc/passwd/x``) names that file; anything else gives
    the operating system's reason (e.g. 'No space left on device').
    """
    p = Path(path)
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        for parent in p.parents:
            if parent.exists() or parent.is_symlink():
                if not parent.is_dir():
                    return OutputError(f"cannot write: {parent} is not a directory", file=str(p))
                break
    reason = exc.strerror or errno.errorcode.get(exc.errno or 0, "") or str(exc)
    return OutputError(f"cannot write: {reason}", file=str(p))


@contextlib.contextmanager
def write_errors(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an :class:`OSError` raised in the block into an :class:`OutputError` on ``path``.

    For output steps outside :func:`atomic_path` (creating the output directory, removing an
    old file of an output set), so every write failure reads the same.
    """
    try:
        yield
    except OutputError:
        raise
    except OSError as exc:
        raise output_error(exc, path) from exc


def _fsync_dir(directory: Path) -> None:
    """Persist a rename in ``directory`` (best effort: some file systems refuse)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it onto ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was; an
    :class:`OSError` (also one raised while the caller writes the temporary file, e.g. disk
    full) becomes an :class:`~commopt.errors.OutputError` naming ``path`` and the reason.
    """
    final = Path(path)
    with write_errors(final):
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}{TEMP_MARK}{os.getpid()}-",
                                        suffix=TEMP_SUFFIX, dir=final.parent)
        os.close(fd)
    tmp = Path(tmp_name)
    try:
        with write_errors(final):
            os.chmod(tmp, 0o666 & ~_umask())
        try:
            yield tmp
        except OSError as exc:
            raise output_error(exc, final) from exc
        with write_errors(final):
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            fault_point("before-rename", final.name)
            os.replace(tmp, final)
        _fsync_dir(final.parent)
        fault_point("after-rename", final.name)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_bytes(path, text.encode("utf-8"))


def write_chunks(path: str | os.PathLike[str], chunks: Iterable[str]) -> None:
    """Write the text ``chunks`` (UTF-8) to ``path`` atomically, one after another: a large
    output is never held as one string. The ``mid-write`` fault point fires after the
    first chunk."""
    name = Path(path).name
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for k, chunk in enumerate(chunks):
            fh.write(chunk)
            if k == 0:
                fh.flush()
                fault_point("mid-write", name)


def write_from(path: str | os.PathLike[str], source: IO[bytes], *, mode: int | None = None) -> None:
    """Put the bytes of the open binary file ``source``, from its position to its end, at
    ``path`` atomically; ``mode``: the file's permission bits (default: the umask's). An
    unnamed file read from its start (:func:`commopt.forked.RenderJob`'s) is given the
    temporary name itself where the system allows it (Linux: a file opened with
    ``O_TMPFILE``): no byte is copied. Otherwise the bytes are copied a piece at a time. The
    ``mid-write`` fault point fires once the temporary file holds bytes."""
    name = Path(path).name
    with atomic_path(path) as tmp:
        if _linked_over(source, tmp):
            fault_point("mid-write", name)
        else:
            with open(tmp, "wb") as out:
                first = True
                while piece := source.read(_COPY_PIECE):
                    out.write(piece)
                    if first:
                        out.flush()
                        fault_point("mid-write", name)
                        first = False
        if mode is not None:
            tmp.chmod(mode)


def _linked_over(source: IO[bytes], tmp: Path) -> bool:
    """Whether the unnamed file ``source`` (at offset 0, no name: its link count is 0) now
    replaces the temporary file ``tmp``, through a link made beside it (a name of
    :func:`atomic_path`'s form, which mkstemp's lower-case names never take). False, with
    nothing changed, where it cannot be linked: another system, no ``/proc``, a file
    ``tempfile`` opened (exclusive: never linkable), another file system."""
    if not hasattr(os, "link") or not os.path.isdir("/proc/self/fd"):
        return False
    try:
        source.flush()
        if source.tell() != 0 or os.fstat(source.fileno()).st_nlink != 0:
            return False
    except (OSError, ValueError, AttributeError):
        return False
    beside = tmp.with_name(tmp.name[:-len(TEMP_SUFFIX)] + "L" + TEMP_SUFFIX)
    root = os.open("/", os.O_RDONLY)
    try:  # a directory fd makes it linkat(AT_SYMLINK_FOLLOW): the /proc link is followed
        os.link(f"/proc/self/fd/{source.fileno()}", beside, src_dir_fd=root, follow_symlinks=True)
    except OSError:
        return False
    finally:
        os.close(root)
    try:
        os.chmod(beside, 0o666 & ~_umask())
        os.replace(beside, tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            beside.unlink()
        raise
    return True


#: Bytes copied at a time by :func:`write_from`.
_COPY_PIECE = 1 << 22


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        if os.environ.get(FAULT_ENV) == f"mid-write:{Path(path).name}":
            with open(tmp, "wb") as fh:
                fh.write(data[: len(data) // 2])
                fh.flush()
            fault_point("mid-write", Path(path).name)
        tmp.write_bytes(data)


def is_temp_file(name: str) -> bool:
    """Whether ``name`` is a temporary file name :func:`atomic_path` gives."""
    return _TEMP_NAME.match(name) is not None


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # this process is not writing there now (see clean_temp_files)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def clean_temp_files(directory: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files a killed commopt left in ``directory``; returns them.

    Only names :func:`atomic_path` gives are touched, and only those of a process that is no
    longer running (a live commopt may be writing them): never a user's file. Call it when
    this process is not itself writing into ``directory``.
    """
    d = Path(directory)
    removed: list[Path] = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in sorted(os.scandir(d), key=lambda e: e.name):
            m = _TEMP_NAME.match(entry.name)
            if m is None or not entry.is_file(follow_symlinks=False) or _pid_alive(int(m["pid"])):
                continue
            with write_errors(entry.path), contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed
