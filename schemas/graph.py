"""The commopt JSON graph format (``"format": "commopt-graph"``, version 1).

Graphs from torch.export convert to it losslessly enough to schedule, plan buffers for and
run aten ops; graphs from other frameworks or hand-written scenarios can use it with only
``duration_us`` per node. See docs/json-format.md for a worked example.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FORMAT_NAME = "commopt-graph"
FORMAT_VERSION = 1

NodeKindName = Literal["input", "output", "compute", "view", "collective", "wait"]
CollectiveTypeName = Literal[
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
    "send", "recv", "barrier",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TensorModel(_Strict):
    """A tensor a node produces: dtype and this rank's local shape."""

    dtype: str = Field(description="torch dtype name without 'torch.', e.g. 'bfloat16'")
    shape: list[int] = Field(description="local shape on this rank")
    max_shape: list[int] | None = Field(
        None, description="largest local shape over all ranks when shards are uneven"
    )
    logical_shape: list[int] | None = Field(None, description="global (unsharded) shape")
    placements: list[str] | None = Field(
        None, description="one per mesh dimension: 'S(dim)', 'R' or 'P(op)'"
    )


class CollectiveModel(_Strict):
    """What a collective node communicates. Bytes are per rank, padded to the largest shard."""

    type: CollectiveTypeName
    group: str = Field(description="name of a process group in 'process_groups'")
    reduce_op: str | None = None
    in_bytes: int = Field(0, ge=0)
    out_bytes: int = Field(0, ge=0)
    coalesced: bool = False
    in_place: bool = False


class NodeModel(_Strict):
    """One node. ``inputs`` lists data dependencies by name; references inside ``args`` and
    ``kwargs`` (``{"ref": name}``) are added to them."""

    name: str = Field(min_length=1)
    kind: NodeKindName
    op: str = Field(description="aten overload ('aten.mm.default') or a free label")
    inputs: list[str] = Field(default_factory=list)
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    outputs: list[TensorModel] = Field(default_factory=list)
    collective: CollectiveModel | None = None
    wait_of: str | None = Field(None, description="for waits: the collective completed")
    alias_of: str | None = Field(None, description="input whose storage the output shares")
    mutates: list[str] = Field(default_factory=list)
    side_effect: bool = False
    rng: bool = Field(False, description="draws random numbers: kept in order with other RNG ops "
                                         "and side effects; collectives may cross it")
    duration_us: float | None = Field(None, ge=0)
    attrs: dict[str, Any] = Field(default_factory=dict)


class ProcessGroupModel(_Strict):
    """A process group by its c10d name."""

    name: str
    size: int = Field(ge=1)
    ranks: list[int] | None = None
    mesh_dim: str | None = None


class GraphDocument(_Strict):
    """A whole graph file."""

    format: Literal["commopt-graph"] = FORMAT_NAME
    version: int = FORMAT_VERSION
    name: str = "graph"
    world_size: int | None = Field(None, ge=1)
    mesh: dict[str, int] | None = None
    process_groups: list[ProcessGroupModel] = Field(default_factory=list)
    nodes: list[NodeModel]
    meta: dict[str, Any] = Field(default_factory=dict)


ROOT_MODEL = GraphDocument
