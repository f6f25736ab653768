"""``commopt report``: overlap before/after in the terminal, HTML, Chrome trace, Markdown, JSON."""

from __future__ import annotations

import click

from commopt.cli.app import App
from commopt.cli.estimator_options import estimator_options, options_from_cli
from commopt.cli.options import (
    check_outputs,
    emit_json,
    format_option,
    graph_argument,
    group_options,
    load_graph_for_cli,
    pass_app,
)
from commopt.cli.progress import stage_progress
from commopt.outputs import written_by_commopt

_file = click.Path(dir_okay=False, path_type=str)


@click.command("report")
@graph_argument
@click.option("--reordered", "reordered", type=_file, default=None,
              help="The same graph in another order (e.g. written by commopt optimize); nodes "
                   "are matched by name and shown as 'after'.")
@click.option("--html", "html_path", type=_file, default=None,
              help="Write a self-contained HTML report (timelines, memory, tables).")
@click.option("--trace", "trace_path", type=_file, default=None,
              help="Write a Chrome trace (open in Perfetto or chrome://tracing).")
@click.option("--markdown", "markdown_path", type=_file, default=None,
              help="Write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set).")
@click.option("--max-memory-increase", type=click.FloatRange(0.0), default=None,
              help="Memory budget used to explain exposure, as a fraction over the original "
                   "peak [default: the passes' default].")
@click.option("--top", type=click.IntRange(0), default=10, show_default=True,
              help="Explain this many of the most exposed collectives.")
@click.option("--timeline-rows", type=click.IntRange(0), default=40, show_default=True,
              help="Rows of the terminal timeline (0: all).")
@click.option("--measured", "measured", multiple=True,
              type=click.Path(exists=False, dir_okay=True, path_type=str), metavar="TRACES",
              help="Profiler traces of the same step (files, or a directory of one per rank as "
                   "the runner's --profile DIR writes): measured exposed communication per rank "
                   "beside the simulated. Repeatable.")
@estimator_options
@group_options
@format_option
@pass_app
def report_cmd(app: App, graph: str, reordered: str | None, html_path: str | None,
               trace_path: str | None, markdown_path: str | None, max_memory_increase: float | None, top: int,
               timeline_rows: int, measured: tuple[str, ...], groups_file: str | None, mesh: str | None,
               world_size: int | None, fmt: str, **estimator_values) -> None:
    """Show how much communication GRAPH hides, before and after a reorder."""
    from commopt.outputs import estimator_inputs
    from commopt.report.compare import compare_graphs
    from commopt.report.html import write_html
    from commopt.report.markdown import append_step_summary, render_markdown
    from commopt.report.text import render_text
    from commopt.report.trace import write_trace

    cfg = app.config.with_overrides({"max_memory_increase": max_memory_increase})
    est = options_from_cli(app.config, estimator_values)
    check_outputs(app, {"--html": html_path, "--trace": trace_path, "--markdown": markdown_path},
                  {"GRAPH": graph, "--reordered": reordered, "--groups": groups_file},
                  estimator_inputs(est), step_summary=True)
    with stage_progress(app) as progress:
        with progress.stage("load"):
            g = load_graph_for_cli(graph, groups_file, mesh, world_size)
            r = load_graph_for_cli(reordered, groups_file, mesh, world_size) if reordered is not None else None
        with progress.stage("estimate and simulate"):
            report = compare_graphs(g, r, estimator_options=est,
                                    max_memory_increase=cfg.get("max_memory_increase"), top=top,
                                    own_output=reordered is None and written_by_commopt(graph))
    written = []
    if html_path is not None:
        write_html(report, html_path)
        written.append(html_path)
    if trace_path is not None:
        write_trace(report, trace_path)
        written.append(trace_path)
    markdown = render_markdown(report)
    if markdown_path is not None:
        from commopt import atomic

        atomic.write_text(markdown_path, markdown)
        written.append(markdown_path)
    summary = append_step_summary(markdown)
    m = None
    if measured:
        from commopt.report.measured import build_measured, render_measured_text

        m = build_measured(report, r if r is not None else g, measured)
    if fmt == "json":
        emit_json(app, report if m is None else {**report.model_dump(mode="json"),
                                                 "measured": m.model_dump(mode="json")})
    else:
        render_text(report, app.out, timeline_rows=timeline_rows)
        if m is not None:
            render_measured_text(m, app.out)
    for path in written:
        app.info(f"wrote {path}")
    if summary is not None:
        app.debug(f"appended the summary to {summary}")
