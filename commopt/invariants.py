"""The invariant checker: does an order keep the invariants (docs/design.md) 1, 2, 4 and 5?

Used after every pass by the pass manager (a violation there is a bug) and by
``commopt verify`` for any reordered graph, ours or someone else's. Invariant 3
(determinism) is a property of the pass, not of one order; tests check it by re-running.

Every check is linear in nodes plus edges: positions are looked up in one array. An order
that is a permutation is first checked with whole-array comparisons over the pairs each
invariant orders (:func:`_order_pairs`, built once per graph); only a check that finds a
pair out of order runs its node-by-node loop, which words the violations.
"""

from __future__ import annotations

import inspect
import math
import re
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, is_dataclass

import numpy as np

from commopt.ir.graph import Graph, NodeKind, Ref
from commopt.ir.schedule import Schedule, ScheduleError

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
    original relative order (every rank then issues them in one global order). On a graph
    without group order (:meth:`Graph.without_group_order`) invariant 2 asks nothing.
    """
    try:
        schedule = Schedule.of(graph, order)
    except ScheduleError:  # not a permutation: the loops name every bad entry
        return _check_each(graph, order, allow_cross_group_reorder)
    pos = np.asarray(schedule.positions, dtype=np.int64).reshape(len(graph.nodes))
    pairs = _order_pairs(graph)
    wait_late = bool((pos[pairs.wait] > pos[pairs.user]).any())
    pred_late = bool((pos[pairs.pred] > pos[pairs.succ]).any())
    order_arr = np.asarray(schedule.order, dtype=np.int64).reshape(len(graph.nodes))
    issued = order_arr[pairs.is_collective[order_arr]]
    coll_late = graph.group_order and bool((issued[1:] < issued[:-1]).any())
    if not (wait_late or pred_late or coll_late):
        return _check_no_write_in_flight(graph, list(schedule.positions))
    return _check_each(graph, order, allow_cross_group_reorder)


@dataclass(frozen=True, eq=False)
class _OrderPairs:
    """The node pairs invariants 1 and 4 order, as arrays (``pred[k]`` before ``succ[k]``,
    ``wait[k]`` before ``user[k]``), and which nodes are collectives (invariant 2: an order
    that issues them with ascending indices keeps every group's order and the global one)."""

    pred: np.ndarray
    succ: np.ndarray
    wait: np.ndarray
    user: np.ndarray
    is_collective: np.ndarray


_PAIRS: weakref.WeakKeyDictionary[Graph, _OrderPairs] = weakref.WeakKeyDictionary()


def _order_pairs(graph: Graph) -> _OrderPairs:
    """``graph``'s :class:`_OrderPairs` (order-independent: built once per graph, the pass
    manager checks an order after every pass)."""
    cached = _PAIRS.get(graph)
    if cached is None:
        nodes = graph.nodes
        ptr, idx = graph.pred_arrays()
        counts = np.diff(np.asarray(ptr, dtype=np.int64))
        succ = np.repeat(np.arange(len(nodes), dtype=np.int64), counts)
        waits: list[int] = []
        users: list[int] = []
        for w, u, _ in _wait_reads(graph):
            waits.append(w)
            users.append(u)
        kind_coll = NodeKind.COLLECTIVE
        is_coll = np.fromiter((n.kind is kind_coll and n.collective is not None
                               for n in nodes), dtype=bool, count=len(nodes))
        cached = _OrderPairs(np.asarray(idx, dtype=np.int64).reshape(len(succ)), succ,
                             np.asarray(waits, dtype=np.int64), np.asarray(users, dtype=np.int64),
                             is_coll)
        _PAIRS[graph] = cached
    return cached


def _check_each(graph: Graph, order: Sequence[int], allow_cross_group_reorder: bool) -> list[Violation]:
    """:func:`check_order` node by node: every violation, worded."""
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
    if graph.group_order:
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
    kind_coll, kind_view, kind_wait = NodeKind.COLLECTIVE, NodeKind.VIEW, NodeKind.WAIT
    for node in nodes:
        kind = node.kind
        if kind is kind_coll:
            src[node.index] = node.index
        elif (kind is kind_view or kind is kind_wait) and node.inputs:
            i = node.index
            j = node.alias_of if node.alias_of is not None else node.inputs[0]
            if j < i and src[j] >= 0:
                src[i] = src[j]
                via[i] = i if kind is kind_wait else via[j]
    return src, via


def wait_before_use_edges(graph: Graph) -> list[tuple[int, int]]:
    """(wait, user) pairs invariant 4 orders beyond the graph's edges: a node that reads a
    collective's result through views of the collective itself (not of a wait) comes after
    every wait of that collective. A scheduler that places nodes itself adds these. Loaders
    refuse such reads (:mod:`commopt.ir.validate`), so this is empty for loaded graphs and
    guards graphs built in code without validation."""
    return [(w, u) for w, u, through_wait in _wait_reads(graph) if not through_wait]


def _wait_reads(graph: Graph) -> Iterator[tuple[int, int, bool]]:
    """(wait, user, through_wait) for every read of a collective's result by a node that is
    neither a view nor a wait: the wait the value came through (``through_wait``), or, for a
    read through views of the collective itself, each of its waits."""
    src, via = _result_sources(graph)
    kind_view, kind_wait = NodeKind.VIEW, NodeKind.WAIT
    for node in graph.nodes:
        if node.kind is kind_view or node.kind is kind_wait:
            continue
        u = node.index
        for j in node.inputs:
            c = src[j]
            if c < 0 or c == u:
                continue
            if via[j] >= 0:
                yield via[j], u, True
            else:
                for w in graph.waits_of(c):
                    yield w, u, False


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


#: Node fields :func:`verify_reordered` does not compare, and why. Every other field of
#: :class:`~commopt.ir.graph.Node` (and, inside it, of TensorMeta, CollectiveInfo, Symbol) is
#: compared, so a field added to the IR is checked unless it is listed here.
NODE_FIELDS_NOT_COMPARED: dict[str, str] = {
    "index": "the node's position in its file: what a reorder changes",
    "name": "the key nodes are matched by",
    "duration_us": "a cost estimate or measurement, not part of what the node computes",
}

#: Graph attributes (:class:`~commopt.ir.graph.Graph` constructor parameters) not compared,
#: and why; every other one (process groups, world size, mesh) is.
GRAPH_FIELDS_NOT_COMPARED: dict[str, str] = {
    "nodes": "compared node by node, matched by name",
    "name": "the graph's label (the file name)",
    "source_format": "the file format (.json or .pt2), not what runs",
    "source_path": "where the file lies",
    "meta": "the loader's notes (warnings, unproven group sizes)",
    "payload": "the file's own object (ExportedProgram or JSON document), compared through the nodes",
    "group_order": "how the original is checked (--reorder-within-groups), not part of the program",
    "index_of": "each node's position by name, which a reorder changes (nodes are matched by name)",
}

#: Node fields holding node indices: compared as the names of those nodes (an unordered set
#: for ``inputs`` and ``mutates``, whose order follows the arguments, compared themselves).
_INDEX_FIELDS = {"inputs": "set", "mutates": "set", "wait_of": "one", "alias_of": "one"}


def verify_reordered(
    original: Graph, reordered: Graph | Sequence[NodeEntry], *, content: Graph | None = None,
    allow_cross_group_reorder: bool | None = None,
) -> list[Violation]:
    """Violations of a reordered graph (any tool's) with respect to its original.

    ``allow_cross_group_reorder``: whether collectives of different groups may have a new
    relative order; None applies the rule ``optimize`` applies
    (:func:`commopt.cross_group.decide_cross_group` on the original), so what ``optimize``
    writes verifies.

    A reorder may change the order of the nodes and nothing else. ``reordered`` is a Graph
    or its nodes as :class:`NodeEntry` in file order (see :func:`entries_from_json`, for
    files a loader rejects because they do not run in order); with entries, ``content`` is
    the same file's nodes loaded in another order (:func:`content_from_json`), or None when
    even that fails and only kind, op and inputs can be compared. Nodes are matched by name.

    Invariant 0 covers nodes missing from or added to ``reordered`` and every change to what
    a matched node computes: every :class:`~commopt.ir.graph.Node` field except
    :data:`NODE_FIELDS_NOT_COMPARED` (kind, op, inputs, args and kwargs with their constants
    and symbols, output dtype/shape/max_shape/logical shape/placements, the collective's
    type/group/reduce op/bytes/coalesced/in-place, wait_of, alias_of, mutates, side effect,
    attrs such as an input's role), one line per node naming its first changed field with both
    values; and every graph attribute except :data:`GRAPH_FIELDS_NOT_COMPARED` (process groups
    with their names, sizes, ranks and mesh dims; world size; mesh). The order of the matched
    nodes is then checked with :func:`check_order` against the original's edges. A graph
    that records buckets (``meta["buckets"]``, written by the bucket pass) holds other nodes:
    it is one violation saying so (:func:`commopt.bucketing.verify.verify_graph` checks both).
    """
    if isinstance(reordered, Graph) and reordered.meta.get("buckets"):
        return [Violation(0, "the graph records buckets (collectives merged by the bucket pass): "
                             "check it with commopt.bucketing.verify.verify_graph, as commopt verify does", ())]
    return same_nodes_reordered(original, reordered, content=content,
                                allow_cross_group_reorder=allow_cross_group_reorder)


def same_nodes_reordered(
    original: Graph, reordered: Graph | Sequence[NodeEntry], *, content: Graph | None = None,
    allow_cross_group_reorder: bool | None = None,
) -> list[Violation]:
    """:func:`verify_reordered` for a graph that must hold exactly ``original``'s nodes."""
    if isinstance(reordered, Graph):
        entries = [NodeEntry(n.name, n.kind.label, n.op, tuple(reordered.nodes[j].name for j in n.inputs))
                   for n in reordered.nodes]
        content = reordered
    else:
        entries = list(reordered)
    out = _graph_changes(original, content) if content is not None else []
    index_of = original.index_of
    order: list[int] = []
    seen: set[str] = set()
    for e in entries:
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
        j = content.index_of.get(e.name) if content is not None else None
        if j is not None:
            diff = node_difference(original, orig, content, content.nodes[j])
        else:
            diff = _entry_difference(original, orig, e)
        if diff is not None:
            path, before, after = diff
            out.append(Violation(0, f"{e.name!r} changed its {path}: {_show(before)} -> {_show(after)}",
                                 (e.name,)))
    if allow_cross_group_reorder is None:
        from commopt.cross_group import decide_cross_group

        allow_cross_group_reorder = decide_cross_group(original, None).allowed
    return out + check_order(original, order, allow_cross_group_reorder=allow_cross_group_reorder)


def _entry_difference(g0: Graph, a, e: NodeEntry) -> tuple[str, object, object] | None:
    """The first difference between a node and a bare file entry (kind, op, inputs)."""
    if e.kind != a.kind.label:
        return "kind", a.kind.label, e.kind
    if e.op != a.op:
        return "op", a.op, e.op
    ins, orig_ins = sorted(e.inputs), sorted(g0.nodes[j].name for j in a.inputs)
    if ins != orig_ins:
        return "inputs", orig_ins, ins
    return None


def node_difference(g0: Graph, a, g1: Graph, b) -> tuple[str, object, object] | None:
    """The first field in which node ``a`` of ``g0`` and node ``b`` of ``g1`` differ in what
    they compute, as (field path, value in ``g0``, value in ``g1``), or None.

    Fields are taken from the Node dataclass (all but :data:`NODE_FIELDS_NOT_COMPARED`), in
    declaration order; node references are compared by name.
    """
    for f in fields(a):
        name = f.name
        if name in NODE_FIELDS_NOT_COMPARED:
            continue
        x, y = getattr(a, name), getattr(b, name)
        how = _INDEX_FIELDS.get(name)
        if how == "set":
            x, y = sorted(g0.nodes[k].name for k in x), sorted(g1.nodes[k].name for k in y)
            if x != y:
                return name, x, y
            continue
        if how == "one":
            x, y = _name(g0, x), _name(g1, y)
        else:
            x, y = _portable(g0, x), _portable(g1, y)
        diff = first_difference(x, y, name)
        if diff is not None:
            return diff
    return None


def _graph_changes(original: Graph, reordered: Graph) -> list[Violation]:
    """Graph attributes a reorder keeps (process groups, world size, mesh): one line each."""
    out = []
    for name in inspect.signature(Graph.__init__).parameters:
        if name == "self" or name in GRAPH_FIELDS_NOT_COMPARED:
            continue
        a, b = getattr(original, name), getattr(reordered, name)
        if name == "groups":
            for g in sorted(set(a) | set(b)):
                if g not in b:
                    out.append(Violation(0, f"process group {g!r} is not in the reordered graph", ()))
                elif g not in a:
                    out.append(Violation(0, f"process group {g!r} is not in the original graph", ()))
                else:
                    diff = first_difference(a[g], b[g], "")
                    if diff is not None:
                        path, x, y = diff
                        out.append(Violation(0, f"process group {g!r} changed its {path.lstrip('.')}: "
                                             f"{_show(x)} -> {_show(y)}", ()))
            continue
        diff = first_difference(a, b, name)
        if diff is not None:
            path, x, y = diff
            out.append(Violation(0, f"the graph changed its {path}: {_show(x)} -> {_show(y)}", ()))
    return out


_ABSENT = type("_Absent", (), {"__repr__": lambda self: "(absent)"})()


def first_difference(a, b, path: str) -> tuple[str, object, object] | None:
    """The first place two values differ, as (path, value in ``a``, value in ``b``), or None.

    Dataclasses are compared field by field (declaration order), dicts key by key (sorted),
    lists and tuples element by element (a tuple equals the list of its items: JSON has no
    tuples), anything else by type and value (``1``, ``1.0`` and ``True`` differ; NaN
    equals NaN).
    """
    if is_dataclass(a) and not isinstance(a, type) and type(a) is type(b):
        for f in fields(a):
            d = first_difference(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
            if d is not None:
                return d
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=repr):
            d = first_difference(a.get(k, _ABSENT), b.get(k, _ABSENT), f"{path}[{k!r}]")
            if d is not None:
                return d
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return path, a, b
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            d = first_difference(x, y, f"{path}[{k}]")
            if d is not None:
                return d
        return None
    if type(a) is not type(b):  # 1 and 1.0 or True differ in what an op computes
        return path, a, b
    if a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)):
        return None
    return path, a, b


def _show(value, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _name(graph: Graph, index: int | None) -> str | None:
    return None if index is None else graph.nodes[index].name


class _NodeName:
    """A node reference by name, so two graphs' arguments compare; shown as in JSON."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NodeName) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"{{'ref': {self.name!r}}}"


def _portable(graph: Graph, value):
    """``value`` with node references as names and kinds as labels, so two graphs compare."""
    if isinstance(value, Ref):
        return _NodeName(graph.nodes[value.index].name)
    if isinstance(value, NodeKind):
        return value.label
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


def content_from_json(path: str, original: Graph, *, groups: str | None = None,
                      mesh: str | None = None, world_size: int | None = None) -> Graph | None:
    """A JSON graph file whose own order does not run, loaded with its nodes put in the
    original's order, so :func:`verify_reordered` can compare every attribute of its nodes
    (its ``content``).

    When it does not load in that order either: if the file names exactly the original's
    nodes, the loader's :class:`~commopt.errors.GraphError` is raised (the file is broken
    beyond its order: a bad field, not a reorder); otherwise None is returned, the missing or
    extra nodes are the violations, and only kind, op and inputs are compared.
    """
    from pathlib import Path

    from commopt.errors import GraphError
    from commopt.io import load_graph
    from commopt.io.json_graph import graph_from_document, read_json_file

    raw = read_json_file(Path(path))
    nodes = raw.get("nodes") if isinstance(raw, dict) else None
    if not isinstance(nodes, list):
        return None
    names = [nd["name"] if isinstance(nd, dict) and isinstance(nd.get("name"), str) else None
             for nd in nodes]
    rank = original.index_of
    last = len(original.nodes)
    perm = sorted(range(len(nodes)), key=lambda k: rank.get(names[k], last) if names[k] is not None else last)
    doc = dict(raw)
    doc["nodes"] = [nodes[k] for k in perm]
    try:
        graph = graph_from_document(doc, file=str(path))
        return load_graph(graph, groups=groups, mesh=mesh, world_size=world_size)
    except GraphError as exc:
        if None in names or sorted(names) != sorted(rank):
            return None
        m = re.match(r"\$\.nodes\[(\d+)\]", exc.field or "")
        if m and int(m.group(1)) < len(perm):  # the position in the file, not in the sorted copy
            exc.field = f"$.nodes[{perm[int(m.group(1))]}]{exc.field[m.end():]}"
        raise


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
