"""JSON output of ``commopt check``: the verdict and every individual check."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CheckMetrics(BaseModel):
    """The simulated numbers a check compares (estimates, from the estimator named)."""

    makespan_us: float
    exposed_comm_us: float
    overlap_ratio: float = Field(ge=0, le=1)
    peak_memory_bytes: int
    lower_bound_us: float | None = None
    graph_digest: str | None = Field(
        None, description="identity of the program the numbers are for (see summary.json)")
    estimator: str | None = Field(
        None, description="the estimator chain behind the numbers (null: not recorded)")
    hardware: str | None = Field(
        None, description="the hardware preset or file the analytical estimator used (null: not recorded)")
    compute_slowdown: float = Field(
        1.0, ge=1, allow_inf_nan=False,
        description="the compute slowdown beside communication the numbers were simulated with "
                    "(1: none; summary.json's compute_slowdown.factor)")


class CheckOutcome(BaseModel):
    """One threshold or baseline comparison."""

    name: str = Field(description="e.g. 'max-exposed-comm-us', 'regression:exposed_comm_us'")
    value: float
    limit: float
    passed: bool
    message: str


class CheckResult(BaseModel):
    """Whether the graph passed, the one-line verdict, and the checks behind it."""

    graph: str
    passed: bool
    verdict: str
    estimator: str
    optimized: bool = Field(description="metrics are for commopt's order (False: the file's order)")
    metrics: CheckMetrics
    baseline: CheckMetrics | None = None
    checks: list[CheckOutcome]


ROOT_MODEL = CheckResult
