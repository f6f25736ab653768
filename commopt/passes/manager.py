"""The pass manager: runs a pipeline, records each pass's effect and checks every result.

After every pass the order must be a permutation of the graph's nodes that keeps the
invariants (:func:`commopt.invariants.check_order`); anything else is a bug in that pass and is
raised as :class:`~commopt.errors.InvariantViolation` naming the pass and the passes that
ran before it. An order that exceeds the memory budget (padded peak, the same on every
rank) is not taken: the pipeline goes on with the pass's input order and the record says so.

A pass may rewrite the graph (:class:`~commopt.passes.base.GraphChange`, e.g. bucketing): its
order is checked on the new graph, which the passes after it work on; the result's ``graph``
and ``durations_us`` are the final graph's, ``initial`` stays the input graph's simulation.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from commopt.errors import CommoptError, InvariantViolation, PassError
from commopt.forked import ChildDied, RenderJob, compute_beside, worth_forking
from commopt.gc_freeze import collector_paused, freeze_long_lived
from commopt.invariants import check_order
from commopt.ir.graph import Graph
from commopt.ir.schedule import Schedule
from commopt.passes._common import forget_graph
from commopt.passes.base import GraphChange, Pass, PassContext
from commopt.sim import SimResult, peak_memory


@dataclass(frozen=True)
class PassRecord:
    """What one pass did: simulated numbers before and after, wall time, whether kept.

    ``before``/``after`` hold the numbers of the simulation
    (:meth:`~commopt.passes.base.PassContext.simulated`): their events, collective timings
    and memory curve are empty, except for the pipeline's input order (the first ``before``,
    its ``initial``) and final order (the last ``after``, its ``final``), simulated in full
    for the reports."""

    name: str
    before: SimResult
    after: SimResult
    seconds: float
    changed: bool
    note: str | None = None


@dataclass
class PipelineResult:
    """The final order, the simulation of the input order and a record per pass.

    ``graph``/``durations_us``: the graph ``order`` orders and its durations, when a pass
    rewrote the input graph (None: the input graph and durations); ``changes`` the record
    and :class:`~commopt.passes.base.GraphChange` of each rewrite, in pipeline order.
    """

    order: Schedule
    initial: SimResult
    final: SimResult
    records: list[PassRecord] = field(default_factory=list)
    graph: Graph | None = None
    durations_us: tuple[float, ...] | None = None
    changes: list[tuple[PassRecord, GraphChange]] = field(default_factory=list)

    def final_graph(self, source: Graph) -> Graph:
        """The graph the final order belongs to (``source`` when no pass rewrote it)."""
        return source if self.graph is None else self.graph

    def with_final(self, sim: SimResult) -> PipelineResult:
        """This result with ``sim``, its final order simulated in full, as its final
        simulation and its last record's: what a run with ``final_in_full=False``
        (:meth:`PassManager.run`) leaves to its caller."""
        records = list(self.records)
        if records and records[-1].after is self.final:
            records[-1] = replace(records[-1], after=sim)
        return replace(self, final=sim, records=records)


class PassManager:
    """Runs ``passes`` in sequence (see the module docstring). With ``jobs`` >= 2, on a
    large graph, the first pass runs in a forked child while this process runs the others
    as if it kept its input order (:meth:`_first_pass_beside`)."""

    def __init__(self, passes: Sequence[Pass], *, jobs: int = 1) -> None:
        self.passes = list(passes)
        self.jobs = jobs

    def all_builtin(self) -> bool:
        """Whether every pass is commopt's own: only then may a pass run in a forked child
        (a plug-in could have effects that must happen once, in this process)."""
        return all(type(p).__module__.startswith("commopt.") for p in self.passes)

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext, *,
            final_in_full: bool = True) -> PipelineResult:
        """Run the pipeline on ``order``; raises InvariantViolation when a pass breaks one.

        ``final_in_full=False``: the final order's simulation holds its numbers only, like
        the other passes' orders (:meth:`PassContext.simulated`), for a caller that starts
        work needing the order alone before it simulates the order in full
        (:meth:`PipelineResult.with_final`).

        The cyclic garbage collector is paused meanwhile (:func:`collector_paused`): the
        passes and simulations build and drop hundreds of thousands of acyclic objects
        (events, tuples, lists) that reference counting frees, and each collection they
        trigger would rescan every young survivor for cycles that are not there. Inside a
        command what the run kept (the result's orders and simulations) is frozen before the
        collector resumes (:func:`freeze_long_lived`), or its first collection scans it all."""
        with collector_paused():
            result = self._run(graph, order, ctx, final_in_full)
            freeze_long_lived()
            return result

    def _run(self, graph: Graph, order: Sequence[int], ctx: PassContext,
             final_in_full: bool) -> PipelineResult:
        """:meth:`run`, with the collector as the caller left it."""
        current = Schedule.of(graph, order)
        sim = ctx.simulate(graph, current)
        run = _Run(graph, ctx, current, sim, PipelineResult(order=current, initial=sim, final=sim),
                   final_in_full=final_in_full)
        beside = self._first_pass_beside(run)
        if beside is None:
            self._steps(run, 0)
        else:
            try:
                run = self._after_first_pass_beside(run, beside)
            finally:
                beside.cancel()
        run.result.order = run.current
        run.result.final = run.sim
        for done in {id(g): g for g in (graph, run.graph)}.values():  # the passes' caches of them
            forget_graph(done)
        for used in {id(c): c for c in (ctx, run.ctx)}.values():
            used.forget_orders()
        return run.result

    def _first_pass_beside(self, run: _Run) -> RenderJob | None:
        """A forked child running the first pass on the input order, or None: only with
        ``jobs`` >= 2 on a large graph (:func:`commopt.forked.worth_forking`), a pipeline of
        commopt's own passes (a plug-in could have effects that must happen once, in this
        process) of two or more, and an input order that keeps the invariants (the order the
        first pass most often returns at scale: compute-overlap's one try at 100k nodes does
        not fit the footprint budget). The child reports ``("same", seconds)`` when the pass
        kept the order, ``("order", order, seconds)`` for another order, and ``("change",)``
        for a rewritten graph (this process then runs the pass again itself)."""
        passes = self.passes
        if len(passes) < 2 or not worth_forking(len(run.graph), self.jobs) or not self.all_builtin():
            return None
        if check_order(run.graph, run.current, allow_cross_group_reorder=run.ctx.allow_cross_group_reorder):
            return None
        first, graph, current, ctx = passes[0], run.graph, run.current, run.ctx

        def work() -> tuple:
            t0 = time.perf_counter()
            proposed = _run_pass(first, graph, current, ctx, [])
            seconds = time.perf_counter() - t0
            if isinstance(proposed, GraphChange):
                return ("change",)
            if proposed == current:
                return ("same", seconds)
            return ("order", list(proposed), seconds)

        return compute_beside(work)

    def _after_first_pass_beside(self, run: _Run, beside: RenderJob) -> _Run:
        """The pipeline's run with its first pass in ``beside`` (:meth:`_first_pass_beside`):
        the other passes run here from the input order meanwhile and are kept when the first
        pass kept that order, the same records as a run in one process; otherwise (or when
        the child died) they run again from the first pass's result. An error of the other
        passes is raised only where a run in one process would meet it."""
        ahead = _Run(run.graph, run.ctx, run.current, run.sim,
                     PipelineResult(order=run.current, initial=run.sim, final=run.sim),
                     checked=True, ran=[self.passes[0].name], final_in_full=run.final_in_full)
        failed: Exception | None = None
        try:
            self._steps(ahead, 1)
        except Exception as exc:  # raised only if the first pass kept the order (as in one process)
            failed = exc
        try:
            outcome = beside.value()
        except ChildDied:  # the first pass runs here
            outcome = ("change",)
        if outcome[0] == "same":
            if failed is not None:
                raise failed
            # the input order's simulation before and after (the passes meanwhile began from it)
            record = PassRecord(self.passes[0].name, run.sim, run.sim, outcome[1], False, None)
            ahead.result.records.insert(0, record)
            return ahead
        if outcome[0] == "order":
            self._steps(run, 0, first=(outcome[1], outcome[2]))
        else:
            self._steps(run, 0)
        return run

    def _steps(self, run: _Run, start: int, first: tuple[list[int], float] | None = None) -> None:
        """Run the passes from index ``start`` on, advancing ``run``. ``first``: the order
        and seconds of pass ``start`` when it already ran elsewhere."""
        for k in range(start, len(self.passes)):
            p = self.passes[k]
            graph, ctx, current, sim = run.graph, run.ctx, run.current, run.sim
            # its order is the final one: simulated in full (unless the caller does it)
            last = k == len(self.passes) - 1 and run.final_in_full
            if first is not None and k == start:
                proposed, seconds = first
            else:
                t0 = time.perf_counter()
                proposed = _run_pass(p, graph, current, ctx, run.ran)
                seconds = time.perf_counter() - t0
            if isinstance(proposed, GraphChange):
                _check(proposed.graph, proposed.order, ctx, p.name, run.ran)
                run.checked = True
                run.graph, run.ctx = proposed.graph, ctx.with_durations(proposed.durations_us)
                run.current = Schedule.of(run.graph, proposed.order)
                after = (run.ctx.simulate if last else run.ctx.simulated)(run.graph, run.current)
                record = PassRecord(p.name, sim, after, seconds, True, proposed.note)
                _take_change(run.result, record, proposed, run.ctx)
                run.ran.append(p.name)
                run.sim = record.after
                continue
            if not (run.checked and proposed == current):  # an order already checked is not again
                _check(graph, proposed, ctx, p.name, run.ran)
            new = Schedule.of(graph, proposed)  # as is when the pass returned a Schedule
            after = (ctx.simulate if last else ctx.simulated)(graph, new)
            note = None
            if new != current and not ctx.fits(graph, new) and _keeps_budget_better(graph, current, new, ctx):
                note = "order not taken: " + _budget_words(graph, new, ctx)
                new, after = current, ctx.simulate(graph, current) if last else sim
            else:
                run.checked = True
            run.result.records.append(PassRecord(p.name, sim, after, seconds, new != current, note))
            run.ran.append(p.name)
            run.current, run.sim = new, after


@dataclass
class _Run:
    """Where a pipeline's run stands: the graph and context the next pass gets (a pass may
    rewrite the graph), its input order and that order's simulation, whether the order passed
    :func:`~commopt.invariants.check_order` (the input order is not checked), the passes run
    so far and their records, and whether the final order is simulated in full here
    (:meth:`PassManager.run`'s ``final_in_full``)."""

    graph: Graph
    ctx: PassContext
    current: Schedule
    sim: SimResult
    result: PipelineResult
    checked: bool = False
    ran: list[str] = field(default_factory=list)
    final_in_full: bool = True


def _take_change(result: PipelineResult, record: PassRecord, change: GraphChange,
                 ctx: PassContext) -> None:
    result.records.append(record)
    result.graph, result.durations_us = change.graph, ctx.durations_us
    result.changes.append((record, change))


def _keeps_budget_better(graph: Graph, current: Schedule, new: Schedule, ctx: PassContext) -> bool:
    """Whether the order a pass got is better for the budget than the over-budget order it
    returned: it fits, or (already over) its padded peak is lower."""
    if ctx.fits(graph, current):
        return True
    return peak_memory(graph, new, padded=True)[0] > peak_memory(graph, current, padded=True)[0]


def _budget_words(graph: Graph, order: Schedule, ctx: PassContext) -> str:
    """Which budget ``order`` exceeds and by how much, for the pass record."""
    peak = peak_memory(graph, order, padded=True)[0]
    if ctx.memory_budget_bytes is not None and peak > ctx.memory_budget_bytes:
        return f"padded peak memory {peak} B exceeds the budget {ctx.memory_budget_bytes} B"
    fb = ctx.footprint_budget
    return (f"footprint {fb.peak(graph, order)} B (arenas + other live tensors) exceeds the "
            f"budget {fb.budget_bytes} B")


def _run_pass(p: Pass, graph: Graph, order: Schedule, ctx: PassContext,
              ran: list[str]) -> list[int] | Schedule | GraphChange:
    """``p``'s order; an exception inside a plug-in pass becomes a :class:`PassError` naming
    the pass and the passes before it (a user error: exit 2, traceback under ``--debug``). A
    built-in pass's exception is a bug in commopt and propagates as one."""
    try:
        out = p.run(graph, order, ctx)
        return out if isinstance(out, (GraphChange, Schedule)) else list(out)
    except (CommoptError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # SystemExit too: a plug-in must not end the run
        if type(p).__module__.startswith("commopt."):
            raise
        before = f"after {', '.join(ran)}" if ran else "as the first pass"
        raise PassError(f"pass {p.name!r} ({before}) failed: {type(exc).__name__}: {exc}",
                        field="passes") from exc


def _check(graph: Graph, order: list[int], ctx: PassContext, name: str, ran: list[str]) -> None:
    before = f"after {', '.join(ran)}" if ran else "as the first pass"
    violations = check_order(graph, order, allow_cross_group_reorder=ctx.allow_cross_group_reorder)
    if violations:
        shown = "; ".join(str(v) for v in violations[:5])
        more = f" (and {len(violations) - 5} more)" if len(violations) > 5 else ""
        raise InvariantViolation(
            f"pass {name!r} ({before}) produced an order that breaks invariants: {shown}{more}. "
            "This is a bug in the pass."
        )
