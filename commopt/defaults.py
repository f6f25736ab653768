"""Built-in defaults of every configurable setting, gathered in one table.

Configuration files and command-line flags override these (see :mod:`commopt.config`). Values
owned by a subsystem are imported from it, so there is one source for each. ``None`` means
"not set": the feature it controls is off (check thresholds), there is no file (profile,
table) or a rule decides (``allow_cross_group_reorder``: :mod:`commopt.cross_group`).
"""

from __future__ import annotations

from typing import Any

from commopt.buffers.planner import DEFAULT_ALIGN_BYTES
from commopt.estimators.options import EstimatorOptions
from commopt.passes.base import DEFAULT_PIPELINE
from commopt.sim.memory import DEFAULT_MAX_MEMORY_INCREASE
from commopt.solver import DEFAULT_TIME_LIMIT_S

_ESTIMATOR = EstimatorOptions()

DEFAULTS: dict[str, Any] = {
    "passes": ",".join(DEFAULT_PIPELINE),
    "estimator": _ESTIMATOR.estimator,
    "hardware": _ESTIMATOR.hardware,
    "gpus_per_node": _ESTIMATOR.gpus_per_node,
    "profile": None,
    "table": None,
    "compute_slowdown": "off",
    "max_memory_increase": DEFAULT_MAX_MEMORY_INCREASE,
    "allow_cross_group_reorder": None,  # the safe rule, commopt.cross_group
    "reorder_within_groups": None,  # where proven, commopt.cross_group.within_groups
    "align": DEFAULT_ALIGN_BYTES,
    "comm_buffers": "all",
    "persistent_params": "none",
    "max_exposed_comm_us": None,
    "min_overlap": None,
    "max_peak_memory": None,
    "max_regression": None,
    "max_gap_to_optimal": None,
    "solver": "heuristic",
    "time_limit": DEFAULT_TIME_LIMIT_S,  # seconds; used only with solver = "exact"
}
