"""Waiting is not transfer: the same collective matched across ranks' traces.

An NCCL kernel starts on each rank when that rank reaches the collective, but its data
moves only once the *last* rank of the group has started: on an early rank most of the
kernel's time is spent waiting for the latest one. A profile fitted on raw kernel durations
therefore carries other ranks' lateness into every prediction.

Where several ranks' traces are given, :func:`match_collectives` finds the same collective
on every rank (same process group, same profiler step, same position among that group's
collectives in the step, same type, same message size except for all_to_all, whose splits
may differ per rank). Each rank's clock is aligned on the collectives' ends
(every rank of a collective finishes with the last transfer step, so the ends agree up to
the clocks' offset), kept within what the kernels allow (:func:`_clock_offsets`); a group's
step whose aligned kernels do not all overlap (a rank ended before another started: not the
same collective) is not matched. A collective's
**transfer** is its end (the last rank's aligned end) minus the latest rank's aligned start;
a rank's **waiting** is the rest of its kernel's time. Where a group's ranks are not all
given, the latest start among those given is a lower bound of the true one, so the transfer
found is an upper bound (said in :attr:`Matching.notes`). Collectives that cannot be matched
(one rank given, a group whose ranks record different sequences, as traces with dropped
events do) stay unmatched; the profile estimator fits those on a lower envelope instead
(:mod:`commopt.estimators.envelope`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from commopt.estimators.kineto import CollectiveSample, KinetoTrace


@dataclass(frozen=True, slots=True)
class MatchedCollective:
    """One collective seen on several ranks: each rank's sample, its transfer and waiting."""

    group: str
    step: int | None
    position: int  # among the group's collectives in the step
    ranks: tuple[int, ...]
    samples: tuple[CollectiveSample, ...]  # per rank, as measured
    transfer_us: tuple[float, ...]  # per rank: the collective's transfer, at most the rank's kernel

    @property
    def complete(self) -> bool:
        """Whether every rank of the group was given (else the transfer is an upper bound)."""
        return len(self.ranks) >= self.samples[0].group_size

    @property
    def waiting_us(self) -> tuple[float, ...]:
        """Per rank: the kernel time that was not transfer."""
        return tuple(s.duration_us - t for s, t in zip(self.samples, self.transfer_us, strict=True))


@dataclass
class Matching:
    """What matching several ranks' traces found."""

    matched: list[MatchedCollective] = field(default_factory=list)
    unmatched: list[CollectiveSample] = field(default_factory=list)
    clock_offsets_us: dict[int, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def transfer_samples(self) -> list[CollectiveSample]:
        """Every matched rank's sample with its transfer time as the duration."""
        return [replace(s, duration_us=t) for m in self.matched
                for s, t in zip(m.samples, m.transfer_us, strict=True)]


def group_key(sample: CollectiveSample) -> str:
    """The process group a sample ran in: its name where the trace records it, else the
    stream its kernel ran on (older traces: one NCCL stream per group), else one sequence
    for all (CPU traces: gloo's worker threads differ per rank and name no group)."""
    if sample.group is not None:
        return sample.group
    return f"stream {sample.stream}" if sample.stream is not None else "(unnamed)"


def match_collectives(traces: Sequence[KinetoTrace]) -> Matching:
    """Match the collectives of several ranks' traces and split each rank's kernel time into
    transfer and waiting (see the module docstring). One trace, or traces without distinct
    ranks, match nothing: every sample comes back unmatched, with a note saying why."""
    out = Matching()
    ranks = [t.rank for t in traces]
    if len(traces) < 2:
        out.unmatched = [s for t in traces for s in t.collectives]
        return out
    if None in ranks or len(set(ranks)) != len(ranks):
        out.unmatched = [s for t in traces for s in t.collectives]
        out.notes.append("collectives not matched across traces: the traces do not name distinct "
                         f"ranks (distributedInfo.rank: {', '.join(map(str, ranks))})")
        return out
    sequences = {t.rank: _sequences(t) for t in traces}
    out.unmatched += [s for t in traces for s in t.collectives if s.start_us is None]  # no time to match
    keys = sorted({k for seqs in sequences.values() for k in seqs}, key=lambda k: (k[0], _step_key(k[1])))
    candidates: dict[tuple[str, int | None], list[_Column]] = {}
    for key in keys:
        have = tuple(sorted(r for r in sequences if key in sequences[r]))
        seqs = [sequences[r][key] for r in have]
        if len(have) >= 2 and len({tuple(map(_identity, seq)) for seq in seqs}) == 1:
            candidates[key] = [(have, list(column)) for column in zip(*seqs, strict=True)]
            continue
        out.unmatched += [s for seq in seqs for s in seq]
        if len(have) >= 2:
            _note_unmatched(out, key, have, "record different collective sequences (dropped events?)")
    offsets = _clock_offsets(c for cols in candidates.values() for c in cols)
    for key in [k for k, cols in candidates.items() if not all(_overlaps(c, offsets) for c in cols)]:
        cols = candidates.pop(key)
        out.unmatched += [s for _, column in cols for s in column]
        _note_unmatched(out, key, cols[0][0], "have kernels that do not overlap in time")
    out.clock_offsets_us = off = _clock_offsets(c for cols in candidates.values() for c in cols)
    for (group, step), cols in candidates.items():
        for pos, (have, column) in enumerate(cols):
            latest = max(s.start_us - off[r] for r, s in zip(have, column, strict=True))
            end = max(s.end_us - off[r] for r, s in zip(have, column, strict=True))
            transfer = tuple(min(max(end - latest, 0.0), s.duration_us) for s in column)
            out.matched.append(MatchedCollective(group, step, pos, have, tuple(column), transfer))
    partial = {(m.group, len(m.ranks), m.samples[0].group_size) for m in out.matched if not m.complete}
    for group, given, size in sorted(partial):
        out.notes.append(f"group {group}: {given} of its {size} ranks given; the latest start among "
                         "them may not be the group's, so its transfer times are upper bounds")
    return out


_Column = tuple[tuple[int, ...], list[CollectiveSample]]  # ranks, and the same collective on each


def _identity(s: CollectiveSample) -> tuple:
    """What must agree between ranks for two samples to be one collective."""
    return (s.type, s.group_size, None if s.type == "all_to_all" else s.size_bytes)


def _note_unmatched(out: Matching, key: tuple[str, int | None], ranks: tuple[int, ...], why: str) -> None:
    out.notes.append(f"group {key[0]}, step {key[1]}: ranks {', '.join(map(str, ranks))} {why}; "
                     "not matched, fitted on a lower envelope")


def _overlaps(column: _Column, offsets: dict[int, float]) -> bool:
    """Whether every rank's aligned kernel ends after every rank's aligned start (up to 10%
    of the longest kernel + 10 us of clock noise): the same collective overlaps on all."""
    have, samples = column
    latest = max(s.start_us - offsets[r] for r, s in zip(have, samples, strict=True))
    slack = 10.0 + 0.1 * max(s.duration_us for s in samples)
    return all(s.end_us - offsets[r] >= latest - slack for r, s in zip(have, samples, strict=True))


def _step_key(step: int | None) -> int:
    return -1 if step is None else step


def _sequences(trace: KinetoTrace) -> dict[tuple[str, int | None], list[CollectiveSample]]:
    """Per (group, step): the trace's collectives in the order they started."""
    seqs: dict[tuple[str, int | None], list[CollectiveSample]] = {}
    for s in sorted((s for s in trace.collectives if s.start_us is not None), key=lambda s: s.start_us):
        seqs.setdefault((group_key(s), s.step), []).append(s)
    return seqs


def _clock_offsets(columns: Iterable[_Column]) -> dict[int, float]:
    """Per rank: how far its clock runs ahead.

    First the median over matched collectives of the rank's end minus the collective's
    median end (NCCL's ranks finish a collective together, up to microseconds). Then each
    rank's estimate is moved, as little as possible, into the range its kernels allow: the
    same collective overlaps on every rank, so a rank's aligned end is at or after every
    other rank's aligned start, and its aligned start at or before their ends. The ends
    alone can mislead by milliseconds where ranks do not finish together (gloo's worker
    threads on a loaded CPU: one rank ended a collective 4 ms after the other, and the
    median placed a rank's whole 255 us kernel before the other's start). Rounds of
    Gauss-Seidel clamping, each rank against the others' current estimates, until none
    moves (two ranks: exact in one round); a rank whose range is empty keeps its estimate,
    and :func:`_overlaps` then finds the collectives that do not fit.
    """
    columns = list(columns)
    residuals: dict[int, list[float]] = {}
    by_rank: dict[int, list[_Column]] = {}
    for have, column in columns:
        ends = [s.end_us for s in column]
        mid = statistics.median(ends)
        for r, e in zip(have, ends, strict=True):
            residuals.setdefault(r, []).append(e - mid)
            by_rank.setdefault(r, []).append((have, column))
    offsets = {r: statistics.median(v) for r, v in residuals.items()}
    for _ in range(max(1, len(offsets))):
        moved = False
        for r, cols in by_rank.items():
            lo, hi = -math.inf, math.inf
            for have, column in cols:
                others = [(a, s) for a, s in zip(have, column, strict=True) if a != r]
                mine = column[have.index(r)]
                lo = max(lo, mine.start_us - min(s.end_us - offsets[a] for a, s in others))
                hi = min(hi, mine.end_us - max(s.start_us - offsets[a] for a, s in others))
            if lo <= hi and not lo <= offsets[r] <= hi:
                offsets[r] = min(max(offsets[r], lo), hi)
                moved = True
        if not moved:
            break
    return offsets
