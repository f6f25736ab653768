"""Options shared by several commands, defined once."""

from __future__ import annotations

import json
from typing import Any

import click
from pydantic import BaseModel

from commopt.cli.app import App

graph_argument = click.argument("graph", type=click.Path(dir_okay=True, path_type=str))

format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Payload format on stdout.",
)


def group_options(f):
    """--groups FILE, --mesh SPEC and --world-size N: process-group sizes and ranks a .pt2
    archive does not record (see docs/process-groups.md)."""
    f = click.option(
        "--world-size",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="Number of ranks in the job; the default process group '0' is the world.",
    )(f)
    f = click.option(
        "--mesh",
        default=None,
        metavar="DIM=SIZE,...",
        help="Device mesh, e.g. dp=2,tp=4 (ranks laid out row-major), to name group ranks.",
    )(f)
    f = click.option(
        "--groups",
        "groups_file",
        default=None,
        type=click.Path(dir_okay=False, path_type=str),
        help="JSON file listing process groups (name, ranks, mesh_dim).",
    )(f)
    return f


def load_graph_for_cli(graph: str, groups_file: str | None = None, mesh: str | None = None,
                       world_size: int | None = None, *, require_sizes: bool = True,
                       echo_warnings: bool = True):
    """Load a graph given on the command line (errors become one-line user errors).

    Every command whose output depends on group sizes (``require_sizes``) refuses a graph
    with a group of unknown size; load warnings go to stderr unless the command shows them
    itself (``echo_warnings=False``).
    """
    from commopt.io import load_graph
    from commopt.io.groups import require_known_group_sizes

    g = load_graph(graph, groups=groups_file, mesh=mesh, world_size=world_size)
    if require_sizes:
        require_known_group_sizes(g)
    if echo_warnings:
        for w in g.meta.get("load_warnings", []):
            click.echo(f"warning: {w}", err=True)
    return g


def emit_json(app: App, payload: BaseModel | dict[str, Any]) -> None:
    """Write a JSON payload to stdout (a pydantic model is validated by construction)."""
    if isinstance(payload, BaseModel):
        text = payload.model_dump_json(indent=2)
    else:
        text = json.dumps(payload, indent=2, sort_keys=False)
    click.echo(text)


pass_app = click.make_pass_decorator(App, ensure=True)
