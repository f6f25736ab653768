"""``commopt verify-plan GRAPH PLAN``: check a buffer plan independently of the planner."""

from __future__ import annotations

import click

from commopt.cli.app import App
from commopt.cli.options import (
    emit_json,
    format_option,
    graph_argument,
    group_options,
    load_graph_for_cli,
    pass_app,
)


@click.command("verify-plan")
@graph_argument
@click.argument("plan_file", metavar="PLAN", type=click.Path(dir_okay=False, path_type=str))
@group_options
@format_option
@pass_app
def verify_plan_cmd(app: App, graph: str, plan_file: str, groups_file: str | None, mesh: str | None, world_size: int | None,
                    fmt: str) -> None:
    """Check a buffer plan against GRAPH in its own order; exit 1 listing every problem."""
    from commopt.buffers import validate_plan
    from commopt.buffers.planfile import load_plan
    from commopt.errors import CheckFailed
    from commopt.schemas.buffer_plan import PlanVerification

    plan = load_plan(plan_file)
    g = load_graph_for_cli(graph, groups_file, mesh, world_size)
    problems = validate_plan(g, None, plan)
    if fmt == "json":
        emit_json(app, PlanVerification(ok=not problems, graph=graph, plan=plan_file, problems=problems))
    else:
        for p in problems:
            app.out.print(p, markup=False)
        if not problems:
            app.out.print(f"{plan_file}: valid for {graph} ({plan.totals.buffers} buffers, "
                          f"{plan.totals.arena_bytes} arena bytes)", markup=False)
    if problems:
        raise CheckFailed(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in the plan", file=plan_file)
