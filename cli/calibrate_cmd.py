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
    rank the generated runner's --profile DIR writes; the samples of all of them are pooled
    before fitting. Each collective fit says how it was made.
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
    model = calibrate(files, steps=step_list)
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
    out.print(f"  compute: {len(model.compute)} (op, shapes, dtypes) entries", markup=False)
    app.info(f"wrote {output}")
