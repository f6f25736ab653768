"""``commopt.optimize``: load, estimate, run the pass pipeline, and (optionally) write.

    result = commopt.optimize("model.pt2", output_dir="out/")
    result.summary.after.exposed_comm_us

The CLI's ``optimize`` command is a thin layer over :func:`optimize`.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commopt.errors import OptionError
from commopt.ir.graph import Graph
from commopt.passes.base import DEFAULT_MAX_MEMORY_INCREASE, PassContext
from commopt.passes.manager import PassManager, PipelineResult
from commopt.schemas.summary import (
    CollectiveCount,
    PassSummary,
    PassTiming,
    SimNumbers,
    Summary,
    Timings,
)

SUMMARY_FILE = "summary.json"


@dataclass
class OptimizeResult:
    """The optimized order of a graph and everything known about it.

    ``order`` is the new order (node indices); ``pipeline`` has the simulation before and
    after and a record per pass; ``summary`` is what ``summary.json`` holds; ``written`` the
    files written (when an output directory was given).
    """

    graph: Graph
    order: list[int]
    durations_us: list[float]
    estimator: str
    pipeline: PipelineResult
    summary: Summary
    written: list[Path] = field(default_factory=list)

    @property
    def has_collectives(self) -> bool:
        """Whether the graph had anything to overlap."""
        return self.summary.collectives > 0

    def write(self, output_dir: str | os.PathLike[str]) -> list[Path]:
        """Write the reordered graph (the input's format) and ``summary.json`` into
        ``output_dir``; returns the paths written. Each file is written atomically."""
        from commopt.io import atomic, save_graph

        out = Path(output_dir)
        if out.exists() and not out.is_dir():
            raise OptionError("exists and is not a directory", file=str(out), field="--output")
        target = out / self.summary.output
        src = self.graph.source_path
        if src is not None and Path(src).resolve() == target.resolve():
            raise OptionError("would overwrite the input graph; choose another output directory",
                              file=str(target), field="--output")
        out.mkdir(parents=True, exist_ok=True)
        graph_path = save_graph(self.graph, target, self.order)
        summary_path = out / SUMMARY_FILE
        atomic.write_text(summary_path, self.summary.model_dump_json(indent=2) + "\n")
        self.written = [graph_path, summary_path]
        return self.written


def optimize(
    graph: Graph | str | os.PathLike[str] | Any,
    *,
    passes: str | Sequence[str] | None = None,
    max_memory_increase: float = DEFAULT_MAX_MEMORY_INCREASE,
    allow_cross_group_reorder: bool = False,
    estimator: str = "analytical",
    hardware: str | None = None,
    gpus_per_node: int | None = None,
    profile: str | None = None,
    table: str | None = None,
    durations_us: Sequence[float] | None = None,
    groups: str | os.PathLike[str] | None = None,
    mesh: str | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    timings: bool = True,
) -> OptimizeResult:
    """Reorder ``graph`` so communication overlaps with compute, within a memory budget.

    ``graph``: a Graph, a path (``.pt2``/``.json``) or a torch object (see
    :func:`commopt.io.load_graph`; ``groups``/``mesh`` name process-group ranks).
    ``passes``: ``"a,b,c"`` or a list (default :data:`commopt.passes.DEFAULT_PIPELINE`).
    ``max_memory_increase``: peak live memory may grow by at most this fraction of the
    original order's peak. Durations come from the estimator chain ``estimator`` (with
    ``hardware``, ``gpus_per_node``, ``profile``, ``table``) unless ``durations_us`` gives
    them. A graph without collectives keeps its order. With ``output_dir`` the reordered
    graph and ``summary.json`` are written there. ``timings=False`` leaves wall times out of
    the summary so re-runs are byte-identical.
    """
    from commopt.io import graph_suffix, load_graph
    from commopt.passes.base import check_max_memory_increase
    from commopt.passes.registry import get_registry, parse_pipeline

    check_max_memory_increase(max_memory_increase)
    names = parse_pipeline(passes)
    registry = get_registry()
    pipeline_passes = [registry.create(n) for n in names]

    t0 = time.perf_counter()
    g = load_graph(graph, groups=groups, mesh=mesh)
    t_load = time.perf_counter() - t0

    t1 = time.perf_counter()
    notes: list[str] = []
    if durations_us is not None:
        durs = [float(d) for d in durations_us]
        if len(durs) != len(g):
            raise OptionError(f"{len(durs)} durations for a graph of {len(g)} nodes", field="durations_us")
        estimator_name = "given"
    else:
        from commopt.estimators import EstimatorOptions, resolve

        options = EstimatorOptions.from_mapping({
            "estimator": estimator, "hardware": hardware, "gpus_per_node": gpus_per_node,
            "profile": profile, "table": table,
        })
        chain = resolve(options=options)
        durs = chain.durations(g)
        estimator_name = chain.name
        notes.extend(chain.notes)
    t_est = time.perf_counter() - t1

    t2 = time.perf_counter()
    ctx = PassContext.for_graph(g, durs, max_memory_increase=max_memory_increase,
                                allow_cross_group_reorder=allow_cross_group_reorder)
    colls = g.collectives()
    if colls:
        pipeline = PassManager(pipeline_passes).run(g, g.original_order, ctx)
    else:
        from commopt.sim import simulate

        sim = simulate(g, g.original_order, durs)
        pipeline = PipelineResult(order=g.original_order, initial=sim, final=sim)
        names = []
        notes.append("the graph has no collectives: nothing to overlap, order unchanged")
    t_passes = time.perf_counter() - t2

    stem = Path(g.source_path).stem if g.source_path else g.name
    counts = Counter((g.nodes[c].collective.group, g.nodes[c].collective.type) for c in colls)
    final = pipeline.final
    summary = Summary(
        graph=g.name,
        input=Path(g.source_path).name if g.source_path else None,
        output=stem + graph_suffix(g),
        nodes=len(g),
        collectives=len(colls),
        collectives_by_group=[CollectiveCount(group=gr, type=ty, count=n)
                              for (gr, ty), n in sorted(counts.items())],
        estimator=estimator_name,
        hardware=(hardware or "h100") if durations_us is None else None,
        max_memory_increase=max_memory_increase,
        memory_budget_bytes=ctx.memory_budget_bytes,
        allow_cross_group_reorder=allow_cross_group_reorder,
        passes=[PassSummary(name=r.name, before=_numbers(r.before), after=_numbers(r.after),
                            changed=r.changed, note=r.note) for r in pipeline.records],
        before=_numbers(pipeline.initial),
        after=_numbers(final),
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
    result = OptimizeResult(g, list(pipeline.order), durs, estimator_name, pipeline, summary)
    if output_dir is not None:
        result.write(output_dir)
    return result


def _numbers(sim) -> SimNumbers:
    return SimNumbers(makespan_us=sim.makespan_us, exposed_comm_us=sim.exposed_comm_us,
                      overlap_ratio=sim.overlap_ratio, peak_memory_bytes=sim.peak_memory_bytes)
