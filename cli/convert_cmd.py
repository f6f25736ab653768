"""``commopt convert IN OUT.json``: a graph in commopt's JSON format."""

from __future__ import annotations

import click

from commopt.cli.app import App
from commopt.cli.options import (
    check_outputs,
    group_options,
    load_graph_for_cli,
    pass_app,
)


@click.command("convert")
@click.argument("source", type=click.Path(path_type=str))
@click.argument("dest", type=click.Path(path_type=str))
@group_options
@pass_app
def convert_cmd(app: App, source: str, dest: str, groups_file: str | None, mesh: str | None,
                world_size: int | None) -> None:
    """Convert a graph to commopt's JSON format (DEST must end in .json)."""
    from commopt.errors import OptionError
    from commopt.io.json_graph import save_json_graph

    if not dest.lower().endswith(".json"):
        raise OptionError("the destination must be a .json file", field="DEST")
    check_outputs(None, {"DEST": dest}, {"SOURCE": source, "--groups": groups_file})
    g = load_graph_for_cli(source, groups_file, mesh, world_size)
    save_json_graph(g, dest)
    app.info(f"wrote {dest} ({len(g.nodes)} nodes)")
