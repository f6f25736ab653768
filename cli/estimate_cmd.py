"""``commopt estimate GRAPH``: per-node durations from an estimator chain."""

from __future__ import annotations

from typing import Any

import click

from commopt.cli.app import App
from commopt.cli.estimator_options import estimator_options, options_from_cli
from commopt.cli.options import (
    emit_json,
    format_option,
    group_options,
    load_graph_for_cli,
    pass_app,
)


@click.command("estimate")
@click.argument("graph", required=False, type=click.Path(path_type=str))
@estimator_options
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many of the most expensive nodes to list.")
@click.option("--list", "list_only", is_flag=True,
              help="List the available estimators (built-in and plug-ins, broken ones marked) and exit.")
@group_options
@format_option
@pass_app
def estimate_cmd(app: App, graph: str | None, top: int, list_only: bool, groups_file: str | None,
                 mesh: str | None, world_size: int | None, fmt: str, **est_values: Any) -> None:
    """Estimate every node's duration: totals by kind, the most expensive nodes."""
    if list_only:
        _list_estimators(app, fmt)
        return
    if graph is None:
        raise click.UsageError("missing argument GRAPH (or use --list)")
    from commopt.estimators.report import estimate_report

    options = options_from_cli(app.config, est_values)
    g = load_graph_for_cli(graph, groups_file, mesh, world_size)
    report = estimate_report(g, options, top=top)
    for note in report.notes:
        app.warn(note)
    if fmt == "json":
        emit_json(app, report)
        return
    _print_report(app, report)


def _list_estimators(app: App, fmt: str) -> None:
    from commopt.estimators import list_estimators

    infos = list_estimators()
    if fmt == "json":
        emit_json(app, {"estimators": [
            {"name": i.name, "source": i.source, "target": i.target, "error": i.error} for i in infos]})
        return
    for i in infos:
        status = f"BROKEN: {i.error}" if i.broken else "ok"
        app.out.print(f"{i.name:<16} {i.source:<28} {status}", markup=False)


def _print_report(app: App, report) -> None:
    from rich.table import Table
    from rich.text import Text

    out = app.out
    out.print(Text.assemble((report.graph, "bold"), f": {report.nodes} nodes; estimates from "
                            f"{report.estimator}" + (f" on {report.hardware}" if report.hardware else "")))
    kinds = Table(title="total by kind (us)", title_justify="left")
    kinds.add_column("kind")
    kinds.add_column("total us", justify="right")
    for k, v in report.total_us_by_kind.items():
        kinds.add_row(k, f"{v:,.1f}")
    for g, v in report.comm_us_by_group.items():
        kinds.add_row(f"  comm group {g}", f"{v:,.1f}")
    out.print(kinds)
    if report.top:
        t = Table(title=f"top {len(report.top)} nodes", title_justify="left")
        for col in ("node", "kind", "op", "us", "from"):
            t.add_column(col, justify="right" if col == "us" else "left")
        for n in report.top:
            t.add_row(n.name, n.kind, n.op, f"{n.duration_us:,.1f}", n.source)
        out.print(t)
    if report.collective_waiting:
        w = Table(title="calibration traces: NCCL kernel time, waiting vs transfer (us)", title_justify="left")
        for col in ("collective", "kernels", "measured", "transfer", "waiting", "waiting %", "how"):
            w.add_column(col, justify="left" if col in ("collective", "how") else "right", no_wrap=True)
        for r in report.collective_waiting:
            w.add_row(r.type, str(r.kernels), f"{r.measured_us:,.0f}", f"{r.transfer_us:,.0f}",
                      f"{r.waiting_us:,.0f}", f"{r.waiting_fraction:.1%}", r.method)
        out.print(w)
    s = report.simulated
    out.print(f"original order (simulated): makespan {s.makespan_us:,.1f} us, exposed communication "
              f"{s.exposed_comm_us:,.1f} us, overlap {s.overlap_ratio:.1%}, lower bound "
              f"{s.lower_bound_us:,.1f} us, peak memory {s.peak_memory_bytes / 2**20:,.1f} MiB")
    out.print("sources: " + ", ".join(f"{k} {v}" for k, v in report.nodes_by_source.items()))
