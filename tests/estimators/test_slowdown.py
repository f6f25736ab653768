"""Compute slowdown beside communication, measured on traces."""

from __future__ import annotations

import pytest

from commopt.estimators.kineto import parse_trace
from commopt.estimators.slowdown import compute_slowdown
from tests.estimators.traces import SHARED_TRACES, parse_all, rank_trace

_NCCL = [("allreduce", 1 << 20, 1000, 2000)]


def test_the_same_kernel_beside_communication_against_alone(tmp_path):
    compute = [("gemm", 0, 10.0), ("gemm", 100, 12.0), ("gemm", 200, 10.0),  # alone: median 10
               ("gemm", 1100, 15.0), ("gemm", 1300, 15.0),  # inside the NCCL kernel: 1.5x
               ("gemm", 1995, 20.0),  # a quarter inside: neither, not used
               ("relu", 1500, 3.0)]  # only beside: nothing to compare it with
    (trace,) = parse_all(tmp_path, [rank_trace(0, 2, _NCCL, compute=compute)])
    m = compute_slowdown([trace])
    assert m.factor == pytest.approx(1.5)
    assert (m.kernel_kinds, m.overlapped_kernels, m.alone_kernels) == (1, 2, 3)


def test_kinds_are_weighted_by_their_time_beside_communication(tmp_path):
    compute = [("a", 0, 10.0), ("a", 1100, 20.0),  # 2x, 20 us beside
               ("b", 100, 10.0), ("b", 1200, 10.0), ("b", 1300, 10.0), ("b", 1400, 10.0), ("b", 1500, 10.0),
               ("b", 1600, 10.0)]  # 1x, 60 us beside
    (trace,) = parse_all(tmp_path, [rank_trace(0, 2, _NCCL, compute=compute)])
    assert compute_slowdown([trace]).factor == pytest.approx(2 ** (20 / 70))


def test_nothing_to_compare_is_none(tmp_path):
    (trace,) = parse_all(tmp_path, [rank_trace(0, 2, _NCCL, compute=[("gemm", 0, 10.0)])])
    assert compute_slowdown([trace]) is None


@pytest.mark.skipif(not (SHARED_TRACES / "hta" / "nccl_data.json.gz").is_file(), reason="no real traces (set COMMOPT_TRACES)")
def test_real_trace_compute_runs_slower_beside_nccl():
    m = compute_slowdown([parse_trace(SHARED_TRACES / "hta" / "nccl_data.json.gz")])
    assert 1.05 < m.factor < 1.25 and m.kernel_kinds >= 20
