"""Loading graphs from files or objects and writing them back in the same format."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from commopt.errors import GraphError
from commopt.ir.graph import Graph


def check_input_path(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` as a Path after checking it names a readable, non-empty file."""
    p = Path(path)
    if not p.exists():
        raise GraphError("no such file", file=str(p))
    if p.is_dir():
        raise GraphError("is a directory, expected a graph file (.pt2 or .json)", file=str(p))
    if p.stat().st_size == 0:
        raise GraphError("file is empty", file=str(p))
    return p


def load_graph(source: Any, *, groups: str | os.PathLike[str] | None = None,
               mesh: str | None = None, world_size: int | None = None,
               assume: dict[str, int] | None = None) -> Graph:
    """Load a graph from a path (``.pt2``, ``.json``, or a torch.compile dump: see
    :mod:`commopt.io.inductor_dump`), an ExportedProgram, a GraphModule or
    an object with a ``commopt_graph()`` method (a :class:`commopt.CapturedStep`).

    ``groups`` (a JSON file), ``mesh`` (``"dp=2,tp=4"``) and ``world_size`` (the default
    group ``"0"`` is the world) supply process-group sizes and ranks a ``.pt2`` archive does
    not record; see :mod:`commopt.io.groups`. An in-memory program loaded while
    ``torch.distributed`` is initialized gets the live process groups first. ``assume``
    (``{symbol: value}``, ``"*"``: every symbol not named) sets the values assumed for
    data-dependent sizes (:mod:`commopt.io.unbacked`).
    """
    if isinstance(source, Graph) or (assume and isinstance(source, (str, os.PathLike))
                                     and Path(source).suffix.lower() == ".json"):
        graph = source if isinstance(source, Graph) else load_graph(source, groups=groups, mesh=mesh,
                                                                    world_size=world_size)
        if groups is not None or mesh is not None or world_size is not None:
            from commopt.io.groups import apply_group_overrides

            graph = apply_group_overrides(graph, groups=groups, mesh=mesh, world_size=world_size)
        if assume:
            from commopt.io.pt2 import apply_assumptions

            graph = apply_assumptions(graph, assume)
        return graph
    if isinstance(source, (str, os.PathLike)):
        from commopt.io.inductor_dump import is_dump, load_dump

        if is_dump(source):  # torch.compile's own dump (TORCH_COMPILE_DEBUG / TORCH_TRACE)
            return load_dump(source, groups=groups, mesh=mesh, world_size=world_size)
        p = check_input_path(source)
        suffix = p.suffix.lower()
        if suffix == ".json":
            from commopt.io.json_graph import load_json_graph

            graph = load_json_graph(p)
        elif suffix == ".pt2":
            from commopt.io.pt2 import load_pt2

            graph = load_pt2(p, groups=groups, mesh=mesh, world_size=world_size, assume=assume)
            return graph
        else:
            raise GraphError(f"unknown graph format {suffix or '(no suffix)'!r}; expected .pt2 or .json", file=str(p))
        if groups is not None or mesh is not None or world_size is not None:
            from commopt.io.groups import apply_group_overrides

            graph = apply_group_overrides(graph, groups=groups, mesh=mesh, world_size=world_size)
        return graph
    to_graph = getattr(source, "commopt_graph", None)  # e.g. commopt.CapturedStep
    if callable(to_graph):
        return load_graph(to_graph(), groups=groups, mesh=mesh, world_size=world_size, assume=assume)
    from commopt.io.groups import live_process_groups
    from commopt.io.pt2 import graph_from_torch

    live = live_process_groups()
    records = [(live, "the live torch.distributed process groups")] if live is not None else []
    return graph_from_torch(source, groups=groups, mesh=mesh, world_size=world_size, records=records,
                            assume=assume)


def save_graph(graph: Graph, path: str | os.PathLike[str], order: list[int] | None = None) -> Path:
    """Write ``graph`` with nodes in ``order`` in its source format; returns the path written.

    A graph read from ``.pt2`` is written as ``.pt2`` (the FX graph re-ordered, linted and
    re-saved); anything else as JSON. The write is atomic.
    """
    p = Path(path)
    if p.suffix.lower() == ".pt2":
        from commopt.io.pt2 import save_pt2

        save_pt2(graph, p, order)
    else:
        from commopt.io.json_graph import save_json_graph

        save_json_graph(graph, p, order)
    return p


def saved_order(graph: Graph, order: Sequence[int]) -> list[int]:
    """The order ``graph``'s nodes have after it is saved in ``order`` in its own format and
    loaded again: a ``.pt2`` archive keeps its own layout (:func:`commopt.io.pt2.archive_order`),
    a JSON file keeps ``order`` as given."""
    if graph.source_format == "pt2":
        from commopt.io.pt2 import archive_order, writes_as_archive

        if writes_as_archive(graph):
            return archive_order(graph, order)
    return list(order)  # JSON, or a traced graph without an ExportedProgram (nothing to lay out)


def graph_suffix(graph: Graph) -> str:
    """The file suffix of the graph's source format ('.pt2' or '.json')."""
    return ".pt2" if graph.source_format == "pt2" else ".json"
