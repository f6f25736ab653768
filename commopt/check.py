"""The invariant checker: does an order keep DESIGN.md's invariants 1, 2, 4 and 5?

Used after every pass by the pass manager (a violation there is a bug) and by
``commopt verify`` for any reordered graph, ours or someone else's. Invariant 3
(determinism) is a property of the pass, not of one order; tests check it by re-running.

Every check is linear in nodes plus edges: positions are looked up in one array.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from commopt.ir.graph import Graph, NodeKind

#: What each invariant number means, for messages and reports.
INVARIANTS: dict[int, str] = {
    0: "same nodes",
    1: "topological order",
    2: "collective order",
    4: "wait before use",
    5: "no write in flight",
}


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant, naming the nodes involved (original names)."""

    invariant: int
    message: str
    nodes: tuple[str, ...]

    @property
    def title(self) -> str:
        """Short label of the invariant ('topological order', ...)."""
        return INVARIANTS.get(self.invariant, str(self.invariant))

    def __str__(self) -> str:
        return f"invariant {self.invariant} ({self.title}): {self.message}"


def check_order(
    graph: Graph, order: Sequence[int], *, allow_cross_group_reorder: bool = False
) -> list[Violation]:
    """Every violation of invariants 1, 2, 4 and 5 by ``order``, in a deterministic order.

    ``order`` must list node indices of ``graph``; missing or repeated indices are reported
    as invariant 0 and the other checks then run on the nodes that are present. Unless
    ``allow_cross_group_reorder``, collectives of different groups must also keep their
    original relative order (every rank then issues them in one global order).
    """
    nodes = graph.nodes
    n = len(nodes)
    out: list[Violation] = []
    pos = [-1] * n
    for k, i in enumerate(order):
        if not (isinstance(i, int) and 0 <= i < n):
            out.append(Violation(0, f"order entry {k} is {i!r}, not a node index", ()))
            continue
        if pos[i] != -1:
            out.append(Violation(0, f"{nodes[i].name!r} appears more than once", (nodes[i].name,)))
            continue
        pos[i] = k
    missing = [nodes[i].name for i in range(n) if pos[i] == -1]
    for name in missing:
        out.append(Violation(0, f"{name!r} is missing from the order", (name,)))
    out.extend(_check_wait_before_use(graph, pos))
    seen = {(v.nodes[0], v.nodes[1]) for v in out if v.invariant == 4 and len(v.nodes) == 2}
    out.extend(_check_topological(graph, pos, seen))
    out.extend(_check_collective_order(graph, order, pos, allow_cross_group_reorder))
    out.extend(_check_no_write_in_flight(graph, pos))
    return out


def _check_topological(graph: Graph, pos: list[int], skip: set[tuple[str, str]]) -> list[Violation]:
    nodes = graph.nodes
    ptr, idx = graph.pred_arrays()
    out = []
    for i in range(len(nodes)):
        pi = pos[i]
        if pi < 0:
            continue
        for k in range(ptr[i], ptr[i + 1]):
            p = idx[k]
            pp = pos[p]
            if pp > pi:
                a, b = nodes[p].name, nodes[i].name
                if (a, b) in skip:
                    continue
                what = "uses" if p in nodes[i].inputs else "must follow"
                out.append(Violation(1, f"{b!r} {what} {a!r} but comes before it", (a, b)))
    return out


def _check_collective_order(
    graph: Graph, order: Sequence[int], pos: list[int], allow_cross_group: bool
) -> list[Violation]:
    nodes = graph.nodes
    out = []
    last_in_group: dict[str, int] = {}
    latest = -1
    for i in order:
        if not (isinstance(i, int) and 0 <= i < len(nodes)):
            continue
        node = nodes[i]
        if node.kind is not NodeKind.COLLECTIVE or node.collective is None:
            continue
        g = node.collective.group
        prev = last_in_group.get(g)
        if prev is not None and prev > i:
            out.append(Violation(
                2, f"{node.name!r} is issued after {nodes[prev].name!r} in group {g!r}, "
                f"the input issues it first", (node.name, nodes[prev].name)))
        elif not allow_cross_group and latest > i:
            out.append(Violation(
                2, f"{node.name!r} (group {g!r}) is issued after {nodes[latest].name!r} (group "
                f"{nodes[latest].collective.group!r}), the input issues it first; "
                "pass allow_cross_group_reorder to permit this", (node.name, nodes[latest].name)))
        if prev is None or i > prev:
            last_in_group[g] = i
        if i > latest:
            latest = i
    return out


def _result_sources(graph: Graph) -> tuple[list[int], list[int]]:
    """Per node: the collective whose result it carries through views/waits (-1: none), and
    the wait on that chain (-1: read straight from the collective)."""
    nodes = graph.nodes
    src = [-1] * len(nodes)
    via = [-1] * len(nodes)
    for node in nodes:
        i = node.index
        if node.kind is NodeKind.COLLECTIVE:
            src[i] = i
        elif node.kind in (NodeKind.VIEW, NodeKind.WAIT) and node.inputs:
            j = node.alias_of if node.alias_of is not None else node.inputs[0]
            if j < i and src[j] >= 0:
                src[i] = src[j]
                via[i] = i if node.kind is NodeKind.WAIT else via[j]
    return src, via


def _check_wait_before_use(graph: Graph, pos: list[int]) -> list[Violation]:
    nodes = graph.nodes
    src, via = _result_sources(graph)
    out = []
    for node in nodes:
        u = node.index
        if node.kind in (NodeKind.VIEW, NodeKind.WAIT) or pos[u] < 0:
            continue
        for j in node.inputs:
            c = src[j]
            if c < 0 or c == u:
                continue
            waits = (via[j],) if via[j] >= 0 else graph.waits_of(c)
            for w in waits:
                if pos[w] >= 0 and pos[w] > pos[u]:
                    out.append(Violation(
                        4, f"{node.name!r} uses the result of {nodes[c].name!r} before its wait "
                        f"{nodes[w].name!r}", (nodes[w].name, node.name)))
    return out


def _check_no_write_in_flight(graph: Graph, pos: list[int]) -> list[Violation]:
    nodes = graph.nodes
    root = graph.storage_root
    writers: dict[int, list[int]] = {}
    for node in nodes:
        for m in node.mutates:
            writers.setdefault(root[m], []).append(node.index)
    if not writers:
        return []
    out = []
    for c in graph.collectives():
        waits = graph.waits_of(c)
        if pos[c] < 0 or not waits:
            continue
        start = pos[c]
        end = max(pos[w] for w in waits)
        roots = sorted({root[j] for j in nodes[c].inputs} | {root[c]})
        for r in roots:
            for m in writers.get(r, ()):
                if m != c and start < pos[m] < end:
                    out.append(Violation(
                        5, f"{nodes[m].name!r} writes storage of {nodes[r].name!r} while "
                        f"{nodes[c].name!r} is in flight (before its wait)",
                        (nodes[m].name, nodes[c].name)))
    return out
