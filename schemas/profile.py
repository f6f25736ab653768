"""A calibrated profile model (``commopt calibrate TRACE... -o profile.json``).

Collectives: measured points (median time per message size) and a fitted latency and
bandwidth per collective type and group size; the profile estimator interpolates between
points in log space and leaves sizes outside the measured range to the next estimator.
Compute: median device time per (op, tensor input shapes, dtypes).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class CollectivePoint(BaseModel):
    """Median time of one message size."""

    size_bytes: int = Field(ge=0)
    time_us: float = Field(ge=0)
    count: int = Field(ge=1, description="samples behind the median")


class CollectiveFit(BaseModel):
    """One collective type over one group size."""

    type: str = Field(description="IR collective type, e.g. 'all_reduce'")
    group_size: int = Field(ge=1)
    latency_us: float = Field(ge=0, description="fitted fixed cost (time = latency + bytes / bandwidth)")
    bandwidth_gbps: float = Field(ge=0, description="fitted algorithm bandwidth, GB/s of message bytes")
    min_bytes: int = Field(ge=0)
    max_bytes: int = Field(ge=0)
    points: list[CollectivePoint]
    how: str | None = Field(None, description="how the fit was made, e.g. 'latency forced to 0: fewer than 2 sizes'")


class ComputeEntry(BaseModel):
    """Median device time of one op on tensors of these shapes and dtypes."""

    op: str = Field(description="op without overload, e.g. 'aten.mm'")
    input_shapes: list[list[int]]
    dtypes: list[str]
    time_us: float = Field(ge=0)
    count: int = Field(ge=1)


class ProfileModel(BaseModel):
    """What ``commopt calibrate`` writes and ``--estimator profile --profile FILE`` reads."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["commopt-profile"] = "commopt-profile"
    version: Literal[1] = 1
    source: str = Field(description="trace file(s) the model was fitted on (file names, comma-separated)")
    device: str = Field(description="device named in the trace ('cpu' for CPU-only traces)")
    world_size: int | None = None
    steps: list[int] = Field(default_factory=list, description="profiler steps used")
    collectives: list[CollectiveFit] = Field(default_factory=list)
    compute: list[ComputeEntry] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


ROOT_MODEL = ProfileModel
