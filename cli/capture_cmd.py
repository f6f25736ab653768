"""``commopt capture MODULE:FUNCTION -o STEP.pt2``: capture a training step in a fake world."""

from __future__ import annotations

import click

from commopt.cli.app import App
from commopt.cli.options import pass_app


@click.command("capture")
@click.argument("target", metavar="MODULE:FUNCTION")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="The .pt2 archive to write (process groups recorded inside).")
@click.option("--world-size", type=click.IntRange(min=1), required=True, metavar="N",
              help="Ranks of the fake world the step is captured in (the job's world size).")
@click.option("--rank", type=click.IntRange(min=0), default=0, show_default=True, metavar="R",
              help="The rank this process plays (its shards and its groups are captured).")
@pass_app
def capture_cmd(app: App, target: str, output: str, world_size: int, rank: int) -> None:
    """Call FUNCTION of MODULE in a fake world of N ranks and save the step it captures.

    FUNCTION takes no arguments, builds the model and its inputs (DeviceMesh, parallelize_module,
    SimpleFSDP parameters, ...) and returns ``commopt.capture(step, *args)``. Nothing is
    communicated: the fake process group lets one CPU process capture rank R of any world.
    MODULE is imported from the current directory or PYTHONPATH.
    """
    from commopt.errors import OptionError
    from commopt.integrations.capture import CapturedStep, call_target, fake_world, load_target

    if not output.lower().endswith(".pt2"):
        raise OptionError("the output must be a .pt2 archive", field="--output")
    make = load_target(target)
    with fake_world(world_size, rank):
        captured = call_target(target, make)
        if not isinstance(captured, CapturedStep):
            raise OptionError(f"{target} returned a {type(captured).__name__}, expected the "
                              "result of commopt.capture(step, *args)", field="MODULE:FUNCTION")
        captured.save(output)
    g = captured.commopt_graph()
    colls = sum(1 for n in g.nodes if n.collective is not None)
    app.info(f"wrote {output} ({len(g.nodes)} nodes, {colls} collectives, "
             f"{len(g.groups)} process group(s), world size {world_size})")
