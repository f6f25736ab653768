"""The persistent communication buffer plan (``buffer_plan.json``, ``"format": "commopt-buffer-plan"``).

One arena per process group; every buffer (a collective's input, output, or both for an
in-place collective) has a fixed byte offset in its group's arena, the same on every rank.
Lifetimes are inclusive positions ``[first, last]`` in the order the plan was made for
(``order_sha256``); two buffers of one arena whose lifetimes intersect never overlap in
memory. ``digest`` is the sha256 of the canonical JSON of everything else
(:func:`commopt.buffers.digest.plan_digest`); the runner compares it across ranks at start-up.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

FORMAT_NAME = "commopt-buffer-plan"
FORMAT_VERSION = 1

BufferRole = Literal["input", "output", "inout"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _OmitUnset(_Strict):
    """A model whose ``_OMIT_UNSET`` fields are left out of its dumps (and digests) while
    they hold their default: files made without the feature they describe keep their bytes."""

    _OMIT_UNSET: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler):
        return self.drop_unset(handler(self))

    @classmethod
    def drop_unset(cls, data: dict[str, Any]) -> dict[str, Any]:
        """``data``, a dump of this model's fields, without the ``_OMIT_UNSET`` ones that
        hold their default, as every dump leaves them out (changed in place and returned):
        the one rule, for writers that dump the fields themselves."""
        for key in cls._OMIT_UNSET:
            if key in data and data[key] in (None, False, []):
                del data[key]
        return data


class PlannedBuffer(_OmitUnset):
    """One communication buffer and where it lives in its group's arena."""

    _OMIT_UNSET: ClassVar[tuple[str, ...]] = ("persistent", "shared_with")

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
    persistent: bool = Field(
        False,
        description="a parameter's slot for the whole step (flat-parameter layout): 'value' is the "
        "parameter (a graph input), copied in once when the runner loads its inputs, never per "
        "step; the slot is never reused (omitted when false)",
    )
    shared_with: list[str] = Field(
        default_factory=list,
        description="other collective tensors ('<collective>:in<k>') reading this same slot: they "
        "have no input buffer of their own (omitted when empty)",
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


class PersistentParam(_Strict):
    """A parameter that lives in its group's arena for the whole step."""

    param: str = Field(description="the graph input (role parameter) held in the slot")
    buffer: str = Field(description="the slot's buffer name")
    group: str
    size_bytes: int = Field(ge=0, description="bytes of the arena reserved for it (aligned)")
    readers: list[str] = Field(description="collective tensors reading the slot ('<collective>:in<k>'); "
                                           "each would otherwise copy the parameter in every step")


class NotPersistent(_Strict):
    """A parameter feeding a collective that stays out of the arena, and why."""

    param: str
    collective: str
    reason: str


class PersistentParams(_Strict):
    """Persistent parameter buffers (``--persistent-params``): which parameters qualified,
    which did not and why, their cost in arena bytes and the copies they save per step."""

    groups: list[str] = Field(description="process groups asked for (['all'] for every group)")
    params: list[PersistentParam]
    not_qualified: list[NotPersistent]
    slot_bytes: int = Field(ge=0, description="arena bytes held by parameter slots for the whole step")
    copies_saved_per_step: int = Field(ge=0, description="copies into the arena the runner no longer "
                                                         "makes each step (one per reader)")
    bytes_not_copied_per_step: int = Field(ge=0, description="bytes those copies would have moved")


class BufferPlan(_OmitUnset):
    """The whole plan: arenas per process group, totals and a digest."""

    _OMIT_UNSET: ClassVar[tuple[str, ...]] = ("persistent_params",)

    format: Literal["commopt-buffer-plan"] = FORMAT_NAME
    version: Literal[1] = FORMAT_VERSION
    graph: str = Field(description="graph name")
    nodes: int = Field(ge=0, description="number of nodes in the graph")
    order_sha256: str = Field(description="sha256 of the node names in the planned order, one per line")
    align_bytes: int = Field(ge=1, description="alignment of every offset and size")
    collective_types: list[str] = Field(description="collective types given buffers (['all'] for all, [] for none)")
    groups: list[GroupArena]
    totals: PlanTotals
    persistent_params: PersistentParams | None = Field(
        None, description="parameters kept in the arena (omitted without --persistent-params)")
    digest: str = Field(description="sha256 of the canonical JSON of this plan without 'digest'")


class PersistentParamsCost(PersistentParams):
    """The summary's view of persistent parameter buffers: the plan's entry and what the
    option costs in arena bytes on the new order."""

    arena_bytes_without: int = Field(ge=0, description="arena total of the new order planned "
                                                       "without persistent parameters")
    arena_cost_bytes: int = Field(description="arena_bytes - arena_bytes_without: what keeping the "
                                              "parameters in the arena costs")


class PlanComparison(_OmitUnset):
    """What the reordering costs in buffer memory: the plan on the new order vs the original one.

    The ``buffer_plan`` entry of ``summary.json``.
    """

    arena_bytes: int = Field(ge=0, description="arena total on the new (optimized) order")
    lower_bound_bytes: int = Field(ge=0, description="lower bound on the new order")
    per_call_site_bytes: int = Field(ge=0, description="one buffer per call site")
    original_arena_bytes: int = Field(ge=0, description="arena total planned on the original order")
    original_lower_bound_bytes: int = Field(ge=0, description="lower bound on the original order")
    arena_increase_bytes: int = Field(description="arena_bytes - original_arena_bytes (negative: saved)")
    persistent_params: PersistentParamsCost | None = Field(
        None, description="persistent parameter buffers (omitted without --persistent-params)")

    _OMIT_UNSET: ClassVar[tuple[str, ...]] = ("persistent_params",)


class PlanVerification(_Strict):
    """Output of ``commopt verify-plan``: every problem found (none means the plan is valid)."""

    ok: bool
    graph: str
    plan: str
    problems: list[str]


ROOT_MODEL = BufferPlan
