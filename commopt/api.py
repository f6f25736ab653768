"""``commopt.optimize``: load, estimate, run the pass pipeline, and (optionally) write.

    result = commopt.optimize("model.pt2", output_dir="out/")
    result.summary.after.exposed_comm_us

The CLI's ``optimize`` command is a thin layer over :func:`optimize`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from commopt.assumed_sizes import DEFAULT_SCALES
from commopt.bucketing.summary import bucketing_summary
from commopt.buffers.footprint import footprint_summary
from commopt.cross_group import decide_cross_group, not_one_program, within_groups
from commopt.errors import OptionError
from commopt.estimators.options import EstimatorOptions
from commopt.gc_freeze import collector_paused, freeze_long_lived, freezing_gc
from commopt.ir.graph import Graph
from commopt.ir.schedule import Schedule
from commopt.ir.sizes import parse_assumptions
from commopt.outputs import (
    build_and_write_outputs,
    build_outputs,
    check_output_dir,
    estimator_inputs,
    output_names_known_before_load,
    start_planning,
    write_outputs,
)
from commopt.passes.base import PassContext
from commopt.passes.manager import PassManager, PipelineResult
from commopt.progress import SILENT, Progress
from commopt.result import OptimizeResult, OutputOptions
from commopt.schemas.summary import (
    CollectiveCount,
    CrossGroupOrder,
    PassSummary,
    PassTiming,
    SimNumbers,
    Summary,
    Timings,
)
from commopt.sim.memory import DEFAULT_MAX_MEMORY_INCREASE
from commopt.sim.robustness import robustness_summary

__all__ = ["OptimizeResult", "OutputOptions", "build_outputs", "optimize", "write_outputs"]

#: Largest graph on which collectives of one group are reordered by default: the passes run
#: twice there (with and without each group's order), which at this size already costs
#: seconds; above it one run keeps each group's order and ``--reorder-within-groups`` asks.
WITHIN_GROUPS_DEFAULT_MAX_NODES = 25_000
#: A free order this close to its lower bound is kept without running the passes again with
#: each group's order: that run could finish at most this fraction sooner.
WITHIN_GROUPS_BOUND_SLACK = 0.001

@freezing_gc
def optimize(
    graph: Graph | str | os.PathLike[str] | Any,
    *,
    passes: str | Sequence[str] | None = None,
    max_memory_increase: float = DEFAULT_MAX_MEMORY_INCREASE,
    allow_cross_group_reorder: bool | None = None,
    reorder_within_groups: bool | None = None,
    estimator: str | EstimatorOptions = "analytical",
    durations_us: Sequence[float] | None = None,
    groups: str | os.PathLike[str] | None = None,
    mesh: str | None = None,
    world_size: int | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    align: int | None = None,
    comm_buffers: str | None = None,
    persistent_params: str | None = None,
    memory_accounting: str | None = None,
    solver: str = "heuristic",
    time_limit_s: float | None = None,
    assume: Mapping[str, int] | Sequence[str] | None = None,
    size_scales: Sequence[float] = DEFAULT_SCALES,
    timings: bool = True,
    force: bool = False,
    jobs: int = 1,
    progress: Progress = SILENT,
) -> OptimizeResult:
    """Reorder ``graph`` so communication overlaps with compute, within a memory budget.

    ``graph``: a Graph, a path (``.pt2``/``.json``) or a torch object (see
    :func:`commopt.io.load_graph`; ``groups``/``mesh``/``world_size`` give process-group
    sizes and ranks, and an in-memory program loaded while ``torch.distributed`` is
    initialized gets the live groups). A group whose size nothing proves is a
    :class:`~commopt.errors.GraphError`: the cost of its collectives depends on it. Load
    warnings (e.g. unknown ranks) lead ``summary.notes``, so they reach the terminal,
    ``summary.json`` and the report.
    ``passes``: ``"a,b,c"`` or a list (default :data:`commopt.passes.DEFAULT_PIPELINE`).
    ``max_memory_increase``: peak live memory may grow by at most this fraction of the
    original order's peak. ``allow_cross_group_reorder``: None (default) lets collectives of
    different groups change their relative order exactly where every rank provably runs this
    program in one order (:func:`commopt.cross_group.decide_cross_group`); True/False force it;
    the summary's ``cross_group`` says which rule applied and why. ``reorder_within_groups``:
    None (default) lets collectives of one group change their relative order too, under the
    same proof, unless cross-group reordering is turned off or the graph has more than
    :data:`WITHIN_GROUPS_DEFAULT_MAX_NODES` nodes (a note says so); True asks for it (an
    :class:`~commopt.errors.OptionError` where it is not proven), False keeps each group's
    order (:func:`commopt.cross_group.within_groups`). The passes then run twice, with and
    without each group's order, and the faster result is kept (once where the free order is
    within :data:`WITHIN_GROUPS_BOUND_SLACK` of its lower bound). Durations come from ``estimator`` — a spec such as
    ``"profile,analytical"`` or an :class:`~commopt.estimators.EstimatorOptions` (hardware,
    GPUs per node, profile and table files) — unless ``durations_us`` gives them. A graph
    without collectives keeps its order. With ``output_dir`` the full output set is built
    (:func:`build_outputs`; ``align`` — a power of two up to 2 MiB, checked before any work —
    ``comm_buffers`` and ``persistent_params`` — groups whose all_gathered parameters live in
    the arena for the whole step, :mod:`commopt.buffers.persistent` — shape the buffer plan) and written there (:func:`write_outputs`: no
    output may be an input, ``manifest.json`` last marks the set complete), and the result
    carries both; a directory holding files commopt did not write is refused before any
    work unless ``force``. ``timings=False`` leaves wall times out of the summary so re-runs are
    byte-identical. ``memory_accounting``: ``"footprint"`` (default, unless ``comm_buffers`` is
    ``"none"``) budgets what the emitted runner holds, its arenas included; ``"live-tensors"`` budgets only the live-tensor peak
    (a program without persistent buffers, or a comparison with a scheduler that has none);
    the summary says which one was used. ``solver="exact"`` runs the exact solver after the
    passes (:func:`commopt.solver.improve`, needs ``commopt[exact]``) for ``time_limit_s``
    seconds (default :data:`commopt.solver.DEFAULT_TIME_LIMIT_S`): it keeps the passes'
    order unless it finds a strictly better one, and its proven bound feeds the summary's
    certificate. Data-dependent sizes (e.g. all_to_all splits read
    back with ``.tolist()``) get assumed values, stated in ``summary.data_dependent`` and its
    notes next to every number: ``assume`` sets them (``{"u2": 40}`` or ``["u2=40", "*=16"]``;
    ``"*"`` every symbol not named), and the summary simulates both orders again with every
    such size at each of ``size_scales`` x its assumed value.
    ``jobs``: processes that may do the work; with 2 or more, on a large graph, a forked
    child simulates the input order's robustness scenarios (and packs its buffers) while the
    passes run, and others generate the runner and render the trace while this process
    builds the rest (:mod:`commopt.forked`: faster, and more memory, since a child copies the
    pages it reads). The result is the same either way.
    ``progress`` hears about each stage (load, estimate, each pass, ...).
    """
    from commopt.buffers.persistent import find_persistent_params
    from commopt.io import graph_suffix, load_graph
    from commopt.io.groups import require_known_group_sizes
    from commopt.passes.registry import get_registry, parse_pipeline
    from commopt.sim.memory import check_max_memory_increase

    check_max_memory_increase(max_memory_increase)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise OptionError(f"jobs must be a whole number >= 1, not {jobs!r}", field="jobs")
    time_limit_s = _check_solver(solver, time_limit_s)
    assumptions = parse_assumptions(assume)
    output_options = OutputOptions(align=align, comm_buffers=comm_buffers,
                                   persistent_params=persistent_params)  # checked before the work
    if output_dir is not None:
        graph_path = graph if isinstance(graph, (str, os.PathLike)) else None
        estimator_files = estimator_inputs(estimator) if isinstance(estimator, EstimatorOptions) else []
        check_output_dir(output_dir, output_names_known_before_load(graph_path, output_dir), force=force,
                         inputs=[("GRAPH", graph_path), ("--groups", groups), *estimator_files])
    names = parse_pipeline(passes)
    registry = get_registry()
    pipeline_passes = [registry.create(n) for n in names]

    t0 = time.perf_counter()
    with progress.stage("load"), collector_paused():
        g = load_graph(graph, groups=groups, mesh=mesh, world_size=world_size, assume=assumptions)
        freeze_long_lived()  # the graph lives for the whole call: frozen before the collector resumes
    require_known_group_sizes(g)
    find_persistent_params(g, persistent_params)  # a group name the graph lacks: refused now
    t_load = time.perf_counter() - t0

    t1 = time.perf_counter()
    notes: list[str] = list(g.meta.get("load_warnings", []))
    options = None
    if durations_us is not None:
        durs = [float(d) for d in durations_us]
        if len(durs) != len(g):
            raise OptionError(f"{len(durs)} durations for a graph of {len(g)} nodes", field="durations_us")
        estimator_name = "given"
        hardware_name = None
        slowdown = _given_slowdown(estimator)
    else:
        from commopt.estimators import resolve

        options = estimator if isinstance(estimator, EstimatorOptions) else EstimatorOptions(estimator=estimator)
        with progress.stage("estimate"):
            chain = resolve(options=options)
            durs = chain.durations(g)
        estimator_name = chain.name
        hardware_name = options.hardware
        notes.extend(chain.notes)
        slowdown = chain.slowdown
    compute_slowdown = 1.0 if slowdown is None else slowdown.factor
    if slowdown is not None:
        from commopt.estimators.slowdown import slowdown_note

        notes.append(slowdown_note(slowdown) + "; the passes plan without it and keep an order "
                     "by its simulated makespan with it")
    t_est = time.perf_counter() - t1
    freeze_long_lived()  # the durations (and the estimator's caches) live on too
    cross = decide_cross_group(g, allow_cross_group_reorder, estimator=estimator_name)
    if reorder_within_groups is None and len(g) > WITHIN_GROUPS_DEFAULT_MAX_NODES:
        reorder_within_groups = False
        notes.append(f"each group's collectives keep their order: reordering within groups runs "
                     f"the passes twice and is on by default up to "
                     f"{WITHIN_GROUPS_DEFAULT_MAX_NODES:,} nodes ({len(g):,} here; "
                     f"--reorder-within-groups asks for it)")
    # where proven, the same nodes without the edges that queue a group's collectives
    g, cross = within_groups(g, cross, reorder_within_groups, estimator=estimator_name)
    allow_cross_group_reorder = cross.allowed

    t2 = time.perf_counter()
    memory_accounting = _memory_accounting(memory_accounting, output_options, notes)
    if memory_accounting not in ("footprint", "live-tensors"):
        raise OptionError(f"memory_accounting must be 'footprint' or 'live-tensors', not "
                          f"{memory_accounting!r}", field="memory_accounting")
    footprint_budget = None
    beside = _input_order_beside(g, durs, output_options, compute_slowdown, jobs,
                                 packing=output_dir is not None,
                                 bounds=memory_accounting == "footprint")  # else none beside it
    try:
        if memory_accounting == "footprint":
            with progress.stage("footprint budget"):
                footprint_budget = _footprint_budget(g, max_memory_increase, output_options)
            if beside is not None:
                with progress.stage("lower bounds (forked)"):
                    beside.take_lower_bounds()
    except BaseException:
        if beside is not None:
            beside.cancel()
        raise

    def context(graph: Graph) -> PassContext:
        return PassContext.for_graph(graph, durs, max_memory_increase=max_memory_increase,
                                     allow_cross_group_reorder=allow_cross_group_reorder,
                                     footprint_budget=footprint_budget,
                                     estimate=(lambda node, gr: chain.estimate(node, gr)[0])
                                     if options is not None else None,
                                     not_one_program=not_one_program(graph, estimator_name),
                                     compute_slowdown=compute_slowdown)

    planning = None
    try:
        ctx = context(g)
        colls = g.collectives()
        other_run: list[PassTiming] = []  # the passes' second run, with or without group order
        # where one run of the passes gives the final order, it is simulated in full (for the
        # summary and reports) once the planning child, which needs the order only, has started
        final_later = bool(g.group_order) and solver != "exact"
        if colls:
            kept_beside = None if g.group_order else _group_order_kept_beside(
                g, PassManager(pipeline_passes), context, jobs)
            try:
                with progress.stage("passes " + ",".join(names)):  # one core when the child has the other
                    pipeline = PassManager(pipeline_passes, jobs=jobs if kept_beside is None else 1).run(
                        g, g.original_order, ctx, final_in_full=not final_later)
                if not g.group_order:  # keeping each group's order is one of the free orders
                    free = g
                    with progress.stage("passes " + ",".join(names) + " (each group's order kept)"):
                        g, pipeline, other = _group_order_kept(g, pipeline, PassManager(pipeline_passes),
                                                               context, notes, kept_beside)
                    other_run = [PassTiming(name=f"{r.name} (run not kept)", seconds=round(r.seconds, 6))
                                 for r in (other.records if other is not None else ())]
                    if g is not free:
                        ctx = context(g)
            finally:
                if kept_beside is not None:
                    kept_beside.cancel()
        else:
            from commopt.sim import simulate

            sim = simulate(g, g.original_order, durs, compute_slowdown=compute_slowdown)
            pipeline = PipelineResult(order=g.original_order, initial=sim, final=sim)
            names = []
            notes.append("the graph has no collectives: nothing to overlap, order unchanged")
        g_out = pipeline.final_graph(g)  # the rewritten program when a pass rewrote it
        durs_out = list(pipeline.durations_us) if pipeline.durations_us is not None else durs
        solver_run = None
        if solver == "exact" and colls:
            with progress.stage("exact solver"):
                pipeline, solver_run = _exact(g_out, pipeline, ctx.with_durations(durs_out), time_limit_s,
                                              timings)
        saved = _as_saved(g_out, pipeline, durs_out, allow_cross_group_reorder, notes, compute_slowdown)
        # a saved order (a .pt2 archive's) is simulated in full by _as_saved
        final_later = final_later and bool(colls) and saved is pipeline
        pipeline = saved
        t_passes = time.perf_counter() - t2
        freeze_long_lived()  # the pipeline's orders and simulations are kept for the summary
        if output_dir is not None:  # the buffer plan and the runner need the order only
            planning = start_planning(g_out, pipeline.order, g, output_options, output_dir,
                                      beside.totals_of(g) if beside is not None else None, jobs,
                                      progress)
        if final_later and pipeline.final is not pipeline.initial:  # the input order's is in full
            from commopt.sim import simulate

            t3 = time.perf_counter()
            with progress.stage("simulate the final order"):
                pipeline = pipeline.with_final(simulate(g_out, pipeline.order, durs_out,
                                                        compute_slowdown=compute_slowdown))
            t_passes += time.perf_counter() - t3
            freeze_long_lived()
        if ctx.memory_budget_bytes is not None and colls:
            from commopt.sim import peak_memory

            final_peak = peak_memory(g_out, pipeline.order, padded=True)[0]
            if final_peak > ctx.memory_budget_bytes:
                notes.append(f"memory budget not met: no order within {ctx.memory_budget_bytes:,} B was "
                             f"found; the result peaks at {final_peak:,} B (padded sizes)")

        # a rewritten program (bucketing) is not re-sized: only the assumed sizes are shown
        data_dependent = _data_dependent(g, pipeline, chain.durations if options is not None and g_out is g
                                         else None,
                                         size_scales, notes, compute_slowdown)
        stem = Path(g.source_path).stem if g.source_path else g.name
        counts = Counter((g.nodes[c].collective.group, g.nodes[c].collective.type) for c in colls)
        final = pipeline.final
        from commopt.certificate import certify
        from commopt.gate import graph_identity

        certificate = certify(final, solver_run)
        with progress.stage("summary (robustness, footprint)"):
            robustness = robustness_summary(g, g.original_order, pipeline.order, durs,
                                            pipeline.initial.makespan_us, pipeline.final.makespan_us,
                                            after_graph=g_out, after_durations_us=durs_out,
                                            compute_slowdown=compute_slowdown,
                                            before_makespans=beside.makespans(g, durs)
                                            if beside is not None else None) if colls else None
            footprint = footprint_summary(g_out, pipeline.order, footprint_budget, notes) if colls else None
            graph_digest = (beside.identity(g) if beside is not None else None) \
                or graph_identity(g)  # the same nodes (a kept group order adds edges): the same program

        summary = Summary(
            graph=g.name,
            graph_digest=graph_digest,
            input=Path(g.source_path).name if g.source_path else None,
            output=stem + graph_suffix(g),
            nodes=len(g),
            collectives=len(colls),
            collectives_by_group=[CollectiveCount(group=gr, type=ty, count=n)
                                  for (gr, ty), n in sorted(counts.items())],
            estimator=estimator_name,
            hardware=hardware_name,
            compute_slowdown=slowdown,
            max_memory_increase=max_memory_increase,
            memory_budget_bytes=ctx.memory_budget_bytes,
            allow_cross_group_reorder=allow_cross_group_reorder,
            cross_group=CrossGroupOrder(allowed=cross.allowed, rule=cross.rule, reason=cross.reason,
                                        within_groups=not g.group_order),
            passes=[PassSummary(name=r.name, before=_numbers(r.before), after=_numbers(r.after),
                                changed=r.changed, note=r.note) for r in pipeline.records],
            before=_numbers(pipeline.initial),
            after=_numbers(final),
            robustness=robustness,
            memory_accounting=memory_accounting,
            footprint=footprint,
            bucketing=bucketing_summary(g, pipeline.changes),
            lower_bound_us=certificate.lower_bound_us,
            makespan_over_lower_bound=1.0 + certificate.gap_to_optimal,
            certificate=certificate,
            data_dependent=data_dependent,
            notes=notes,
            optimizer_seconds=round(t_est + t_passes, 6) if timings else None,
            timings=Timings(
                load_seconds=round(t_load, 6), estimate_seconds=round(t_est, 6),
                passes=[PassTiming(name=r.name, seconds=round(r.seconds, 6)) for r in pipeline.records]
                + other_run,
            ) if timings else None,
        )
        rewritten = g_out is not g
        result = OptimizeResult(g_out, Schedule.of(g_out, pipeline.order), tuple(durs_out), estimator_name,
                                pipeline, summary, source_graph=g if rewritten else None,
                                source_durations_us=tuple(durs) if rewritten else None)
        if output_dir is None:
            return result
        freeze_long_lived()
        inputs = [("--groups", groups), *(estimator_inputs(options) if options is not None else [])]
        outputs, written = build_and_write_outputs(
            result, output_options, output_dir, inputs=inputs, force=force, jobs=jobs,
            original_totals=beside.totals_of(result.before_graph) if beside is not None else None,
            planning=planning, progress=progress)
        return dataclasses.replace(result, summary=outputs.summary, outputs=outputs, written=written)

    finally:
        if beside is not None:
            beside.cancel()
        if planning is not None:
            planning.cancel()

class _InputOrderWork:
    """What the graph and its input order alone decide, computed by one forked child
    (:func:`_input_order_beside`) and handed over in turn: the lower bounds (with the
    footprint accounting: the passes' first simulation needs them, once this process has its
    footprint budget), the graph's identity for the summary, then the input order's makespan
    under each robustness scenario and, when outputs are written, its buffers' arena totals
    (while the passes run). Each is handed out only for the graph (and durations) the child
    worked on: a run that keeps each group's order swaps the graph for its twin, with the
    same nodes."""

    def __init__(self, job, graph: Graph, durations: list[float], packed: bool, bounds: bool) -> None:
        self._job, self._graph, self._durations, self._packed = job, graph, durations, packed
        self._identity_at = 1 if bounds else 0  # the index of each value the child yields
        self._input_order_at = self._identity_at + 1

    def take_lower_bounds(self) -> None:
        """Keep the lower bounds the child computed for the passes' simulations of its graph
        and durations. A child that failed or was killed leaves them to be computed here,
        where an error they raise is raised as without a child."""
        from commopt.sim.bounds import remember_lower_bounds
        from commopt.sim.model import step_durations

        try:
            computed = self._job.value(0)
        except Exception:  # computed again here
            return
        if computed is not None:
            remember_lower_bounds(self._graph, step_durations(self._graph, self._durations), computed)

    def identity(self, graph: Graph) -> str | None:
        """:func:`commopt.gate.graph_identity` of ``graph`` (it depends on the nodes only),
        or None: another graph's nodes, or the child could not compute it (then this process
        does, meeting any error itself)."""
        if graph.nodes is not self._graph.nodes:
            return None
        try:
            return self._job.value(self._identity_at)
        except Exception:
            return None

    def makespans(self, graph: Graph, durations: list[float]) -> list[float] | None:
        """The input order's scenario makespans on ``graph`` (None: another graph, or the
        child was killed: they are computed here)."""
        if graph is not self._graph or durations is not self._durations:
            return None
        return self._input_order()[0]

    def totals_of(self, graph: Graph):
        """A callable returning the input order's (arena bytes, lower bound bytes) on
        ``graph`` (None: the child was killed, they are packed where the plan is compared),
        or None for another graph or when the child did not pack them."""
        if graph is not self._graph or not self._packed:
            return None
        return lambda: self._input_order()[1]

    def _input_order(self) -> tuple[list[float] | None, tuple[int, int] | None]:
        """The child's (makespans, totals), or Nones where it was killed before it had them;
        the child's own error is raised as it is."""
        from commopt.forked import ChildDied

        try:
            return self._job.value(self._input_order_at)
        except ChildDied:
            return None, None

    def cancel(self) -> None:
        """Stop the child if it still runs."""
        self._job.cancel()


def _input_order_beside(graph: Graph, durations: list[float], options: OutputOptions,
                        compute_slowdown: float, jobs: int, *, packing: bool,
                        bounds: bool) -> _InputOrderWork | None:
    """One forked child computing what :class:`_InputOrderWork` hands over, in that order:
    with ``bounds`` the graph's lower bounds (:func:`commopt.sim.bounds.lower_bounds`) while
    this process computes the footprint budget (at 100k nodes both take about half a
    second), the graph's identity (:func:`commopt.gate.graph_identity`: a sort of every
    node's name, 0.6-0.7 s of CPU at a million nodes), and the input order's robustness
    makespans and, with ``packing``, its buffers' arena totals for the plan comparison while
    this process runs the passes. One child for all of it: after each fork this process
    copies every page it then writes (CPython writes reference counts into the objects it
    reads). None where forking does not pay (:func:`commopt.forked.worth_forking`) or the
    graph has no collectives (the passes do not run). The child only reads."""
    from commopt.buffers.planner import DEFAULT_ALIGN_BYTES, original_arena_totals
    from commopt.forked import compute_beside, worth_forking
    from commopt.gate import graph_identity
    from commopt.sim.bounds import computed_lower_bounds, lower_bounds
    from commopt.sim.model import step_durations
    from commopt.sim.robustness import makespans, perturbations

    if not worth_forking(len(graph), jobs) or not graph.collectives():
        return None
    align = DEFAULT_ALIGN_BYTES if options.align is None else options.align

    def lower_bounds_of_graph() -> dict[float, object]:
        lower_bounds(graph, step_durations(graph, durations), compute_slowdown)
        return computed_lower_bounds(graph)

    def work() -> Iterator[object]:
        if bounds:
            yield _or_none(lower_bounds_of_graph)
        yield _or_none(lambda: graph_identity(graph))
        scenarios = [durs for _, durs in perturbations(graph, durations)]
        spans = makespans(graph, graph.original_order, scenarios, compute_slowdown=compute_slowdown)
        totals = original_arena_totals(graph, graph.original_order, align=align,
                                       collective_types=options.comm_buffers,
                                       persistent_params=options.persistent_params) if packing else None
        yield spans, totals

    return _InputOrderWork(compute_beside(work, in_turn=True), graph, durations, packing, bounds)


def _or_none(compute: Callable[[], Any]) -> Any:
    """``compute()``, or None where it raises: for a child's work that this process can do
    again itself, meeting the error there as it would without a child."""
    try:
        return compute()
    except Exception:
        return None


def _memory_accounting(asked: str | None, options: OutputOptions, notes: list[str]) -> str:
    """The accounting the budget uses: ``asked``, else the runner's footprint, or the
    live-tensor peak when no collective gets a persistent buffer (``comm_buffers='none'``:
    then the runner holds exactly the live tensors)."""
    from commopt.buffers import parse_collective_types

    if asked is not None:
        return asked
    if parse_collective_types(options.comm_buffers) == ():
        notes.append("no persistent communication buffers (comm buffers: none): the memory budget "
                     "bounds the live-tensor peak, which is what the runner holds")
        return "live-tensors"
    return "footprint"


def _check_solver(solver: str, time_limit_s: float | None) -> float:
    """The exact solver's time limit, after checking the options (before any work)."""
    from commopt.solver import DEFAULT_TIME_LIMIT_S, SOLVERS, require_ortools

    if solver not in SOLVERS:
        raise OptionError(f"solver must be one of {', '.join(SOLVERS)}, not {solver!r}", field="--solver")
    if time_limit_s is not None and solver != "exact":
        raise OptionError("--time-limit applies to --solver exact", field="--time-limit")
    if time_limit_s is not None and not (isinstance(time_limit_s, (int, float))
                                         and 0 < time_limit_s < float("inf")):
        raise OptionError(f"{time_limit_s!r} is not a time limit > 0 seconds", field="--time-limit")
    if solver == "exact":
        require_ortools()
    return DEFAULT_TIME_LIMIT_S if time_limit_s is None else float(time_limit_s)


def _exact(graph: Graph, pipeline: PipelineResult, ctx: PassContext, time_limit_s: float,
           timings: bool):
    """The pipeline with the exact solver's order appended as a record (its order replaces
    the passes' only when strictly better), and the solver's run for the certificate."""
    from commopt.passes.manager import PassRecord
    from commopt.solver import improve

    t0 = time.perf_counter()
    out = improve(graph, pipeline.order, ctx, time_limit_s=time_limit_s, timings=timings)
    record = PassRecord("exact", pipeline.final, out.sim, time.perf_counter() - t0, out.run.kept,
                        out.run.note)
    return (dataclasses.replace(pipeline, order=out.order, final=out.sim,
                                records=[*pipeline.records, record]), out.run)


def _footprint_budget(graph: Graph, max_memory_increase: float, options: OutputOptions):
    """The budget on the runner's footprint (arenas at their lower bound + other live
    tensors): ``(1 + max_memory_increase)`` x the original order's. The passes keep to it as
    to the live-tensor budget (:meth:`commopt.passes.base.PassContext.fits`)."""
    from commopt.buffers.footprint import FootprintBudget
    from commopt.buffers.planner import DEFAULT_ALIGN_BYTES

    align = DEFAULT_ALIGN_BYTES if options.align is None else options.align
    return FootprintBudget.for_graph(graph, max_memory_increase, graph.original_order, align=align,
                                     collective_types=options.comm_buffers,
                                     persistent_params=options.persistent_params)



def _group_order_kept_beside(free: Graph, manager: PassManager, context, jobs: int):
    """A forked child running ``manager``'s pipeline with every group's collectives in their
    input order (:func:`_group_order_kept`'s second run) while this process runs the first:
    the two runs are independent, and on real graphs each takes seconds (compute-overlap
    searches). None where forking does not pay (:func:`commopt.forked.worth_forking`, from
    :data:`~commopt.forked.PIPELINE_FORK_MIN_NODES` nodes), or
    with a plug-in pass (its effects must happen once, here). The child only reads; it
    reports the run's result."""
    from commopt.forked import PIPELINE_FORK_MIN_NODES, compute_beside, worth_forking

    if not worth_forking(len(free), jobs, PIPELINE_FORK_MIN_NODES) or not manager.all_builtin():
        return None

    def work() -> PipelineResult:
        strict = free.with_group_order(True)
        return manager.run(strict, strict.original_order, context(strict))

    return compute_beside(work)


def _group_order_kept(free: Graph, pipeline: PipelineResult, manager: PassManager, context,
                      notes: list[str], beside=None) -> tuple[Graph, PipelineResult, PipelineResult | None]:
    """The pipeline run again with every group's collectives in their input order (the
    graph with its group-order edges), and the run that finishes first (makespan, then
    exposed communication): the passes are greedy, and more freedom can lead them to a worse
    order. Returns the chosen graph and result, and the other result (its timings are
    reported too; None when it was not run), with a note either way, so reordering within
    groups is never worse than keeping each group's order. It is not run when the free
    order is within :data:`WITHIN_GROUPS_BOUND_SLACK` of its lower bound, which bounds the
    kept order too (keeping an order only adds constraints). ``beside``: the second run in a
    forked child (:func:`_group_order_kept_beside`), taken instead of running it here (here
    after all when the child died)."""
    from commopt.forked import ChildDied

    ours = pipeline.final
    if ours.makespan_us <= ours.lower_bound_us * (1 + WITHIN_GROUPS_BOUND_SLACK):
        notes.append(f"reordering within groups: {ours.makespan_us:,.1f} us, within "
                     f"{WITHIN_GROUPS_BOUND_SLACK:.1%} of the lower bound, so keeping each group's "
                     f"order (not run) could not finish sooner by more")
        return free, pipeline, None
    strict = free.with_group_order(True)
    strict_ctx = context(strict)
    try:
        kept = beside.value() if beside is not None else None
    except ChildDied:
        kept = None
    if kept is None:
        kept = manager.run(strict, strict.original_order, strict_ctx)
    theirs = kept.final
    if (theirs.makespan_us, theirs.exposed_comm_us) < (ours.makespan_us, ours.exposed_comm_us):
        notes.append(f"reordering within groups: keeping each group's order finished first "
                     f"({theirs.makespan_us:,.1f} vs {ours.makespan_us:,.1f} us), so it is kept")
        return strict, _bounded_as_free(kept, free, pipeline, strict_ctx), pipeline
    notes.append(f"reordering within groups: {ours.makespan_us:,.1f} us, keeping each group's "
                 f"order {theirs.makespan_us:,.1f} us")
    return free, pipeline, kept


def _bounded_as_free(kept: PipelineResult, free: Graph, free_run: PipelineResult,
                     ctx: PassContext) -> PipelineResult:
    """``kept`` (a run with each group's order) with the lower bounds, and so the
    certificate, over every order the rule allows, not only those keeping each group's
    order: its final order simulated on the graph without group order (the same makespan:
    an order's simulation does not depend on those edges), and the input order's simulation
    that ``free_run`` (the run on ``free``) already made. ``ctx``: the kept run's context."""
    from commopt.sim import simulate

    graph = kept.graph.without_group_order() if kept.graph is not None else free
    final = simulate(graph, kept.order, kept.durations_us if kept.durations_us is not None else ctx.durations_us,
                     compute_slowdown=ctx.compute_slowdown)
    initial = free_run.initial
    assert (final.makespan_us, initial.makespan_us) == (kept.final.makespan_us, kept.initial.makespan_us)
    return dataclasses.replace(kept, initial=initial, final=final)


def _as_saved(graph: Graph, pipeline: PipelineResult, durations: list[float],
              allow_cross_group_reorder: bool, notes: list[str],
              compute_slowdown: float = 1.0) -> PipelineResult:
    """The pipeline's result in the order the written graph will have when it is read back
    (a ``.pt2`` archive keeps placeholders first and each getitem after its op), so that the
    summary, the buffer plan and the runner describe the program that is written."""
    from commopt.errors import InvariantViolation
    from commopt.invariants import check_order
    from commopt.io import saved_order
    from commopt.sim import simulate

    order = saved_order(graph, pipeline.order)
    if order == list(pipeline.order):
        return pipeline
    violations = check_order(graph, order, allow_cross_group_reorder=allow_cross_group_reorder)
    if violations:
        raise InvariantViolation(f"the order as the {graph.source_format} file keeps it breaks "
                                 f"an invariant: {violations[0]}")
    final = simulate(graph, order, durations, compute_slowdown=compute_slowdown)
    before = pipeline.final
    if (final.makespan_us, final.peak_memory_bytes) != (before.makespan_us, before.peak_memory_bytes):
        notes.append(f"the passes' order laid out as the {graph.source_format} file keeps it "
                     f"(inputs first, each getitem after its op): makespan "
                     f"{before.makespan_us:.1f} -> {final.makespan_us:.1f} us, peak memory "
                     f"{before.peak_memory_bytes:,} -> {final.peak_memory_bytes:,} B")
    return dataclasses.replace(pipeline, order=order, final=final)


def _data_dependent(graph: Graph, pipeline: PipelineResult, durations_of: Any,
                    scales: Sequence[float], notes: list[str], compute_slowdown: float = 1.0):
    """The summary's data-dependent sizes entry (None when every size is static); its
    statement and the range of the result lead the notes, so no number is read without them.
    ``durations_of(graph)`` re-estimates a re-sized graph (None: durations were given)."""
    from commopt.assumed_sizes import data_dependent_entry, range_line

    entry = data_dependent_entry(graph, graph.original_order, pipeline.order, durations_of,
                                 (_numbers(pipeline.initial), _numbers(pipeline.final)), scales,
                                 compute_slowdown=compute_slowdown)
    if entry is not None:
        notes[:0] = [entry.statement, range_line(entry)]
    return entry

def _given_slowdown(estimator: str | EstimatorOptions):
    """The compute slowdown asked for with durations given per node: a factor in the
    estimator options (``"calibrated"`` loads their profile), else none."""
    if not isinstance(estimator, EstimatorOptions):
        return None
    from commopt.estimators.slowdown import applied_slowdown

    return applied_slowdown(estimator.compute_slowdown, estimator.profile)


def _numbers(sim) -> SimNumbers:
    from commopt.assumed_sizes import sim_numbers

    return sim_numbers(sim)
