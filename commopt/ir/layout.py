"""Views that leave a tensor's bytes where they are.

A collective often sends a view of what an op computed: tensor parallelism reduces
``view(mm(...))``, SimpleFSDP reduce-scatters ``view(t(t(mm(...))))``, and an all_gather reads
``view(parameter)``. When every view between the op (the storage root) and the value sent keeps
each element at its byte, the value *is* the root's bytes, read in the same order: the op can
write its result straight into the collective's buffer and the views run on the buffer, with
no copy. :func:`same_bytes_root` decides that from the graph alone (the IR records shapes, not
strides, so it follows the layout through the chain from the root, which an op allocates
contiguous).
"""

from __future__ import annotations

from commopt.ir.graph import Graph, Node, NodeKind

#: Views that keep every element in place on a contiguous tensor (the same bytes, the same
#: order, a different shape).
RESHAPING_VIEWS = frozenset({
    "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
    "aten.alias.default", "aten.flatten.using_ints", "aten.unflatten.int",
    "aten.squeeze.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.unsqueeze.default",
})

#: Views that reorder dimensions: the bytes stay, their order changes unless a later one
#: undoes it (``t(t(x))`` is ``x``).
_TRANSPOSES = frozenset({"aten.t.default", "aten.transpose.int", "aten.permute.default"})

#: Longest chain of views followed back to the root.
_MAX_CHAIN = 16


def same_bytes_root(graph: Graph, value: int) -> int | None:
    """The node whose storage ``value`` is, element for element in the same order, through
    reshaping views and transposes that cancel; ``value`` itself when it is no view. None
    when some view on the way changes which bytes or their order (a slice, a transpose left
    standing, a dtype view), or the chain is longer than any real one."""
    nodes = graph.nodes
    chain = [value]
    while nodes[chain[-1]].alias_of is not None:
        if len(chain) > _MAX_CHAIN:
            return None
        chain.append(nodes[chain[-1]].alias_of)
    root = nodes[chain[-1]]
    if len(root.outputs) != 1:
        return None
    meta = root.outputs[0]
    order = list(range(len(meta.shape)))  # which root dimension each current one is
    for i in reversed(chain[:-1]):
        node = nodes[i]
        out = node.outputs[0] if len(node.outputs) == 1 else None
        if node.kind is not NodeKind.VIEW or node.mutates or out is None \
                or out.dtype != meta.dtype or out.numel != meta.numel:
            return None
        if node.op in RESHAPING_VIEWS:
            if order != sorted(order):
                return None  # a reshape of a transposed tensor reads it out of order
            order = list(range(len(out.shape)))
        elif node.op in _TRANSPOSES:
            order = _transposed(node, order)
            if order is None:
                return None
        else:
            return None
    return root.index if order == sorted(order) else None


def _transposed(node: Node, order: list[int]) -> list[int] | None:
    """``order`` after the transpose ``node``; None when its dimensions are not plain ints."""
    ndim = len(order)
    if node.op == "aten.t.default":
        return order[::-1] if ndim == 2 else order
    if node.op == "aten.transpose.int":
        dims = node.args[1:3]
    else:  # permute
        dims = node.args[1] if len(node.args) > 1 else None
    if not isinstance(dims, (list, tuple)) or not all(type(d) is int and -ndim <= d < ndim for d in dims):
        return None
    dims = [d % ndim for d in dims] if ndim else []
    if node.op == "aten.transpose.int":
        if len(dims) != 2:
            return None
        a, b = dims
        order = list(order)
        order[a], order[b] = order[b], order[a]
        return order
    if sorted(dims) != list(range(ndim)):
        return None
    return [order[d] for d in dims]
