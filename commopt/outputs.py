"""Everything ``commopt optimize`` writes into its output directory, from one optimize result.

The reordered graph (the input's format), ``buffer_plan.json``, the runner script
``run_<name>.py``, ``report.html``, ``trace.json`` and, last, ``summary.json``: a reader that
finds ``summary.json`` knows the rest of the set was written. Every file goes through
:mod:`commopt.io.atomic`, so a run killed at any point leaves each file either complete (old
or new) or absent, never partial. Outputs are deterministic except the wall times in
``summary.json`` (``optimizer_seconds``/``timings``, left out with ``timings=False``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from commopt.errors import GraphError, OptionError
from commopt.progress import SILENT, Progress

if TYPE_CHECKING:
    from commopt.api import OptimizeResult
    from commopt.schemas.buffer_plan import BufferPlan
    from commopt.schemas.report import OverlapReport

PLAN_FILE = "buffer_plan.json"
REPORT_HTML = "report.html"
TRACE_FILE = "trace.json"


@dataclass
class Artifacts:
    """What was produced besides the order: the plan, the runner's name, the report."""

    plan: BufferPlan | None = None
    runner_name: str | None = None
    report: OverlapReport | None = None


def build_artifacts(
    result: OptimizeResult,
    *,
    align: int | None = None,
    comm_buffers: str | None = None,
    progress: Progress = SILENT,
) -> Artifacts:
    """Plan buffers on the optimized order and build the overlap report (nothing written).

    Adds the buffer-plan totals, with the arena the original order would need, to
    ``result.summary.buffer_plan``.
    """
    from commopt.buffers import compare_plans, plan_buffers
    from commopt.buffers.planner import DEFAULT_ALIGN_BYTES
    from commopt.codegen import runner_filename
    from commopt.report import build_report

    g = result.graph
    align = DEFAULT_ALIGN_BYTES if align is None else align
    with progress.stage("plan buffers"):
        plan = plan_buffers(g, result.order, align=align, collective_types=comm_buffers)
        result.summary.buffer_plan = compare_plans(
            g, g.original_order, result.order, align=align, collective_types=comm_buffers,
            new_plan=plan,
        )
    with progress.stage("build report"):
        report = build_report(
            g, g.original_order, result.order, result.durations_us,
            estimator_name=result.estimator,
            before_sim=result.pipeline.initial, after_sim=result.pipeline.final,
            memory_budget_bytes=result.summary.memory_budget_bytes, notes=result.summary.notes,
        )
    return Artifacts(plan=plan, runner_name=runner_filename(g), report=report)


def write_outputs(
    result: OptimizeResult,
    output_dir: str | os.PathLike[str],
    artifacts: Artifacts,
    *,
    progress: Progress = SILENT,
) -> list[Path]:
    """Write the whole output set into ``output_dir``; returns the paths in writing order."""
    from commopt.api import SUMMARY_FILE
    from commopt.buffers import save_plan
    from commopt.codegen import write_runner
    from commopt.io import atomic, save_graph
    from commopt.report import write_html, write_trace

    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise OptionError("exists and is not a directory", file=str(out), field="--output")
    g = result.graph
    target = out / result.summary.output
    if g.source_path is not None and Path(g.source_path).resolve() == target.resolve():
        raise OptionError("would overwrite the input graph; choose another output directory",
                          file=str(target), field="--output")
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with progress.stage("write graph"):
        written.append(save_graph(g, target, result.order))
    if artifacts.plan is not None:
        written.append(save_plan(artifacts.plan, out / PLAN_FILE))
    if artifacts.runner_name is not None:
        with progress.stage("generate runner"):
            try:
                model = write_runner(g, out / artifacts.runner_name, result.order, artifacts.plan)
            except GraphError as exc:  # an op the runner cannot launch (e.g. send/recv)
                result.summary.notes.append(f"runner not generated: {exc}")
            else:
                written.append(out / artifacts.runner_name)
                result.summary.notes.append(_runner_note(model))
    if artifacts.report is not None:
        with progress.stage("write reports"):
            write_html(artifacts.report, out / REPORT_HTML)
            write_trace(artifacts.report, out / TRACE_FILE)
            written += [out / REPORT_HTML, out / TRACE_FILE]
    result.summary.outputs = [p.name for p in written] + [SUMMARY_FILE]
    summary_path = out / SUMMARY_FILE
    atomic.write_text(summary_path, result.summary.model_dump_json(indent=2) + "\n")
    written.append(summary_path)
    result.written = written
    return written


def _runner_note(model) -> str:
    """One line on what the runner does per step (copies left, zero-copy producers)."""
    return (f"runner {model.graph_name}: {model.zero_copy_per_iter} producer(s) write straight into "
            f"comm buffers, {model.copies_per_iter} copy-in(s) per step, "
            f"{len(model.emulated)} emulated node(s)")
