"""Choose buckets with the simulator: a merge is kept only where the makespan drops.

A bucket pays the per-collective latency once, but its collective waits for the last
member's input, its result is held until the last member is read back, the copies in and out
cost compute time, and its buffer is larger. None of that is a fixed byte threshold, so the
choice is made on the order at hand: members of one class (see
:func:`commopt.bucketing.eligibility.class_key`) are taken in issue order and a bucket grows by
its next member exactly when the bucketed program, simulated with the same durations for the
nodes it keeps and estimates for the nodes it adds, is faster and still fits every memory
budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from commopt.bucketing.eligibility import bucket_problem, class_key, member_problem, written_roots
from commopt.bucketing.rewrite import Bucket, Rewritten, apply_buckets
from commopt.ir.graph import Graph, Node, NodeKind
from commopt.ir.schedule import Schedule

#: At most this many node-simulations (candidates x nodes) are spent choosing buckets, so a
#: 100,000-node graph does not simulate itself thousands of times; candidates past it are
#: not examined (and the pass record says how many).
BUCKET_WORK = 4_000_000
#: A merge must shorten the makespan by more than this fraction to be kept.
MIN_GAIN = 1e-6


@dataclass(frozen=True)
class Trial:
    """A bucketed program: the rewrite, its durations and its simulated makespan."""

    rewritten: Rewritten
    durations_us: tuple[float, ...]
    makespan_us: float
    budgets: Callable[[Graph, Sequence[int]], bool]

    def fits(self) -> bool:
        """Whether the bucketed program keeps the memory budgets (asked only of merges that
        pay: planning the footprint costs more than simulating)."""
        graph = self.rewritten.graph
        return self.budgets(graph, list(range(len(graph))))


@dataclass(frozen=True)
class Choice:
    """The buckets kept (the best trial, None when no merge paid), and how many candidate
    merges were simulated and left unexamined."""

    best: Trial | None
    examined: int
    unexamined: int


def candidate_classes(graph: Graph, order: Schedule) -> list[list[int]]:
    """Bucketable collectives grouped by class, each in issue order; classes with one member
    are left out."""
    classes: dict[tuple, list[int]] = {}
    written = written_roots(graph)
    for i in order:
        if graph.nodes[i].kind is NodeKind.COLLECTIVE and member_problem(graph, i, written) is None:
            classes.setdefault(class_key(graph, i), []).append(i)
    return [m for m in classes.values() if len(m) > 1]


def choose_buckets(graph: Graph, order: Sequence[int], durations_us: Sequence[float],
                   estimate: Callable[[Node, Graph], float],
                   fits: Callable[[Graph, Sequence[int]], bool],
                   baseline_us: float) -> Choice:
    """The greedy choice of the module docstring on ``order`` (whose makespan is
    ``baseline_us``). ``estimate`` gives a new node its duration; ``fits`` says whether a
    bucketed program keeps the memory budgets."""
    sched = Schedule.of(graph, order)
    classes = candidate_classes(graph, sched)
    budget = max(1, BUCKET_WORK // max(1, len(graph)))
    best: Trial | None = None
    best_us = baseline_us
    examined = 0

    def pays(kept: list[Bucket], cand: list[int]) -> bool:
        nonlocal best, best_us, examined
        if examined >= budget or bucket_problem(graph, sched, cand) is not None:
            return False
        examined += 1
        trial = _trial(graph, sched, [*kept, Bucket(tuple(cand))], durations_us, estimate, fits)
        if trial.makespan_us < best_us * (1.0 - MIN_GAIN) and trial.fits():
            best, best_us = trial, trial.makespan_us
            return True
        return False

    grow_buckets(classes, pays)
    unexamined = max(0, sum(len(m) - 1 for m in classes) - examined) if examined >= budget else 0
    return Choice(best, examined, unexamined)


def grow_buckets(classes: list[list[int]],
                 accepts: Callable[[list[Bucket], list[int]], bool]) -> list[Bucket]:
    """Cut each class (members in issue order) into runs: a run grows by its next member
    exactly when ``accepts(buckets kept so far, run + member)``; runs of two or more are the
    buckets."""
    kept: list[Bucket] = []
    for members in classes:
        current = [members[0]]
        for m in members[1:]:
            cand = [*current, m]
            if accepts(kept, cand):
                current = cand
                continue
            if len(current) > 1:
                kept.append(Bucket(tuple(current)))
            current = [m]
        if len(current) > 1:
            kept.append(Bucket(tuple(current)))
    return kept


def _trial(graph: Graph, order: Schedule, buckets: list[Bucket], durations_us: Sequence[float],
           estimate: Callable[[Node, Graph], float],
           fits: Callable[[Graph, Sequence[int]], bool]) -> Trial:
    from commopt.sim.engine import makespan_us

    rw = apply_buckets(graph, order, buckets)
    new = rw.graph
    durs = tuple(durations_us[o] if o >= 0 else estimate(new.nodes[i], new)
                 for i, o in enumerate(rw.origin))
    identity = list(range(len(new)))
    return Trial(rw, durs, makespan_us(new, identity, durs), fits)
