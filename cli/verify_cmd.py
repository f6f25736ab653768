"""``commopt verify ORIGINAL REORDERED``: does a reordered graph (any tool's) keep every invariant?"""

from __future__ import annotations

import click

from commopt.cli.app import App
from commopt.cli.options import (
    emit_json,
    format_option,
    group_options,
    load_graph_for_cli,
    pass_app,
)


@click.command("verify")
@click.argument("original", type=click.Path(path_type=str))
@click.argument("reordered", type=click.Path(path_type=str))
@click.option("--allow-cross-group-reorder/--keep-cross-group-order", default=None,
              help="Accept collectives of different groups in a new relative order, or not "
                   "[default: accept where every rank provably runs the program in one order, "
                   "the rule optimize applies; see docs/process-groups.md].")
@click.option("--reorder-within-groups/--keep-group-order", default=None,
              help="Accept collectives of one group in a new relative order too, or not "
                   "[default: accept where every rank provably runs the program in one order and "
                   "the order across groups is not kept, the rule optimize applies].")
@group_options
@format_option
@pass_app
def verify_cmd(app: App, original: str, reordered: str, allow_cross_group_reorder: bool | None,
               reorder_within_groups: bool | None, groups_file: str | None, mesh: str | None,
               world_size: int | None, fmt: str) -> None:
    """Check that REORDERED (any tool's) keeps every invariant of ORIGINAL; exit 1 if not.

    A reorder may change the order only. Nodes are matched by name; missing, extra and
    changed nodes are reported too: every attribute of a node (op, arguments, outputs'
    dtypes and shapes, collective, waits, aliases, writes, role) and the process groups and
    world size must be the same (docs/design.md, "What verify compares").
    """
    from commopt.bucketing.verify import verify_graph
    from commopt.cross_group import decide_cross_group, within_groups
    from commopt.errors import CheckFailed
    from commopt.invariants import content_from_json
    from commopt.ir.graph import Graph
    from commopt.schemas.verify import VerifyReport, ViolationModel

    g0 = load_graph_for_cli(original, groups_file, mesh, world_size)
    g1 = _load_reordered(reordered, groups_file, mesh, world_size)
    cross = decide_cross_group(g0, allow_cross_group_reorder)
    g0, cross = within_groups(g0, cross, reorder_within_groups)
    allow_cross_group_reorder = cross.allowed
    content = None
    if not isinstance(g1, Graph):
        content = content_from_json(reordered, g0, groups=groups_file, mesh=mesh, world_size=world_size)
    violations = verify_graph(g0, g1, content=content, allow_cross_group_reorder=allow_cross_group_reorder)
    report = VerifyReport(
        original=original, reordered=reordered, nodes=len(g0), ok=not violations,
        allow_cross_group_reorder=allow_cross_group_reorder,
        reorder_within_groups=not g0.group_order,
        violations=[ViolationModel(invariant=v.invariant, title=v.title, message=v.message,
                                   nodes=list(v.nodes)) for v in violations],
    )
    if fmt == "json":
        emit_json(app, report)
    elif violations:
        for v in violations:
            app.out.print(str(v), markup=False)
    else:
        app.out.print(f"ok: {reordered} keeps every invariant of {original} ({len(g0)} nodes)",
                      markup=False)
    if violations:
        raise CheckFailed(f"{len(violations)} invariant violation(s)", file=reordered)


def _load_reordered(path: str, groups_file: str | None, mesh: str | None, world_size: int | None):
    """The reordered graph; a JSON file that does not load as a graph (its order does not
    run, a node is missing) is read node by node so every violation can be listed."""
    from commopt.errors import GraphError
    from commopt.invariants import entries_from_json

    try:
        return load_graph_for_cli(path, groups_file, mesh, world_size)
    except GraphError:
        if not path.lower().endswith(".json"):
            raise
        return entries_from_json(path)
