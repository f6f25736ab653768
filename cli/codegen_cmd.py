"""``commopt codegen``: write the torchrun runner script of a graph."""

from __future__ import annotations

from pathlib import Path

import click

from commopt.cli.app import App
from commopt.cli.options import (
    check_outputs,
    emit_json,
    format_option,
    graph_argument,
    group_options,
    load_graph_for_cli,
    pass_app,
)


def load_plan(path: str):
    """A buffer plan file (``commopt plan`` output): :func:`commopt.buffers.load_plan` after the
    same missing/empty-file checks as every other input."""
    from commopt.buffers import load_plan as read_plan
    from commopt.io import check_input_path

    return read_plan(check_input_path(path))


@click.command("codegen")
@graph_argument
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="buffer plan JSON for the graph's node order (default: plan it now).")
@click.option("--no-plan", is_flag=True, help="no arenas: every collective gets fresh tensors.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="runner script to write (default: run_<graph name>.py).")
@click.option("--backend", type=click.Choice(["nccl", "gloo"]), default=None,
              help="the script's default backend (default: nccl with CUDA, else gloo).")
@group_options
@format_option
@pass_app
def codegen_cmd(app: App, graph: str, plan_file: str | None, no_plan: bool, output: str | None,
                backend: str | None, groups_file: str | None, mesh: str | None, world_size: int | None, fmt: str) -> None:
    """Write a standalone torchrun script that runs GRAPH in its node order.

    The graph's node order is the order the script runs (give it the graph `commopt optimize`
    wrote); --verify in the script compares with fresh, unplanned buffers.
    """
    from commopt.codegen import runner_filename, write_runner
    from commopt.errors import OptionError
    from commopt.schemas.codegen import CodegenResult

    if plan_file is not None and no_plan:
        raise OptionError("--plan and --no-plan exclude each other", field="--plan")
    g = load_graph_for_cli(graph, groups_file, mesh, world_size)
    path = Path(output) if output is not None else Path(runner_filename(g))
    check_outputs(None, {"--output": path}, {"GRAPH": graph, "--plan": plan_file, "--groups": groups_file})
    order = g.original_order
    if plan_file is not None:
        plan = load_plan(plan_file)
    elif no_plan:
        plan = None
    else:
        from commopt.buffers import plan_buffers

        plan = plan_buffers(g, order)
    model = write_runner(g, path, order, plan, backend=backend)
    result = CodegenResult(
        graph=g.name, path=str(path), world_size=model.world_size,
        plan_digest=model.plan_digest or None, arena_bytes=sum(b for _, b in model.arenas),
        buffers=len(model.buffers), copies_per_iter=model.copies_per_iter,
        zero_copy_per_iter=model.zero_copy_per_iter, ops=len(model.ops),
        emulated=len(model.emulated),
    )
    if fmt == "json":
        emit_json(app, result)
        return
    world = model.world_size or "N"
    app.info(f"wrote {path}: {result.buffers} buffers in {len(model.arenas)} arena(s) "
             f"({result.arena_bytes} bytes), {result.copies_per_iter} copies and "
             f"{result.zero_copy_per_iter} zero-copy producers per step, "
             f"{result.emulated} emulated nodes")
    app.info(f"run it: torchrun --nproc-per-node {world} {path} --verify")
