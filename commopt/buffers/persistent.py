"""Persistent parameter buffers: parameters that live in their group's arena for the whole step.

FSDP keeps each sharded parameter in one flat buffer that the all_gather reads directly. The
runner does the same for a parameter that qualifies: its bytes sit in a slot of the arena of
the all_gather's group that no other buffer ever uses; the runner copies the parameter in
once, when it loads the inputs, and every all_gather reading it reads the slot with no copy
per step. Several collectives reading one parameter (the forward and backward all_gather of
one shard) share that slot.

A parameter qualifies when it is provable that the slot always holds what each all_gather
reads, whatever the order:

- the all_gather reads a graph input of role ``parameter`` directly or through pure reshaping
  views (same elements in the same order: ``view``, ``reshape``, ``_unsafe_view``, ...), of the
  same dtype and number of elements;
- its shard is even (no rank holds a larger one: the slot is the tensor itself);
- nothing in the step writes the parameter's storage (an in-place update would change what a
  later all_gather reads).

A cast (bf16 ``param_dtype``) or any other compute between the parameter and the all_gather
disqualifies it: the arena would hold the cast's result, which is new every step. Each
parameter that feeds an all_gather but does not qualify is listed with the reason.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass

from commopt.errors import OptionError, suggest
from commopt.ir.graph import IN_PLACE_TYPES, Graph, NodeKind
from commopt.ir.layout import RESHAPING_VIEWS
from commopt.ir.sizes import has_data_dependent_output

#: The only collective whose input a persistent slot holds: it reads the slot and writes
#: elsewhere (an in-place collective would overwrite the parameter).
PERSISTENT_COLLECTIVE = "all_gather"


def parse_persistent_params(spec: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """``None`` / ``'none'`` -> () (off); ``'all'`` -> None (every group); ``'0,1'`` -> the
    sorted group names. Names are checked against a graph by :func:`find_persistent_params`."""
    if spec is None:
        return ()
    items = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s).strip() for s in spec]
    items = [s for s in items if s]
    if not items:
        raise OptionError("no process group given; use 'all', 'none' or a list of group names",
                          field="--persistent-params")
    if "none" in items or "all" in items:
        if len(items) > 1:
            raise OptionError("'all' and 'none' cannot be combined with group names",
                              field="--persistent-params")
        return () if items[0] == "none" else None
    return tuple(sorted(set(items)))


@dataclass(frozen=True, slots=True)
class ParamSlot:
    """One persistent slot: the parameter (graph input), its group and every collective
    tensor that reads it, as (collective, tensor index), the first one owning the slot."""

    param: int
    group: str
    reads: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Rejected:
    """A parameter feeding a collective that gets no persistent slot, and why."""

    param: int
    collective: int
    reason: str


@dataclass(frozen=True, slots=True)
class PersistentParams:
    """Which parameters live in the arena (``slots``, by owning read) and which do not."""

    groups: tuple[str, ...] | None
    slots: tuple[ParamSlot, ...]
    rejected: tuple[Rejected, ...]

    def by_read(self) -> dict[tuple[int, int], ParamSlot]:
        """(collective, tensor index) -> the slot that read is served by."""
        return {read: s for s in self.slots for read in s.reads}


NO_PERSISTENT = PersistentParams((), (), ())

_CACHE: weakref.WeakKeyDictionary[Graph, dict] = weakref.WeakKeyDictionary()


def find_persistent_params(graph: Graph, spec: str | Iterable[str] | None) -> PersistentParams:
    """The persistent slots ``spec`` (see :func:`parse_persistent_params`) gives ``graph``.

    Order-independent and deterministic (slots sorted by their first reader's index);
    cached per graph. A group name the graph does not have raises :class:`OptionError`.
    """
    groups = parse_persistent_params(spec)
    if groups == ():
        return NO_PERSISTENT
    for name in groups or ():
        if name not in graph.groups:
            raise OptionError(f"unknown process group {name!r}{suggest(name, list(graph.groups))}; "
                              f"the graph has {', '.join(sorted(graph.groups)) or 'none'}",
                              field="--persistent-params")
    cache = _CACHE.setdefault(graph, {})
    if groups not in cache:
        cache[groups] = _find(graph, groups)
    return cache[groups]


def _find(graph: Graph, groups: tuple[str, ...] | None) -> PersistentParams:
    from commopt.buffers.lifetimes import collective_inputs

    nodes = graph.nodes
    mutated = {graph.storage_root[j] for n in nodes for j in n.mutates}
    reads: dict[tuple[int, str], list[tuple[int, int]]] = {}
    rejected: list[Rejected] = []
    for c in graph.collectives():
        info = nodes[c].collective
        if info is None or (groups is not None and info.group not in groups):
            continue
        for k, i in enumerate(i for i in collective_inputs(nodes[c]) if nodes[i].outputs):
            param, why = _param_behind(graph, i, mutated)
            if param is None:
                continue
            if why is None and info.type != PERSISTENT_COLLECTIVE:
                why = (f"read by a {info.type}, not an all_gather"
                       + (" (it runs in place and would overwrite the parameter)"
                          if info.in_place or info.type in IN_PLACE_TYPES else ""))
            if why is not None:
                rejected.append(Rejected(param, c, why))
                continue
            reads.setdefault((param, info.group), []).append((c, k))
    slots = sorted((ParamSlot(p, g, tuple(sorted(r))) for (p, g), r in reads.items()),
                   key=lambda s: s.reads[0])
    return PersistentParams(groups, tuple(slots), tuple(rejected))


def _param_behind(graph: Graph, value: int, mutated: set[int]) -> tuple[int | None, str | None]:
    """(the parameter ``value`` comes from, None if it qualifies else why not); (None, None)
    when no parameter is behind it (an activation, a gradient, a user input)."""
    nodes = graph.nodes
    chain = [value]
    while nodes[chain[-1]].alias_of is not None:
        chain.append(nodes[chain[-1]].alias_of)
    root = nodes[chain[-1]]
    if root.kind is not NodeKind.INPUT:
        param = _parameter_through_compute(graph, root.index)
        if param is None:
            return None, None
        return param, (f"{root.op} computes the all_gather's input from the parameter (a cast "
                       "or other compute): the arena would hold its result, which changes with "
                       "the parameter every step")
    if root.attrs.get("role") != "parameter":
        return None, None
    meta = root.outputs[0] if root.outputs else None
    if meta is None or has_data_dependent_output(root):
        return root.index, "its size is only known when the program runs"
    if meta.max_shape is not None and tuple(meta.max_shape) != tuple(meta.shape):
        return root.index, "uneven shard: another rank holds a larger one"
    for j in chain[:-1]:
        n = nodes[j]
        out = n.outputs[0] if n.outputs else None
        if n.kind is not NodeKind.VIEW or n.mutates or n.op not in RESHAPING_VIEWS or out is None \
                or out.dtype != meta.dtype or out.numel != meta.numel:
            return root.index, (f"{n.op} between the parameter and the all_gather is not a "
                                "pure reshaping view")
    if root.index in mutated:
        return root.index, "the step updates the parameter in place"
    return root.index, None


def _parameter_through_compute(graph: Graph, start: int) -> int | None:
    """The parameter behind a single-input chain of compute nodes and views (a cast of a
    parameter, a view of a cast, ...), else None."""
    nodes = graph.nodes
    i, seen = start, 0
    while seen < 16:
        n = nodes[i]
        if n.kind is NodeKind.INPUT:
            return i if n.attrs.get("role") == "parameter" else None
        if n.alias_of is not None:
            i = n.alias_of
        elif n.kind is NodeKind.COMPUTE and len(n.inputs) == 1:
            i = n.inputs[0]
        else:
            return None
        seen += 1
    return None
