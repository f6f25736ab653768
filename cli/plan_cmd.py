"""``commopt plan GRAPH``: one communication-buffer arena per process group, on the file's order."""

from __future__ import annotations

import click
from rich.table import Table

from commopt.cli.app import App
from commopt.cli.options import (
    align_option,
    check_outputs,
    emit_json,
    format_option,
    graph_argument,
    group_options,
    load_graph_for_cli,
    pass_app,
    persistent_params_option,
    print_persistent_params,
)


def _mib(n: int) -> str:
    return f"{n / 2**20:,.2f} MiB"


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "-"


@click.command("plan")
@graph_argument
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Write the plan (buffer_plan.json format) here.")
@align_option
@click.option("--comm-buffers", "comm_buffers", default=None, metavar="all|TYPE,...",
              help="Collective types that get persistent buffers, e.g. all_reduce,all_gather [default: all].")
@persistent_params_option
@group_options
@format_option
@pass_app
def plan_cmd(app: App, graph: str, output: str | None, align: int | None, comm_buffers: str | None,
             persistent_params: str | None, groups_file: str | None, mesh: str | None, world_size: int | None, fmt: str) -> None:
    """Plan one communication-buffer arena per process group on the graph's own order."""
    from commopt.buffers import DEFAULT_ALIGN_BYTES, plan_buffers
    from commopt.buffers.planfile import save_plan

    cfg = app.config.with_overrides({"align": align, "comm_buffers": comm_buffers,
                                     "persistent_params": persistent_params})
    check_outputs(app, {"--output": output}, {"GRAPH": graph, "--groups": groups_file})
    g = load_graph_for_cli(graph, groups_file, mesh, world_size)
    plan = plan_buffers(g, align=cfg.get("align", DEFAULT_ALIGN_BYTES),
                        collective_types=cfg.get("comm_buffers", "all"),
                        persistent_params=cfg.get("persistent_params"))
    if output is not None:
        save_plan(plan, output)
    if fmt == "json":
        emit_json(app, plan)
    else:
        table = Table(title=f"buffer plan for {plan.graph} (align {plan.align_bytes} B)", title_justify="left")
        for col in ("group", "buffers", "arena", "lower bound", "per call site", "arena/bound", "heuristic"):
            table.add_column(col, justify="left" if col in ("group", "heuristic") else "right")
        for a in plan.groups:
            table.add_row(a.group, str(len(a.buffers)), _mib(a.arena_bytes), _mib(a.lower_bound_bytes),
                          _mib(a.per_call_site_bytes), _ratio(a.arena_bytes, a.lower_bound_bytes), a.heuristic)
        t = plan.totals
        table.add_row("total", str(t.buffers), _mib(t.arena_bytes), _mib(t.lower_bound_bytes),
                      _mib(t.per_call_site_bytes), _ratio(t.arena_bytes, t.lower_bound_bytes), "")
        app.out.print(table)
        inputs = [b for a in plan.groups for b in a.buffers if b.role != "output" and not b.persistent]
        zero_copy = sum(b.zero_copy for b in inputs)
        app.out.print(f"{zero_copy} of {len(inputs)} collective inputs can be written in place by "
                      f"their producer (zero-copy)", markup=False)
        if plan.persistent_params is not None:
            print_persistent_params(app.out, plan.persistent_params)
        app.out.print(f"digest {plan.digest}", markup=False)
        if not plan.groups:
            app.warn("the graph has no collectives of the selected types: the plan is empty")
    if output is not None:
        app.info(f"wrote {output}")
