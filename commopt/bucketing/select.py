"""Choose buckets with the simulator: a merge is kept only where the makespan drops.

A bucket pays the per-collective latency once, but its collective waits for the last
member's input, its result is held until the last member is read back, the copies in and out
cost compute time, and its buffer is larger. None of that is a fixed byte threshold, so the
choice is made on the order at hand: members of one class (see
:func:`commopt.bucketing.eligibility.class_key`) are taken in issue order and a bucket grows by
its next member when the bucketed program, simulated with the same durations for the
nodes it keeps and estimates for the nodes it adds, is faster; the run is then kept as a
bucket when the rewritten program is faster and fits every memory budget.

Trying a merge does not rewrite the graph: :mod:`commopt.bucketing.replay` replays the
bucketed program from the first place the merge changes, with the simulator's arithmetic (the
same makespan, exactly). The graph is rewritten only to prove a run (its simulated makespan
and its memory budgets, which need the rewritten graph): once per run when it fits; when it
does not, its longest fitting prefix is found by halving, and the class's later runs are
proven at one member more than that prefix as they grow (memory grows with the run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from commopt.bucketing.eligibility import bucket_problem, class_key, member_problem, written_roots
from commopt.bucketing.replay import Program
from commopt.bucketing.rewrite import Bucket, Rewritten, _Names, apply_buckets
from commopt.ir.graph import Graph, Node, NodeKind
from commopt.ir.schedule import Schedule

#: At most this much work is spent choosing buckets, counted in nodes replayed (a candidate
#: replays the program from the first place it changes, :mod:`commopt.bucketing.replay`);
#: candidates past it are not examined (and the pass record says how many).
BUCKET_WORK = 15_000_000
#: A rewrite of the whole graph with its simulation and memory check counts as replaying
#: this many times its nodes (measured: about as long).
REWRITE_WORK = 50
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
        pay: the footprint's arenas cost more than simulating)."""
        graph = self.rewritten.graph
        return self.budgets(graph, list(range(len(graph))))


@dataclass(frozen=True)
class Choice:
    """The buckets kept (the best trial, None when no merge paid), how many candidate merges
    were simulated (``examined``, replayed) and left unexamined, how many bucketed programs
    were rewritten to prove them, the work spent (:data:`BUCKET_WORK`'s units) and how many
    rewritten programs' makespans ``differed`` from the replay (0: the replay is exact)."""

    best: Trial | None
    examined: int
    unexamined: int
    rewrites: int = 0
    replayed: int = 0
    differed: int = 0


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
                   baseline_us: float, *, compute_slowdown: float = 1.0) -> Choice:
    """The greedy choice of the module docstring on ``order`` (whose makespan is
    ``baseline_us``). ``estimate`` gives a new node its duration; ``fits`` says whether a
    bucketed program keeps the memory budgets. With a ``compute_slowdown`` the replay, which
    does not model it, only proposes merges: each kept one is proven by the simulator with it."""
    sched = Schedule.of(graph, order)
    chooser = _Chooser(graph, sched, durations_us, estimate, fits, baseline_us, compute_slowdown)
    for members in candidate_classes(graph, sched):
        chooser.grow(members)
    return chooser.choice()


class _Chooser:
    """The state of :func:`choose_buckets`: the buckets kept and proven (rewritten, simulated
    and within the budgets), and the replayed program (:class:`~commopt.bucketing.replay.Program`)
    of those plus the run growing now."""

    def __init__(self, graph: Graph, order: Schedule, durations_us: Sequence[float],
                 estimate: Callable[[Node, Graph], float],
                 fits: Callable[[Graph, Sequence[int]], bool], baseline_us: float,
                 compute_slowdown: float = 1.0) -> None:
        self.graph, self.order, self.durations_us = graph, order, durations_us
        self.compute_slowdown = compute_slowdown
        self.estimate, self.fits = estimate, fits
        self.kept: list[Bucket] = []
        self.best: Trial | None = None
        self.best_us = baseline_us
        self.examined = self.unexamined = self.rewrites = self.differed = 0
        self.steps = 0  # work of replays past and rewrites (see BUCKET_WORK)
        #: in the class being cut, the length of the last bucket the memory budget cut short
        self.cut: int | None = None
        #: the longest prefix of the growing run already proven, with its trial
        self.proven: tuple[list[int], Trial] | None = None
        names = _Names(graph)
        tags: list[str] = []

        def tag(k: int) -> str:
            while len(tags) <= k:
                tags.append(names.prefix())
            return tags[k]

        self.tag = tag
        self.program: Program | None = None

    def grow(self, members: list[int]) -> None:
        """Cut one class into buckets: a run grows by its next member while the replayed
        makespan drops; each run is then proven (:meth:`_prove`)."""
        self.cut = None
        current = [members[0]]
        k = 1
        while k < len(members):
            cand = [*current, members[k]]
            if self._pays(cand, len(current) > 1):
                current, k = cand, k + 1
                continue
            proven = self._prove(current)
            current = [current[proven]] if proven < len(current) else [members[k]]
            k = members.index(current[0]) + 1
        self._prove(current)

    def _pays(self, cand: list[int], replaces: bool) -> bool:
        """Whether ``cand`` (the run growing now plus one member) shortens the replayed
        makespan; at one more member than the class's last bucket the memory cut short
        (:attr:`cut`), it must also be proven."""
        if self._spent() or bucket_problem(self.graph, self.order, cand) is not None:
            return False
        if self.program is None:
            self.program = self._replayed()
        self.examined += 1
        program = self.program
        us = program.try_bucket(Bucket(tuple(cand)), len(self.kept) if replaces else None)
        if us is None or not us < program.makespan_us * (1.0 - MIN_GAIN):
            return False
        if self.cut is not None and len(cand) == self.cut + 1:
            trial = self._trial(cand, us)
            if not self._good(trial):
                return False
            self.proven = (cand, trial)
        program.accept()
        return True

    def _prove(self, run: list[int]) -> int:
        """Keep ``run`` as a bucket when the rewritten program, simulated, is faster than the
        buckets kept and fits the budgets. Otherwise keep its longest prefix that does
        (halving: memory grows with the run; :attr:`cut` remembers its length), replay the
        program again, and return the prefix's length (1: none)."""
        if len(run) < 2:
            return len(run)
        lo, best = 1, None
        if self.proven is not None and run[:len(self.proven[0])] == self.proven[0]:
            lo, best = len(self.proven[0]), self.proven[1]
        if lo < len(run):
            trial = self._trial(run, self.program.makespan_us)
            if self._good(trial):
                lo, best = len(run), trial
        if lo == len(run):
            self._keep(run, best)
            return lo
        hi = len(run)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            t = self._trial(run[:mid], None)
            if self._good(t):
                lo, best = mid, t
            else:
                hi = mid
        if best is not None:
            self._keep(run[:lo], best)
        self.cut, self.proven = lo, None
        self.steps += self.program.steps
        self.program = self._replayed()
        return lo

    def _trial(self, run: list[int], replayed_us: float | None) -> Trial:
        """The program with the kept buckets and ``run`` rewritten and simulated (counting
        where the replay, ``replayed_us``, said otherwise: it never should)."""
        self.rewrites += 1
        self.steps += len(self.graph) * REWRITE_WORK
        trial = _trial(self.graph, self.order, [*self.kept, Bucket(tuple(run))], self.durations_us,
                       self.estimate, self.fits, self.compute_slowdown)
        if replayed_us is not None and self.compute_slowdown == 1.0 and trial.makespan_us != replayed_us:
            self.differed += 1
        return trial

    def _good(self, trial: Trial) -> bool:
        return trial.makespan_us < self.best_us * (1.0 - MIN_GAIN) and trial.fits()

    def _keep(self, run: list[int], trial: Trial) -> None:
        self.kept.append(Bucket(tuple(run)))
        self.best, self.best_us = trial, trial.makespan_us
        self.proven = None

    def _replayed(self) -> Program:
        """The replayed program of the kept buckets."""
        program = Program(self.graph, self.order, self.durations_us, self.estimate, self.tag)
        for b in self.kept:
            program.try_bucket(b, None)
            program.accept()
        return program

    def _work(self) -> int:
        return self.steps + (0 if self.program is None else self.program.steps)

    def _spent(self) -> bool:
        if self._work() < BUCKET_WORK:
            return False
        self.unexamined += 1
        return True

    def choice(self) -> Choice:
        """What was chosen."""
        return Choice(self.best, self.examined, self.unexamined, self.rewrites, self._work(), self.differed)


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
           fits: Callable[[Graph, Sequence[int]], bool], compute_slowdown: float = 1.0) -> Trial:
    from commopt.sim.engine import makespan_us

    rw = apply_buckets(graph, order, buckets)
    new = rw.graph
    durs = tuple(durations_us[o] if o >= 0 else estimate(new.nodes[i], new)
                 for i, o in enumerate(rw.origin))
    identity = list(range(len(new)))
    return Trial(rw, durs, makespan_us(new, identity, durs, compute_slowdown=compute_slowdown), fits)
