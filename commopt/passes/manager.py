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
from dataclasses import dataclass, field

from commopt.errors import CommoptError, InvariantViolation, PassError
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


class PassManager:
    """Runs ``passes`` in sequence (see the module docstring)."""

    def __init__(self, passes: Sequence[Pass]) -> None:
        self.passes = list(passes)

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> PipelineResult:
        """Run the pipeline on ``order``; raises InvariantViolation when a pass breaks one.

        The cyclic garbage collector is paused meanwhile (:func:`collector_paused`): the
        passes and simulations build and drop hundreds of thousands of acyclic objects
        (events, tuples, lists) that reference counting frees, and each collection they
        trigger would rescan every young survivor for cycles that are not there. Inside a
        command what the run kept (the result's orders and simulations) is frozen before the
        collector resumes (:func:`freeze_long_lived`), or its first collection scans it all."""
        with collector_paused():
            result = self._run(graph, order, ctx)
            freeze_long_lived()
            return result

    def _run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> PipelineResult:
        """:meth:`run`, with the collector as the caller left it."""
        source, source_ctx = graph, ctx
        current = Schedule.of(graph, order)
        sim = ctx.simulate(graph, current)
        result = PipelineResult(order=current, initial=sim, final=sim)
        ran: list[str] = []
        checked = False  # whether ``current`` passed check_order (the input order is not checked)
        for k, p in enumerate(self.passes):
            last = k == len(self.passes) - 1  # its order is the final one: simulated in full
            t0 = time.perf_counter()
            proposed = _run_pass(p, graph, current, ctx, ran)
            seconds = time.perf_counter() - t0
            if isinstance(proposed, GraphChange):
                _check(proposed.graph, proposed.order, ctx, p.name, ran)
                checked = True
                graph, ctx = proposed.graph, ctx.with_durations(proposed.durations_us)
                current = Schedule.of(graph, proposed.order)
                after = (ctx.simulate if last else ctx.simulated)(graph, current)
                record = PassRecord(p.name, sim, after, seconds, True, proposed.note)
                _take_change(result, record, proposed, ctx)
                ran.append(p.name)
                sim = record.after
                continue
            if not (checked and proposed == current):  # an order already checked is not again
                _check(graph, proposed, ctx, p.name, ran)
            new = Schedule.of(graph, proposed)  # as is when the pass returned a Schedule
            after = (ctx.simulate if last else ctx.simulated)(graph, new)
            note = None
            if new != current and not ctx.fits(graph, new) and _keeps_budget_better(graph, current, new, ctx):
                note = "order not taken: " + _budget_words(graph, new, ctx)
                new, after = current, ctx.simulate(graph, current) if last else sim
            else:
                checked = True
            result.records.append(PassRecord(p.name, sim, after, seconds, new != current, note))
            ran.append(p.name)
            current, sim = new, after
        result.order = current
        result.final = sim
        for done in {id(g): g for g in (source, graph)}.values():  # the passes' caches of them
            forget_graph(done)
        for used in {id(c): c for c in (source_ctx, ctx)}.values():
            used.forget_orders()
        return result


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
