"""Which collectives may join a bucket, with which others, and where in an order.

A member must be a plain functional collective the rewrite knows how to lay out (one input
tensor, one result, one wait, the same shape on every rank) and members of one bucket must
agree on everything the merged collective is issued with: group, type, reduce op, dtype and
the remaining arguments. In an order, a bucket is valid when all its members are issued
before any of them is waited on, and nothing writes a member's input between that member's
own issue and the bucket's (the merged collective reads it later).
"""

from __future__ import annotations

from collections.abc import Sequence

from commopt.bucketing.rewrite import BUCKET_OPS, member_input
from commopt.ir.graph import Graph, NodeKind
from commopt.ir.schedule import Schedule
from commopt.ir.sizes import SYMBOLIC_SHAPES_ATTR


def member_problem(graph: Graph, c: int, written: set[int] | None = None) -> str | None:
    """Why collective ``c`` cannot join a bucket (None: it can). ``written``: the storage
    roots some node writes (:func:`written_roots`; computed when not given)."""
    node = graph.nodes[c]
    info = node.collective
    if node.kind is not NodeKind.COLLECTIVE or info is None:
        return "not a collective"
    if BUCKET_OPS.get(info.type) != node.op or info.coalesced or info.in_place:
        return f"{node.op} is not a bucketable collective"
    if len(node.inputs) != 1 or not node.args or len(node.outputs) != 1:
        return "not one input and one result"
    waits = graph.waits_of(c)
    if len(waits) != 1 or graph.users(c) != [waits[0]]:
        return "its result is used other than through one wait"
    src = graph.nodes[member_input(graph, c)]
    if len(src.outputs) != 1:
        return "its input is one of several results"
    t_in, t_out = src.outputs[0], node.outputs[0]
    if t_in.max_shape is not None or t_out.max_shape is not None:
        return "shards differ between ranks"
    if SYMBOLIC_SHAPES_ATTR in node.attrs or SYMBOLIC_SHAPES_ATTR in src.attrs:
        return "its size is data-dependent"
    if t_in.dtype != t_out.dtype:
        return "input and result dtypes differ"
    size = graph.groups[info.group].size
    expected = {"all_gather": t_in.numel * size, "reduce_scatter": t_in.numel // size,
                "all_reduce": t_in.numel}[info.type]
    if t_out.numel != expected or (info.type == "reduce_scatter" and t_in.numel % size):
        return "its result size does not follow from its input"
    if info.type != "all_gather" and c in (written_roots(graph) if written is None else written):
        # its result would be a view of the bucket's output, shared with the other members:
        # a write to it would be a write to every member's storage
        return "its result is written in place"
    return None


def written_roots(graph: Graph) -> set[int]:
    """The storage roots some node of ``graph`` writes."""
    root = graph.storage_root
    return {root[m] for node in graph.nodes for m in node.mutates}


def class_key(graph: Graph, c: int) -> tuple:
    """What members of one bucket share: type, group, reduce op, dtype and the other args."""
    node = graph.nodes[c]
    info = node.collective
    dtype = graph.nodes[member_input(graph, c)].outputs[0].dtype
    return (info.group, info.type, info.reduce_op, dtype, repr(node.args[1:]), repr(node.kwargs))


def bucket_problem(graph: Graph, order: Schedule, members: Sequence[int]) -> str | None:
    """Why ``members`` cannot be one bucket in ``order`` (None: they can)."""
    pos = order.positions
    issue = max(pos[c] for c in members)
    first_wait = min(pos[graph.waits_of(c)[0]] for c in members)
    if issue >= first_wait:
        return "a member is waited on before the last member is issued"
    roots = graph.storage_root
    for c in members:
        root = roots[member_input(graph, c)]
        for p in range(pos[c] + 1, issue + 1):
            writer = graph.nodes[order[p]]
            if any(roots[m] == root for m in writer.mutates):
                return f"{writer.name} writes the input of {graph.nodes[c].name} before the bucket reads it"
    return None
