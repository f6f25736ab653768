"""``commopt estimate`` (per-node durations) and ``commopt calibrate`` (fit a profile model).

:func:`estimator_options` is the click decorator every command that needs durations uses;
:func:`options_from_cli` turns its values, layered over the configuration, into
:class:`~commopt.estimators.EstimatorOptions`.
"""

from __future__ import annotations

from typing import Any

import click

from commopt.cli.app import App
from commopt.cli.options import (
    emit_json,
    format_option,
    group_options,
    load_graph_for_cli,
    pass_app,
)

ESTIMATOR_KEYS = ("estimator", "hardware", "gpus_per_node", "profile", "table", "cache_dir")


def estimator_options(f):
    """--estimator, --hardware, --gpus-per-node, --profile, --table, --cache-dir."""
    opts = [
        click.option("--estimator", default=None, metavar="SPEC",
                     help="Estimator chain: analytical, profile, table, benchmark, a plug-in name, "
                          "module:attr, or a comma list (analytical is always last) [default: analytical]."),
        click.option("--hardware", default=None, metavar="NAME|FILE",
                     help="Hardware preset (h100, h200, a100, b200, mi300x) or JSON file [default: h100]."),
        click.option("--gpus-per-node", type=click.IntRange(min=1), default=None,
                     help="GPUs per host: groups spanning hosts use the network [default: 8]."),
        click.option("--profile", default=None, type=click.Path(dir_okay=False, path_type=str),
                     help="Profile model from 'commopt calibrate', or a Kineto trace (profile estimator)."),
        click.option("--table", default=None, type=click.Path(dir_okay=False, path_type=str),
                     help="JSON/CSV durations by node name or op (table estimator)."),
        click.option("--cache-dir", default=None, type=click.Path(file_okay=False, path_type=str),
                     help="Where the benchmark estimator caches timings [default: ~/.cache/commopt]."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def options_from_cli(values: dict[str, Any]):
    """EstimatorOptions from command-line values over the configuration file and defaults.

    An estimator spec naming ``profile`` or ``table`` is implied by giving the file alone:
    ``--profile p.json`` means ``profile,analytical`` unless ``--estimator`` says otherwise.
    """
    from commopt.config import load_config
    from commopt.estimators import EstimatorOptions

    cli_vals = {k: values.get(k) for k in ESTIMATOR_KEYS}
    cfg = load_config().with_overrides({k: v for k, v in cli_vals.items() if k != "cache_dir"})
    merged = {k: cfg.get(k) for k in ESTIMATOR_KEYS if k != "cache_dir"}
    merged["cache_dir"] = cli_vals.get("cache_dir")
    if values.get("estimator") is None and cfg.sources.get("estimator") == "default":
        implied = [name for name in ("profile", "table") if merged.get(name)]
        if implied:
            merged["estimator"] = ",".join(implied + ["analytical"])
    return EstimatorOptions.from_mapping(merged)


@click.command("estimate")
@click.argument("graph", required=False, type=click.Path(path_type=str))
@estimator_options
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many of the most expensive nodes to list.")
@click.option("--list", "list_only", is_flag=True,
              help="List the available estimators (built-in and plug-ins, broken ones marked) and exit.")
@group_options
@format_option
@pass_app
def estimate_cmd(app: App, graph: str | None, top: int, list_only: bool, groups_file: str | None,
                 mesh: str | None, world_size: int | None, fmt: str, **est_values: Any) -> None:
    """Estimate every node's duration: totals by kind, the most expensive nodes."""
    if list_only:
        _list_estimators(app, fmt)
        return
    if graph is None:
        raise click.UsageError("missing argument GRAPH (or use --list)")
    from commopt.estimators.report import estimate_report

    options = options_from_cli(est_values)
    g = load_graph_for_cli(graph, groups_file, mesh, world_size)
    report = estimate_report(g, options, top=top)
    for note in report.notes:
        app.warn(note)
    if fmt == "json":
        emit_json(app, report)
        return
    _print_report(app, report)


def _list_estimators(app: App, fmt: str) -> None:
    from commopt.estimators import list_estimators

    infos = list_estimators()
    if fmt == "json":
        emit_json(app, {"estimators": [
            {"name": i.name, "source": i.source, "target": i.target, "error": i.error} for i in infos]})
        return
    for i in infos:
        status = f"BROKEN: {i.error}" if i.broken else "ok"
        app.out.print(f"{i.name:<16} {i.source:<28} {status}", markup=False)


def _print_report(app: App, report) -> None:
    from rich.table import Table

    out = app.out
    out.print(f"[bold]{report.graph}[/bold]: {report.nodes} nodes; estimates from "
              f"{report.estimator}" + (f" on {report.hardware}" if report.hardware else ""))
    kinds = Table(title="total by kind (us)", title_justify="left")
    kinds.add_column("kind")
    kinds.add_column("total us", justify="right")
    for k, v in report.total_us_by_kind.items():
        kinds.add_row(k, f"{v:,.1f}")
    for g, v in report.comm_us_by_group.items():
        kinds.add_row(f"  comm group {g}", f"{v:,.1f}")
    out.print(kinds)
    if report.top:
        t = Table(title=f"top {len(report.top)} nodes", title_justify="left")
        for col in ("node", "kind", "op", "us", "from"):
            t.add_column(col, justify="right" if col == "us" else "left")
        for n in report.top:
            t.add_row(n.name, n.kind, n.op, f"{n.duration_us:,.1f}", n.source)
        out.print(t)
    s = report.simulated
    out.print(f"original order (simulated): makespan {s.makespan_us:,.1f} us, exposed communication "
              f"{s.exposed_comm_us:,.1f} us, overlap {s.overlap_ratio:.1%}, lower bound "
              f"{s.lower_bound_us:,.1f} us, peak memory {s.peak_memory_bytes / 2**20:,.1f} MiB")
    out.print("sources: " + ", ".join(f"{k} {v}" for k, v in report.nodes_by_source.items()))


@click.command("calibrate")
@click.argument("trace", type=click.Path(dir_okay=False, path_type=str))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="Where to write the profile model (JSON).")
@click.option("--steps", default=None, metavar="N,M",
              help="Only these profiler steps (ProfilerStep#N) [default: all].")
@format_option
@pass_app
def calibrate_cmd(app: App, trace: str, output: str, steps: str | None, fmt: str) -> None:
    """Fit a profile model (collective latency/bandwidth, op times) on a Kineto trace."""
    from commopt.errors import OptionError
    from commopt.estimators.profile import calibrate, write_profile

    step_list = None
    if steps:
        try:
            step_list = [int(s) for s in steps.split(",") if s.strip()]
        except ValueError:
            raise OptionError(f"--steps takes step numbers like 4,5, got {steps!r}", field="--steps") from None
    model = calibrate(trace, steps=step_list)
    write_profile(model, output)
    for note in model.notes:
        app.warn(note)
    if fmt == "json":
        emit_json(app, model)
        return
    out = app.out
    out.print(f"calibrated on {model.source} ({model.device}, steps {model.steps or 'all'})", markup=False)
    for f in model.collectives:
        out.print(f"  {f.type} over {f.group_size} ranks: {len(f.points)} sizes "
                  f"{f.min_bytes:,}-{f.max_bytes:,} B, latency {f.latency_us:,.1f} us, "
                  f"bandwidth {f.bandwidth_gbps:,.2f} GB/s", markup=False)
    out.print(f"  compute: {len(model.compute)} (op, shapes, dtypes) entries", markup=False)
    app.info(f"wrote {output}")
