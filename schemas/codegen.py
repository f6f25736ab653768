"""JSON output of ``commopt codegen``: what the generated runner script holds."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CodegenResult(BaseModel):
    """The runner written for one graph."""

    graph: str
    path: str = Field(description="the runner script written")
    world_size: int | None
    plan_digest: str | None = Field(description="digest of the buffer plan used (None: no arenas)")
    arena_bytes: int = Field(ge=0, description="bytes of all arenas together")
    buffers: int = Field(ge=0)
    copies_per_iter: int = Field(ge=0, description="tensors copied into comm buffers per step")
    zero_copy_per_iter: int = Field(ge=0, description="producers writing straight into buffers")
    ops: int = Field(ge=0, description="distinct operations run for real")
    emulated: int = Field(ge=0, description="nodes emulated by a timed busy wait")


ROOT_MODEL = CodegenResult
