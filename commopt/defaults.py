"""Built-in defaults of every configurable setting, in one place.

Configuration files and command-line flags override these (see :mod:`commopt.config`).
``None`` means "not set": the feature it controls is off (check thresholds) or the value is
derived (profile and table files).
"""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, Any] = {
    "passes": None,
    "estimator": "analytical",
    "hardware": "h100",
    "gpus_per_node": 8,
    "profile": None,
    "table": None,
    "max_memory_increase": None,
    "allow_cross_group_reorder": False,
    "align": None,
    "comm_buffers": "all",
    "max_exposed_comm_us": None,
    "min_overlap": None,
    "max_peak_memory": None,
    "max_regression": None,
}
