"""Collectives reading the same input share one input buffer: the runner copies it in once.

Two collective tensors may read one slot when it is provable, whatever the order, that they
read the same bytes in the same element order:

- each reads the same storage, directly or through reshaping views
  (:data:`commopt.buffers.persistent.RESHAPING_VIEWS`) and waits (a wait is its collective's
  result), of the same dtype and number of elements as the storage: row-major element order
  is then the storage's own, so one copy serves every shape;
- nothing in the program writes that storage (no in-place op, no in-place collective): its
  content is fixed from the moment it is produced, so a copy taken at the first issue is
  what every later reader would copy;
- they belong to the same process group (one arena) and read their input without writing
  it (all_gather, reduce_scatter, all_to_all; all_reduce and broadcast run in place on their
  output buffer and never read an input slot);
- the sizes are known before the program runs.

The slot then lives from the first reader's issue to the last reader's last wait; it is
named after the reader with the smallest node index, and lists the others (``shared_with``).
"""

from __future__ import annotations

import weakref

from commopt.buffers.persistent import RESHAPING_VIEWS
from commopt.ir.graph import Graph, NodeKind
from commopt.ir.sizes import has_data_dependent_output

#: Collective types whose input may sit in a shared slot: they read it and write elsewhere.
SHAREABLE_TYPES = frozenset({"all_gather", "reduce_scatter", "all_to_all"})

_CACHE: weakref.WeakKeyDictionary[Graph, dict] = weakref.WeakKeyDictionary()


def shared_reads(graph: Graph) -> dict[tuple[int, int], tuple[tuple[int, int], ...]]:
    """(collective, tensor index) -> every read sharing its content (itself included, sorted),
    for reads with at least one partner. Order-independent; cached per graph."""
    cached = _CACHE.get(graph)
    if cached is None:
        cached = _find(graph)
        _CACHE[graph] = cached
    return cached


def content_key(graph: Graph, value: int, mutated: set[int]) -> tuple | None:
    """What ``value`` holds, when provably fixed: (storage, dtype, elements, padded bytes);
    None when a view reorders or selects elements, the storage is written, or the size is
    only known at run time."""
    nodes = graph.nodes
    meta = nodes[value].outputs[0] if len(nodes[value].outputs) == 1 else None
    if meta is None or has_data_dependent_output(nodes[value]):
        return None
    j = value
    while nodes[j].alias_of is not None:
        n = nodes[j]
        if n.mutates or not (n.kind is NodeKind.WAIT
                             or (n.kind is NodeKind.VIEW and n.op in RESHAPING_VIEWS)):
            return None
        j = n.alias_of
    root = nodes[j]
    if j in mutated or len(root.outputs) != 1 or root.outputs[0].dtype != meta.dtype \
            or root.outputs[0].numel != meta.numel or has_data_dependent_output(root):
        return None
    return j, meta.dtype, meta.numel, meta.padded_nbytes


def _find(graph: Graph) -> dict[tuple[int, int], tuple[tuple[int, int], ...]]:
    from commopt.buffers.lifetimes import collective_inputs

    nodes = graph.nodes
    mutated = {graph.storage_root[j] for n in nodes for j in n.mutates}
    by_content: dict[tuple, list[tuple[int, int]]] = {}
    for c in graph.collectives():
        info = nodes[c].collective
        if info is None or info.in_place or info.type not in SHAREABLE_TYPES:
            continue
        for k, i in enumerate(i for i in collective_inputs(nodes[c]) if nodes[i].outputs):
            key = content_key(graph, i, mutated)
            if key is not None:
                by_content.setdefault((info.group, *key), []).append((c, k))
    out: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}
    for reads in by_content.values():
        if len(reads) > 1:
            members = tuple(sorted(reads))
            for read in members:
                out[read] = members
    return out
