"""JSON output of ``commopt inspect``."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CollectiveSummary(BaseModel):
    """Collectives of one type in one process group."""

    group: str
    group_size: int | None = Field(description="ranks in the group; null when nothing proves it "
                                               "(commands that cost communication refuse the graph)")
    ranks: list[int] | None
    type: str
    count: int
    total_bytes: int = Field(description="sum of message sizes (max of in/out), padded")


class TensorSummary(BaseModel):
    """A graph input or output."""

    name: str
    dtype: str | None
    shape: list[int] | None
    role: str | None = None


class InspectReport(BaseModel):
    """What a graph contains."""

    name: str
    format: str
    path: str | None
    world_size: int | None
    nodes: int
    kinds: dict[str, int]
    collectives: list[CollectiveSummary]
    inputs: list[TensorSummary]
    outputs: list[TensorSummary]
    warnings: list[str]


ROOT_MODEL = InspectReport
