"""JSON output of ``commopt estimate``: per-node durations, totals and the costliest nodes."""

from __future__ import annotations

from pydantic import BaseModel, Field

from commopt.schemas.profile import ComputeSlowdown, WaitingShare


class NodeEstimate(BaseModel):
    """One node's estimated duration and what gave it."""

    name: str
    kind: str
    op: str
    duration_us: float = Field(ge=0)
    source: str = Field(description="estimator name, 'graph file' or 'zero' (inputs, views, waits)")


class SimulatedOriginal(BaseModel):
    """The original order simulated with these durations (estimates)."""

    makespan_us: float
    exposed_comm_us: float
    overlap_ratio: float
    lower_bound_us: float
    peak_memory_bytes: int


class EstimateReport(BaseModel):
    """What ``commopt estimate --format json`` prints."""

    graph: str
    estimator: str = Field(description="the chain that produced the durations, e.g. 'profile,analytical'")
    hardware: str | None = Field(description="hardware of the analytical estimator")
    nodes: int
    total_us_by_kind: dict[str, float]
    comm_us_by_group: dict[str, float]
    nodes_by_source: dict[str, int]
    top: list[NodeEstimate] = Field(description="the most expensive nodes, costliest first")
    simulated: SimulatedOriginal
    notes: list[str]
    collective_waiting: list[WaitingShare] = Field(
        default_factory=list, description="profile estimator: per collective type, how much of the calibration "
                                          "traces' NCCL kernel time was waiting rather than transfer (durations "
                                          "above are transfer times)")
    compute_slowdown: ComputeSlowdown | None = Field(
        None, description="profile estimator: measured slowdown of compute beside communication (not applied)")
    durations: list[NodeEstimate] = Field(description="every node, in graph order")


ROOT_MODEL = EstimateReport
