"""Rendering an output in a forked child (commopt.forked): the bytes, and every way the
child can fail, come back to the parent as if it had rendered the file itself."""

import os
import signal

import pytest

from commopt import forked
from commopt.errors import OutputError
from commopt.forked import RenderJob, worth_forking

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _hello(fh):
    fh.write(b"hello ")
    fh.write(b"world\n" * 3)
    return {"lines": 3}


@pytest.mark.parametrize("fork", [True, False])
def test_the_rendered_bytes_and_the_value_come_back(tmp_path, fork):
    job = RenderJob(_hello, tmp_path, fork=fork)
    assert job.value() == {"lines": 3}
    assert job.file().read() == b"hello " + b"world\n" * 3
    assert job.file().read() == b"hello " + b"world\n" * 3  # again from the start
    job.close()
    assert os.listdir(tmp_path) == []  # an anonymous file: nothing left behind


def _two(first, second):
    first.write(b"first")
    second.write(b"second")
    return 2


@pytest.mark.parametrize("fork", [True, False])
def test_a_job_renders_several_files_each_read_back_by_its_index(tmp_path, fork):
    job = RenderJob(_two, tmp_path, fork=fork, files=2)
    assert job.value() == 2
    assert job.file(1).read() == b"second" and job.file(0).read() == b"first"
    job.close()
    assert os.listdir(tmp_path) == []


def _fails(fh):
    raise OutputError("cannot write: disk full", file="x/trace.json", field="f")


@pytest.mark.parametrize("fork", [True, False])
def test_the_renderers_error_is_raised_by_result_with_its_fields(tmp_path, fork):
    job = RenderJob(_fails, tmp_path, fork=fork)
    with pytest.raises(OutputError) as info:
        job.file()
    assert str(info.value) == "x/trace.json, field f: cannot write: disk full"


class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("no")


def _fails_oddly(fh):
    raise _Unpicklable("odd failure")


def test_an_exception_that_cannot_travel_is_named_in_a_runtime_error(tmp_path):
    job = RenderJob(_fails_oddly, tmp_path, fork=True)
    with pytest.raises(RuntimeError, match="_Unpicklable: odd failure"):
        job.file()


def _dies(fh):
    fh.write(b"half")
    fh.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_child_killed_before_it_reports_is_an_error_not_a_partial_file(tmp_path):
    job = RenderJob(_dies, tmp_path, fork=True)
    with pytest.raises(RuntimeError, match="ended without a result .killed by SIGKILL"):
        job.file()


def test_cancel_stops_and_reaps_a_child_still_rendering(tmp_path):
    read_end, write_end = os.pipe()

    def waits_forever(fh):
        os.close(write_end)
        os.read(read_end, 1)  # never written: blocks until killed
        fh.write(b"never")

    job = RenderJob(waits_forever, tmp_path, fork=True)
    pid = job._pid
    job.cancel()
    os.close(read_end)
    os.close(write_end)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, 0)  # already reaped
    assert job._pid is None


def test_only_asked_for_and_only_on_large_graphs():
    assert not worth_forking(10**6, jobs=1)
    assert not worth_forking(1_000, jobs=2)
    assert worth_forking(10**6, jobs=2)
    assert worth_forking(2_000, 2, min_nodes=2_000) and not worth_forking(1_999, 2, min_nodes=2_000)
    assert worth_forking(10**6, 2, min_nodes=10**7)  # never later than FORK_MIN_NODES
    assert not worth_forking(10**6, 1, min_nodes=0)


@pytest.mark.parametrize(("cores", "jobs"), [(1, 1), (2, 2), (64, 2)])
def test_default_jobs_is_one_per_core_up_to_two(monkeypatch, cores, jobs):
    monkeypatch.setattr(forked, "available_cores", lambda: cores)
    assert forked.default_jobs() == jobs


def test_available_cores_follows_the_affinity():
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this system")
    assert forked.available_cores() == len(os.sched_getaffinity(0))


def test_a_refused_fork_renders_in_process(tmp_path, monkeypatch):
    def refused():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refused)
    job = RenderJob(_hello, tmp_path, fork=True)
    assert job._pid is None and job.value() == {"lines": 3}
    assert job.file().read().startswith(b"hello world")


def test_work_without_a_file_returns_its_value_and_a_death_is_told_apart():
    """compute_beside: the child's value comes back; a child killed before it reports raises
    ChildDied (a RuntimeError), which callers that can redo the work catch alone."""
    assert forked.compute_beside(lambda: sum(range(10))).value() == 45
    with pytest.raises(forked.ChildDied, match="killed by SIGKILL"):
        forked.compute_beside(lambda: os.kill(os.getpid(), signal.SIGKILL)).value()
    with pytest.raises(ValueError, match="its own error"):  # not a death: raised as it is
        forked.compute_beside(lambda: (_ for _ in ()).throw(ValueError("its own error"))).value()


def test_values_in_turn_come_back_as_the_child_yields_them():
    """in_turn: the parent has the child's first value while the child still works (the
    child's second step waits for a byte the parent writes only after reading the first)."""
    import select

    read_end, write_end = os.pipe()

    def work():
        yield "first"
        yield bool(select.select([read_end], [], [], 60)[0])  # True: the parent read "first" first
        yield "third"

    job = forked.compute_beside(work, in_turn=True)
    assert job.value(0) == "first"
    os.write(write_end, b"x")
    assert job.value(2) == "third" and job.value(1) is True and job.value(0) == "first"
    with pytest.raises(forked.ChildDied, match="exit status 0"):  # no fourth: the child ended
        job.value(3)
    assert job._pid is None  # reaped
    os.close(read_end)
    os.close(write_end)


def _first_then(ending):
    def work():
        yield 1
        ending()
        yield 2
    return work


def _fail():
    raise ValueError("second step failed")


@pytest.mark.parametrize("fork", [True, False])
def test_an_error_in_turn_is_raised_for_its_value_and_the_later_ones(tmp_path, fork):
    job = RenderJob(_first_then(_fail), tmp_path, fork=fork, files=0, in_turn=True)
    assert job.value(0) == 1
    for index in (1, 2):
        with pytest.raises(ValueError, match="second step failed"):
            job.value(index)


def test_a_child_killed_in_turn_keeps_the_values_it_sent():
    job = forked.compute_beside(_first_then(lambda: os.kill(os.getpid(), signal.SIGKILL)), in_turn=True)
    assert job.value(0) == 1
    with pytest.raises(forked.ChildDied, match="killed by SIGKILL"):
        job.value(1)
