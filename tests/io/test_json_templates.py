"""A JSON graph as commopt writes it is read through its node templates into exactly the
graph (and the error) that parsing it whole gives, and written back byte for byte."""

from __future__ import annotations

import copy
import json
import random

import pytest

import commopt.io.json_templates as json_templates
from commopt.errors import GraphError
from commopt.io.json_graph import dumps_document, load_json_graph, save_json_graph
from commopt.io.json_templates import lined_graph

from .test_json_fast_path import EVERY_FIELD, _docs, _mutated, _summary


def _outcome(path):
    try:
        graph = load_json_graph(path)
    except GraphError as exc:
        return exc.message, exc.node, exc.field
    out = path.with_name("written.json")
    save_json_graph(graph, out)
    return _summary(graph), graph.payload, out.read_text()


def _both(path, monkeypatch):
    """What loading ``path`` gives through the templates, and parsing it whole."""
    lined = _outcome(path)
    with monkeypatch.context() as m:
        m.setattr(json_templates, "lined_graph", lambda text, file, name: None)
        parsed = _outcome(path)
    return lined, parsed


@pytest.mark.parametrize("raw", _docs(), ids=lambda d: d.get("name", "graph"))
def test_a_written_graph_is_read_through_templates_as_parsing_reads_it(raw, tmp_path, monkeypatch):
    text = dumps_document(raw)
    assert lined_graph(text, "g.json", "g") is not None
    path = tmp_path / "g.json"
    path.write_text(text)
    lined, parsed = _both(path, monkeypatch)
    assert lined == parsed
    assert lined[2] == text  # written back as read


@pytest.mark.parametrize("seed", range(3))
def test_odd_written_documents_give_the_graph_or_error_parsing_gives(seed, tmp_path, monkeypatch):
    from commopt.io.json_graph import graph_to_document
    from commopt.synth import fsdp_tp_stack

    rng = random.Random(seed)
    base = [copy.deepcopy(EVERY_FIELD), graph_to_document(fsdp_tp_stack(1, dp=2, hidden=16, tokens=8))]
    path = tmp_path / "g.json"
    for _ in range(150):
        doc = _mutated(rng.choice(base), rng)
        try:
            text = dumps_document(doc)
        except (ValueError, RecursionError):
            continue
        path.write_text(text)
        lined, parsed = _both(path, monkeypatch)
        assert lined == parsed, text[:2000]


@pytest.mark.parametrize("edit", [
    lambda t: t.replace('"name": "x"', '"name":  "x"'),  # spacing the writer does not use
    lambda t: t.replace('"name": "x"', '"name": "\\u0078"'),  # an escape
    lambda t: t.replace('"duration_us": 3', '"duration_us": 3.0e0'),  # a number spelt otherwise
    lambda t: t.replace('"op": "placeholder"', '"op": "placeholder", "op": "placeholder"'),
    lambda t: t.replace(",\n    ", ", ", 1),  # two nodes on a line
    lambda t: t.replace('\n  "nodes": [', '\n  "nodes":  ['),
    lambda t: t[:-1],  # no final newline
    lambda t: t.replace('"name": "x"', '"name": ""').replace('"ref": "x"', '"ref": ""'),
])
def test_a_document_not_as_the_writer_writes_it_is_parsed(edit, tmp_path, monkeypatch):
    """A document laid out otherwise than the writer does, or with an empty name (which
    parsing refuses), is parsed, as before."""
    text = edit(dumps_document(copy.deepcopy(EVERY_FIELD)))
    assert text != dumps_document(copy.deepcopy(EVERY_FIELD))
    assert lined_graph(text, "g.json", "g") is None
    path = tmp_path / "g.json"
    path.write_text(text)
    lined, parsed = _both(path, monkeypatch)
    assert lined == parsed


def test_names_in_free_values_and_repeated_references_are_stamped_per_node(tmp_path, monkeypatch):
    doc = copy.deepcopy(EVERY_FIELD)
    doc["nodes"][1]["attrs"] = {"name": "buf", "nested": [{"ref": "x"}], "filename": "f.py",
                                "part_of": "y"}
    doc["nodes"][6]["kwargs"] = {"name": "r", "other": {"ref": "x"}, "module_name": "m"}
    text = dumps_document(doc)
    graph = lined_graph(text, "g.json", "g")
    assert graph is not None
    assert graph.nodes[1].attrs == {"name": "buf", "nested": [{"ref": "x"}], "filename": "f.py",
                                    "part_of": "y"}
    assert graph.nodes[6].kwargs["name"] == "r" and graph.nodes[6].kwargs["module_name"] == "m"
    assert json.loads(text)["nodes"][6]["kwargs"]["other"] == {"ref": "x"}
    path = tmp_path / "g.json"
    path.write_text(text)
    lined, parsed = _both(path, monkeypatch)
    assert lined == parsed
