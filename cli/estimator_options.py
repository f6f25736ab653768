"""The estimator options every command that needs durations takes, defined once.

:func:`estimator_options` is the click decorator; :func:`options_from_cli` turns its values,
layered over the configuration, into :class:`~commopt.estimators.EstimatorOptions`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from commopt.config import Config

ESTIMATOR_KEYS = ("estimator", "hardware", "gpus_per_node", "profile", "table", "cache_dir",
                  "compute_slowdown")


def estimator_options(f):
    """--estimator, --hardware, --gpus-per-node, --profile, --table, --cache-dir,
    --compute-slowdown."""
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
        click.option("--compute-slowdown", default=None, metavar="off|calibrated|FACTOR",
                     help="Compute runs this many times as long beside communication in every "
                          "simulation: 'calibrated' takes the factor --profile measured [default: off]."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def options_from_cli(config: Config, values: dict[str, Any]):
    """EstimatorOptions from command-line values over ``config`` (the configuration file and
    defaults, :attr:`App.config`).

    An estimator spec naming ``profile`` or ``table`` is implied by giving the file alone:
    ``--profile p.json`` means ``profile,analytical`` unless ``--estimator`` says otherwise.
    """
    from commopt.estimators import EstimatorOptions

    cli_vals = {k: values.get(k) for k in ESTIMATOR_KEYS}
    cfg = config.with_overrides({k: v for k, v in cli_vals.items() if k != "cache_dir"})
    merged = {k: cfg.get(k) for k in ESTIMATOR_KEYS if k != "cache_dir"}
    merged["cache_dir"] = cli_vals.get("cache_dir")
    if values.get("estimator") is None and cfg.sources.get("estimator") == "default":
        implied = [name for name in ("profile", "table") if merged.get(name)]
        if implied:
            merged["estimator"] = ",".join(implied + ["analytical"])
    return EstimatorOptions.from_mapping(merged)
