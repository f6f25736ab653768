"""Record our own Kineto trace on CPU (a gloo run of a sample graph) and calibrate from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from commopt.estimators import EstimatorOptions, resolve
from commopt.estimators.kineto import parse_trace
from commopt.estimators.profile import calibrate
from commopt.io import load_graph
from tests.distributed import read_groups_record, recreate_groups, run_exported, run_gloo

SAMPLE = Path(__file__).resolve().parents[2] / "sample_graphs" / "ws2" / "ddp"
STEPS = 3
#: Extra 256x256 matmuls rank 1 runs before each profiled step (about 100 ms here).
LATE_MATMULS = 100


def _profiled_steps(rank: int, world_size: int, archive: str, trace_path: str) -> bool:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    mapping = recreate_groups(read_groups_record(archive))
    ep = torch.export.load(archive)
    run_exported(ep, mapping)  # warm-up outside the trace
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for step in range(STEPS):
            with record_function(f"ProfilerStep#{step}"):
                run_exported(ep, mapping)
    if rank == 0:
        prof.export_chrome_trace(trace_path)
    return True


@pytest.mark.slow
def test_calibrate_from_a_cpu_gloo_trace(tmp_path):
    trace = tmp_path / "rank0.pt.trace.json"
    assert run_gloo(_profiled_steps, 2, str(SAMPLE.with_suffix(".pt2")), str(trace)) == [True, True]

    parsed = parse_trace(trace)
    assert parsed.device == "cpu" and parsed.steps == list(range(STEPS))
    assert {c.type for c in parsed.collectives} == {"all_reduce"}
    assert all(c.group_size == 2 for c in parsed.collectives)
    assert len(parsed.collectives) == 2 * STEPS  # two gradient buckets per step

    model = calibrate(parsed)
    (fit,) = model.collectives
    assert (fit.type, fit.group_size) == ("all_reduce", 2)
    assert model.compute, "aten ops with shapes"

    graph = load_graph(SAMPLE.with_suffix(".json"))
    chain = resolve(options=EstimatorOptions(estimator="profile", profile=str(trace)))
    durations = chain.durations(graph)
    colls = graph.collectives()
    # the buckets the graph all-reduces are exactly the sizes measured
    assert all(chain.sources[c] == "profile" for c in colls)
    for c in colls:
        size = graph.nodes[c].collective.bytes
        measured = [s.duration_us for s in parsed.collectives if s.size_bytes == size]
        # one rank's trace: the lower envelope (at most the fastest instance: the others waited)
        point = next(p for p in fit.points if p.size_bytes == size)
        assert measured and durations[c] == point.time_us <= min(measured)
    matmuls = [n.index for n in graph.nodes if n.op.startswith(("aten.mm", "aten.addmm"))]
    assert matmuls and all(chain.sources[i] == "profile" for i in matmuls)


def _late_rank_traces(rank: int, world_size: int, archive: str, trace_dir: str) -> bool:
    """Every rank profiles STEPS steps, each started together (a barrier); rank 1 computes
    LATE_MATMULS extra matmuls first, so rank 0 reaches every step's first all_reduce first
    and waits for it.

    The lateness has to outweigh what else can delay rank 0 on a loaded 2-core machine (a
    descheduled rank, a slow first step): with 20 matmuls (about 15-30 ms) and no barrier,
    rank 1 waited longer in total about once in a full CI run."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function

    mapping = recreate_groups(read_groups_record(archive))
    ep = torch.export.load(archive)
    run_exported(ep, mapping)
    a = torch.randn(256, 256)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for step in range(STEPS):
            dist.barrier()
            with record_function(f"ProfilerStep#{step}"):
                for _ in range(LATE_MATMULS if rank == 1 else 0):
                    a = torch.tanh(a @ a)
                run_exported(ep, mapping)
    prof.export_chrome_trace(str(Path(trace_dir) / f"trace_rank{rank}.json"))
    return True


@pytest.mark.slow
def test_two_ranks_gloo_traces_separate_waiting_from_transfer(tmp_path):
    assert run_gloo(_late_rank_traces, 2, str(SAMPLE.with_suffix(".pt2")), str(tmp_path)) == [True, True]
    from commopt.estimators.waiting import match_collectives

    traces = [parse_trace(tmp_path / f"trace_rank{r}.json") for r in (0, 1)]
    assert [t.rank for t in traces] == [0, 1]
    m = match_collectives(traces)
    assert not m.unmatched and len(m.matched) == 2 * STEPS  # two gradient buckets per step
    waited = [x.waiting_us for x in m.matched]
    # rank 0 was early: it waited on the first bucket of every step, longer than rank 1 did
    assert sum(w[0] for w in waited) > sum(w[1] for w in waited)
    model = calibrate(tmp_path)
    (fit,) = model.collectives
    assert fit.fitted_on == "transfer" and "matched across 2 ranks" in fit.how
    (share,) = model.waiting
    assert share.method == "matched across ranks" and share.waiting_us > 0
    raw = calibrate(tmp_path, separate_waiting=False).collectives[0]
    assert sum(p.time_us for p in fit.points) < sum(p.time_us for p in raw.points)
