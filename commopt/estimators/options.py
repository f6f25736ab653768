"""Estimator settings in one place, shared by every command and the Python API."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class EstimatorOptions:
    """What an estimator chain needs besides the graph.

    ``estimator`` is a spec for :func:`commopt.estimators.resolve`; ``hardware`` a preset name
    or a JSON file; ``profile`` a calibrated model (``commopt calibrate``) or a Kineto trace;
    ``table`` a JSON or CSV file of durations; ``cache_dir`` where the benchmark estimator
    keeps its measurements (default ``~/.cache/commopt``); ``compute_slowdown`` how much
    longer compute runs beside communication in every simulation: ``"off"`` (the default),
    ``"calibrated"`` (the factor ``commopt calibrate`` measured, from ``profile``) or a
    factor >= 1 (:func:`commopt.estimators.slowdown.applied_slowdown`).
    """

    estimator: str = "analytical"
    hardware: str = "h100"
    gpus_per_node: int = 8
    profile: str | None = None
    table: str | None = None
    cache_dir: str | None = None
    compute_slowdown: str | None = None

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> EstimatorOptions:
        """Options from a mapping (a Config's values or click kwargs); unknown keys ignored,
        None values keep the default."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names and v is not None})
