"""Reading Kineto traces: both formats, hand-written and real."""

from __future__ import annotations

import collections

import pytest

from commopt.estimators.kineto import TraceError, collective_type, parse_trace, trace_files
from tests.estimators.traces import SHARED_TRACES, new_format_trace, old_format_trace, write


def test_new_format_takes_the_collective_from_the_kernel(tmp_path):
    tr = parse_trace(write(tmp_path / "t.json.gz", new_format_trace(), gz=True))
    assert tr.device == "Test GPU" and tr.steps == [1, 2]
    assert [(c.type, c.group_size, c.size_bytes, c.duration_us, c.step, c.info_from) for c in tr.collectives] == [
        ("all_reduce", 2, 4096, 100, 1, "kernel args"), ("all_reduce", 2, 8192, 200, 2, "kernel args")]
    assert [(c.op, c.input_shapes, c.dtypes, c.duration_us, c.step) for c in tr.compute] == [
        ("aten.mm", ((64, 32), (32, 16)), ("float32", "float32"), 41, 1),
        ("aten.mm", ((64, 32), (32, 16)), ("float32", "float32"), 42, 2)]
    assert tr.matched_kernel_us == tr.compute_kernel_us == 83


def test_old_format_takes_the_collective_from_the_cpu_side(tmp_path):
    tr = parse_trace(write(tmp_path / "old.json", old_format_trace()))
    a2a, ag = tr.collectives
    # SendRecv kernel, but the annotation says all_to_all: 8*256 bf16 over the world (8)
    assert (a2a.type, a2a.group_size, a2a.size_bytes, a2a.dtype) == ("all_to_all", 8, 8 * 256 * 2, "bfloat16")
    # _allgather_base_(out 4096, in 1024): full message and group size 4 from the ratio
    assert (ag.type, ag.group_size, ag.size_bytes) == ("all_gather", 4, 4096 * 4)
    (relu_k,) = tr.compute
    assert relu_k.op == "aten.clamp_min" and relu_k.input_shapes == ((128,),)  # innermost op
    assert tr.compute_kernel_us == 12 and tr.matched_kernel_us == 9  # the orphan kernel has no op


def test_not_a_kineto_trace(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(TraceError, match="no 'traceEvents'"):
        parse_trace(bad)
    bad.write_text("{nope")
    with pytest.raises(TraceError, match="JSON expected"):
        parse_trace(bad)
    with pytest.raises(TraceError, match="no such trace file"):
        parse_trace(tmp_path / "missing.json")


def test_a_trace_without_collectives_says_so(tmp_path):
    data = new_format_trace()
    data["traceEvents"] = [e for e in data["traceEvents"] if "nccl" not in e["name"]]
    tr = parse_trace(write(tmp_path / "t.json", data))
    assert tr.collectives == []
    assert any("no NCCL kernels" in n and "analytical" in n for n in tr.notes)


def test_collective_names_normalize():
    assert collective_type("c10d::_allgather_base_") == "all_gather"
    assert collective_type("nccl:all_to_all") == "all_to_all"
    assert collective_type("allreduce") == "all_reduce"
    assert collective_type("_reduce_scatter_base") == "reduce_scatter"
    assert collective_type("aten::mm") is None


needs_traces = pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="no real traces (set COMMOPT_TRACES)")


@needs_traces
def test_real_trace_new_format():
    tr = parse_trace(SHARED_TRACES / "hta" / "nccl_data.json.gz")
    counts = collections.Counter((c.type, c.group_size, c.info_from) for c in tr.collectives)
    assert counts == {("all_reduce", 2, "kernel args"): 15, ("broadcast", 2, "kernel args"): 6}
    assert tr.steps == [4, 5, 6]
    assert tr.matched_kernel_us == pytest.approx(tr.compute_kernel_us)


@needs_traces
def test_real_trace_old_format_sendrecv_is_all_to_all():
    tr = parse_trace(SHARED_TRACES / "param" / "dlrm_kineto" / "worker0_step_12.1694128201545.pt.trace.json.gz")
    counts = collections.Counter(c.type for c in tr.collectives)
    assert counts == {"all_to_all": 5, "all_reduce": 3}
    assert all(c.group_size == 8 and c.info_from == "cpu annotation" for c in tr.collectives)
    assert any(c.input_shapes for c in tr.compute)


def test_trace_files_expands_directories_sorted_and_keeps_files(tmp_path):
    ranks = tmp_path / "profile"
    ranks.mkdir()
    for name in ("trace_rank1.json", "trace_rank0.json.gz", "notes.txt", "trace_rank2.json.tmp"):
        (ranks / name).write_text("{}")
    (ranks / "sub.json").mkdir()  # a directory named like a trace is not one
    single = write(tmp_path / "extra.json", new_format_trace())
    assert trace_files([ranks, single]) == [ranks / "trace_rank0.json.gz", ranks / "trace_rank1.json", single]
    # a file named twice counts once (its samples would weigh double)
    assert trace_files([single, ranks, ranks / "trace_rank1.json"]) == [
        single, ranks / "trace_rank0.json.gz", ranks / "trace_rank1.json"]


def test_trace_files_refuses_an_empty_directory_or_a_missing_path(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match=r"no trace files \(\*\.json, \*\.json\.gz\) in the directory"):
        trace_files([tmp_path / "empty"])
    with pytest.raises(TraceError, match="no such trace file or directory"):
        trace_files([tmp_path / "missing"])
