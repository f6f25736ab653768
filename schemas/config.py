"""commopt configuration: ``[tool.commopt]`` in pyproject.toml, or a ``commopt.toml`` file.

Every key is optional; command-line flags override file values, file values override the
built-in defaults. A relative path (``hardware`` file, ``profile``, ``table``) is relative to
the config file's directory. ``commopt config`` shows the effective values and where each came from.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ConfigFile(BaseModel):
    """The keys a configuration file may set (unknown keys are an error)."""

    model_config = ConfigDict(extra="forbid")

    passes: str | None = Field(None, description="comma-separated pass pipeline")
    estimator: str | None = Field(None, description="estimator spec, e.g. 'profile,analytical'")
    hardware: str | None = Field(None, description="hardware preset name or JSON file (relative to this file)")
    gpus_per_node: int | None = Field(None, ge=1)
    profile: str | None = Field(None, description="calibrated profile JSON or Kineto trace (relative to this file)")
    table: str | None = Field(None, description="JSON/CSV duration table (relative to this file)")
    compute_slowdown: str | None = Field(
        None, description="compute beside communication: 'off', 'calibrated' (the profile's "
                          "measured factor) or a factor >= 1")
    max_memory_increase: float | None = Field(None, gt=-1, le=100, allow_inf_nan=False)
    allow_cross_group_reorder: bool | None = None
    reorder_within_groups: bool | None = Field(
        None, description="let collectives of one process group change their relative order "
                          "(true; an error where it is not proven) or keep it (false); unset: "
                          "where every rank provably runs the program in one order, up to "
                          "25,000 nodes")
    align: int | None = Field(None, ge=1)
    comm_buffers: str | None = None
    persistent_params: str | None = Field(
        None, description="process groups whose all_gathered parameters live in the arena: "
                          "'all', 'none' or comma-separated group names")
    max_exposed_comm_us: float | None = Field(None, ge=0, allow_inf_nan=False)
    min_overlap: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    max_peak_memory: int | None = Field(None, ge=0)
    max_regression: float | None = Field(None, ge=0, allow_inf_nan=False, description="percent")
    max_gap_to_optimal: float | None = Field(
        None, ge=0, allow_inf_nan=False,
        description="percent: makespan / proven lower bound - 1 (commopt check)")
    solver: Literal["heuristic", "exact"] | None = Field(
        None, description="'exact': after the passes, solve with OR-Tools CP-SAT (commopt optimize)")
    time_limit: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="seconds the exact solver may take (used with solver = 'exact')")


class EffectiveSetting(BaseModel):
    """One setting's value and where it came from ('default', a file path, 'command line')."""

    value: str | int | float | bool | None
    source: str


class EffectiveConfig(BaseModel):
    """JSON output of ``commopt config``."""

    config_file: str | None
    settings: dict[str, EffectiveSetting]


ROOT_MODEL = ConfigFile
