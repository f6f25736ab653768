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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from commopt.errors import OptionError
from commopt.estimators.options import EstimatorOptions
from commopt.gc_freeze import freeze_long_lived, freezing_gc
from commopt.ir.graph import Graph
from commopt.ir.schedule import Schedule
from commopt.outputs import build_outputs, estimator_inputs, write_outputs
from commopt.passes.base import PassContext
from commopt.passes.manager import PassManager, PipelineResult
from commopt.progress import SILENT, Progress
from commopt.result import OptimizeResult, OutputOptions
from commopt.schemas.summary import (
    CollectiveCount,
    PassSummary,
    PassTiming,
    SimNumbers,
    Summary,
    Timings,
)
from commopt.sim.memory import DEFAULT_MAX_MEMORY_INCREASE

__all__ = ["OptimizeResult", "OutputOptions", "build_outputs", "optimize", "write_outputs"]

@freezing_gc
def optimize(
    graph: Graph | str | os.PathLike[str] | Any,
    *,
    passes: str | Sequence[str] | None = None,
    max_memory_increase: float = DEFAULT_MAX_MEMORY_INCREASE,
    allow_cross_group_reorder: bool = False,
    estimator: str | EstimatorOptions = "analytical",
    durations_us: Sequence[float] | None = None,
    groups: str | os.PathLike[str] | None = None,
    mesh: str | None = None,
    world_size: int | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    align: int | None = None,
    comm_buffers: str | None = None,
    memory_accounting: str = "footprint",
    timings: bool = True,
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
    original order's peak. Durations come from ``estimator`` — a spec such as
    ``"profile,analytical"`` or an :class:`~commopt.estimators.EstimatorOptions` (hardware,
    GPUs per node, profile and table files) — unless ``durations_us`` gives them. A graph
    without collectives keeps its order. With ``output_dir`` the full output set is built
    (:func:`build_outputs`; ``align`` — a power of two up to 2 MiB, checked before any work —
    and ``comm_buffers`` shape the buffer plan) and written there (:func:`write_outputs`: no
    output may be an input, ``manifest.json`` last marks the set complete), and the result
    carries both. ``timings=False`` leaves wall times out of the summary so re-runs are
    byte-identical. ``memory_accounting``: ``"footprint"`` (default) budgets what the emitted
    runner holds, its arenas included; ``"live-tensors"`` budgets only the live-tensor peak
    (a program without persistent buffers, or a comparison with a scheduler that has none);
    the summary says which one was used. ``progress`` hears about each stage (load, estimate, each pass, ...).
    """
    from commopt.io import graph_suffix, load_graph
    from commopt.io.groups import require_known_group_sizes
    from commopt.passes.registry import get_registry, parse_pipeline
    from commopt.sim.memory import check_max_memory_increase

    check_max_memory_increase(max_memory_increase)
    output_options = OutputOptions(align=align, comm_buffers=comm_buffers)  # checked before the work
    names = parse_pipeline(passes)
    registry = get_registry()
    pipeline_passes = [registry.create(n) for n in names]

    t0 = time.perf_counter()
    with progress.stage("load"):
        g = load_graph(graph, groups=groups, mesh=mesh, world_size=world_size)
    require_known_group_sizes(g)
    freeze_long_lived()  # the graph lives for the whole call: no collection scans it again
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
    else:
        from commopt.estimators import EstimatorOptions, resolve

        options = estimator if isinstance(estimator, EstimatorOptions) else EstimatorOptions(estimator=estimator)
        with progress.stage("estimate"):
            chain = resolve(options=options)
            durs = chain.durations(g)
        estimator_name = chain.name
        hardware_name = options.hardware
        notes.extend(chain.notes)
    t_est = time.perf_counter() - t1

    t2 = time.perf_counter()
    if memory_accounting not in ("footprint", "live-tensors"):
        raise OptionError(f"memory_accounting must be 'footprint' or 'live-tensors', not "
                          f"{memory_accounting!r}", field="memory_accounting")
    footprint_budget = (_footprint_budget(g, max_memory_increase, output_options)
                        if memory_accounting == "footprint" else None)
    ctx = PassContext.for_graph(g, durs, max_memory_increase=max_memory_increase,
                                allow_cross_group_reorder=allow_cross_group_reorder,
                                footprint_budget=footprint_budget)
    colls = g.collectives()
    if colls:
        with progress.stage("passes " + ",".join(names)):
            pipeline = PassManager(pipeline_passes).run(g, g.original_order, ctx)
    else:
        from commopt.sim import simulate

        sim = simulate(g, g.original_order, durs)
        pipeline = PipelineResult(order=g.original_order, initial=sim, final=sim)
        names = []
        notes.append("the graph has no collectives: nothing to overlap, order unchanged")
    pipeline = _as_saved(g, pipeline, durs, allow_cross_group_reorder, notes)
    t_passes = time.perf_counter() - t2
    if ctx.memory_budget_bytes is not None and colls:
        from commopt.sim import peak_memory

        final_peak = peak_memory(g, pipeline.order, padded=True)[0]
        if final_peak > ctx.memory_budget_bytes:
            notes.append(f"memory budget not met: no order within {ctx.memory_budget_bytes:,} B was "
                         f"found; the result peaks at {final_peak:,} B (padded sizes)")

    stem = Path(g.source_path).stem if g.source_path else g.name
    counts = Counter((g.nodes[c].collective.group, g.nodes[c].collective.type) for c in colls)
    final = pipeline.final
    from commopt.gate import graph_identity

    summary = Summary(
        graph=g.name,
        graph_digest=graph_identity(g),
        input=Path(g.source_path).name if g.source_path else None,
        output=stem + graph_suffix(g),
        nodes=len(g),
        collectives=len(colls),
        collectives_by_group=[CollectiveCount(group=gr, type=ty, count=n)
                              for (gr, ty), n in sorted(counts.items())],
        estimator=estimator_name,
        hardware=hardware_name,
        max_memory_increase=max_memory_increase,
        memory_budget_bytes=ctx.memory_budget_bytes,
        allow_cross_group_reorder=allow_cross_group_reorder,
        passes=[PassSummary(name=r.name, before=_numbers(r.before), after=_numbers(r.after),
                            changed=r.changed, note=r.note) for r in pipeline.records],
        before=_numbers(pipeline.initial),
        after=_numbers(final),
        memory_accounting=memory_accounting,
        footprint=_footprint_summary(g, pipeline.order, footprint_budget, notes) if colls else None,
        lower_bound_us=final.lower_bound_us,
        makespan_over_lower_bound=(final.makespan_us / final.lower_bound_us
                                   if final.lower_bound_us > 0 else 1.0),
        notes=notes,
        optimizer_seconds=round(t_est + t_passes, 6) if timings else None,
        timings=Timings(
            load_seconds=round(t_load, 6), estimate_seconds=round(t_est, 6),
            passes=[PassTiming(name=r.name, seconds=round(r.seconds, 6)) for r in pipeline.records],
        ) if timings else None,
    )
    result = OptimizeResult(g, Schedule.of(g, pipeline.order), tuple(durs), estimator_name,
                            pipeline, summary)
    if output_dir is None:
        return result
    freeze_long_lived()
    outputs = build_outputs(result, output_options, progress=progress)
    inputs = [("--groups", groups), *(estimator_inputs(options) if options is not None else [])]
    written = write_outputs(result, outputs, output_dir, inputs=inputs, progress=progress)
    return dataclasses.replace(result, summary=outputs.summary, outputs=outputs, written=written)


def _footprint_budget(graph: Graph, max_memory_increase: float, options: OutputOptions):
    """The budget on the runner's footprint (arenas at their lower bound + other live
    tensors): ``(1 + max_memory_increase)`` x the original order's. The passes keep to it as
    to the live-tensor budget (:meth:`commopt.passes.base.PassContext.fits`)."""
    from commopt.buffers.footprint import FootprintBudget
    from commopt.buffers.planner import DEFAULT_ALIGN_BYTES

    align = DEFAULT_ALIGN_BYTES if options.align is None else options.align
    return FootprintBudget.for_graph(graph, max_memory_increase, graph.original_order, align=align,
                                     collective_types=options.comm_buffers)


def _footprint_summary(graph: Graph, order: Sequence[int], budget: Any, notes: list[str]):
    """The summary's footprint entry (before and after, arenas at their lower bound; the output
    set replaces ``after`` with the runner's exact figure), and a note when over budget."""
    from commopt.schemas.summary import MemoryFootprint

    if budget is None:
        return None
    before = budget.base  # computed once, when the budget was made
    after = budget.footprint(graph, order)  # memoized: the pass manager checked this order
    if after.peak_bytes > budget.budget_bytes:
        notes.append(f"memory budget not met: the footprint (arenas + other live tensors) is "
                     f"{after.peak_bytes:,} B, the budget {budget.budget_bytes:,} B")
    return MemoryFootprint(budget_bytes=budget.budget_bytes, before_bytes=before.peak_bytes,
                           after_bytes=after.peak_bytes, arena_before_bytes=before.arena_bytes,
                           arena_after_bytes=after.arena_bytes)


def _as_saved(graph: Graph, pipeline: PipelineResult, durations: list[float],
              allow_cross_group_reorder: bool, notes: list[str]) -> PipelineResult:
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
    final = simulate(graph, order, durations)
    before = pipeline.final
    if (final.makespan_us, final.peak_memory_bytes) != (before.makespan_us, before.peak_memory_bytes):
        notes.append(f"the passes' order laid out as the {graph.source_format} file keeps it "
                     f"(inputs first, each getitem after its op): makespan "
                     f"{before.makespan_us:.1f} -> {final.makespan_us:.1f} us, peak memory "
                     f"{before.peak_memory_bytes:,} -> {final.peak_memory_bytes:,} B")
    return PipelineResult(order=order, initial=pipeline.initial, final=final, records=pipeline.records)


def _numbers(sim) -> SimNumbers:
    return SimNumbers(makespan_us=sim.makespan_us, exposed_comm_us=sim.exposed_comm_us,
                      overlap_ratio=sim.overlap_ratio, peak_memory_bytes=sim.peak_memory_bytes)
