"""The scheduling problem the simulator scores, in the form an exact solver takes.

The solver places only the nodes that take a place on a stream: compute and waits on the
compute stream, collectives on their group's stream. Everything else is placed
analytically (:func:`assemble`): inputs first, the output last, and each view right after
its last input (a view costs nothing and is ready when its inputs are, so no place is
better). Through views, every constraint between placed nodes is one of two kinds
(:mod:`commopt.sim.model`):

- *clock*: the successor's clock (a compute node's start, a collective's issue) is at least
  the predecessor's clock-after: a compute-stream node's end, a collective's issue;
- *finish*: the successor starts after the predecessor ends (it reads its value, waits for
  it or queues behind it on its group's stream).

Beyond the graph's edges, invariant 4 (a node reading a collective's result through views
of the collective comes after its waits) and, unless cross-group reordering is allowed,
invariant 2 (collectives keep their issue order) become clock edges.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from commopt.invariants import wait_before_use_edges
from commopt.ir.graph import Graph, NodeKind
from commopt.sim.model import needs_finish, step_durations

#: Kinds the solver places; the rest are placed by :func:`assemble`.
PLACED_KINDS = (NodeKind.COMPUTE, NodeKind.WAIT, NodeKind.COLLECTIVE)

#: Integer time units are chosen so the longest schedule spans about this many units. At
#: 10**10, CP-SAT's propagation ran far past the time limit on some small random graphs
#: (79 s under a 0.8 s limit: the limit is not checked inside propagation).
TARGET_UNITS = 10**7
#: ... but never finer than this many units per microsecond.
MAX_UNITS_PER_US = 10**6


@dataclass(frozen=True)
class Problem:
    """A graph's scheduling problem: the placed nodes (index order), their durations in
    integer units (``units_per_us`` per microsecond, rounded down so a bound proven on them
    holds for the real durations), and the edges ``(pred, succ, finish)`` between them."""

    graph: Graph
    placed: list[int]
    units: list[int]
    units_per_us: int
    edges: list[tuple[int, int, bool]]

    def on_compute_stream(self, i: int) -> bool:
        """Whether node ``i`` runs on the compute stream (else: a collective)."""
        return self.graph.nodes[i].kind is not NodeKind.COLLECTIVE


def problem(graph: Graph, durations_us: Sequence[float], *, allow_cross_group_reorder: bool) -> Problem:
    """The :class:`Problem` of ``graph`` with ``durations_us``."""
    nodes = graph.nodes
    dur = step_durations(graph, durations_us)
    placed = [n.index for n in nodes if n.kind in PLACED_KINDS]
    total = sum(dur[i] for i in placed)
    scale = MAX_UNITS_PER_US
    if total > 0:
        scale = max(1, min(MAX_UNITS_PER_US, 10 ** int(math.floor(math.log10(TARGET_UNITS / total)))))
    units = [int(math.floor(d * scale)) for d in dur]
    edges = _edges(graph)
    if not allow_cross_group_reorder:
        colls = graph.collectives()
        edges.extend((a, b, False) for a, b in zip(colls, colls[1:], strict=False))
    return Problem(graph, placed, units, scale, edges)


def _edges(graph: Graph) -> list[tuple[int, int, bool]]:
    """Constraints between placed nodes: the graph's edges seen through views, and
    invariant 4's wait-before-use pairs."""
    nodes = graph.nodes
    sources: dict[int, tuple[int, ...]] = {}  # view -> the placed nodes whose values it carries
    for node in nodes:
        if node.kind is NodeKind.VIEW:
            srcs: set[int] = set()
            for x in node.inputs:
                if nodes[x].kind is NodeKind.VIEW:
                    srcs.update(sources[x])
                elif nodes[x].kind in PLACED_KINDS:
                    srcs.add(x)
            sources[node.index] = tuple(sorted(srcs))
    edges: set[tuple[int, int, bool]] = set()
    for node in nodes:
        s = node.index
        if node.kind not in PLACED_KINDS:
            continue
        for p in graph.preds(s):
            kind = nodes[p].kind
            if kind is NodeKind.VIEW:
                edges.update((q, s, True) for q in sources[p])
            elif kind in PLACED_KINDS:
                edges.add((p, s, needs_finish(graph, p, s)))
    edges.update((w, u, False) for w, u in wait_before_use_edges(graph) if nodes[u].kind in PLACED_KINDS)
    return sorted(edges)


@dataclass(frozen=True)
class Storage:
    """A freeable storage a placed node allocates: its padded bytes, the other placed nodes
    that use it, and whether the output uses it (then it lives to the end)."""

    nbytes: int
    users: tuple[int, ...]
    to_end: bool


def storages(graph: Graph) -> tuple[dict[int, Storage], int]:
    """Per storage allocated by a placed node, its :class:`Storage`; and the bytes of the
    graph inputs, live whatever the order (:class:`commopt.sim.model.MemoryModel`, padded
    sizes, as the memory budget counts them). Views are left out: each sits right after its
    input, whose storage it uses."""
    from commopt.sim.model import memory_model

    nodes = graph.nodes
    mm = memory_model(graph, padded=True)
    users: dict[int, list[int]] = {}
    to_end: set[int] = set()
    for node in nodes:
        for r in mm.releases[node.index]:
            if node.kind is NodeKind.OUTPUT:
                to_end.add(r)
            elif node.kind in PLACED_KINDS and node.index != r:
                users.setdefault(r, []).append(node.index)
    resident = sum(mm.alloc[i] for i in range(len(nodes)) if mm.is_input[i])
    out = {r: Storage(mm.alloc[r], tuple(users.get(r, ())), r in to_end)
           for r in range(len(nodes))
           if mm.alloc[r] > 0 and not mm.is_input[r] and nodes[r].kind in PLACED_KINDS}
    return out, resident


def assemble(graph: Graph, sequence: Sequence[int]) -> list[int]:
    """A full order from the placed nodes in ``sequence``: inputs first, each view right
    after its last input, the output last. ``sequence`` must list every placed node once,
    in an order that keeps the problem's edges."""
    nodes = graph.nodes
    order: list[int] = []
    waiting = [0] * len(nodes)  # views: inputs not yet in the order
    for node in nodes:
        if node.kind is NodeKind.VIEW:
            waiting[node.index] = len(set(node.inputs))

    def emit(i: int) -> None:
        stack = [i]
        while stack:
            j = stack.pop()
            order.append(j)
            for s in reversed(graph.succs(j)):
                if nodes[s].kind is NodeKind.VIEW and j in nodes[s].inputs:
                    waiting[s] -= 1
                    if waiting[s] == 0:
                        stack.append(s)

    for node in nodes:
        if node.kind is NodeKind.INPUT or (node.kind is NodeKind.VIEW and not node.inputs):
            emit(node.index)
    for i in sequence:
        emit(i)
    order.extend(n.index for n in nodes if n.kind is NodeKind.OUTPUT)
    if len(order) != len(nodes):
        missing = sorted(set(range(len(nodes))) - set(order))
        raise ValueError(f"{len(missing)} nodes could not be placed, e.g. {nodes[missing[0]].name!r}")
    return order
