"""``commopt check GRAPH``: the CI gate (exit 0 pass, 1 a check failed, 2 bad input)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from commopt.cli.app import App, echo
from commopt.cli.estimator_options import estimator_options, options_from_cli
from commopt.cli.options import (
    check_outputs,
    emit_json,
    format_option,
    graph_argument,
    group_options,
    pass_app,
)


@click.command("check")
@graph_argument
@click.option("--max-exposed-comm-us", type=click.FloatRange(min=0), default=None, metavar="US",
              help="Fail when simulated exposed communication exceeds US microseconds.")
@click.option("--min-overlap", type=click.FloatRange(0, 1), default=None, metavar="F",
              help="Fail when less than this fraction of communication is hidden.")
@click.option("--max-peak-memory", type=click.IntRange(min=0), default=None, metavar="BYTES",
              help="Fail when peak live memory exceeds BYTES.")
@click.option("--baseline", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="summary.json (commopt optimize) or check JSON to compare against.")
@click.option("--max-regression", type=click.FloatRange(min=0), default=None, metavar="PCT",
              help="Allowed growth over the baseline in percent [default: 0].")
@click.option("--max-gap-to-optimal", type=click.FloatRange(min=0), default=None, metavar="PCT",
              help="Fail when the makespan is not proven within PCT percent of the optimum "
                   "(makespan / proven lower bound - 1).")
@click.option("--as-is", is_flag=True, help="Check the file's own order instead of commopt's.")
@click.option("--passes", default=None, metavar="A,B,C", help="Pass pipeline used for the check.")
@click.option("--max-memory-increase", type=float, default=None, metavar="F",
              help="Memory budget of the passes (fraction of the original peak).")
@click.option("--markdown", "markdown_file", type=click.Path(dir_okay=False, path_type=str),
              default=None, help="Also write a Markdown summary to this file.")
@estimator_options
@group_options
@format_option
@pass_app
def check_cmd(app: App, graph: str, max_exposed_comm_us: float | None, min_overlap: float | None,
              max_peak_memory: int | None, baseline: str | None, max_regression: float | None,
              max_gap_to_optimal: float | None, as_is: bool, passes: str | None, max_memory_increase: float | None,
              markdown_file: str | None, groups_file: str | None, mesh: str | None, world_size: int | None, fmt: str,
              **estimator_values) -> None:
    """Simulate GRAPH and fail (exit 1) when thresholds or the baseline are not met."""
    from commopt import atomic, gate
    from commopt.api import optimize
    from commopt.errors import ExitCode
    from commopt.outputs import estimator_inputs
    from commopt.schemas.check import CheckMetrics

    cfg = app.config.with_overrides({
        "max_exposed_comm_us": max_exposed_comm_us, "min_overlap": min_overlap,
        "max_peak_memory": max_peak_memory, "max_regression": max_regression,
        "max_gap_to_optimal": max_gap_to_optimal, "passes": passes, "max_memory_increase": max_memory_increase,
    })
    est = options_from_cli(app.config, estimator_values)
    check_outputs(app, {"--markdown": markdown_file},
                  {"GRAPH": graph, "--baseline": baseline, "--groups": groups_file},
                  estimator_inputs(est), step_summary=True)
    # --max-regression without --baseline is an error; a config file's value is only a default
    regression = cfg.get("max_regression") if baseline is not None else max_regression
    gate.check_thresholds(max_exposed_comm_us=cfg.get("max_exposed_comm_us"),
                          min_overlap=cfg.get("min_overlap"), max_peak_memory=cfg.get("max_peak_memory"),
                          max_regression=regression, has_baseline=baseline is not None,
                          max_gap_to_optimal=cfg.get("max_gap_to_optimal"))
    base = gate.load_baseline(baseline) if baseline is not None else None
    kwargs = {}
    if cfg.get("max_memory_increase") is not None:
        kwargs["max_memory_increase"] = cfg.get("max_memory_increase")
    result = optimize(
        graph, passes=cfg.get("passes"), estimator=est,
        allow_cross_group_reorder=cfg.get("allow_cross_group_reorder"),
        reorder_within_groups=cfg.get("reorder_within_groups"),
        groups=groups_file, mesh=mesh, world_size=world_size, timings=False, **kwargs,
    )
    app.keep_until_exit(result)
    s = result.summary
    for warning in result.graph.meta.get("load_warnings", []):
        app.warn(warning)
    numbers = s.before if as_is else s.after
    metrics = CheckMetrics(
        makespan_us=numbers.makespan_us, exposed_comm_us=numbers.exposed_comm_us,
        overlap_ratio=numbers.overlap_ratio, peak_memory_bytes=numbers.peak_memory_bytes,
        lower_bound_us=s.lower_bound_us, graph_digest=s.graph_digest,
        estimator=s.estimator, hardware=s.hardware,
        compute_slowdown=s.compute_slowdown.factor if s.compute_slowdown is not None else 1.0,
    )
    outcomes = gate.evaluate(
        metrics,
        max_exposed_comm_us=cfg.get("max_exposed_comm_us"),
        min_overlap=cfg.get("min_overlap"),
        max_peak_memory=cfg.get("max_peak_memory"),
        baseline=base,
        max_regression=regression,
        max_gap_to_optimal=cfg.get("max_gap_to_optimal"),
    )
    res = gate.result(graph, s.estimator, not as_is, metrics, outcomes, base)
    md = gate.markdown(res)
    if markdown_file:
        atomic.write_text(markdown_file, md)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(Path(step_summary), "a", encoding="utf-8") as fh:
            fh.write(md + "\n")
    if os.environ.get("GITHUB_ACTIONS"):
        for line in gate.github_annotations(res):
            echo(line, one_line=True)
    if fmt == "json":
        emit_json(app, res)
    else:
        echo(res.verdict)
        for o in res.checks:
            app.debug(f"  {'ok  ' if o.passed else 'FAIL'} {o.name}: {o.message}")
    if not res.passed:
        if fmt == "json":
            app.err.print(res.verdict, markup=False)
        click.get_current_context().exit(int(ExitCode.CHECK_FAILED))
