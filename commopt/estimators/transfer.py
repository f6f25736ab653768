"""Collective fits on transfer time, and how much of the measured time was waiting.

Per collective type and group size the points are:

- **transfer** where the collective was matched across several ranks' traces
  (:mod:`commopt.estimators.waiting`): the median transfer time per message size. Where
  some of a group's ranks were not given, those times are upper bounds (a missing rank may
  have started later), so their lower envelope is taken, as for one rank's durations;
- **lower envelope** where it was not (one rank's trace, or sequences that differ between
  ranks): the envelope of the measured durations (:mod:`commopt.estimators.envelope`).

Unmatched samples of a (type, group size) that also has matched ones are not fitted (the
matched ones measure what the envelope only estimates); their waiting is estimated from
the matched fit. :func:`waiting_shares` then says per collective type how much of the
measured kernel time was waiting.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from commopt.estimators.envelope import lower_envelope
from commopt.estimators.kineto import CollectiveSample, KinetoTrace
from commopt.estimators.line_fit import fit_line_explained
from commopt.estimators.profile import interpolate_log
from commopt.estimators.waiting import Matching, match_collectives
from commopt.schemas.profile import CollectiveFit, CollectivePoint, WaitingShare


@dataclass
class TransferFit:
    """The fits, the per-type waiting shares, and notes on how they were made."""

    fits: list[CollectiveFit]
    waiting: list[WaitingShare]
    notes: list[str]


def fit_transfer(traces: Sequence[KinetoTrace]) -> TransferFit:
    """Fit every collective (type, group size) of ``traces`` on transfer time (see above)."""
    matching = match_collectives(traces)
    matched = _by_kind(matching.transfer_samples())
    unmatched = _by_kind(matching.unmatched)
    ranks_of: dict[tuple[str, int], int] = {}
    partial: set[tuple[str, int]] = set()
    for m in matching.matched:
        key = (m.samples[0].type, m.samples[0].group_size)
        ranks_of[key] = max(ranks_of.get(key, 0), len(m.ranks))
        if not m.complete:
            partial.add(key)
    fits = []
    for kind in sorted(set(matched) | set(unmatched)):
        if kind in matched:
            by_size = _by_size(matched[kind])
            times = {b: statistics.median(ts) for b, ts in by_size.items()}
            counts = {b: len(ts) for b, ts in by_size.items()}
            fitted_on, how = "transfer", f"transfer matched across {ranks_of[kind]} ranks"
            if kind in partial:
                times = lower_envelope({b: [t] for b, t in times.items()})
                how = (f"transfer matched across {ranks_of[kind]} of {kind[1]} ranks (upper bounds), "
                       "their lower envelope")
            dropped = len(unmatched.get(kind, ()))
            if dropped:
                how += f" ({dropped} unmatched kernel(s) not fitted)"
        else:
            by_size = _by_size(unmatched[kind])
            times = lower_envelope(by_size)
            counts = {b: len(ts) for b, ts in by_size.items()}
            fitted_on, how = "lower envelope", "lower envelope of the measured durations (not matched across ranks)"
        points = [CollectivePoint(size_bytes=b, time_us=times[b], count=counts[b]) for b in sorted(times)]
        latency, bw, line = fit_line_explained([p.size_bytes for p in points], [p.time_us for p in points])
        fits.append(CollectiveFit(type=kind[0], group_size=kind[1], latency_us=latency, bandwidth_gbps=bw,
                                  min_bytes=points[0].size_bytes, max_bytes=points[-1].size_bytes,
                                  points=points, how=f"{how}; {line}", fitted_on=fitted_on))
    notes = list(matching.notes)
    if len({t.rank for t in traces}) < 2 and any(f.fitted_on == "lower envelope" for f in fits):
        notes.append("one rank's trace: collective transfer times are a lower envelope of its kernel "
                     "durations (an estimate); every rank's trace (the runner's --profile DIR) measures them")
    return TransferFit(fits, waiting_shares(matching, fits), notes)


def waiting_shares(matching: Matching, fits: list[CollectiveFit]) -> list[WaitingShare]:
    """Per collective type: measured kernel time, of which transfer and waiting. Matched
    kernels give both measured; an unmatched kernel's transfer is its fit's time at its
    size (the envelope, or the matched fit), at most its duration."""
    by_kind = {(f.type, f.group_size): f for f in fits}
    rows: dict[str, list[float]] = {}  # type -> [kernels, measured, transfer, matched kernels]
    for m in matching.matched:
        for s, t in zip(m.samples, m.transfer_us, strict=True):
            _add(rows, s, t, matched=True)
    for s in matching.unmatched:
        fit = by_kind[(s.type, s.group_size)]
        inside = fit.min_bytes <= s.size_bytes <= fit.max_bytes
        t = interpolate_log(fit.points, s.size_bytes) if inside and fit.points else s.duration_us
        _add(rows, s, min(t, s.duration_us), matched=False)
    out = []
    for ctype, (kernels, measured, transfer, n_matched) in sorted(rows.items()):
        method = ("matched across ranks" if n_matched == kernels
                  else "lower envelope" if n_matched == 0 else "mixed")
        out.append(WaitingShare(type=ctype, kernels=int(kernels), measured_us=measured, transfer_us=transfer,
                                waiting_us=measured - transfer,
                                waiting_fraction=(measured - transfer) / measured if measured > 0 else 0.0,
                                method=method))
    return out


def _add(rows: dict[str, list[float]], s: CollectiveSample, transfer: float, *, matched: bool) -> None:
    row = rows.setdefault(s.type, [0, 0.0, 0.0, 0])
    row[0] += 1
    row[1] += s.duration_us
    row[2] += transfer
    row[3] += matched


def _by_kind(samples: Iterable[CollectiveSample]) -> dict[tuple[str, int], list[CollectiveSample]]:
    out: dict[tuple[str, int], list[CollectiveSample]] = {}
    for s in samples:
        out.setdefault((s.type, s.group_size), []).append(s)
    return out


def _by_size(samples: Iterable[CollectiveSample]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for s in samples:
        out.setdefault(s.size_bytes, []).append(s.duration_us)
    return out
