"""JSON output of ``commopt verify`` and ``commopt passes``."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ViolationModel(BaseModel):
    """One broken invariant (numbers as in docs/design.md; 0: the node sets differ)."""

    invariant: int
    title: str
    message: str
    nodes: list[str]


class VerifyReport(BaseModel):
    """Whether a reordered graph keeps every invariant with respect to its original."""

    original: str
    reordered: str
    nodes: int
    ok: bool
    allow_cross_group_reorder: bool
    reorder_within_groups: bool = Field(
        False, description="collectives of one group were accepted in a new relative order")
    violations: list[ViolationModel]


class PassInfo(BaseModel):
    """A registered pass."""

    name: str
    source: str = Field(description="'built-in' or the plug-in distribution")
    summary: str | None
    broken: str | None = Field(None, description="why the plug-in cannot be loaded")


class PassList(BaseModel):
    """Every registered pass and the default pipeline."""

    default_pipeline: list[str]
    passes: list[PassInfo]


ROOT_MODEL = VerifyReport
