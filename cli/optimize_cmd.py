"""``commopt optimize GRAPH -o OUTDIR``: reorder a graph and write it with summary.json."""

from __future__ import annotations

import click

from commopt.cli.app import App
from commopt.cli.options import emit_json, format_option, graph_argument, group_options, pass_app


@click.command("optimize")
@graph_argument
@click.option("-o", "--output", "output_dir", required=True,
              type=click.Path(file_okay=False, path_type=str),
              help="Directory for the reordered graph and summary.json (created if needed).")
@click.option("--passes", default=None, metavar="A,B,C",
              help="Pass pipeline (see `commopt passes`); default compute-overlap,sink-waits,raise-comms.")
@click.option("--max-memory-increase", type=float, default=None, metavar="F",
              help="Peak live memory may grow by this fraction of the original's peak [default: 0.1].")
@click.option("--allow-cross-group-reorder/--keep-cross-group-order", default=None,
              help="Let collectives of different process groups change their relative order "
                   "(same-group order is always kept) [default: keep].")
@click.option("--estimator", default=None, metavar="SPEC",
              help="Estimator chain, e.g. 'profile,analytical' [default: analytical].")
@click.option("--hardware", default=None, help="Hardware preset or JSON file [default: h100].")
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=None, help="[default: 8]")
@click.option("--profile", default=None, type=click.Path(dir_okay=False, path_type=str),
              help="Calibrated profile JSON or Kineto trace (profile estimator).")
@click.option("--table", default=None, type=click.Path(dir_okay=False, path_type=str),
              help="JSON/CSV duration table (table estimator).")
@click.option("--no-timings", is_flag=True,
              help="Leave wall times out of summary.json so re-runs are byte-identical.")
@group_options
@format_option
@pass_app
def optimize_cmd(app: App, graph: str, output_dir: str, passes: str | None,
                 max_memory_increase: float | None, allow_cross_group_reorder: bool | None,
                 estimator: str | None, hardware: str | None, gpus_per_node: int | None,
                 profile: str | None, table: str | None, no_timings: bool,
                 groups_file: str | None, mesh: str | None, fmt: str) -> None:
    """Reorder GRAPH so communication overlaps with compute; write it and summary.json."""
    from commopt.api import optimize
    from commopt.config import load_config
    from commopt.passes.base import DEFAULT_MAX_MEMORY_INCREASE

    cfg = load_config().with_overrides({
        "passes": passes, "max_memory_increase": max_memory_increase,
        "allow_cross_group_reorder": allow_cross_group_reorder, "estimator": estimator,
        "hardware": hardware, "gpus_per_node": gpus_per_node, "profile": profile, "table": table,
    })
    result = optimize(
        graph,
        passes=cfg.get("passes"),
        max_memory_increase=cfg.get("max_memory_increase", DEFAULT_MAX_MEMORY_INCREASE),
        allow_cross_group_reorder=bool(cfg.get("allow_cross_group_reorder", False)),
        estimator=cfg.get("estimator", "analytical"),
        hardware=cfg.get("hardware"),
        gpus_per_node=cfg.get("gpus_per_node"),
        profile=cfg.get("profile"),
        table=cfg.get("table"),
        groups=groups_file,
        mesh=mesh,
        output_dir=output_dir,
        timings=not no_timings,
    )
    s = result.summary
    for note in s.notes:
        app.info(note)
    for path in result.written:
        app.info(f"wrote {path}")
    if fmt == "json":
        emit_json(app, s)
        return
    _print_text(app, s)


def _print_text(app: App, s) -> None:
    from rich.table import Table

    out = app.out
    out.print(f"[bold]{s.graph}[/bold]: {s.nodes} nodes, {s.collectives} collectives; "
              f"estimates from {s.estimator}")
    if not s.collectives:
        out.print("no collectives: the graph was written unchanged")
        return
    t = Table(title="passes (simulated, us)", title_justify="left")
    for col in ("pass", "makespan before", "after", "exposed before", "after", "peak MiB", "note"):
        t.add_column(col, justify="left" if col in ("pass", "note") else "right")
    for p in s.passes:
        t.add_row(p.name, f"{p.before.makespan_us:,.1f}", f"{p.after.makespan_us:,.1f}",
                  f"{p.before.exposed_comm_us:,.1f}", f"{p.after.exposed_comm_us:,.1f}",
                  f"{p.after.peak_memory_bytes / 2**20:,.1f}", p.note or "")
    out.print(t)
    b, a = s.before, s.after
    out.print(f"makespan {b.makespan_us:,.1f} -> {a.makespan_us:,.1f} us "
              f"(lower bound {s.lower_bound_us:,.1f}, ratio {s.makespan_over_lower_bound:.3f})")
    out.print(f"exposed communication {b.exposed_comm_us:,.1f} -> {a.exposed_comm_us:,.1f} us; "
              f"overlap {b.overlap_ratio:.1%} -> {a.overlap_ratio:.1%}")
    out.print(f"peak memory {b.peak_memory_bytes / 2**20:,.1f} -> {a.peak_memory_bytes / 2**20:,.1f} MiB "
              f"(budget {s.memory_budget_bytes / 2**20 if s.memory_budget_bytes else 0:,.1f} MiB)")
    if s.optimizer_seconds is not None:
        app.info(f"optimized in {s.optimizer_seconds:.2f} s")
