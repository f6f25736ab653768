"""same_bytes_root: which views of an op's result are its bytes in order (zero-copy through
views), on hand-built chains and on the real-model corpus."""

from __future__ import annotations

import pytest

from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import NodeKind, Ref
from commopt.ir.layout import same_bytes_root
from tests.corpus.graphs import CORPUS


def _chain(*views):
    """mm (4, 8) followed by ``views``: (name, op, shape, extra args) each; returns the graph
    and the index of the last value."""
    b = GraphBuilder(world_size=2)
    x = b.input("x", (4, 8))
    w = b.input("w", (8, 8))
    v = b.compute("mm", "aten.mm.default", [x, w], (4, 8))
    for name, op, shape, extra in views:
        v = b.view(name, v, shape, op=op, args=(Ref(v), *extra))
    return b.build(), v


def test_the_op_itself_and_reshaping_views_are_its_bytes():
    graph, v = _chain()
    assert same_bytes_root(graph, v) == graph.index_of["mm"]
    graph, v = _chain(("flat", "aten.view.default", (32,), ([32],)),
                      ("back", "aten._unsafe_view.default", (2, 16), ([2, 16],)),
                      ("u", "aten.unsqueeze.default", (1, 2, 16), (0,)))
    assert same_bytes_root(graph, v) == graph.index_of["mm"]


def test_transposes_count_only_when_they_cancel():
    graph, v = _chain(("t1", "aten.t.default", (8, 4), ()), ("t2", "aten.t.default", (4, 8), ()),
                      ("flat", "aten.view.default", (32,), ([32],)))
    assert same_bytes_root(graph, v) == graph.index_of["mm"]  # SimpleFSDP's view(t(t(mm)))
    graph, v = _chain(("t1", "aten.transpose.int", (8, 4), (0, 1)),
                      ("t2", "aten.permute.default", (4, 8), ([1, 0],)))
    assert same_bytes_root(graph, v) == graph.index_of["mm"]
    graph, v = _chain(("t1", "aten.transpose.int", (8, 4), (-1, -2)))
    assert same_bytes_root(graph, v) is None  # a transpose left standing reorders the bytes
    graph, v = _chain(("t1", "aten.t.default", (8, 4), ()), ("flat", "aten.view.default", (32,), ([32],)))
    assert same_bytes_root(graph, v) is None  # a reshape of a transposed tensor reads out of order


def test_views_that_move_or_reinterpret_bytes_are_not():
    graph, v = _chain(("s", "aten.slice.Tensor", (2, 8), (0, 0, 2)))
    assert same_bytes_root(graph, v) is None  # fewer elements
    graph, v = _chain(("d", "aten.expand.default", (4, 8), ([4, 8],)))
    assert same_bytes_root(graph, v) is None  # not a view that is known to keep the layout
    graph, v = _chain(("t1", "aten.transpose.int", (8, 4), (0, "dim")))
    assert same_bytes_root(graph, v) is None  # a dimension that is not a plain int


@pytest.mark.parametrize("name, ctype, sources", [
    ("llama_tp_L8", "all_reduce", 56),  # view / _unsafe_view of the row-parallel mm
    ("llama_fsdp", "reduce_scatter", 21),  # view(t(t(mm))), view(view(sum)), view(embedding bwd)
    ("llama_fsdp", "all_gather", 0),  # views of parameters: graph inputs, not op results
])
def test_real_collectives_send_their_producers_bytes(name, ctype, sources):
    from commopt.io import load_graph

    graph = load_graph(CORPUS / "ws2" / f"{name}.pt2")
    found = 0
    for c in graph.collectives():
        node = graph.nodes[c]
        if node.collective.type != ctype:
            continue
        root = same_bytes_root(graph, node.inputs[0])
        if root is not None and graph.nodes[root].kind is NodeKind.COMPUTE:
            found += 1
            assert graph.storage_root[node.inputs[0]] == root
    assert found == sources
