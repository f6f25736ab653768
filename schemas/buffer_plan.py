"""The persistent communication buffer plan (``buffer_plan.json``, ``"format": "commopt-buffer-plan"``).

One arena per process group; every buffer (a collective's input, output, or both for an
in-place collective) has a fixed byte offset in its group's arena, the same on every rank.
Lifetimes are inclusive positions ``[first, last]`` in the order the plan was made for
(``order_sha256``); two buffers of one arena whose lifetimes intersect never overlap in
memory. ``digest`` is the sha256 of the canonical JSON of everything else
(:func:`commopt.buffers.digest.plan_digest`); the runner compares it across ranks at start-up.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FORMAT_NAME = "commopt-buffer-plan"
FORMAT_VERSION = 1

BufferRole = Literal["input", "output", "inout"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlannedBuffer(_Strict):
    """One communication buffer and where it lives in its group's arena."""

    name: str = Field(description="unique id: '<collective>:<role><tensor_index>', e.g. 'ag0:in0'")
    node: str = Field(description="the collective node this buffer belongs to")
    collective_type: str = Field(description="all_reduce, all_gather, ...")
    role: BufferRole = Field(
        description="'input' (what the collective reads), 'output' (what it writes) or "
        "'inout' (in-place collective: input storage is output storage)"
    )
    tensor_index: int = Field(ge=0, description="which tensor of a coalesced collective (0 otherwise)")
    value: str = Field(
        description="node whose value the buffer holds: the collective's input for 'input'/'inout', "
        "the collective itself for 'output'"
    )
    offset_bytes: int = Field(ge=0, description="byte offset in the group's arena (aligned)")
    size_bytes: int = Field(ge=0, description="bytes reserved: padded size rounded up to the alignment")
    padded_bytes: int = Field(ge=0, description="largest rank's shard size in bytes (unaligned)")
    local_bytes: int = Field(ge=0, description="this graph's local size in bytes (unpadded)")
    dtype: str
    shape: list[int] = Field(description="local shape")
    max_shape: list[int] | None = Field(None, description="largest rank's shape when shards are uneven")
    first: int = Field(ge=0, description="first position in the order where the buffer is live")
    last: int = Field(ge=0, description="last position in the order where the buffer is live (inclusive)")
    producer: str | None = Field(
        None, description="node that allocates the value's storage ('input'/'inout'); None for outputs"
    )
    zero_copy: bool = Field(
        False,
        description="the producer can write straight into the buffer: its op has an out= variant, "
        "it produces nothing else, the value is not a view or a graph input, and nothing reads "
        "the value after the buffer's lifetime",
    )


class GroupArena(_Strict):
    """The arena of one process group and the buffers packed into it."""

    group: str
    group_size: int = Field(ge=1)
    arena_bytes: int = Field(ge=0, description="bytes to allocate (and register) for this group")
    lower_bound_bytes: int = Field(
        ge=0, description="largest sum of aligned sizes of simultaneously live buffers"
    )
    per_call_site_bytes: int = Field(ge=0, description="sum of aligned sizes: one buffer per call site")
    heuristic: str = Field(description="the offset-assignment ordering that gave this arena")
    buffers: list[PlannedBuffer]


class PlanTotals(_Strict):
    """Sums over every group."""

    buffers: int = Field(ge=0)
    arena_bytes: int = Field(ge=0)
    lower_bound_bytes: int = Field(ge=0)
    per_call_site_bytes: int = Field(ge=0)


class BufferPlan(_Strict):
    """The whole plan: arenas per process group, totals and a digest."""

    format: Literal["commopt-buffer-plan"] = FORMAT_NAME
    version: Literal[1] = FORMAT_VERSION
    graph: str = Field(description="graph name")
    nodes: int = Field(ge=0, description="number of nodes in the graph")
    order_sha256: str = Field(description="sha256 of the node names in the planned order, one per line")
    align_bytes: int = Field(ge=1, description="alignment of every offset and size")
    collective_types: list[str] = Field(description="collective types given buffers (['all'] for all, [] for none)")
    groups: list[GroupArena]
    totals: PlanTotals
    digest: str = Field(description="sha256 of the canonical JSON of this plan without 'digest'")


class PlanComparison(_Strict):
    """What the reordering costs in buffer memory: the plan on the new order vs the original one.

    The ``buffer_plan`` entry of ``summary.json``.
    """

    arena_bytes: int = Field(ge=0, description="arena total on the new (optimized) order")
    lower_bound_bytes: int = Field(ge=0, description="lower bound on the new order")
    per_call_site_bytes: int = Field(ge=0, description="one buffer per call site")
    original_arena_bytes: int = Field(ge=0, description="arena total planned on the original order")
    original_lower_bound_bytes: int = Field(ge=0, description="lower bound on the original order")
    arena_increase_bytes: int = Field(description="arena_bytes - original_arena_bytes (negative: saved)")


class PlanVerification(_Strict):
    """Output of ``commopt verify-plan``: every problem found (none means the plan is valid)."""

    ok: bool
    graph: str
    plan: str
    problems: list[str]


ROOT_MODEL = BufferPlan
