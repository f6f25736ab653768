"""``commopt inspect GRAPH``: node counts, collectives by group and type, inputs, outputs, warnings."""

from __future__ import annotations

import click
from rich.table import Table
from rich.text import Text

from commopt.cli.app import App
from commopt.cli.options import (
    emit_json,
    format_option,
    graph_argument,
    group_options,
    load_graph_for_cli,
    pass_app,
)


@click.command("inspect")
@graph_argument
@group_options
@format_option
@pass_app
def inspect_cmd(app: App, graph: str, groups_file: str | None, mesh: str | None, world_size: int | None, fmt: str) -> None:
    """Show node counts, collectives by group and type, inputs, outputs and warnings."""
    from commopt.inspect import inspect_graph
    from commopt.report.fmt import nbytes

    report = inspect_graph(load_graph_for_cli(graph, groups_file, mesh, world_size,
                                                   require_sizes=False, echo_warnings=False))
    if fmt == "json":
        emit_json(app, report)
        return
    out = app.out
    out.print(Text.assemble((report.name, "bold"),
                            f" ({report.format}, {report.nodes} nodes, world size {report.world_size or '?'})"))
    kinds = Table(title="nodes by kind", title_justify="left")
    kinds.add_column("kind")
    kinds.add_column("count", justify="right")
    for k, v in report.kinds.items():
        kinds.add_row(k, str(v))
    out.print(kinds)
    if report.collectives:
        t = Table(title="collectives", title_justify="left")
        for col in ("group", "size", "ranks", "type", "count", "bytes"):
            t.add_column(col, justify="right" if col in ("size", "count", "bytes") else "left")
        for c in report.collectives:
            ranks = "?" if c.ranks is None else (str(c.ranks) if len(c.ranks) <= 8 else f"{len(c.ranks)} ranks")
            t.add_row(c.group, "?" if c.group_size is None else str(c.group_size), ranks, c.type, str(c.count), nbytes(c.total_bytes))
        out.print(t)
    out.print(f"inputs: {len(report.inputs)}  outputs: {len(report.outputs)}")
    for w in report.warnings:
        app.warn(w)
