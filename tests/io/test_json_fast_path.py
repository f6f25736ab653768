"""The JSON loader's fast path builds exactly what the pydantic path builds, and defers to it
for anything it does not accept unchanged."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from commopt.errors import GraphError
from commopt.io.json_graph import (
    _fast_graph,
    graph_from_document,
    graph_from_model,
    graph_to_document,
)
from commopt.ir.args import Symbol
from commopt.ir.graph import CollectiveInfo, Node, NodeKind, Ref, TensorMeta
from commopt.schemas.graph import GraphDocument
from commopt.synth import fsdp_tp_stack

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs"

_T = {"dtype": "float32", "shape": [4]}
#: every field of every model, set (where it can be) to a value no other field of its type has
EVERY_FIELD = {
    "format": "commopt-graph", "version": 1, "name": "every_field", "world_size": 4,
    "mesh": {"dp": 2, "tp": 2},
    "process_groups": [{"name": "tp", "size": 2, "ranks": [0, 1], "mesh_dim": "tp"}],
    "nodes": [
        {"name": "x", "kind": "input", "op": "placeholder", "outputs": [
            {"dtype": "float32", "shape": [4], "max_shape": [5], "logical_shape": [9], "placements": ["S(0)", "R"]}]},
        {"name": "buf", "kind": "input", "op": "placeholder", "outputs": [_T]},
        {"name": "ar", "kind": "collective", "op": "_c10d_functional.all_reduce.default",
         "args": [{"ref": "x"}, "sum", "tp"], "outputs": [_T],
         "collective": {"type": "all_reduce", "group": "tp", "reduce_op": "sum", "in_bytes": 16, "out_bytes": 20,
                        "coalesced": True, "in_place": False}},
        {"name": "w", "kind": "wait", "op": "_c10d_functional.wait_tensor.default", "args": [{"ref": "ar"}],
         "wait_of": "ar", "alias_of": "ar", "outputs": [_T]},
        {"name": "v", "kind": "view", "op": "aten.view.default", "args": [{"ref": "w"}, [2, 2]], "alias_of": "w",
         "outputs": [{"dtype": "float32", "shape": [2, 2]}]},
        {"name": "c", "kind": "compute", "op": "aten.add_.Tensor", "inputs": ["buf", "v"],
         "args": [{"ref": "buf"}, [1, [2.5, {"ref": "x"}]], {"float": "-inf"}],
         "kwargs": {"dtype": {"dtype": "bfloat16"}, "alpha": {"ref": "v"}}, "mutates": ["buf"], "side_effect": True,
         "duration_us": 3, "attrs": {"role": "update"}, "outputs": [_T]},
        {"name": "r", "kind": "compute", "op": "aten.rand.default", "args": [[4]], "rng": True, "duration_us": 1.5,
         "outputs": [_T]},
        {"name": "out", "kind": "output", "op": "output", "args": [[{"ref": "c"}, {"ref": "r"}]]},
    ],
    "meta": {"note": "every field"},
}


def _summary(graph):
    return (
        [(n.index, n.name, n.kind, n.op, n.inputs, n.outputs, n.args, n.kwargs, n.collective, n.wait_of,
          n.alias_of, n.mutates, n.side_effect, n.duration_us, n.attrs) for n in graph.nodes],
        graph.groups, graph.name, graph.world_size, graph.mesh, graph.meta, graph.ordering_edges,
    )


def _docs():
    docs = [json.loads(p.read_text()) for p in sorted(SAMPLES.glob("ws*/*.json"))]
    docs.append(graph_to_document(fsdp_tp_stack(3, dp=4, tp=2, hidden=64, tokens=32)))
    docs.append(copy.deepcopy(EVERY_FIELD))
    return docs


@pytest.mark.parametrize("raw", _docs(), ids=lambda d: d.get("name", "graph"))
def test_fast_path_equals_pydantic_path(raw):
    fast = _fast_graph(raw, "f.json")
    assert fast is not None
    slow = graph_from_model(GraphDocument.model_validate(raw), file="f.json")
    assert _summary(fast) == _summary(slow)


def test_values_pydantic_would_coerce_take_the_pydantic_path():
    raw = graph_to_document(fsdp_tp_stack(1, dp=2, hidden=16, tokens=8))
    odd = copy.deepcopy(raw)
    odd["nodes"][3]["duration_us"] = "2.5"  # a string: pydantic (lax) reads 2.5
    assert _fast_graph(odd, None) is None
    graph = graph_from_document(odd)
    assert graph.nodes[3].duration_us == 2.5


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d["nodes"][1].update(extra_key=1), "$.nodes[1].extra_key"),
        (lambda d: d["nodes"][2]["outputs"][0].update(shape=["x"]), "$.nodes[2].outputs[0].shape[0]"),
        (lambda d: d["nodes"][2].update(side_effect="maybe"), "$.nodes[2].side_effect"),
        (lambda d: d["process_groups"][0].update(size=0), "$.process_groups[0].size"),
    ],
)
def test_invalid_documents_are_worded_by_pydantic(edit, field):
    raw = graph_to_document(fsdp_tp_stack(1, dp=2, hidden=16, tokens=8))
    edit(raw)
    with pytest.raises(GraphError) as exc:
        graph_from_document(raw, file="g.json")
    assert exc.value.field == field and "schema violation" in exc.value.message


def test_every_field_takes_the_fast_path_into_its_attribute():
    """The loader passes Node's fields by position: a field moved in Node shows here."""
    graph = _fast_graph(copy.deepcopy(EVERY_FIELD), "f.json")
    assert graph is not None
    t4 = TensorMeta("float32", (4,))
    assert graph.nodes == [
        Node(index=0, name="x", kind=NodeKind.INPUT, op="placeholder",
             outputs=(TensorMeta("float32", (4,), max_shape=(5,), logical_shape=(9,), placements=("S(0)", "R")),)),
        Node(index=1, name="buf", kind=NodeKind.INPUT, op="placeholder", outputs=(t4,)),
        Node(index=2, name="ar", kind=NodeKind.COLLECTIVE, op="_c10d_functional.all_reduce.default", inputs=(0,),
             outputs=(t4,), args=(Ref(0), "sum", "tp"),
             collective=CollectiveInfo("all_reduce", "tp", reduce_op="sum", in_bytes=16, out_bytes=20,
                                       coalesced=True, in_place=False)),
        Node(index=3, name="w", kind=NodeKind.WAIT, op="_c10d_functional.wait_tensor.default", inputs=(2,),
             outputs=(t4,), args=(Ref(2),), wait_of=2, alias_of=2),
        Node(index=4, name="v", kind=NodeKind.VIEW, op="aten.view.default", inputs=(3,),
             outputs=(TensorMeta("float32", (2, 2)),), args=(Ref(3), [2, 2]), alias_of=3),
        Node(index=5, name="c", kind=NodeKind.COMPUTE, op="aten.add_.Tensor", inputs=(1, 4, 0), outputs=(t4,),
             args=(Ref(1), [1, [2.5, Ref(0)]], float("-inf")),
             kwargs={"dtype": Symbol("dtype", "bfloat16"), "alpha": Ref(4)}, mutates=(1,), side_effect=True,
             duration_us=3.0, attrs={"role": "update"}),
        Node(index=6, name="r", kind=NodeKind.COMPUTE, op="aten.rand.default", outputs=(t4,), args=([4],), rng=True,
             duration_us=1.5),
        Node(index=7, name="out", kind=NodeKind.OUTPUT, op="output", inputs=(5, 6), args=([Ref(5), Ref(6)],)),
    ]
    assert type(graph.nodes[5].duration_us) is float


def test_equal_tensors_references_and_collectives_are_one_object():
    graph = _fast_graph(graph_to_document(fsdp_tp_stack(2, dp=2, hidden=16, tokens=8)), None)
    values = [v for n in graph.nodes for v in (n.outputs, *n.outputs, n.collective, *n.args)
              if v is not None and type(v) in (tuple, TensorMeta, CollectiveInfo, Ref)]
    first: dict = {}
    assert all(first.setdefault(v, v) is v for v in values)
    assert len(first) < len(values) / 2  # most repeat


def test_a_duplicate_name_is_named_where_it_repeats():
    raw = copy.deepcopy(EVERY_FIELD)
    raw["nodes"][6]["name"] = "buf"
    with pytest.raises(GraphError) as exc:
        graph_from_document(raw, file="g.json")
    assert (exc.value.message, exc.value.node, exc.value.field) == ("duplicate node name", "buf", "$.nodes[6].name")


# Values a mutation puts somewhere in a document: each type the schema tells apart, numbers
# pydantic coerces, names that are and are not nodes, and free values too deep or not finite.
_ODD_VALUES = [
    None, True, False, 0, 1, -1, 1.0, 2.5, -0.5, float("inf"), float("nan"), 10**20, "", "x",
    "ar", "sum", "tp", "float32", "all_reduce", "compute", "collective", [], [1], [True, 4],
    [1.0, 4], ["x"], ["nope"], {}, {"ref": "x"}, {"ref": "nope"}, {"ref": 1}, {"float": "inf"},
    {"dtype": "bfloat16"}, {"kwargs": {"a": [float("-inf")]}}, {"dtype": "float32", "shape": [4]},
    {"extra": 1}, [[[[1]]]],
]


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def _places(value, loc=()):
    """Every location inside ``value`` (dict keys and list positions), as key paths."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*loc, k)
            yield from _places(v, (*loc, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield (*loc, i)
            yield from _places(v, (*loc, i))


def _mutated(raw, rng):
    """``raw`` with one random change: a value replaced, a field dropped or an unknown one
    added; inside a node (one chosen first, so that each node's fields are often hit) or,
    one time in five, anywhere."""
    doc = copy.deepcopy(raw)
    places = [p for p in _places(doc) if p[0] not in ("format", "version")]
    if rng.random() < 0.8:
        node = rng.randrange(len(doc["nodes"]))
        places = [p for p in places if p[:2] == ("nodes", node) and len(p) > 2]
    *parent_loc, last = rng.choice(places)
    parent = doc
    for k in parent_loc:
        parent = parent[k]
    action = rng.random()
    if action < 0.1 and isinstance(parent, dict):
        del parent[last]
    elif action < 0.15 and isinstance(parent, dict):
        parent["unknown_field"] = 1
    elif action < 0.2:
        parent[last] = _deep(rng.choice([1, 95, 97, 98, 120]))
    else:
        parent[last] = copy.deepcopy(rng.choice(_ODD_VALUES))
    return doc


#: Free values (meta, attrs, args, kwargs) too deep or not finite, and a negative duration.
_FREE_VALUE_EDITS = [
    lambda d: d["meta"].update(deep=_deep(99)),
    lambda d: d["meta"].update(deep=_deep(98)),
    lambda d: d["meta"].update(x=[float("inf")]),
    lambda d: d["nodes"][5]["attrs"].update(x={"y": float("nan")}),
    lambda d: d["nodes"][5]["attrs"].update(x=_deep(97)),
    lambda d: d["nodes"][5]["attrs"].update(x=_deep(96)),
    lambda d: d["nodes"][5]["kwargs"].update(x=_deep(96)),
    lambda d: d["nodes"][5]["kwargs"].update(x=[{"ref": "x"}, _deep(96)]),
    lambda d: d["nodes"][5]["args"].append(_deep(95) + [{"ref": "x"}]),
    lambda d: d["nodes"][5]["args"].append(_deep(96) + [{"ref": "x"}]),
    lambda d: d["nodes"][5]["args"].append({"kwargs": {"a": _deep(96)}}),
    lambda d: d["nodes"][5]["args"].append({"kwargs": {"a": float("-inf")}}),
    lambda d: d["nodes"][5]["kwargs"].update(x=float("inf")),
    lambda d: d["nodes"][5].update(duration_us=-0.5),
    lambda d: d["nodes"][5].update(duration_us=float("nan")),
]


def _edited_every_field(edit):
    doc = copy.deepcopy(EVERY_FIELD)
    edit(doc)
    return doc


def _outcome(raw):
    try:
        graph = graph_from_document(raw, file="f.json")
    except GraphError as exc:
        return exc.message, exc.node, exc.field
    return _summary(graph)


@pytest.mark.parametrize("seed", range(4))
def test_fast_path_gives_the_checked_paths_graph_or_error_for_odd_documents(seed, monkeypatch):
    """Whatever a document holds, the fast path builds the graph, or reports the error, that
    the checked path (free values, then pydantic, then the build) does."""
    import random

    import commopt.io.json_graph as json_graph

    rng = random.Random(seed)
    base = [copy.deepcopy(EVERY_FIELD), graph_to_document(fsdp_tp_stack(1, dp=2, hidden=16, tokens=8))]
    docs = [_mutated(rng.choice(base), rng) for _ in range(400)]
    docs += [_edited_every_field(edit) for edit in _FREE_VALUE_EDITS]
    fast = [_outcome(copy.deepcopy(d)) for d in docs]
    monkeypatch.setattr(json_graph, "_fast_graph", lambda raw, file: None)
    checked = [_outcome(copy.deepcopy(d)) for d in docs]
    for doc, f, c in zip(docs, fast, checked, strict=True):
        assert f == c, json.dumps(doc, default=str)[:2000]


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["nodes"][3].update(args=[{"ref": "nope"}]), "refers to unknown node 'nope'"),
    (lambda d: d["nodes"][6].update(name="buf"), "duplicate node name"),
    (lambda d: d["nodes"][6].update(args=[{"nope": 1}]), "unknown argument object 'nope'"),
])
def test_an_error_in_a_plain_document_needs_no_pydantic_walk(edit, message, monkeypatch):
    """Reading goes on past an error in the names to check the nodes after it, so a plain
    document's error is reported without pydantic validating every node (seconds at 100,000)."""
    raw = copy.deepcopy(EVERY_FIELD)
    edit(raw)

    def refuse(*args, **kwargs):
        raise AssertionError("pydantic was asked")

    monkeypatch.setattr(GraphDocument, "model_validate", refuse)
    with pytest.raises(GraphError) as exc:
        graph_from_document(raw, file="g.json")
    assert message in exc.value.message
