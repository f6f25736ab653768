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
from commopt.schemas.graph import GraphDocument
from commopt.synth import fsdp_tp_stack

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs"


def _summary(graph):
    return (
        [(n.index, n.name, n.kind, n.op, n.inputs, n.outputs, n.args, n.kwargs, n.collective, n.wait_of,
          n.alias_of, n.mutates, n.side_effect, n.duration_us, n.attrs) for n in graph.nodes],
        graph.groups, graph.name, graph.world_size, graph.mesh, graph.meta, graph.ordering_edges,
    )


def _docs():
    docs = [json.loads(p.read_text()) for p in sorted(SAMPLES.glob("ws*/*.json"))]
    docs.append(graph_to_document(fsdp_tp_stack(3, dp=4, tp=2, hidden=64, tokens=32)))
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
