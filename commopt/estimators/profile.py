"""The profile estimator: durations calibrated from a PyTorch profiler (Kineto) trace.

:func:`calibrate` turns a trace (see :mod:`commopt.estimators.kineto`) into a
:class:`~commopt.schemas.profile.ProfileModel`: per collective type and group size the
*transfer* time of every measured message size plus a least-squares latency/bandwidth fit
(most of an NCCL kernel's measured time is waiting for the slowest rank, which the
simulator does not model as communication: see :mod:`commopt.estimators.transfer`), how
much of the measured time was waiting, the compute slowdown beside communication
(:mod:`commopt.estimators.slowdown`); per (op, input shapes, dtypes) the median device
time. :class:`ProfileEstimator` answers from it:

- a collective inside the measured size range: log-log interpolation between the two
  nearest measured sizes (exact sizes give their median); outside the range, or for a type
  / group size never measured: None (the next estimator, analytical, answers) and a note;
- a compute node whose op, tensor input shapes and dtypes were measured: the median; else None.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from commopt.atomic import write_text
from commopt.errors import OptionError
from commopt.estimators.analytical import op_base_name
from commopt.estimators.kineto import (
    CollectiveSample,
    ComputeSample,
    KinetoTrace,
    parse_trace,
    trace_files,
)
from commopt.estimators.line_fit import fit_line_explained
from commopt.ir.graph import Graph, Node, NodeKind, Ref
from commopt.progress import SILENT, Progress
from commopt.schemas.profile import CollectiveFit, CollectivePoint, ComputeEntry, ProfileModel


def fit_collectives(samples: Iterable[CollectiveSample]) -> list[CollectiveFit]:
    """Points (the median duration per size) and a latency/bandwidth fit per (type, group
    size), sorted by both; each fit says how it was made (``how``, see
    :func:`fit_line_explained`). Raw durations, waiting included: :func:`calibrate` fits on
    transfer time unless told otherwise."""
    groups: dict[tuple[str, int], dict[int, list[float]]] = {}
    for s in samples:
        groups.setdefault((s.type, s.group_size), {}).setdefault(s.size_bytes, []).append(s.duration_us)
    fits = []
    for (ctype, n), by_size in sorted(groups.items()):
        points = [CollectivePoint(size_bytes=b, time_us=statistics.median(ts), count=len(ts))
                  for b, ts in sorted(by_size.items())]
        latency, bw, how = fit_line_explained([p.size_bytes for p in points], [p.time_us for p in points])
        fits.append(CollectiveFit(type=ctype, group_size=n, latency_us=latency, bandwidth_gbps=bw,
                                  min_bytes=points[0].size_bytes, max_bytes=points[-1].size_bytes,
                                  points=points, how=how, fitted_on="duration"))
    return fits


def fit_compute(samples: Iterable[ComputeSample]) -> list[ComputeEntry]:
    """Median time per (op, shapes, dtypes); samples without shapes cannot be keyed and are dropped."""
    groups: dict[tuple, list[float]] = {}
    for s in samples:
        if s.input_shapes is None or s.dtypes is None:
            continue
        groups.setdefault((s.op, s.input_shapes, s.dtypes), []).append(s.duration_us)
    return [ComputeEntry(op=op, input_shapes=[list(x) for x in shapes], dtypes=list(dtypes),
                         time_us=statistics.median(ts), count=len(ts))
            for (op, shapes, dtypes), ts in sorted(groups.items())]


def calibrate(trace: str | Path | KinetoTrace | Sequence[str | Path | KinetoTrace], *,
              steps: Iterable[int] | None = None, separate_waiting: bool = True,
              progress: Progress = SILENT) -> ProfileModel:
    """Fit a profile model on one trace or several (files, directories, parsed traces),
    optionally only on ``steps``.

    Several traces (one per rank, as the generated runner's ``--profile DIR`` writes them)
    are merged. Collectives are fitted on transfer time (``separate_waiting``): matched
    across the ranks' traces where they can be, else a lower envelope of the durations
    (:func:`commopt.estimators.transfer.fit_transfer`); with ``separate_waiting=False`` on
    the median raw duration per size, waiting included (the version 1 behaviour, kept to
    compare). Compute samples are pooled per (op, shapes, dtypes) before the medians. A
    directory stands for its traces (:func:`trace_files`). ``progress`` hears about reading
    each trace and the fits.
    """
    items = list(trace) if isinstance(trace, (list, tuple)) else [trace]
    if not items:
        raise OptionError("no trace to calibrate on")
    traces = []
    for item in items:
        for t in [item] if isinstance(item, KinetoTrace) else trace_files([item]):
            if isinstance(t, KinetoTrace):
                traces.append(t)
                continue
            with progress.stage(f"read {Path(t).name}"):
                traces.append(parse_trace(t))
    keep = set(steps) if steps is not None else None
    notes = [n for t in traces for n in t.notes]
    if keep is not None:
        available = sorted({s for t in traces for s in t.steps})
        missing = sorted(keep - set(available))
        if missing:
            raise OptionError(f"no profiler step {', '.join(map(str, missing))} in the trace "
                              f"(it has {', '.join(map(str, available)) or 'none'})", field="--steps")
    if keep is not None:
        traces = [only_steps(t, keep) for t in traces]
    used = sorted(keep) if keep is not None else sorted({s for t in traces for s in t.steps})
    with progress.stage("fit collectives and compute"):
        return _fit(traces, used, notes, separate_waiting)


def _fit(traces: list[KinetoTrace], used: list[int], notes: list[str],
         separate_waiting: bool) -> ProfileModel:
    from commopt.estimators.slowdown import compute_slowdown
    from commopt.estimators.transfer import fit_transfer

    if separate_waiting:
        fitted = fit_transfer(traces)
        collectives, waiting = fitted.fits, fitted.waiting
        notes += fitted.notes
    else:
        collectives, waiting = fit_collectives(s for t in traces for s in t.collectives), []
    return ProfileModel(
        source=", ".join(t.path for t in traces), device=traces[0].device,
        world_size=traces[0].world_size, steps=used, collectives=collectives,
        compute=fit_compute(s for t in traces for s in t.compute), notes=list(dict.fromkeys(notes)),
        waiting=waiting, compute_slowdown=compute_slowdown(traces))


def only_steps(trace: KinetoTrace, steps: set[int]) -> KinetoTrace:
    """``trace`` with only the collective and compute samples of profiler ``steps`` (the
    compute slowdown is measured on every kernel of the trace)."""
    return replace(trace, collectives=[s for s in trace.collectives if s.step in steps],
                   compute=[s for s in trace.compute if s.step in steps])


def write_profile(model: ProfileModel, path: str | Path) -> Path:
    """Write ``model`` as JSON (atomically)."""
    p = Path(path)
    write_text(p, model.model_dump_json(indent=2) + "\n")
    return p


def load_profile(path: str | Path) -> ProfileModel:
    """A profile model from a file ``commopt calibrate`` wrote, or calibrated from a trace."""
    p = Path(path)
    if not p.is_file():
        raise OptionError("no such profile or trace file", file=str(p), field="--profile")
    if p.suffix.lower() == ".json":
        from commopt.io.json_graph import read_json_file

        try:
            data = read_json_file(p, error=OptionError)
        except OptionError:
            data = None  # not a profile model: read as a trace, which words the error
        if isinstance(data, dict) and data.get("format") == "commopt-profile":
            try:
                return ProfileModel.model_validate(data)
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(str(x) for x in err["loc"]) or None
                raise OptionError(f"bad profile model: {err['msg']}", file=str(p), field=loc) from None
    return calibrate(p)


class ProfileEstimator:
    """Answers from a calibrated :class:`ProfileModel` (see the module docstring)."""

    name = "profile"

    def __init__(self, model: ProfileModel) -> None:
        self.model = model
        self.notes: list[str] = list(model.notes)
        if model.waiting:
            self.notes.append(waiting_note(model))
        self._fits = {(f.type, f.group_size): f for f in model.collectives}
        self._compute = {(e.op, tuple(tuple(s) for s in e.input_shapes), tuple(e.dtypes)): e.time_us
                         for e in model.compute}
        self._noted: set[tuple] = set()

    def _note_once(self, key: tuple, text: str) -> None:
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(text)

    def estimate(self, node: Node, graph: Graph) -> float | None:
        """Measured or interpolated duration, or None to defer."""
        if node.kind is NodeKind.COLLECTIVE and node.collective is not None:
            info = node.collective
            from commopt.io.groups import proven_group_size

            n = proven_group_size(graph, info.group)
            return self.collective_us(info.type, n, info.bytes)
        if node.kind is NodeKind.COMPUTE:
            return self._compute.get(compute_key(node, graph))
        return None

    def collective_us(self, ctype: str, group_size: int, size_bytes: int) -> float | None:
        """Interpolated time of a collective, or None outside what was measured."""
        fit = self._fits.get((ctype, group_size))
        if fit is None:
            self._note_once(("missing", ctype, group_size),
                            f"profile: no {ctype} over {group_size} ranks measured; analytical used")
            return None
        if not fit.min_bytes <= size_bytes <= fit.max_bytes:
            self._note_once(("range", ctype, group_size),
                            f"profile: some {ctype} over {group_size} ranks fall outside the measured "
                            f"{fit.min_bytes:,}-{fit.max_bytes:,} bytes; analytical used for those")
            return None
        return interpolate_log(fit.points, size_bytes)


def waiting_note(model: ProfileModel) -> str:
    """One line for reports: how much of the calibration traces' NCCL time was waiting, per
    collective type, and that collectives are costed by their transfer time."""
    measured = sum(w.measured_us for w in model.waiting)
    waiting = sum(w.waiting_us for w in model.waiting)
    share = waiting / measured if measured > 0 else 0.0
    per_type = ", ".join(f"{w.type} {w.waiting_fraction:.1%} ({w.method})" for w in model.waiting)
    return (f"profile: {share:.1%} of the calibration traces' NCCL kernel time was waiting for other "
            f"ranks, not transfer ({per_type}); collectives are costed by transfer time")


def interpolate_log(points: list[CollectivePoint], size_bytes: int) -> float:
    """Piecewise-linear interpolation of log(time) over log(bytes) between measured points."""
    sizes = [p.size_bytes for p in points]
    i = bisect_left(sizes, size_bytes)
    if i < len(points) and sizes[i] == size_bytes:
        return points[i].time_us
    lo, hi = points[i - 1], points[i]
    if lo.size_bytes <= 0 or lo.time_us <= 0 or hi.time_us <= 0:
        frac = (size_bytes - lo.size_bytes) / (hi.size_bytes - lo.size_bytes)
        return lo.time_us + frac * (hi.time_us - lo.time_us)
    frac = (math.log(size_bytes) - math.log(lo.size_bytes)) / (math.log(hi.size_bytes) - math.log(lo.size_bytes))
    return math.exp(math.log(lo.time_us) + frac * (math.log(hi.time_us) - math.log(lo.time_us)))


def compute_key(node: Node, graph: Graph) -> tuple:
    """(op, tensor input shapes, dtypes) of a compute node, as traces key ops.

    Tensor arguments in call order (a trace's ``Input Dims`` lists them the same way); lists
    of tensors are skipped on both sides (traces record them without shapes).
    """
    shapes = []
    dtypes = []
    nodes = graph.nodes
    for a in list(node.args) + list(node.kwargs.values()):
        if isinstance(a, Ref) and nodes[a.index].outputs:
            t = nodes[a.index].outputs[0]
            shapes.append(tuple(t.shape))
            dtypes.append(t.dtype)
    return op_base_name(node.op), tuple(shapes), tuple(dtypes)


def from_options(options) -> ProfileEstimator:
    """The profile estimator for ``options.profile`` (a model file or a trace)."""
    if not options.profile:
        raise OptionError("the profile estimator needs --profile FILE (a model from "
                          "'commopt calibrate' or a Kineto trace)", field="--profile")
    return ProfileEstimator(load_profile(options.profile))
