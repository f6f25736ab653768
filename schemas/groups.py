"""Process-group records (``"format": "commopt-groups"``, version 1).

A ``.pt2`` archive names each process group only by its c10d name (``"0"``, ``"5"``); this
file says which global ranks each named group holds, and along which device-mesh dimension
it runs. It is stored inside the archive (``extra/commopt_groups.json``, written by
:func:`commopt.io.groups.save_with_groups`), beside it as ``<archive>.groups.json``, or given
with ``--groups FILE``. ``ranks`` are the group of the rank that exported the graph
(``rank``); a group with a ``mesh_dim`` exists once per slice of the mesh along that
dimension, and the runner creates every slice.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

GROUPS_FORMAT_NAME = "commopt-groups"
GROUPS_FORMAT_VERSION = 1


class GroupRecord(BaseModel):
    """One process group by its c10d name."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="c10d group name, as the graph's collectives use it")
    ranks: list[int] = Field(min_length=1, description="global ranks of the group, in group-rank order")
    mesh_dim: str | None = Field(None, description="device-mesh dimension the group runs along")


class GroupsDocument(BaseModel):
    """The process groups a graph's collectives use."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["commopt-groups"] = GROUPS_FORMAT_NAME
    version: int = GROUPS_FORMAT_VERSION
    world_size: int | None = Field(None, ge=1)
    rank: int = Field(0, ge=0, description="the rank whose groups are listed")
    mesh: dict[str, int] | None = Field(
        None, description="device mesh dimensions and sizes, row-major, e.g. {'dp': 2, 'tp': 4}"
    )
    groups: list[GroupRecord] = Field(default_factory=list)


ROOT_MODEL = GroupsDocument
