"""Work on the machine's other core: a forked child process renders an output file into an
anonymous temporary file (and may compute a small result beside it) while this process goes
on.

Some work depends on nothing the parent is still computing: the lower bounds and the input
order's robustness makespans and buffer packing (while the footprint budget and the passes
are computed), the runner's source (once the buffers are planned, about as long as this
process's report, timelines and trace). The child shares the parent's memory copy-on-write
and only reads it; it writes nothing under a final name, prints nothing and reports back
small messages: its result (or each value in turn, ``in_turn``), or the exception it raised.
After each fork this process copies every page it then writes (CPython writes reference
counts into every object it reads), so related work shares one child. The parent copies the
rendered bytes to their final place with the rest of the output set, in the same order and
with the same crash safety as if it had rendered them itself.

It is asked for with ``jobs`` >= 2 (``commopt optimize`` asks for it by default where this
process may use two cores or more, :func:`default_jobs`): a child copies every memory page
holding an object it reads (CPython writes reference counts into them), so at 100k nodes the
command uses more memory for less wall time (BENCHMARKS.md). Where ``os.fork``
does not exist, or on a graph too small to gain from it, the work runs in this process when
started, so the files are the same either way.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

#: Below this many nodes an output is rendered in this process: forking (tens of
#: milliseconds for a large address space) would cost more than it saves.
FORK_MIN_NODES = 20_000

#: Below this many nodes the pipeline's second run (each group's order kept) stays in this
#: process: a run of the passes on a real graph costs about a millisecond a node (the 2,196-node
#: Llama TP archive: 1.4 and 1.9 s), far more than the fork.
PIPELINE_FORK_MIN_NODES = 2_000

#: The most processes the output set keeps busy at once: this one and one rendering child.
MAX_USEFUL_JOBS = 2


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system tells it (a
    container or ``taskset`` limits it), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call on this system (e.g. macOS)
        return os.cpu_count() or 1


def default_jobs() -> int:
    """The ``jobs`` a command uses when not told: one per core it may use, at most
    :data:`MAX_USEFUL_JOBS` (more would wait), so one core means no forked child."""
    return max(1, min(MAX_USEFUL_JOBS, available_cores()))


def worth_forking(nodes: int, jobs: int, min_nodes: int | None = None) -> bool:
    """Whether to work beside this process: asked for (``jobs`` >= 2 processes), possible,
    and paying off for a graph of ``nodes`` nodes: from :data:`FORK_MIN_NODES`, or from
    ``min_nodes`` for work that pays off sooner (never later than :data:`FORK_MIN_NODES`)."""
    least = FORK_MIN_NODES if min_nodes is None else min(min_nodes, FORK_MIN_NODES)
    return jobs >= 2 and hasattr(os, "fork") and nodes >= least


def _scratch_dir(destination: Path) -> Path:
    """The nearest existing directory at or above ``destination``: the rendered bytes are
    kept on the disk they go to (not in a memory-backed /tmp, where they would count as RAM)."""
    for candidate in (destination, *destination.parents):
        if candidate.is_dir():
            return candidate
    return Path(tempfile.gettempdir())


def _unnamed_file(directory: Path) -> IO[bytes]:
    """A file without a name in ``directory``, gone when closed. Where the system has
    ``O_TMPFILE`` it is opened without ``O_EXCL`` (``tempfile``'s are exclusive), so
    :func:`commopt.atomic.write_from` can give it its final name instead of copying it."""
    flag = getattr(os, "O_TMPFILE", 0)
    if flag:
        try:
            fd = os.open(directory, flag | os.O_RDWR | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError:  # a file system without it
            pass
        else:
            return open(fd, "w+b")
    return tempfile.TemporaryFile(dir=directory)


class ChildDied(RuntimeError):
    """A forked child ended without reporting (killed by a signal, out of memory): what it
    was computing can be computed again in this process."""


class RenderJob:
    """Files (one unless ``files`` says more) rendered by ``render(fh, ...)``, one open binary
    file per rendered file, which may also return a small picklable value: in a forked child,
    or at once when ``fork`` is False. :meth:`file` returns an open file holding its bytes (at
    offset 0) and :meth:`value` what ``render`` returned; both raise what ``render`` raised.
    :meth:`cancel` stops a child that is still running.

    ``in_turn``: ``render`` is a generator and its values are reported one by one as it
    yields them (:meth:`value` ``(k)``: the k-th, as soon as the child has it), so a child can
    hand over a first result and go on with other work."""

    def __init__(self, render: Callable[..., Any], destination: str | os.PathLike[str], *,
                 fork: bool, files: int = 1, in_turn: bool = False) -> None:
        scratch = _scratch_dir(Path(destination))
        self._files: list[IO[bytes]] = [_unnamed_file(scratch) for _ in range(files)]
        self._pid: int | None = None
        self._pipe: IO[bytes] | None = None
        self._outcomes: list[tuple[bool, Any]] = []  # (True, value) or (False, exception), in turn
        self._ended = "no more values"  # how a child ended without reporting more
        forked = _fork_with_pipe() if fork else None
        if forked is None:
            self._outcomes = list(_outcomes(render, self._files, in_turn))
            return
        pid, read_end, write_end = forked
        if pid == 0:  # the child: render, report, and leave without any of the parent's teardown
            os.close(read_end)
            _run_child(render, self._files, write_end, in_turn)
        os.close(write_end)
        self._pid, self._pipe = pid, open(read_end, "rb", closefd=True)

    def value(self, index: int = 0) -> Any:
        """What ``render`` returned (waiting for the child), or with ``in_turn`` the value it
        yielded ``index``-th; raises its exception (or :class:`ChildDied`)."""
        while len(self._outcomes) <= index and self._pipe is not None:
            self._read_outcome()
        if len(self._outcomes) > index:
            ok, payload = self._outcomes[index]
        elif self._outcomes and not self._outcomes[-1][0]:  # the error that ended the work
            ok, payload = self._outcomes[-1]
        else:
            raise ChildDied(f"the process rendering an output ended without a result ({self._ended})")
        if not ok:
            raise payload
        return payload

    def file(self, index: int = 0) -> IO[bytes]:
        """Rendered file ``index`` (the order ``render`` was given them), positioned at its
        start (waiting for the child); raises the renderer's exception."""
        self.value()
        fh = self._files[index]
        fh.seek(0)
        return fh

    def _read_outcome(self) -> None:
        """Wait for the child's next message and keep it; at the end of its messages (it
        ended, or was killed before it could report: out of memory, a signal) reap it."""
        assert self._pipe is not None and self._pid is not None
        header = self._pipe.read(_HEADER.size)
        message = self._pipe.read(_HEADER.unpack(header)[0]) if len(header) == _HEADER.size else b""
        if message:
            outcome = pickle.loads(message)
            self._outcomes.append(outcome)
            if outcome[0]:
                return
        self._pipe.close()  # an error is the child's last message
        self._pipe = None
        _, status = os.waitpid(self._pid, 0)
        self._pid = None
        self._ended = _status_text(status)

    def cancel(self) -> None:
        """Stop and reap a child still running (an error elsewhere ended the output set), and
        drop the temporary file."""
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, 0)
            self._pid = None
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None
        self.close()

    def close(self) -> None:
        """Drop the temporary files (their bytes vanish with them)."""
        for fh in self._files:
            fh.close()


def compute_beside(compute: Callable[[], Any], *, in_turn: bool = False) -> RenderJob:
    """A :class:`RenderJob` for work that writes no file: ``compute()``'s value in a forked
    child (:meth:`RenderJob.value`), or with ``in_turn`` each value the generator
    ``compute()`` yields, as soon as it is yielded (:meth:`RenderJob.value` ``(k)``)."""
    return RenderJob(compute, tempfile.gettempdir(), fork=True, files=0, in_turn=in_turn)


#: A message's length before its pickled ``(ok, value)``.
_HEADER = struct.Struct("<Q")


def _fork_with_pipe() -> tuple[int, int, int] | None:
    """``(os.fork(), read end, write end)`` of a pipe for the child's report; None when the
    system refuses a new process (at its process or memory limit): the file is then rendered
    in this process, which gives the same bytes."""
    read_end, write_end = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()  # nothing buffered is inherited twice
    try:
        return os.fork(), read_end, write_end
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None


def _outcomes(render: Callable[..., Any], files: list[IO[bytes]], in_turn: bool
              ) -> Iterator[tuple[bool, Any]]:
    """``(True, value)`` for what ``render(*files)`` returns (each value it yields, with
    ``in_turn``), the rendered files flushed; ``(False, exception)`` last where it raises."""
    try:
        for value in render(*files) if in_turn else [render(*files)]:
            for fh in files:
                fh.flush()
            yield True, value
    except BaseException as exc:  # raised again when asked for, as a child's would be
        yield False, exc


def _run_child(render: Callable[..., Any], files: list[IO[bytes]], pipe: int, in_turn: bool) -> None:
    """The child's whole life: ``render(*files)`` and one pickled ``(ok, value or
    exception)`` message per outcome (:func:`_outcomes`), each sent as it comes."""
    status = 0
    try:
        with open(pipe, "wb", closefd=True) as out:
            for ok, payload in _outcomes(render, files, in_turn):
                try:
                    message = pickle.dumps((ok, payload))
                except Exception as exc:  # a value or an exception that cannot be pickled
                    message, ok = _pickled_error(payload if not ok else exc), False
                out.write(_HEADER.pack(len(message)) + message)
                out.flush()
                if not ok:
                    break
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _pickled_error(exc: BaseException) -> bytes:
    """``(False, exc)`` pickled; an exception that cannot be pickled becomes a RuntimeError
    with its type and message."""
    try:
        return pickle.dumps((False, exc))
    except Exception:
        return pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))


def _status_text(status: int) -> str:
    """A wait status in words."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(sig).name}"
        return f"killed by signal {sig}"
    return f"exit status {os.WEXITSTATUS(status)}"
