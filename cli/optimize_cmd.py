"""``commopt optimize GRAPH -o OUTDIR``: reorder a graph and write the full output set."""

from __future__ import annotations

import click

from commopt.cli.app import App
from commopt.cli.estimator_options import estimator_options, options_from_cli
from commopt.cli.options import (
    align_option,
    emit_json,
    format_option,
    graph_argument,
    group_options,
    pass_app,
    persistent_params_option,
    print_persistent_params,
)
from commopt.cli.progress import stage_progress


@click.command("optimize")
@graph_argument
@click.option("-o", "--output", "output_dir", required=True,
              type=click.Path(file_okay=False, path_type=str),
              help="Directory for the outputs (created if needed).")
@click.option("--passes", default=None, metavar="A,B,C",
              help="Pass pipeline (see `commopt passes`) [default: the measured best pipeline].")
@click.option("--max-memory-increase", type=float, default=None, metavar="F",
              help="Memory may grow by this fraction of the original's (the runner's footprint, "
                   "arenas included, and the live-tensor peak); negative asks for less memory "
                   "than the original [default: 0.1].")
@click.option("--memory-accounting", type=click.Choice(["footprint", "live-tensors"]), default=None,
              help="What the budget bounds: the runner's footprint (arenas + other live tensors) "
                   "and the live-tensor peak, or the live-tensor peak only [default: footprint; "
                   "live-tensors with --comm-buffers none].")
@click.option("--allow-cross-group-reorder/--keep-cross-group-order", default=None,
              help="Let collectives of different process groups change their relative order, or "
                   "keep it (and then each group's order too) [default: reorder where every rank "
                   "provably runs this program in one order, see docs/process-groups.md].")
@click.option("--reorder-within-groups/--keep-group-order", default=None,
              help="Let collectives of one process group change their relative order too (an "
                   "error where it is not proven), or keep each group's order [default: reorder "
                   "where every rank provably runs this program in one order and cross-group "
                   "reordering is on, up to 25,000 nodes; see docs/process-groups.md].")
@align_option
@click.option("--comm-buffers", default=None, metavar="all|TYPE,...",
              help="Collective types given persistent buffers, or 'none' (each collective allocates "
                   "its result; the budget then bounds the live-tensor peak) [default: all].")
@persistent_params_option
@click.option("--force", is_flag=True,
              help="Write into OUTPUT even if it holds files commopt did not write (they are "
                   "left alone unless an output has their name).")
@click.option("--solver", type=click.Choice(["heuristic", "exact"]), default=None,
              help="exact: after the passes, solve the scheduling problem with OR-Tools CP-SAT "
                   "(pip install 'commopt[exact]'); never worse than the heuristic, and its "
                   "proven bound sharpens the certificate [default: heuristic].")
@click.option("--time-limit", "time_limit_s", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="S", help="Seconds the exact solver may take [default: 20].")
@click.option("--assume", "assume", multiple=True, metavar="SYMBOL=N",
              help="Value to assume for a data-dependent size (an unbacked symbol such as u2: "
                   "all_to_all splits read back with .tolist()); '*=N' sets every one not named. "
                   "Repeatable [default: even all_to_all splits, else the largest value the "
                   "program allows].")
@click.option("--no-timings", is_flag=True,
              help="Leave wall times out of summary.json so re-runs are byte-identical.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Processes doing the work. With 2, a graph of 20,000 nodes or more has its "
                   "runner, its trace and the input order's scenarios and buffer packing "
                   "computed on another core: faster, and more memory (a child copies the "
                   "pages it reads). Same files either way [default: the cores this process "
                   "may use, at most 2].")
@estimator_options
@group_options
@format_option
@pass_app
def optimize_cmd(app: App, graph: str, output_dir: str, passes: str | None,
                 max_memory_increase: float | None, memory_accounting: str | None,
                 allow_cross_group_reorder: bool | None, reorder_within_groups: bool | None,
                 align: int | None, comm_buffers: str | None,
                 persistent_params: str | None, force: bool, solver: str | None, time_limit_s: float | None,
                 assume: tuple[str, ...],
                 no_timings: bool, jobs: int | None,
                 groups_file: str | None, mesh: str | None, world_size: int | None, fmt: str, **estimator_values) -> None:
    """Reorder GRAPH so communication overlaps with compute and write, into OUTPUT: the
    reordered graph (same format), buffer_plan.json, run_NAME.py, report.html, trace.json,
    summary.json and, last, manifest.json (each file's size and SHA-256: the set is complete
    when it is there)."""
    from commopt.api import optimize
    from commopt.forked import default_jobs
    from commopt.sim.memory import DEFAULT_MAX_MEMORY_INCREASE

    cfg = app.config.with_overrides({
        "passes": passes, "max_memory_increase": max_memory_increase,
        "allow_cross_group_reorder": allow_cross_group_reorder,
        "reorder_within_groups": reorder_within_groups,
        "align": align, "comm_buffers": comm_buffers, "persistent_params": persistent_params,
        "solver": solver, "time_limit": time_limit_s,
    })
    solver = cfg.get("solver", "heuristic")
    # a configured time limit serves the exact solver; a --time-limit flag without it is an error
    limit_s = cfg.get("time_limit") if solver == "exact" or time_limit_s is not None else None
    with stage_progress(app) as progress:
        result = optimize(
            graph,
            passes=cfg.get("passes"),
            max_memory_increase=cfg.get("max_memory_increase", DEFAULT_MAX_MEMORY_INCREASE),
            allow_cross_group_reorder=cfg.get("allow_cross_group_reorder"),
            reorder_within_groups=cfg.get("reorder_within_groups"),
            estimator=options_from_cli(app.config, estimator_values),
            groups=groups_file,
            mesh=mesh,
            world_size=world_size,
            output_dir=output_dir,
            align=cfg.get("align"),
            comm_buffers=cfg.get("comm_buffers"),
            persistent_params=cfg.get("persistent_params"),
            memory_accounting=memory_accounting,
            solver=solver,
            time_limit_s=limit_s,
            assume=list(assume),
            timings=not no_timings,
            force=force,
            jobs=default_jobs() if jobs is None else jobs,
            progress=progress,
        )
    app.keep_until_exit(result)
    s = result.summary
    load_warnings = set(result.graph.meta.get("load_warnings", []))
    for note in s.notes:
        (app.warn if note in load_warnings else app.info)(note)
    for path in result.written:
        app.debug(f"wrote {path}")
    app.info(f"wrote {len(result.written)} files to {output_dir}: "
             f"{', '.join(p.name for p in result.written)}")
    if fmt == "json":
        emit_json(app, s)
        return
    _print_text(app, s)


def _print_text(app: App, s) -> None:
    from rich.table import Table
    from rich.text import Text

    from commopt.report.text import print_table

    out = app.out
    out.print(Text.assemble((s.graph, "bold"), f": {s.nodes} nodes, {s.collectives} collectives; "
                            f"estimates from {s.estimator}"))
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
    print_table(out, t)
    b, a = s.before, s.after
    out.print(f"makespan {b.makespan_us:,.1f} -> {a.makespan_us:,.1f} us "
              f"(lower bound {s.lower_bound_us:,.1f}, ratio {s.makespan_over_lower_bound:.3f})")
    if s.certificate is not None:
        from commopt.certificate import words

        out.print(words(s.certificate))
    assumed = " (on assumed data-dependent sizes: see below)" if s.data_dependent else ""
    out.print(f"exposed communication {b.exposed_comm_us:,.1f} -> {a.exposed_comm_us:,.1f} us; "
              f"overlap {b.overlap_ratio:.1%} -> {a.overlap_ratio:.1%}{assumed}")
    if s.robustness is not None:
        r = s.robustness
        worst = f"; worst case {r.after_max_us / r.before_max_us - 1:+.1%}" if r.before_max_us > 0 else ""
        out.print(f"with every cost off by up to {r.cost_error:.0%} ({len(r.scenarios)} scenarios): "
                  f"makespan {r.before_min_us:,.1f}-{r.before_max_us:,.1f} -> "
                  f"{r.after_min_us:,.1f}-{r.after_max_us:,.1f} us{worst}")
    out.print(f"peak live tensors {b.peak_memory_bytes / 2**20:,.1f} -> {a.peak_memory_bytes / 2**20:,.1f} MiB "
              f"(budget {s.memory_budget_bytes / 2**20 if s.memory_budget_bytes else 0:,.1f} MiB)")
    if s.footprint is not None:
        f = s.footprint
        share = f.arena_after_bytes / f.after_bytes if f.after_bytes else 0.0
        out.print(f"footprint of the runner (persistent buffers: arenas + other live tensors) "
                  f"{f.before_bytes / 2**20:,.2f} -> {f.after_bytes / 2**20:,.2f} MiB, arenas "
                  f"{share:.0%} of it (budget {f.budget_bytes / 2**20:,.2f} MiB)")
    if s.buffer_plan is not None:
        bp = s.buffer_plan
        out.print(f"comm buffer arenas {bp.arena_bytes / 2**20:,.2f} MiB (lower bound "
                  f"{bp.lower_bound_bytes / 2**20:,.2f}, one per call site {bp.per_call_site_bytes / 2**20:,.2f}; "
                  f"original order {bp.original_arena_bytes / 2**20:,.2f})")
        if bp.persistent_params is not None:
            print_persistent_params(out, bp.persistent_params)
    if s.bucketing is not None:
        bk = s.bucketing
        out.print(f"buckets: {bk.collectives_before} -> {bk.collectives_after} collectives "
                  f"({sum(len(x.members) for x in bk.buckets)} merged into {len(bk.buckets)}); "
                  f"makespan {bk.makespan_before_us:,.1f} -> {bk.makespan_after_us:,.1f} us where merged")
    if s.cross_group is not None:
        verb = "reordered" if s.cross_group.allowed else "kept"
        out.print(f"order across process groups {verb} (rule {s.cross_group.rule}): "
                  f"{s.cross_group.reason}", markup=False)
        if s.cross_group.within_groups:
            out.print("order within process groups free too: each group's collectives may be "
                      "issued in a new order (--keep-group-order keeps it)", markup=False)
    if s.data_dependent is not None:
        _print_data_dependent(out, s.data_dependent)
    if s.optimizer_seconds is not None:
        app.info(f"optimized in {s.optimizer_seconds:.2f} s")


def _print_data_dependent(out, entry) -> None:
    """The assumed sizes and the result at each scale of them."""
    from rich.table import Table

    from commopt.report.text import print_table

    t = Table(title="data-dependent sizes: the result at multiples of the assumed values "
                    "(simulated, us; orders not re-optimized)", title_justify="left")
    for col in ("sizes", "makespan before", "after", "exposed after", "overlap after"):
        t.add_column(col, justify="left" if col == "sizes" else "right")
    for sc in entry.scenarios:
        t.add_row(f"{sc.scale:g}x" + (" (assumed)" if sc.scale == 1.0 else ""),
                  f"{sc.before.makespan_us:,.1f}", f"{sc.after.makespan_us:,.1f}",
                  f"{sc.after.exposed_comm_us:,.1f}", f"{sc.after.overlap_ratio:.1%}")
    print_table(out, t)
