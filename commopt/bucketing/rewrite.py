"""Merge collectives into buckets by rewriting the graph.

A bucket is several collectives of one group, type, reduce op and dtype that become one
collective over a contiguous buffer (see docs/bucketing.md for the layouts):

- all_gather: each member's shard is flattened into one input buffer (``cat``), one
  all_gather fills a ``[group_size, N]`` buffer, and each member's gathered tensor is copied
  out of its column slice (rank-major data cannot be a view of its own shape);
- reduce_scatter: each member's input is viewed as ``[group_size, m]`` (one row per
  destination rank) and the rows are concatenated along dim 1, so one reduce_scatter returns
  every member's shard side by side: each is a view of the output;
- all_reduce: one flat buffer; each member's result is a view of it.

The rewrite works on an order: the bucket's collective takes the place of its last member's
collective, its wait the place of its first member's wait, and each member's read-back the
place of that member's wait. The new graph lists its nodes in that order (the graph's own
order decides its ordering edges), so the returned order is simply ``range(len(graph))``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from commopt.ir.args import Symbol, iter_refs
from commopt.ir.graph import (
    LOADED_INDEX,
    LOADED_REPLACED,
    CollectiveInfo,
    Graph,
    Node,
    NodeKind,
    Ref,
    TensorMeta,
)

#: The functional collective each bucketable type is issued with.
BUCKET_OPS: dict[str, str] = {
    "all_gather": "_c10d_functional.all_gather_into_tensor.default",
    "reduce_scatter": "_c10d_functional.reduce_scatter_tensor.default",
    "all_reduce": "_c10d_functional.all_reduce.default",
}
FLATTEN_OP = "aten.reshape.default"
VIEW_OP = "aten.view.default"
SLICE_OP = "aten.slice.Tensor"
CAT_OP = "aten.cat.default"
COPY_OP = "aten.clone.default"
WAIT_OP = "_c10d_functional.wait_tensor.default"


@dataclass(frozen=True, slots=True)
class Bucket:
    """Collectives (node indices of the graph they were chosen in, in issue order) merged
    into one. ``tag`` prefixes the names of the nodes the merge adds (None: the next free
    ``bucket<k>``); verification gives the tag a written graph used."""

    members: tuple[int, ...]
    tag: str | None = None


@dataclass(frozen=True)
class Rewritten:
    """A bucketed graph and where its nodes came from.

    ``origin[i]`` is the index in the source graph of new node ``i`` (-1 for a node the
    rewrite added); ``buckets`` lists, per bucket, the names of its member collectives and
    the name of the collective that replaced them.
    """

    graph: Graph
    origin: tuple[int, ...]
    buckets: tuple[tuple[tuple[str, ...], str], ...]


@dataclass
class PendingNode:
    """New nodes before they get indices: ``args`` hold ``Ref(key)`` with string keys for
    new nodes and ``Ref(int)`` for source nodes."""

    key: str
    kind: NodeKind
    op: str
    args: tuple
    kwargs: dict
    outputs: tuple[TensorMeta, ...]
    alias_of: Any = None
    collective: CollectiveInfo | None = None
    wait_of: Any = None


def member_input(graph: Graph, c: int) -> int:
    """The node a bucketable collective reads."""
    return graph.nodes[c].inputs[0]


def apply_buckets(graph: Graph, order: Sequence[int], buckets: Sequence[Bucket]) -> Rewritten:
    """The graph with every bucket of ``buckets`` merged, its nodes in ``order`` with the
    bucket nodes placed as the module docstring says. Buckets must be valid in ``order``
    (:func:`commopt.bucketing.eligibility.bucket_problem` is None for each)."""
    nodes = graph.nodes
    pos = [0] * len(nodes)
    for p, i in enumerate(order):
        pos[i] = p
    before: dict[int, list[PendingNode]] = {}  # source index -> new nodes emitted just before it
    replaced: dict[int, str] = {}  # member wait -> key of the node standing for its value
    removed: set[int] = set()
    names = _Names(graph)
    records = []
    for b in buckets:
        tag = b.tag or names.prefix()
        issue, readback = bucket_nodes(graph, b, tag)
        last_c = max(b.members, key=lambda c: pos[c])
        waits = [graph.waits_of(c)[0] for c in b.members]
        first_w = min(waits, key=lambda w: pos[w])
        before.setdefault(last_c, []).extend(issue)
        head, per_member = readback
        before.setdefault(first_w, []).extend(head)
        for c, w, (items, out_key) in zip(b.members, waits, per_member, strict=True):
            before.setdefault(w, []).extend(items)
            replaced[w] = out_key
            removed.update((c, w))
        records.append((tuple(nodes[c].name for c in b.members), issue[-1].key))
    sequence: list[int | PendingNode] = []
    for i in order:
        sequence.extend(before.get(i, ()))
        if i not in removed:
            sequence.append(i)
    return _materialize(graph, sequence, replaced, names, tuple(records))


def bucket_nodes(graph: Graph, b: Bucket, tag: str):
    """The new nodes of bucket ``b``, before they get indices: (nodes issuing the bucket,
    (nodes at the first wait, per member (nodes, key of its value))). The rewrite places them;
    the bucket choice's replay (:mod:`commopt.bucketing.replay`) costs the same nodes."""
    first = graph.nodes[b.members[0]]
    info = first.collective
    size = graph.groups[info.group].size
    ins = [graph.nodes[member_input(graph, c)].outputs[0] for c in b.members]
    outs = [graph.nodes[c].outputs[0] for c in b.members]
    dtype = ins[0].dtype
    extra = tuple(first.args[1:])  # reduce op, group size, group name: as the members have them
    if info.type == "reduce_scatter":
        widths = [t.numel // size for t in ins]
        flat = [_P(f"{tag}_in{k}", NodeKind.VIEW, FLATTEN_OP,
                   (Ref(member_input(graph, c)), [size, w]), TensorMeta(dtype, (size, w)),
                   alias_of=member_input(graph, c))
                for k, (c, w) in enumerate(zip(b.members, widths, strict=True))]
        total = sum(widths)
        cat = _P(f"{tag}_cat", NodeKind.COMPUTE, CAT_OP, ([Ref(f.key) for f in flat], 1),
                 TensorMeta(dtype, (size, total)))
        send = _P(f"{tag}_flat", NodeKind.VIEW, VIEW_OP, (Ref(cat.key), [size * total]),
                  TensorMeta(dtype, (size * total,)), alias_of=cat.key)
        issue = [*flat, cat, send]
        out_meta = TensorMeta(dtype, (total,))
    else:
        widths = [t.numel for t in ins]
        flat = [_P(f"{tag}_in{k}", NodeKind.VIEW, FLATTEN_OP, (Ref(member_input(graph, c)), [w]),
                   TensorMeta(dtype, (w,)), alias_of=member_input(graph, c))
                for k, (c, w) in enumerate(zip(b.members, widths, strict=True))]
        total = sum(widths)
        send = _P(f"{tag}_cat", NodeKind.COMPUTE, CAT_OP, ([Ref(f.key) for f in flat],),
                  TensorMeta(dtype, (total,)))
        issue = [*flat, send]
        out_meta = TensorMeta(dtype, ((size if info.type == "all_gather" else 1) * total,))
    in_meta = send.outputs[0]
    coll_info = replace(info, in_bytes=in_meta.nbytes, out_bytes=out_meta.nbytes)
    coll = _P(f"{tag}_{info.type}", NodeKind.COLLECTIVE, BUCKET_OPS[info.type], (Ref(send.key), *extra),
              out_meta, collective=coll_info)
    issue.append(coll)
    wait = _P(f"{tag}_wait", NodeKind.WAIT, WAIT_OP, (Ref(coll.key),), out_meta,
              alias_of=coll.key, wait_of=coll.key)
    head = [wait]
    source = wait.key
    if info.type == "all_gather":
        grid = _P(f"{tag}_grid", NodeKind.VIEW, VIEW_OP, (Ref(wait.key), [size, total]),
                  TensorMeta(dtype, (size, total)), alias_of=wait.key)
        head.append(grid)
        source = grid.key
    per_member = []
    off = 0
    for k, (w, out) in enumerate(zip(widths, outs, strict=True)):
        per_member.append(_readback(tag, k, info.type, source, off, w, size, out))
        off += w
    return issue, (head, per_member)


def result_name(tag: str, k: int) -> str:
    """Name of the node holding member ``k``'s result in the bucket tagged ``tag``."""
    return f"{tag}_out{k}"


def tag_of(collective_name: str, ctype: str) -> str:
    """The tag of the bucket whose merged collective of type ``ctype`` is named so."""
    return collective_name.removesuffix(f"_{ctype}")


def _readback(tag: str, k: int, ctype: str, source: str, off: int, width: int, size: int,
              out: TensorMeta) -> tuple[list[PendingNode], str]:
    """Nodes giving member ``k`` its own result back, and the key of the last one."""
    dtype = out.dtype
    if ctype == "all_gather":
        part = _P(f"{tag}_part{k}", NodeKind.VIEW, SLICE_OP, (Ref(source), 1, off, off + width),
                  TensorMeta(dtype, (size, width)), alias_of=source)
        copy = _P(f"{tag}_copy{k}", NodeKind.COMPUTE, COPY_OP, (Ref(part.key),),
                  TensorMeta(dtype, (size, width)),
                  kwargs={"memory_format": Symbol("memory_format", "contiguous_format")})
        res = _P(result_name(tag, k), NodeKind.VIEW, VIEW_OP, (Ref(copy.key), list(out.shape)), out,
                 alias_of=copy.key)
        return [part, copy, res], res.key
    part = _P(f"{tag}_part{k}", NodeKind.VIEW, SLICE_OP, (Ref(source), 0, off, off + width),
              TensorMeta(dtype, (width,)), alias_of=source)
    res = _P(result_name(tag, k), NodeKind.VIEW, VIEW_OP, (Ref(part.key), list(out.shape)), out,
             alias_of=part.key)
    return [part, res], res.key


def _P(key: str, kind: NodeKind, op: str, args: tuple, out: TensorMeta, *, kwargs=None,
       alias_of=None, collective=None, wait_of=None) -> PendingNode:
    return PendingNode(key, kind, op, tuple(args), dict(kwargs or {}), (out,), alias_of, collective, wait_of)


class _Names:
    """Fresh node names that clash with no name of the graph: ``bucket<k>_...``."""

    def __init__(self, graph: Graph) -> None:
        # the prefixes in use, read once: the choice rewrites the graph once per candidate
        self.taken = {n.split("_", 1)[0] for n in graph.index_of if n.startswith("bucket") and "_" in n}
        self.count = 0

    def prefix(self) -> str:
        while True:
            tag = f"bucket{self.count}"
            self.count += 1
            if tag not in self.taken:
                return tag


def _materialize(graph: Graph, sequence: list, replaced: dict[int, str], names: _Names,
                 records: tuple) -> Rewritten:
    """Build the new graph from ``sequence`` (source indices and pending nodes)."""
    new_index: dict[Any, int] = {}
    for p, item in enumerate(sequence):
        new_index[item.key if isinstance(item, PendingNode) else item] = p
    for w, key in replaced.items():
        new_index[w] = new_index[key]

    def ref(x: Any) -> int:
        return new_index[x]

    out_nodes: list[Node] = []
    origin: list[int] = []
    for p, item in enumerate(sequence):
        if isinstance(item, PendingNode):
            node = Node(index=p, name=item.key, kind=item.kind, op=item.op,
                        inputs=tuple(dict.fromkeys(ref(r) for r in iter_refs(item.args))),
                        outputs=item.outputs, args=remap_refs(item.args, ref),
                        kwargs=remap_refs(item.kwargs, ref), collective=item.collective,
                        wait_of=None if item.wait_of is None else ref(item.wait_of),
                        alias_of=None if item.alias_of is None else ref(item.alias_of),
                        attrs={})
            origin.append(-1)
        else:
            old = graph.nodes[item]
            node = Node(index=p, name=old.name, kind=old.kind, op=old.op,
                        inputs=tuple(dict.fromkeys(ref(i) for i in old.inputs)), outputs=old.outputs,
                        args=remap_refs(old.args, ref), kwargs=remap_refs(old.kwargs, ref),
                        collective=old.collective,
                        wait_of=None if old.wait_of is None else ref(old.wait_of),
                        alias_of=None if old.alias_of is None else ref(old.alias_of),
                        mutates=tuple(ref(i) for i in old.mutates), side_effect=old.side_effect,
                        rng=old.rng, duration_us=old.duration_us, attrs=dict(old.attrs))
            origin.append(item)
        out_nodes.append(node)
    meta = {k: v for k, v in graph.meta.items() if k not in (LOADED_INDEX, LOADED_REPLACED)}
    meta["buckets"] = [*meta.get("buckets", []), *([list(m), c] for m, c in records)]
    new = Graph(out_nodes, dict(graph.groups), name=graph.name, source_format=graph.source_format,
                source_path=graph.source_path, world_size=graph.world_size, mesh=graph.mesh,
                meta=meta, payload=graph.payload, group_order=graph.group_order)
    new.meta.update(_loaded_origin(graph, origin, replaced, new_index))
    return Rewritten(new, tuple(origin), records)


def _loaded_origin(graph: Graph, origin: list[int], replaced: dict[int, str],
                   new_index: dict[Any, int]) -> dict[str, Any]:
    """Where the new graph's nodes are in the program the graph was loaded from, for the
    writer of ``.pt2`` archives (:func:`commopt.io.pt2.reordered_program`): ``loaded_index``,
    each node's loaded index (-1: added), and ``loaded_replaced``, loaded index of each removed
    node whose value is used -> the new node standing for it."""
    base = graph.meta.get(LOADED_INDEX)
    loaded = (lambda i: i) if base is None else (lambda i: base[i])
    before = {k: new_index[v] for k, v in graph.meta.get(LOADED_REPLACED, {}).items()}
    before.update({loaded(w): new_index[key] for w, key in replaced.items()})
    return {LOADED_INDEX: [loaded(i) if i >= 0 else -1 for i in origin], LOADED_REPLACED: before}


def remap_refs(value: Any, ref) -> Any:
    """``value`` (an argument: Ref, plain value, or tuples, lists and dicts of them) with
    every ``Ref(k)`` replaced by ``Ref(ref(k))``: a new node's references given their
    final indices."""
    t = type(value)
    if t is Ref:
        return Ref(ref(value.index))
    if t is tuple or t is list:
        if not value:
            return value
        out = [Ref(ref(v.index)) if type(v) is Ref else v if type(v) in _PLAIN else remap_refs(v, ref)
               for v in value]
        return tuple(out) if t is tuple else out
    if t is dict:
        return {k: remap_refs(v, ref) for k, v in value.items()} if value else value
    return value


_PLAIN = (int, float, str, bool, type(None))


def bucket_bytes(graph: Graph, b: Bucket) -> int:
    """Bytes one rank contributes to the merged collective."""
    return sum(graph.nodes[member_input(graph, c)].outputs[0].nbytes for c in b.members)


__all__ = ["BUCKET_OPS", "Bucket", "Rewritten", "apply_buckets", "bucket_bytes", "member_input"]
