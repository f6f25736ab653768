"""A calibrated profile model (``commopt calibrate TRACE... -o profile.json``).

Collectives: measured points (time per message size) and a fitted latency and bandwidth
per collective type and group size; the profile estimator interpolates between points in
log space and leaves sizes outside the measured range to the next estimator. The points
are *transfer* times, not raw kernel durations (most of an NCCL kernel's time is waiting
for the slowest rank): matched across ranks where several ranks' traces were given, else a
lower envelope of one rank's durations (``fitted_on``). ``waiting`` says per collective type
how much of the measured kernel time was waiting.
Compute: median device time per (op, tensor input shapes, dtypes); ``compute_slowdown`` how
much slower compute kernels ran while an NCCL kernel ran beside them.

Version 2 added ``fitted_on``, ``waiting`` and ``compute_slowdown``; version 1 files (fitted
on raw durations) still load.
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
    fitted_on: Literal["transfer", "lower envelope", "duration"] | None = Field(
        None, description="what the points are: transfer times matched across ranks, a lower envelope "
                          "of one rank's durations, or raw kernel durations (None: a version 1 file)")


class WaitingShare(BaseModel):
    """How much of one collective type's measured NCCL kernel time was waiting for other ranks."""

    type: str
    kernels: int = Field(ge=0)
    measured_us: float = Field(ge=0, description="kernel time as measured, summed")
    transfer_us: float = Field(ge=0, description="of which moving data")
    waiting_us: float = Field(ge=0, description="of which waiting for the latest rank")
    waiting_fraction: float = Field(ge=0, le=1)
    method: Literal["matched across ranks", "lower envelope", "mixed"] = Field(
        description="how the transfer was found: measured (matched across ranks), estimated "
                    "(lower envelope of one rank's durations), or both")


class ComputeSlowdown(BaseModel):
    """Compute kernels that ran beside an NCCL kernel against the same kernels alone."""

    factor: float = Field(gt=0, description="time beside communication / time alone (1: no slowdown)")
    kernel_kinds: int = Field(ge=0, description="kernels (name, grid, block) seen both ways")
    overlapped_kernels: int = Field(ge=0)
    alone_kernels: int = Field(ge=0)
    how: str


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
    version: Literal[1, 2] = 2
    source: str = Field(description="trace file(s) the model was fitted on (file names, comma-separated)")
    device: str = Field(description="device named in the trace ('cpu' for CPU-only traces)")
    world_size: int | None = None
    steps: list[int] = Field(default_factory=list, description="profiler steps used")
    collectives: list[CollectiveFit] = Field(default_factory=list)
    compute: list[ComputeEntry] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    waiting: list[WaitingShare] = Field(default_factory=list,
                                        description="per collective type: measured time that was waiting")
    compute_slowdown: ComputeSlowdown | None = Field(
        None, description="measured slowdown of compute under overlapping communication (None: not measured)")


ROOT_MODEL = ProfileModel
