"""``commopt calibrate TRACE... -o profile.json``: fit the profile estimator from profiler traces."""

from __future__ import annotations

import click

from commopt.cli.app import App
from commopt.cli.options import (
    check_outputs,
    emit_json,
    format_option,
    pass_app,
)
from commopt.cli.progress import stage_progress


@click.command("calibrate")
@click.argument("traces", nargs=-1, required=True, metavar="TRACE...",
                type=click.Path(file_okay=True, dir_okay=True, path_type=str))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="Where to write the profile model (JSON).")
@click.option("--steps", default=None, metavar="N,M",
              help="Only these profiler steps (ProfilerStep#N) [default: all].")
@format_option
@pass_app
def calibrate_cmd(app: App, traces: tuple[str, ...], output: str, steps: str | None, fmt: str) -> None:
    """Fit a profile model (collective latency/bandwidth, op times) on Kineto traces.

    Each TRACE is a trace file (.json or .json.gz) or a directory of them, e.g. the one per
    rank the generated runner's --profile DIR writes. Collectives are fitted on transfer
    time, not on kernel durations (most of an NCCL kernel's time is waiting for the slowest
    rank): with several ranks' traces the same collective is matched across ranks and its
    transfer is its end minus the latest rank's start; with one rank a lower envelope of
    duration vs size estimates it. Each collective fit says how it was made; the output says
    per collective type how much of the measured time was waiting, and how much slower
    compute kernels ran beside communication.
    """
    from commopt.errors import OptionError
    from commopt.estimators.kineto import trace_files
    from commopt.estimators.profile import calibrate, write_profile

    files = trace_files(traces)
    check_outputs(None, {"--output": output}, {}, [("TRACE", f) for f in files])
    step_list = None
    if steps:
        try:
            step_list = [int(s) for s in steps.split(",") if s.strip()]
        except ValueError:
            raise OptionError(f"--steps takes step numbers like 4,5, got {steps!r}", field="--steps") from None
    with stage_progress(app) as progress:
        model = calibrate(files, steps=step_list, progress=progress)
    write_profile(model, output)
    for note in model.notes:
        app.warn(note)
    if fmt == "json":
        emit_json(app, model)
        return
    out = app.out
    what = model.source if len(files) == 1 else f"{len(files)} traces ({model.source})"
    out.print(f"calibrated on {what} ({model.device}, steps {model.steps or 'all'})", markup=False)
    for f in model.collectives:
        out.print(f"  {f.type} over {f.group_size} ranks: {len(f.points)} sizes "
                  f"{f.min_bytes:,}-{f.max_bytes:,} B, latency {f.latency_us:,.1f} us, "
                  f"bandwidth {f.bandwidth_gbps:,.2f} GB/s ({f.how})", markup=False)
    for w in model.waiting:
        out.print(f"  {w.type}: {w.kernels} kernels, {w.measured_us:,.0f} us measured = "
                  f"{w.transfer_us:,.0f} us transfer + {w.waiting_us:,.0f} us waiting "
                  f"({w.waiting_fraction:.1%} waiting; {w.method})", markup=False)
    out.print(f"  compute: {len(model.compute)} (op, shapes, dtypes) entries", markup=False)
    slow = model.compute_slowdown
    if slow is not None:
        out.print(f"  compute beside communication: {slow.factor:.3f}x as long as alone "
                  f"({slow.kernel_kinds} kernel kinds, {slow.overlapped_kernels} kernels beside, "
                  f"{slow.alone_kernels} alone; applied with --compute-slowdown calibrated)", markup=False)
    app.info(f"wrote {output}")
