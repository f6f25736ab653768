"""``commopt calibrate TRACE -o profile.json``: fit the profile estimator from a profiler trace."""

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

    check_outputs(None, {"--output": output}, {"TRACE": trace})
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
