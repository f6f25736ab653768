"""Exact mode: solve the simulator's scheduling problem with OR-Tools CP-SAT (``commopt[exact]``).

    outcome = improve(graph, heuristic_order, ctx, time_limit_s=20)

The model (:mod:`commopt.solver.cpsat`) is exactly what the simulator scores
(:mod:`commopt.solver.problem`), warm-started with the heuristic's order and solved under a
time limit; graphs with more placed nodes than :data:`WHOLE_GRAPH_NODES` are improved window
by window (:mod:`commopt.solver.window`). The solution is read back as an order, simulated,
checked against every invariant and the memory budget, and kept only when its makespan is
strictly below the heuristic's: exact mode never returns a worse order. Memory: the first
solve leaves the budget out (so its proven bound holds for every order that keeps the
invariants, budget or not: it feeds the certificate, :mod:`commopt.certificate`) and then
shortens storage lifetimes at the makespan it found; when that order does not fit, a second
solve limits live memory to the budget (stricter than the budget along the order, and
without the arenas of the footprint budget), and any order over a budget is refused (the
run says so). Windows leave memory out of the model.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from commopt.errors import OptionError
from commopt.invariants import check_order
from commopt.ir.graph import Graph
from commopt.ir.schedule import Schedule
from commopt.passes.base import PassContext
from commopt.schemas.summary import SolverRun
from commopt.sim.engine import node_times
from commopt.sim.result import SimResult
from commopt.solver.problem import assemble

__all__ = ["DEFAULT_TIME_LIMIT_S", "SOLVERS", "WHOLE_GRAPH_NODES", "ExactOutcome", "improve",
           "require_ortools"]

#: ``--solver`` choices: the default heuristic pipeline, or the pipeline then the exact solver.
SOLVERS = ("heuristic", "exact")
DEFAULT_TIME_LIMIT_S = 20.0
#: Graphs with more placed nodes (compute, waits, collectives) are improved by windows.
WHOLE_GRAPH_NODES = 1500
#: A makespan counts as better only when lower by more than this (relative): float noise.
_BETTER = 1e-9


@dataclass(frozen=True)
class ExactOutcome:
    """The order exact mode returns (the heuristic's unless the solver's is strictly better),
    its simulation, and the run's record for the summary."""

    order: Schedule
    sim: SimResult
    run: SolverRun


def require_ortools() -> None:
    """:class:`OptionError` naming the extra to install when OR-Tools is missing."""
    try:
        import ortools.sat.python.cp_model  # noqa: F401
    except ImportError:
        raise OptionError("the exact solver needs OR-Tools: pip install 'commopt[exact]' "
                          "(or pip install ortools)", field="--solver") from None


def improve(graph: Graph, order: Sequence[int], ctx: PassContext, *, time_limit_s: float,
            workers: int | None = None, timings: bool = True) -> ExactOutcome:
    """The best order exact mode finds within ``time_limit_s``, starting from ``order``
    (the heuristic's), never worse than it (module docstring)."""
    from commopt.solver.problem import problem
    from commopt.solver.window import improve_windows

    require_ortools()
    if not (time_limit_s > 0):
        raise OptionError(f"{time_limit_s!r} is not a time limit > 0 seconds", field="--time-limit")
    t0 = time.perf_counter()
    workers = workers or min(8, os.cpu_count() or 1)
    base = Schedule.of(graph, order)
    base_sim = ctx.simulate(graph, base)
    prob = problem(graph, ctx.durations_us, allow_cross_group_reorder=ctx.allow_cross_group_reorder)
    best = {"order": base, "sim": base_sim}
    refused: list[str] = []

    def accept(candidate: list[int]) -> bool:
        sim = ctx.simulate(graph, candidate)
        if sim.makespan_us >= best["sim"].makespan_us * (1.0 - _BETTER):
            return False
        why = _refusal(graph, candidate, ctx)
        if why is not None:
            refused.append(why)
            return False
        best.update(order=Schedule.of(graph, candidate), sim=sim)
        return True

    bound_us = None
    note = None
    if len(prob.placed) <= WHOLE_GRAPH_NODES:
        status, bound_us, note = _solve_whole(graph, prob, base, ctx, time_limit_s, workers, accept)
    else:
        _, note = improve_windows(graph, prob, base, time_limit_s=time_limit_s, workers=workers,
                                  accept=accept)
        status = "windows"
    kept = best["order"] is not base
    if refused:
        note = "; ".join(filter(None, [note, f"solver's order refused: {refused[-1]}"]))
    run = SolverRun(status=status, time_limit_seconds=time_limit_s,
                    seconds=round(time.perf_counter() - t0, 6) if timings else None,
                    makespan_us=best["sim"].makespan_us, proven_bound_us=bound_us, kept=kept,
                    note=note)
    return ExactOutcome(best["order"], best["sim"], run)


#: With a memory budget, the share of the time limit solved without it (the proven bound);
#: the rest solves with live memory limited to the budget when that found a better order over
#: the budget, else goes on searching without it.
FREE_SHARE = 0.4


def _solve_whole(graph: Graph, prob, base: Schedule, ctx: PassContext, time_limit_s: float,
                 workers: int, accept) -> tuple[str, float | None, str | None]:
    """Solve the whole graph, warm-started with ``base``'s schedule (in integer units): first
    without memory (its bound holds for every order), then, when that order does not fit
    the budget, with live memory limited to it. Returns the status, the proven bound (us)
    and a note."""
    from commopt.solver import cpsat
    from commopt.solver.problem import storages

    t0 = time.perf_counter()
    times = node_times(graph, base, [float(u) for u in prob.units])
    hint = {i: (int(times.issue[i]) if not prob.on_compute_stream(i) else int(times.start[i]),
                int(times.start[i])) for i in prob.placed}
    horizon = max(1, max((int(times.end[i]) for i in prob.placed), default=0))
    stores, resident = storages(graph)
    budget = ctx.memory_budget_bytes
    share = 1.0 if budget is None else FREE_SHARE
    sol = cpsat.solve(prob, prob.placed, hint=hint, horizon=horizon, time_limit_s=share * time_limit_s,
                      workers=workers, stores=stores)
    bound = sol.bound / prob.units_per_us if sol.bound is not None else None
    if any(accept(assemble(graph, seq)) for seq in sol.sequences) or budget is None:
        return sol.status, bound, None
    left = time_limit_s - (time.perf_counter() - t0)
    if left <= 0.05 or sol.status == "optimal" and (sol.objective is None or sol.objective >= horizon):
        return sol.status, bound, None
    if sol.objective is None or sol.objective >= horizon:  # nothing better yet: search on
        more = cpsat.solve(prob, prob.placed, hint=hint, horizon=horizon, time_limit_s=left,
                           workers=workers, stores=stores)
        if more.bound is not None:
            bound = max(bound or 0.0, more.bound / prob.units_per_us)
        found = any(accept(assemble(graph, seq)) for seq in more.sequences)
        note = None if found or more.objective is None or more.objective >= horizon else \
            "a better order was found too late to fit it to the memory budget"
        return more.status, bound, note
    limited = cpsat.solve(prob, prob.placed, hint=hint, horizon=horizon, time_limit_s=left,
                          workers=workers, stores=stores, capacity=budget - resident)
    found = any(accept(assemble(graph, seq)) for seq in limited.sequences)
    note = (f"with live memory limited to the budget: {limited.status}"
            + ("" if found else ", no better order within the budget"))
    return sol.status, bound, note


def _refusal(graph: Graph, order: list[int], ctx: PassContext) -> str | None:
    """Why ``order`` cannot be returned (the memory budget), or None. An invariant broken is
    a bug in the model, raised."""
    from commopt.passes._common import within_budget

    violations = check_order(graph, order, allow_cross_group_reorder=ctx.allow_cross_group_reorder)
    if violations:  # the model encodes every invariant: this is a bug in it
        raise AssertionError(f"the exact solver's order breaks an invariant: {violations[0]}")
    if not within_budget(graph, order, ctx.memory_budget_bytes):
        return "its padded live-tensor peak exceeds the memory budget"
    if not ctx.fits(graph, order):
        return "its footprint (arenas + other live tensors) exceeds the memory budget"
    return None
