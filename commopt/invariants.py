"""The invariant checker: does an order keep the invariants (docs/design.md) 1, 2, 4 and 5?

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


def verify_reordered(
    original: Graph, reordered: Graph | Sequence[NodeEntry], *, allow_cross_group_reorder: bool = False
) -> list[Violation]:
    """Violations of a reordered graph (any tool's) with respect to its original.

    A reorder may change the order of the nodes and nothing else. ``reordered`` is a Graph
    or its nodes as :class:`NodeEntry` in file order (see :func:`entries_from_json`, for
    files a loader rejects because they do not run in order). Nodes are matched by name.
    Invariant 0 covers nodes missing from or added to ``reordered`` and every change to what
    a matched node computes: kind, operation, inputs and, for a Graph, its arguments, the
    dtypes and shapes it produces, its collective (type, group, reduce op, bytes), what it
    waits for, aliases or writes, and the process groups and world size the graph runs on.
    The order of the matched nodes is then checked with :func:`check_order` against the
    original's edges.
    """
    if isinstance(reordered, Graph):
        entries = [NodeEntry(n.name, n.kind.label, n.op, tuple(reordered.nodes[j].name for j in n.inputs))
                   for n in reordered.nodes]
        out = _graph_changes(original, reordered)
    else:
        entries = list(reordered)
        out = []
    index_of = original.index_of
    order: list[int] = []
    seen: set[str] = set()
    for k, e in enumerate(entries):
        i = index_of.get(e.name)
        if i is None:
            out.append(Violation(0, f"{e.name!r} is not in the original graph", (e.name,)))
            continue
        if e.name in seen:
            out.append(Violation(0, f"{e.name!r} appears more than once", (e.name,)))
            continue
        seen.add(e.name)
        order.append(i)
        orig = original.nodes[i]
        if e.op != orig.op or e.kind != orig.kind.label:
            out.append(Violation(0, f"{e.name!r} changed from {orig.kind.label} {orig.op} to "
                                 f"{e.kind} {e.op}", (e.name,)))
            continue
        ins = sorted(e.inputs)
        orig_ins = sorted(original.nodes[j].name for j in orig.inputs)
        if ins != orig_ins:
            out.append(Violation(0, f"{e.name!r} reads {ins}, the original reads {orig_ins}", (e.name,)))
            continue
        if isinstance(reordered, Graph):
            out.extend(_node_changes(original, orig, reordered, reordered.nodes[k]))
    return out + check_order(original, order, allow_cross_group_reorder=allow_cross_group_reorder)


def _graph_changes(original: Graph, reordered: Graph) -> list[Violation]:
    """World size and process groups: a reorder runs on the same ranks."""
    out = []
    if original.world_size != reordered.world_size:
        out.append(Violation(0, f"the world size changed from {original.world_size} to "
                             f"{reordered.world_size}", ()))
    for name in sorted(set(original.groups) | set(reordered.groups)):
        a, b = original.groups.get(name), reordered.groups.get(name)
        if a is None or b is None:
            continue  # a group no collective uses; collectives' groups are compared per node
        if a.size != b.size or (a.ranks is not None and b.ranks is not None and a.ranks != b.ranks):
            out.append(Violation(0, f"process group {name!r} changed from {_group_text(a)} to "
                                 f"{_group_text(b)}", ()))
    return out


def _group_text(group) -> str:
    return f"{group.size} ranks" + (f" {list(group.ranks)}" if group.ranks is not None else "")


def _node_changes(g0: Graph, a, g1: Graph, b) -> list[Violation]:
    """What differs between two nodes of the same name in what they compute."""
    facts = {
        "arguments": (_portable(g0, a.args), _portable(g1, b.args)),
        "keyword arguments": (_portable(g0, a.kwargs), _portable(g1, b.kwargs)),
        "outputs (dtype, shape)": ([(t.dtype, t.shape, t.max_shape) for t in a.outputs],
                                   [(t.dtype, t.shape, t.max_shape) for t in b.outputs]),
        "collective": (a.collective, b.collective),
        "collective it waits for": (_name(g0, a.wait_of), _name(g1, b.wait_of)),
        "storage it aliases": (_name(g0, a.alias_of), _name(g1, b.alias_of)),
        "inputs it writes": (sorted(g0.nodes[j].name for j in a.mutates),
                             sorted(g1.nodes[j].name for j in b.mutates)),
        "side effect": (a.side_effect, b.side_effect),
    }
    return [Violation(0, f"{a.name!r} changed its {what}: {before} -> {after}", (a.name,))
            for what, (before, after) in facts.items() if before != after]


def _name(graph: Graph, index: int | None) -> str | None:
    return None if index is None else graph.nodes[index].name


def _portable(graph: Graph, value):
    """``value`` with node references as names, so two graphs' arguments compare."""
    from commopt.ir.graph import Ref

    if isinstance(value, Ref):
        return ("ref", graph.nodes[value.index].name)
    if isinstance(value, dict):
        return {k: _portable(graph, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_portable(graph, v) for v in value)
    return value


@dataclass(frozen=True, slots=True)
class NodeEntry:
    """A node of a reordered file as far as verification needs it."""

    name: str
    kind: str
    op: str
    inputs: tuple[str, ...]


def entries_from_json(path: str) -> list[NodeEntry]:
    """The nodes of a JSON graph file in file order, without requiring that order to run
    (so a broken reorder can still be verified and every violation listed)."""
    from pathlib import Path

    from commopt.errors import GraphError
    from commopt.io.json_graph import read_json_file

    raw = read_json_file(Path(path))
    nodes = raw.get("nodes") if isinstance(raw, dict) else None
    if not isinstance(nodes, list):
        raise GraphError("no node list", file=str(path), field="$.nodes")
    out = []
    for k, nd in enumerate(nodes):
        if not (isinstance(nd, dict) and isinstance(nd.get("name"), str)):
            raise GraphError("a node is an object with a name", file=str(path), field=f"$.nodes[{k}]")
        refs = list(nd.get("inputs", []))
        _collect_refs(nd.get("args", []), refs)
        _collect_refs(nd.get("kwargs", {}), refs)
        out.append(NodeEntry(nd["name"], str(nd.get("kind", "")), str(nd.get("op", "")),
                             tuple(dict.fromkeys(str(r) for r in refs))))
    return out


def _collect_refs(value, out: list) -> None:
    if isinstance(value, dict):
        if set(value) == {"ref"}:
            out.append(value["ref"])
            return
        for v in value.values():
            _collect_refs(v, out)
    elif isinstance(value, list):
        for v in value:
            _collect_refs(v, out)
