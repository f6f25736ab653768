"""Measured exposed communication from per-rank PyTorch profiler traces (as HTA counts it).

For each rank's trace, communication and compute are each the union of their spans, and the
exposed communication is the communication time that no compute span overlaps:

- GPU traces: NCCL kernels are communication, every other GPU kernel is compute (Holistic
  Trace Analysis' "exposed communication": comm kernel time not overlapped by compute kernels);
- CPU traces (gloo): the ``gloo:*`` spans on gloo's worker threads are communication, and the
  ``aten::`` ops of the thread that issues the collectives are compute (the ``c10d::`` issue
  ops and waits are not: a rank blocked in a wait computes nothing).

Totals are divided by the number of profiled steps: the ``ProfilerStep#N`` markers when the
trace has them, else -- a trace of the generated runner, which profiles a few whole
iterations -- the collective spans over the graph's collectives per step, when that divides
evenly. Otherwise the numbers stay totals and a note says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from commopt.schemas.measured import MeasuredRank

Span = tuple[float, float]


def merged(spans: Iterable[Span]) -> list[Span]:
    """The union of ``spans`` as sorted, disjoint spans."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def total(spans: Sequence[Span]) -> float:
    """Length of disjoint ``spans``."""
    return sum(e - s for s, e in spans)


def overlap(a: Sequence[Span], b: Sequence[Span]) -> float:
    """Length of the intersection of two sorted, disjoint span lists."""
    i = j = 0
    length = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            length += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return length


def _span(e: dict[str, Any]) -> Span:
    return float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))


def comm_and_compute(events: list[dict[str, Any]]) -> tuple[list[Span], list[Span], int, str]:
    """(communication spans, compute spans, collective count, device) of one trace's events."""
    kernels = [e for e in events if e.get("cat") == "kernel"]
    if kernels:
        comm = [e for e in kernels if "nccl" in str(e.get("name", "")).lower()]
        compute = [e for e in kernels if "nccl" not in str(e.get("name", "")).lower()]
        return [_span(e) for e in comm], [_span(e) for e in compute], len(comm), "gpu"
    comm = [e for e in events if e.get("cat") == "user_annotation"
            and str(e.get("name", "")).startswith("gloo:")]
    issuers = Counter(e.get("tid") for e in events if e.get("cat") == "cpu_op"
                      and str(e.get("name", "")).startswith("c10d::"))
    main = issuers.most_common(1)[0][0] if issuers else None
    compute = [e for e in events if e.get("cat") == "cpu_op" and e.get("tid") == main
               and str(e.get("name", "")).startswith("aten::") and "wait" not in str(e.get("name", ""))]
    return [_span(e) for e in comm], [_span(e) for e in compute], len(comm), "cpu"


def measure_trace(path: str | Path, collectives_per_step: int | None = None) -> MeasuredRank:
    """The measured overlap of one rank's trace (``collectives_per_step``: the graph's count,
    used to find the number of steps of a trace without ``ProfilerStep`` markers)."""
    from commopt.estimators.kineto import read_trace_json

    data = read_trace_json(path)
    events = [e for e in data["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"
              and isinstance(e.get("ts"), (int, float))]
    comm, compute, count, device = comm_and_compute(events)
    comm_u, compute_u = merged(comm), merged(compute)
    exposed = total(comm_u) - overlap(comm_u, compute_u)
    markers = sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    steps, steps_from = None, "unknown: totals over the trace"
    if markers:
        steps, steps_from = markers, "ProfilerStep markers"
    elif collectives_per_step and count and count % collectives_per_step == 0:
        steps = count // collectives_per_step
        steps_from = f"{count} collective spans / {collectives_per_step} per step"
    per = steps or 1
    info = data.get("distributedInfo") if isinstance(data.get("distributedInfo"), dict) else {}
    rank = info.get("rank") if type(info.get("rank")) is int else None
    return MeasuredRank(trace=Path(path).name, rank=rank, device=device, steps=steps,
                        steps_from=steps_from, collectives=count,
                        comm_us=total(comm_u) / per, compute_us=total(compute_u) / per,
                        exposed_comm_us=max(0.0, exposed) / per)


def measure(paths: Iterable[str | Path], collectives_per_step: int | None = None) -> list[MeasuredRank]:
    """:func:`measure_trace` of every trace ``paths`` name (files, or directories of them as
    the runner's ``--profile DIR`` writes), ordered by rank."""
    from commopt.estimators.kineto import trace_files

    ranks = [measure_trace(f, collectives_per_step) for f in trace_files(paths)]
    return sorted(ranks, key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.trace))
