"""Process-group ranks for graphs whose files name groups only by their c10d name.

A ``.pt2`` archive records a collective's group as ``"0"`` or ``"5"``; commopt needs the
ranks (does a group span hosts? the runner must recreate it under the same name). Sources,
later ones overriding earlier ones:

1. the record stored in the archive by :func:`save_with_groups` (``extra/commopt_groups.json``);
2. a sidecar ``<archive>.groups.json`` next to the file;
3. ``--groups FILE`` (same format, ``schemas/groups.py``);
4. ``--mesh dp=2,tp=4``: ranks laid out row-major; a group is matched to the mesh dimension of
   its size when exactly one dimension has that size;
5. ``--world-size N`` (or the mesh's or a record's world size): the default group ``"0"`` is
   the world;
6. inference: a group whose size is the world size holds every rank.

When ``torch.distributed`` is initialized, an in-memory program loaded through the Python API
also gets the live groups (:func:`record_process_groups`) as its first, weakest record.

A group's *size* is known only when it is proven: by the graph's own ops (``group_size``
arguments, ``all_to_all`` split lists), by a record, by a mesh dimension named in a record, or
by the world size for group ``"0"``. A group of unknown size keeps a placeholder size and is
listed in ``graph.meta["unknown_group_sizes"]``; :func:`require_known_group_sizes` turns that
into an error for every command whose numbers depend on it. Where sizes or ranks stay unknown,
``graph.meta["load_warnings"]`` names the groups and says how to supply them.
"""

from __future__ import annotations

import copy
import io
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from commopt.errors import GraphError, OptionError, json_path
from commopt.ir.graph import Graph, ProcessGroup
from commopt.ir.validate import MAX_WORLD_SIZE, validate_groups
from commopt.schemas.groups import (
    GROUPS_FORMAT_NAME,
    GROUPS_FORMAT_VERSION,
    GroupRecord,
    GroupsDocument,
)

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

#: Name of the groups record inside a ``.pt2`` archive (under its ``extra/`` folder).
ARCHIVE_GROUPS_NAME = "commopt_groups.json"
SIDECAR_SUFFIX = ".groups.json"

HOW_TO_SUPPLY = (
    "export with commopt.save_with_groups(ep, path), or pass --groups FILE "
    "(format commopt-groups), --mesh dp=N,tp=M or --world-size N (group '0' is the world)"
)

#: c10d name of the default process group (the one ``init_process_group`` creates): the world.
DEFAULT_GROUP = "0"

#: ``graph.meta`` key listing the groups whose size nothing proves.
UNKNOWN_SIZES_KEY = "unknown_group_sizes"


# --------------------------------------------------------------------------- mesh
def parse_mesh(spec: str | dict[str, int] | None) -> dict[str, int] | None:
    """``"dp=2,tp=4"`` -> ``{"dp": 2, "tp": 4}`` (order kept: row-major, last dim fastest)."""
    if spec is None or isinstance(spec, dict):
        return spec
    mesh: dict[str, int] = {}
    for part in spec.split(","):
        part = part.strip()
        name, sep, size = part.partition("=")
        name = name.strip()
        size = size.strip()
        if not sep or not name.isidentifier() or not size.isascii() or not size.isdigit() \
                or int(size) < 1 or len(size) > 9:
            raise OptionError(
                f"bad mesh dimension {part!r}: expected NAME=SIZE, e.g. dp=2,tp=4", field="--mesh"
            )
        if name in mesh:
            raise OptionError(f"mesh dimension {name!r} given twice", field="--mesh")
        mesh[name] = int(size)
    return mesh


def mesh_slice(mesh: dict[str, int], dim: str, rank: int = 0) -> list[int]:
    """Global ranks of the group along mesh dimension ``dim`` that contains ``rank``."""
    dims = list(mesh)
    sizes = [mesh[d] for d in dims]
    k = dims.index(dim)
    stride = math.prod(sizes[k + 1:])
    coord = (rank // stride) % sizes[k]
    base = rank - coord * stride
    return [base + i * stride for i in range(sizes[k])]


def mesh_slices(mesh: dict[str, int], dim: str) -> list[list[int]]:
    """Every group along mesh dimension ``dim`` (each rank is in exactly one), sorted."""
    world = math.prod(mesh.values())
    seen: dict[int, list[int]] = {}
    for r in range(world):
        s = mesh_slice(mesh, dim, r)
        seen.setdefault(s[0], s)
    return [seen[k] for k in sorted(seen)]


# --------------------------------------------------------------------------- recording
def record_process_groups(mesh: DeviceMesh | None = None, *, rank: int | None = None) -> GroupsDocument:
    """The live process groups of this process (name, global ranks, mesh dimension).

    Call it at export time, after ``init_process_group`` (a real or the fake backend) and
    after creating the groups / DeviceMesh the model uses: a ``.pt2`` archive names groups
    only by their c10d name, and this record is what gives them sizes and ranks. ``mesh``
    labels the groups with its dimension names; ``rank`` defaults to this process's rank.
    Raises :class:`~commopt.errors.OptionError` when ``torch.distributed`` is not initialized.
    """
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    if not dist.is_initialized():
        raise OptionError("torch.distributed is not initialized: no process groups to record")
    world = dist.get_world_size()
    me = dist.get_rank() if rank is None else rank
    dims_by_name: dict[str, str] = {}
    mesh_sizes: dict[str, int] | None = None
    if mesh is not None:
        names = mesh.mesh_dim_names or tuple(f"dim{i}" for i in range(mesh.ndim))
        mesh_sizes = {n: int(s) for n, s in zip(names, mesh.shape, strict=True)}
        for i, n in enumerate(names):
            dims_by_name[mesh.get_group(i).group_name] = n
    records: dict[str, GroupRecord] = {}
    for pg, name in c10d._world.pg_names.items():
        ranks = sorted(c10d.get_process_group_ranks(pg))
        records[name] = GroupRecord(name=name, ranks=ranks, mesh_dim=dims_by_name.get(name))
    ordered = sorted(records.values(), key=lambda g: (len(g.name), g.name))
    return GroupsDocument(world_size=world, rank=me, mesh=mesh_sizes, groups=ordered)


def live_process_groups() -> GroupsDocument | None:
    """:func:`record_process_groups` when ``torch.distributed`` is initialized, else None.

    Used by the Python API on in-memory programs: inside a job the live groups are the
    groups the program was traced with, so their sizes are proven rather than guessed.
    """
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return None
    return record_process_groups()


def dumps_groups(doc: GroupsDocument) -> str:
    """Deterministic JSON text of a groups document."""
    return json.dumps(doc.model_dump(mode="json", exclude_none=True), indent=2, sort_keys=False) + "\n"


def save_with_groups(ep: Any, path: str | os.PathLike[str], *, mesh: DeviceMesh | None = None,
                     groups: GroupsDocument | None = None) -> Path:
    """``torch.export.save(ep, path)`` with the process groups stored in the archive.

    ``groups`` defaults to :func:`record_process_groups` (``mesh`` labels its dimensions).
    The write is atomic; :func:`commopt.io.pt2.load_pt2` reads the record back.
    """
    import torch

    from commopt import atomic

    doc = groups if groups is not None else record_process_groups(mesh)
    buf = io.BytesIO()
    torch.export.save(ep, buf, extra_files={ARCHIVE_GROUPS_NAME: dumps_groups(doc)})
    p = Path(path)
    atomic.write_bytes(p, buf.getvalue())
    return p


# --------------------------------------------------------------------------- reading
def parse_groups_text(text: str, *, file: str | None = None) -> GroupsDocument:
    """Validate a groups document given as JSON text."""
    from commopt.io.json_graph import parse_json_text

    return groups_document(parse_json_text(text, file=file), file=file)


def groups_document(raw: Any, *, file: str | None = None) -> GroupsDocument:
    """Validate a parsed groups document: the schema, then what the schema cannot say (each
    group named once; ranks distinct, non-negative and inside ``world_size`` and ``mesh``)."""
    if not isinstance(raw, dict):
        raise GraphError("a groups file holds a JSON object at the top", file=file, field="$")
    if raw.get("format", GROUPS_FORMAT_NAME) != GROUPS_FORMAT_NAME:
        raise GraphError(f"format is {raw.get('format')!r}, expected {GROUPS_FORMAT_NAME!r}",
                         file=file, field="$.format")
    if raw.get("version", GROUPS_FORMAT_VERSION) != GROUPS_FORMAT_VERSION:
        raise GraphError(
            f"unsupported groups format version {raw.get('version')!r} (this commopt reads "
            f"version {GROUPS_FORMAT_VERSION})", file=file, field="$.version",
        )
    try:
        doc = GroupsDocument.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise GraphError(f"schema violation: {err['msg']}", file=file, field=json_path(err["loc"])) from None
    world = doc.world_size
    if world is None and doc.mesh is not None:
        world = math.prod(doc.mesh.values()) if all(v >= 1 for v in doc.mesh.values()) else None
    validate_groups({}, world_size=doc.world_size, mesh=doc.mesh, file=file, field="$")
    seen: set[str] = set()
    for pos, rec in enumerate(doc.groups):
        if rec.name in seen:
            raise GraphError(f"group {rec.name!r} is listed twice", file=file,
                             field=f"$.groups[{pos}].name")
        seen.add(rec.name)
        pg = ProcessGroup(rec.name, len(rec.ranks), tuple(rec.ranks), rec.mesh_dim)
        validate_groups({rec.name: pg}, world_size=world, mesh=doc.mesh, file=file,
                        field=f"$.groups[{pos}].ranks")
    if world is not None and doc.rank >= world:
        raise GraphError(f"rank {doc.rank} is outside the world of {world} ranks", file=file,
                         field="$.rank")
    return doc


def read_groups_file(path: str | os.PathLike[str]) -> GroupsDocument:
    """Read and validate a groups file (``--groups FILE`` or a sidecar)."""
    from commopt.io.json_graph import read_json_file

    p = Path(path)
    if not p.exists():
        raise GraphError("no such groups file", file=str(p))
    if p.is_dir():
        raise GraphError("is a directory, expected a groups file (.json)", file=str(p))
    return groups_document(read_json_file(p), file=str(p))


def sidecar_path(graph_path: str | os.PathLike[str]) -> Path:
    """Where the sidecar groups file of a graph file lives: ``<file>.groups.json``."""
    p = Path(graph_path)
    return p.with_name(p.name + SIDECAR_SUFFIX)


# --------------------------------------------------------------------------- resolving
def resolve_groups(
    groups: dict[str, ProcessGroup],
    *,
    records: Iterable[tuple[GroupsDocument, str | None]] = (),
    mesh: dict[str, int] | None = None,
    world_size: int | None = None,
    given_world_size: int | None = None,
    sizes_known: set[str] | None = None,
) -> tuple[dict[str, ProcessGroup], int | None, dict[str, int] | None, list[str], list[str]]:
    """Fill in group sizes and ranks from records, a mesh, the world size and inference.

    ``groups`` are the graph's groups (sizes the graph itself proves are in ``sizes_known``;
    the others are placeholders). ``world_size`` is what the graph already says (records
    override it); ``given_world_size`` is ``--world-size`` (it must agree with the rest).
    Returns the groups, world size, mesh, load warnings and the groups whose size nothing
    proves (those keep a placeholder size of 1 and must not be costed).
    """
    known = set(groups) if sizes_known is None else set(sizes_known)
    size: dict[str, int | None] = {n: (g.size if n in known else None) for n, g in groups.items()}
    ranks: dict[str, tuple[int, ...] | None] = {n: g.ranks for n, g in groups.items()}
    dims: dict[str, str | None] = {n: g.mesh_dim for n, g in groups.items()}
    export_rank = 0
    records = list(records)
    for doc, file in records:
        if doc.world_size is not None:
            world_size = doc.world_size
        if doc.mesh is not None:
            mesh = dict(doc.mesh)
        export_rank = doc.rank
        for pos, rec in enumerate(doc.groups):
            if rec.name not in groups:
                continue
            proven = groups[rec.name].size if rec.name in known else None
            if proven is not None and proven != len(rec.ranks):
                raise GraphError(
                    f"group {rec.name!r} has {len(rec.ranks)} ranks here, but the graph's "
                    f"collectives use it with group size {proven}",
                    file=file, field=f"$.groups[{pos}].ranks",
                )
            size[rec.name] = len(rec.ranks)
            ranks[rec.name] = tuple(rec.ranks)
            dims[rec.name] = rec.mesh_dim if rec.mesh_dim is not None else dims[rec.name]
    if mesh is not None:
        mesh_world = math.prod(mesh.values())
        if mesh_world > MAX_WORLD_SIZE:
            raise OptionError(f"the mesh {mesh} has {mesh_world} ranks, more than "
                              f"{MAX_WORLD_SIZE:,}", field="--mesh")
        if world_size is not None and world_size != mesh_world:
            raise OptionError(
                f"the mesh {mesh} has {mesh_world} ranks but the world size is {world_size}",
                field="--mesh",
            )
        world_size = mesh_world
    if given_world_size is not None:
        if not 1 <= given_world_size <= MAX_WORLD_SIZE:
            raise OptionError(f"must be in [1, {MAX_WORLD_SIZE:,}]", field="--world-size")
        if world_size is not None and world_size != given_world_size:
            raise OptionError(
                f"--world-size {given_world_size} contradicts the world size {world_size} that "
                "the graph, its groups record or --mesh gives", field="--world-size",
            )
        world_size = given_world_size
    if world_size is not None and DEFAULT_GROUP in groups:
        s0 = size[DEFAULT_GROUP]
        if s0 is None:
            size[DEFAULT_GROUP] = world_size
        elif s0 != world_size and ranks[DEFAULT_GROUP] is None:
            raise OptionError(
                f"group {DEFAULT_GROUP!r} is the default group (the world), but the graph's "
                f"collectives use it with group size {s0} and the world size is {world_size}",
                field="--world-size" if given_world_size is not None else "--mesh",
            )
    warnings: list[str] = []
    ambiguous: list[str] = []
    for name in sorted(groups, key=lambda s: (len(s), s)):
        if ranks[name] is not None:
            continue
        s = size[name]
        if mesh is not None:
            dim = dims[name]
            if dim is None and s is not None and s != world_size:
                matches = [d for d, n in mesh.items() if n == s]
                if len(matches) == 1:
                    dim = matches[0]
                elif len(matches) > 1:
                    ambiguous.append(f"{name!r} (size {s}: mesh dims {', '.join(matches)})")
            if dim is not None:
                if dim not in mesh:
                    raise OptionError(f"group {name!r} runs along mesh dim {dim!r}, which the mesh "
                                      f"{mesh} lacks", field="--mesh")
                if s is not None and s != mesh[dim]:
                    raise OptionError(f"group {name!r} has size {s} but runs along mesh dim "
                                      f"{dim!r} of size {mesh[dim]}", field="--mesh")
                ranks[name] = tuple(mesh_slice(mesh, dim, export_rank))
                dims[name] = dim
                size[name] = len(ranks[name])
                continue
        if world_size is not None and s == world_size:
            ranks[name] = tuple(range(world_size))
    unknown_sizes = sorted((n for n in groups if size[n] is None), key=lambda s: (len(s), s))
    if unknown_sizes:
        warnings.append(
            "size of process group(s) " + ", ".join(repr(n) for n in unknown_sizes)
            + f" unknown (the graph does not record it): {HOW_TO_SUPPLY}"
        )
    if ambiguous:
        warnings.append("cannot tell which mesh dimension group(s) run along: " + "; ".join(ambiguous)
                        + ": pass --groups FILE")
    unknown = sorted((n for n in groups if ranks[n] is None and size[n] is not None),
                     key=lambda s: (len(s), s))
    if unknown:
        warnings.append(
            "ranks of process group(s) " + ", ".join(repr(n) for n in unknown)
            + f" unknown (the cost model packs each into as few hosts as possible): {HOW_TO_SUPPLY}"
        )
    out = {n: ProcessGroup(n, size[n] or 1, ranks[n], dims[n]) for n in groups}
    files = [file for _doc, file in records if file is not None]
    validate_groups(out, world_size=world_size, mesh=mesh, file=files[-1] if files else None,
                    field="--world-size" if given_world_size is not None else "--mesh"
                    if mesh is not None else "process_groups")
    return out, world_size, mesh, warnings, unknown_sizes


def set_group_notes(meta: dict[str, Any], warnings: list[str], unknown_sizes: list[str]) -> None:
    """Record what :func:`resolve_groups` found in a graph's ``meta`` (replacing older group notes)."""
    kept = [w for w in meta.get("load_warnings", []) if "process group" not in w]
    if kept or warnings:
        meta["load_warnings"] = kept + warnings
    else:
        meta.pop("load_warnings", None)
    if unknown_sizes:
        meta[UNKNOWN_SIZES_KEY] = list(unknown_sizes)
    else:
        meta.pop(UNKNOWN_SIZES_KEY, None)


def unknown_group_sizes(graph: Graph) -> list[str]:
    """Names of the graph's groups whose size nothing proves (see :func:`resolve_groups`)."""
    return list(graph.meta.get(UNKNOWN_SIZES_KEY, ()))


def unknown_size_error(graph: Graph, names: list[str]) -> GraphError:
    """The one-line error for costing a graph whose groups ``names`` have no proven size."""
    return GraphError(
        "size of process group(s) " + ", ".join(repr(n) for n in names)
        + f" unknown (the graph does not record it; commopt does not guess): {HOW_TO_SUPPLY}",
        file=graph.source_path,
    )


def require_known_group_sizes(graph: Graph) -> None:
    """Raise a one-line :class:`GraphError` when a group's size is unknown.

    Every result that costs communication (estimates, simulation, optimization, buffer plans,
    runners) depends on group sizes, so those callers require them; ``inspect`` only warns.
    """
    names = unknown_group_sizes(graph)
    if names:
        raise unknown_size_error(graph, names)


def proven_group_size(graph: Graph, group: str) -> int:
    """Size of ``group`` as the graph proves it; a :class:`GraphError` where nothing does.

    An undeclared group is the world only when it is the default group ``"0"`` and the world
    size is known.
    """
    if group in graph.meta.get(UNKNOWN_SIZES_KEY, ()):
        raise unknown_size_error(graph, [group])
    pg = graph.groups.get(group)
    if pg is not None:
        return pg.size
    if group == DEFAULT_GROUP and graph.world_size is not None:
        return graph.world_size
    raise GraphError(f"collectives use process group {group!r}, which the graph does not declare "
                     f"(no size or ranks): {HOW_TO_SUPPLY}", file=graph.source_path)


def apply_group_overrides(graph: Graph, *, groups: str | os.PathLike[str] | GroupsDocument | None = None,
                          mesh: str | dict[str, int] | None = None,
                          world_size: int | None = None) -> Graph:
    """A copy of ``graph`` with group ranks from a groups file, a mesh spec and/or a world size.

    The nodes are shared (groups carry no derived edge data), so this is cheap.
    """
    records: list[tuple[GroupsDocument, str | None]] = []
    if isinstance(groups, GroupsDocument):
        records.append((groups, None))
    elif groups is not None:
        records.append((read_groups_file(groups), str(groups)))
    known = set(graph.groups) - set(unknown_group_sizes(graph))
    new_groups, world, mesh_d, warnings, unknown_sizes = resolve_groups(
        graph.groups, records=records, mesh=parse_mesh(mesh), world_size=graph.world_size,
        given_world_size=world_size, sizes_known=known,
    )
    out = copy.copy(graph)
    out.groups = new_groups
    out.world_size = world
    out.mesh = mesh_d if mesh_d is not None else graph.mesh
    out.meta = dict(graph.meta)
    set_group_notes(out.meta, warnings, unknown_sizes)
    return out


def groups_document_of(graph: Graph) -> GroupsDocument:
    """The groups record of a graph (for writing back into an archive or a sidecar)."""
    return GroupsDocument(
        world_size=graph.world_size,
        mesh=graph.mesh,
        groups=[
            GroupRecord(name=g.name, ranks=list(g.ranks), mesh_dim=g.mesh_dim)
            for g in sorted(graph.groups.values(), key=lambda g: (len(g.name), g.name))
            if g.ranks is not None
        ],
    )
