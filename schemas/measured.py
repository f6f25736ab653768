"""Measured overlap of a profiled step (``commopt report GRAPH --measured DIR``).

Per rank, read from that rank's PyTorch profiler trace: how long communication ran, how long
compute ran, and how much of the communication no compute overlapped (exposed), the way
Holistic Trace Analysis counts it. Shown beside the simulated before/after of the same graph.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MeasuredRank(_Model):
    """One rank's trace, totals over the profiled steps and per step."""

    trace: str = Field(description="trace file name")
    rank: int | None = Field(description="rank the trace records (distributedInfo), if any")
    device: str = Field(description="'cpu' (gloo: collectives on gloo's worker threads) or the GPU")
    steps: int | None = Field(description="profiled steps: ProfilerStep#N markers, or the "
                              "collective count over the graph's collectives per step")
    steps_from: str = Field(description="how the step count was found")
    collectives: int = Field(ge=0, description="collective spans in the trace")
    comm_us: float = Field(ge=0, description="time with communication running, per step")
    compute_us: float = Field(ge=0, description="time with compute running, per step")
    exposed_comm_us: float = Field(ge=0, description="communication time no compute overlaps, per step")


class MeasuredOverlap(_Model):
    """Every rank's measured overlap, with the simulated numbers of the same graph."""

    graph: str
    estimator: str = Field(description="estimator chain of the simulated numbers")
    simulated_comm_us: float = Field(description="simulated communication time of the step")
    simulated_before_exposed_us: float
    simulated_after_exposed_us: float | None
    ranks: list[MeasuredRank]
    notes: list[str] = Field(default_factory=list)


ROOT_MODEL = MeasuredOverlap
