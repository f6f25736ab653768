"""Measured exposed communication from profiler traces: span arithmetic, GPU and gloo traces,
step counting."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commopt.estimators.kineto import TraceError
from commopt.measured import measure, measure_trace, merged, overlap, total

spans = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 100)).map(lambda t: (float(t[0]), float(t[0] + t[1]))),
                 max_size=20)


@given(comm=spans, compute=spans)
def test_exposed_is_the_comm_time_no_compute_covers(comm, compute):
    c, k = merged(comm), merged(compute)
    exposed = total(c) - overlap(c, k)
    covered = sum(1 for t in range(0, 1100) if any(s <= t + 0.5 < e for s, e in c)
                  and not any(s <= t + 0.5 < e for s, e in k))  # unit cells, checked one by one
    assert exposed == pytest.approx(covered)
    assert 0 <= exposed <= total(c)


def _write(tmp_path, name, events, **top):
    p = tmp_path / name
    p.write_text(json.dumps({"traceEvents": events, **top}))
    return p


def test_gpu_trace_nccl_kernels_against_compute_kernels_per_step(tmp_path):
    k = lambda name, ts, dur: {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur}  # noqa: E731
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 100, "dur": 100},
        k("ncclDevKernel_AllGather_RING_LL", 10, 30), k("sm90_gemm", 0, 20), k("elementwise", 35, 10),
        k("ncclDevKernel_ReduceScatter", 120, 20), k("sm90_gemm", 110, 15),
    ]
    r = measure_trace(_write(tmp_path, "t.json", events, distributedInfo={"rank": 3}))
    # comm 30 + 20 = 50; covered [10,20), [35,40), [120,125): 20; exposed 30; 2 steps (markers)
    assert (r.rank, r.device, r.steps, r.collectives) == (3, "gpu", 2, 2)
    assert (r.comm_us, r.compute_us, r.exposed_comm_us) == (25.0, 22.5, 15.0)


def test_gloo_trace_counts_worker_spans_against_the_issuing_threads_aten_ops(tmp_path):
    op = lambda name, tid, ts, dur, cat="cpu_op": {"ph": "X", "cat": cat, "name": name, "tid": tid,  # noqa: E731
                                                   "ts": ts, "dur": dur}
    events = [
        op("aten::mm", 1, 0, 10), op("c10d::allreduce_", 1, 10, 2), op("aten::add", 1, 12, 8),
        op("aten::mm", 1, 14, 2),  # nested in aten::add: counted once
        op("c10d::wait_tensor_wait", 1, 20, 30),  # blocked, not compute
        op("gloo:all_reduce", 7, 11, 30, "user_annotation"),
        op("aten::copy_", 7, 12, 5),  # gloo's own thread: not compute of the step
    ]
    r = measure_trace(_write(tmp_path, "t.json", events), collectives_per_step=1)
    assert (r.device, r.steps, r.steps_from) == ("cpu", 1, "1 collective spans / 1 per step")
    assert (r.comm_us, r.compute_us, r.exposed_comm_us) == (30.0, 18.0, 22.0)  # [12,20) of [11,41) covered


def test_a_directory_of_rank_traces_is_ordered_by_rank_and_bad_files_are_one_line(tmp_path):
    for rank in (1, 0):
        _write(tmp_path, f"trace_rank{rank}.json", [], distributedInfo={"rank": rank})
    assert [r.rank for r in measure([tmp_path])] == [0, 1]
    (tmp_path / "trace_rank2.json").write_text("not json")
    with pytest.raises(TraceError, match="not a Kineto trace"):
        measure([tmp_path])
    with pytest.raises(TraceError, match="no such trace file"):
        measure([tmp_path / "missing"])
