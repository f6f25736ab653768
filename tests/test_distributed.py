"""The gloo test harness itself: results by rank, real collectives, failures reported."""

from __future__ import annotations

import pytest

from tests.distributed import GLOO_WORKER_THREADS, gloo_worker_threads, run_gloo


def _all_reduce(rank: int, world_size: int, scale: float):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    t = torch.full((3,), float(rank + 1)) * scale
    dist.all_reduce(t)
    mesh = init_device_mesh("cpu", (world_size,), mesh_dim_names=("dp",))
    groups = [None, dist.new_group([0, 1]), mesh.get_group("dp")]
    return t, [gloo_worker_threads(g) for g in groups]


def _fail_on_rank_one(rank: int, world_size: int):
    if rank == 1:
        raise ValueError("boom on purpose")
    return rank


@pytest.mark.slow
def test_run_gloo_returns_each_ranks_result_after_a_real_all_reduce():
    import torch

    results = run_gloo(_all_reduce, 2, 2.0)
    assert len(results) == 2
    for t, threads in results:
        assert torch.equal(t, torch.full((3,), 6.0))  # (1 + 2) * 2
        # the world, a new group and a mesh dimension's group: one gloo worker thread each
        assert threads == [GLOO_WORKER_THREADS] * 3


@pytest.mark.slow
def test_run_gloo_reraises_a_ranks_exception_with_its_traceback():
    with pytest.raises(RuntimeError, match=r"rank 1 ---[\s\S]*ValueError: boom on purpose"):
        run_gloo(_fail_on_rank_one, 2, timeout_s=60)


def _abort_on_rank_one(rank: int, world_size: int):
    import os

    if rank == 1:
        os.abort()  # what glibc does on a detected heap corruption
    return rank


@pytest.mark.slow
def test_run_gloo_names_a_rank_killed_by_a_native_crash():
    # Issue 13: a heap-corruption abort in one rank surfaced only as "Connection reset by
    # peer" on the others; the dead rank and its signal must be named, without waiting
    # out the timeout.
    import time

    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"rank 1 --- died with SIGABRT"):
        run_gloo(_abort_on_rank_one, 2, timeout_s=120)
    assert time.monotonic() - start < 60
