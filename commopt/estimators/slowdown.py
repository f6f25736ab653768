"""Compute slowdown under overlapping communication, measured on GPU traces.

NCCL kernels occupy SMs (and memory bandwidth) while they run, waiting or moving data, so a
compute kernel that runs beside one can take longer than the same kernel alone. The
measure: every compute kernel of a trace is either *beside communication* (at least
:data:`OVERLAPPED` of its time inside an NCCL kernel of the same trace) or *alone* (no time
inside one); kernels in between are not used. Per kernel kind (name, grid, block: the same
work) seen both ways, the ratio of the medians; the factor is their geometric mean,
weighted by the time spent beside communication.

:func:`applied_slowdown` turns the ``--compute-slowdown`` option into the factor every
simulation of a run applies (:mod:`commopt.sim.engine`).
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING

from commopt.errors import OptionError
from commopt.schemas.summary import AppliedSlowdown

if TYPE_CHECKING:  # the trace reader and the profile schema are for calibrated runs only
    from commopt.estimators.kineto import KernelSpan, KinetoTrace
    from commopt.schemas.profile import ComputeSlowdown, ProfileModel

#: Option values that turn the slowdown off (as does a factor of 1).
OFF = ("off", "none")

#: A kernel at least this much inside NCCL kernels counts as beside communication.
OVERLAPPED = 0.9


def compute_slowdown(traces: Sequence[KinetoTrace]) -> ComputeSlowdown | None:
    """The measured slowdown factor (see the module docstring), or None when no kernel kind
    ran both beside an NCCL kernel and alone (nothing to compare)."""
    from commopt.schemas.profile import ComputeSlowdown

    beside: dict[str, list[float]] = {}
    alone: dict[str, list[float]] = {}
    for t in traces:
        union = _union(t.nccl_spans)
        for k in t.kernel_spans:
            if k.duration_us <= 0:
                continue
            share = _inside(union, k) / k.duration_us
            if share >= OVERLAPPED:
                beside.setdefault(k.key, []).append(k.duration_us)
            elif share == 0:
                alone.setdefault(k.key, []).append(k.duration_us)
    both = sorted(set(beside) & set(alone))
    if not both:
        return None
    weights = [sum(beside[k]) for k in both]
    logs = [math.log(statistics.median(beside[k]) / statistics.median(alone[k])) for k in both]
    factor = math.exp(sum(w * x for w, x in zip(weights, logs, strict=True)) / sum(weights))
    return ComputeSlowdown(
        factor=factor, kernel_kinds=len(both),
        overlapped_kernels=sum(len(beside[k]) for k in both), alone_kernels=sum(len(alone[k]) for k in both),
        how=f"median time of {len(both)} kernel kind(s) beside an NCCL kernel (>= {OVERLAPPED:.0%} of "
            "the kernel) over alone, geometric mean weighted by time beside")


def applied_slowdown(spec: str | float | None, profile: str | None = None,
                     model: ProfileModel | None = None) -> AppliedSlowdown | None:
    """The slowdown ``--compute-slowdown spec`` asks for, or None when it is off.

    ``spec``: None or ``"off"``; a factor >= 1; or ``"calibrated"``, the factor ``commopt
    calibrate`` measured, read from ``model`` (the chain's profile estimator's) or else
    loaded from ``profile``. Anything else, a calibrated run without a profile or whose
    profile has no measurement, and a measured factor below 1 are an :class:`OptionError`:
    a slowdown that cannot be applied as asked is never replaced by a guess.
    """
    if spec is None or str(spec).strip().lower() in OFF:
        return None
    text = str(spec).strip()
    if text.lower() != "calibrated":
        try:
            factor = float(text)
        except ValueError:
            raise OptionError(f"{text!r} is not 'off', 'calibrated' or a factor", field="--compute-slowdown") from None
        if not 1.0 <= factor < math.inf:
            raise OptionError(f"a compute slowdown is a factor >= 1 (compute never runs faster beside "
                              f"communication in the model), not {text}", field="--compute-slowdown")
        return None if factor == 1.0 else AppliedSlowdown(factor=factor, source=f"--compute-slowdown {text}")
    if model is None:
        if not profile:
            raise OptionError("'calibrated' needs --profile: a model from 'commopt calibrate' or a GPU "
                              "trace, where the factor is measured", field="--compute-slowdown")
        from commopt.estimators.profile import load_profile

        model = load_profile(profile)
    measured = model.compute_slowdown
    if measured is None:
        raise OptionError("the profile has no compute slowdown measurement (no kernel kind ran both "
                          "beside an NCCL kernel and alone); give a factor or 'off'",
                          file=profile, field="--compute-slowdown")
    if measured.factor < 1.0:
        raise OptionError(f"the profile measured compute beside communication at {measured.factor:.3f}x "
                          "its time alone, below 1 (noise: the model cannot make compute faster); "
                          "give 'off' or a factor >= 1", file=profile, field="--compute-slowdown")
    return AppliedSlowdown(factor=measured.factor,
                           source=f"calibrated on {model.source}: {measured.how}")


def slowdown_note(slowdown: AppliedSlowdown) -> str:
    """The note every output with an applied slowdown carries, so no number is read without it."""
    return (f"compute runs {slowdown.factor:.3f}x as long while a collective is in flight "
            f"({slowdown.source}): every simulated time includes it")


def _union(spans: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Disjoint sorted intervals covering ``spans``."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _inside(union: list[tuple[float, float]], k: KernelSpan) -> float:
    """Time of ``k`` inside the intervals of ``union``."""
    a, b = k.start_us, k.start_us + k.duration_us
    i = max(bisect_right(union, (a, math.inf)) - 1, 0)
    total = 0.0
    while i < len(union) and union[i][0] < b:
        total += max(0.0, min(b, union[i][1]) - max(a, union[i][0]))
        i += 1
    return total
