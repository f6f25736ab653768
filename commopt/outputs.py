"""Everything ``commopt optimize`` writes into its output directory, from one optimize result.

Two steps, each done once: :func:`build_outputs` makes every artifact in memory from the
result and explicit :class:`OutputOptions` (the buffer plan, the runner's source, the report,
the final summary); :func:`write_outputs` writes them. Neither changes the result.

The files, in writing order: the reordered graph (the input's format), ``buffer_plan.json``,
the runner script ``run_<name>.py``, ``report.html``, ``trace.json`` and, last,
``summary.json``: a reader that finds ``summary.json`` knows the rest of the set was written.
Every file goes through :mod:`commopt.atomic`, so a run killed at any point leaves each file
either complete (old or new) or absent, never partial. Outputs are deterministic except the
wall times in ``summary.json`` (left out with ``timings=False``).
"""

from __future__ import annotations

import os
from pathlib import Path

from commopt.errors import GraphError, OptionError
from commopt.progress import SILENT, Progress
from commopt.result import OptimizeResult, OutputOptions, Outputs

SUMMARY_FILE = "summary.json"
PLAN_FILE = "buffer_plan.json"
REPORT_HTML = "report.html"
TRACE_FILE = "trace.json"


#: The output options when none are given: default alignment, buffers for every collective.
DEFAULT_OUTPUT_OPTIONS = OutputOptions()


def build_outputs(result: OptimizeResult, options: OutputOptions = DEFAULT_OUTPUT_OPTIONS, *,
                  progress: Progress = SILENT) -> Outputs:
    """Plan buffers on the optimized order, generate the runner and build the report.

    The summary of the outputs is the result's summary with the buffer-plan totals (and the
    arena the original order would need), the runner's note and the list of files added;
    ``result`` itself is not changed, so building twice gives equal outputs.
    """
    from commopt.buffers import compare_plans, plan_buffers
    from commopt.buffers.planner import DEFAULT_ALIGN_BYTES
    from commopt.report import build_report

    g = result.graph
    order = list(result.order)
    align = DEFAULT_ALIGN_BYTES if options.align is None else options.align
    with progress.stage("plan buffers"):
        plan = plan_buffers(g, order, align=align, collective_types=options.comm_buffers)
        comparison = compare_plans(g, g.original_order, order, align=align,
                                   collective_types=options.comm_buffers, new_plan=plan)
    notes = list(result.summary.notes)
    with progress.stage("generate runner"):
        runner_name, runner_source, note = _runner(g, order, plan)
    notes.append(note)
    with progress.stage("build report"):
        report = build_report(
            g, g.original_order, order, list(result.durations_us),
            estimator_name=result.estimator,
            before_sim=result.pipeline.initial, after_sim=result.pipeline.final,
            memory_budget_bytes=result.summary.memory_budget_bytes, notes=result.summary.notes,
        )
    files = [result.summary.output, PLAN_FILE, *([runner_name] if runner_name else []),
             REPORT_HTML, TRACE_FILE, SUMMARY_FILE]
    summary = result.summary.model_copy(deep=True, update={
        "buffer_plan": comparison, "notes": notes, "outputs": files})
    return Outputs(summary=summary, graph_file=result.summary.output, plan=plan,
                   runner_name=runner_name, runner_source=runner_source, report=report)


def _runner(graph, order: list[int], plan) -> tuple[str | None, str | None, str]:
    """(file name, source, summary note) of the runner, or no runner and the reason."""
    from commopt.codegen import generate, runner_filename

    try:
        model, source = generate(graph, order, plan)
    except GraphError as exc:  # an op the runner cannot launch (e.g. send/recv)
        return None, None, f"runner not generated: {exc}"
    return runner_filename(graph), source, _runner_note(model)


def write_outputs(result: OptimizeResult, outputs: Outputs, output_dir: str | os.PathLike[str], *,
                  progress: Progress = SILENT) -> tuple[Path, ...]:
    """Write the output set into ``output_dir``; returns the paths in writing order.

    ``result`` provides the graph and order the reordered graph file is written from.
    """
    from commopt import atomic
    from commopt.buffers import save_plan
    from commopt.io import save_graph
    from commopt.report import write_html, write_trace

    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise OptionError("exists and is not a directory", file=str(out), field="--output")
    g = result.graph
    target = out / outputs.graph_file
    if g.source_path is not None and Path(g.source_path).resolve() == target.resolve():
        raise OptionError("would overwrite the input graph; choose another output directory",
                          file=str(target), field="--output")
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with progress.stage("write graph"):
        written.append(save_graph(g, target, list(result.order)))
    if outputs.plan is not None:
        written.append(save_plan(outputs.plan, out / PLAN_FILE))
    if outputs.runner_name is not None:
        path = out / outputs.runner_name
        with atomic.atomic_path(path) as tmp:
            tmp.write_text(outputs.runner_source, encoding="utf-8")
            tmp.chmod(0o755)
        written.append(path)
    if outputs.report is not None:
        with progress.stage("write reports"):
            write_html(outputs.report, out / REPORT_HTML)
            write_trace(outputs.report, out / TRACE_FILE)
            written += [out / REPORT_HTML, out / TRACE_FILE]
    summary_path = out / SUMMARY_FILE
    atomic.write_text(summary_path, outputs.summary.model_dump_json(indent=2) + "\n")
    written.append(summary_path)
    return tuple(written)


def _runner_note(model) -> str:
    """One line on what the runner does per step (copies left, zero-copy producers)."""
    return (f"runner {model.graph_name}: {model.zero_copy_per_iter} producer(s) write straight into "
            f"comm buffers, {model.copies_per_iter} copy-in(s) per step, "
            f"{len(model.emulated)} emulated node(s)")
