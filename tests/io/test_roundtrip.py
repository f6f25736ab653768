"""Every sample: .pt2 -> IR -> .pt2 and .json -> IR -> .json, in the original and a new order."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from commopt.io import load_graph, save_graph
from commopt.io.json_graph import save_json_graph
from commopt.ir.graph import NodeKind
from commopt.synth import late_first_order

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs"
PT2 = sorted(SAMPLES.glob("ws*/*.pt2"))
JSON = sorted(SAMPLES.glob("ws*/*.json"))
IDS = lambda p: f"{p.parent.name}/{p.name}"  # noqa: E731


@functools.cache
def _loaded(path: Path):
    """Each sample loaded once per session (graphs are never mutated)."""
    return load_graph(path)


def _summary(graph):
    return [
        (n.name, n.kind, n.op, n.inputs, n.outputs, n.collective, n.wait_of, n.alias_of, n.mutates,
         n.side_effect, n.args, n.kwargs, n.attrs)
        for n in graph.nodes
    ]


def test_every_sample_is_committed_in_both_sets():
    names = {(p.parent.name, p.stem) for p in PT2}
    for s in ("ws8", "ws2"):
        for name in ("fsdp", "tp", "ddp", "mesh2d", "moe", "llama_tp"):
            assert (s, name) in names
            assert (SAMPLES / s / f"{name}.json").is_file()
    # the toy sets stay small; sample_graphs/realistic/ has its own budget (tests/test_realistic_graphs.py)
    total = sum(p.stat().st_size for s in ("ws8", "ws2") for p in (SAMPLES / s).rglob("*") if p.is_file())
    assert total < 5 * 1024 * 1024


@pytest.mark.parametrize("path", PT2, ids=IDS)
def test_pt2_roundtrip_keeps_the_graph(path, tmp_path):
    graph = _loaded(path)
    assert graph.source_format == "pt2"
    assert any(n.kind is NodeKind.COLLECTIVE for n in graph.nodes)
    assert all(g.ranks is not None for g in graph.groups.values())
    out = tmp_path / path.name
    save_graph(graph, out)
    again = load_graph(out)
    assert _summary(again) == _summary(graph)
    assert again.groups == graph.groups
    assert (again.world_size, again.mesh) == (graph.world_size, graph.mesh)


@pytest.mark.parametrize("path", PT2, ids=IDS)
def test_pt2_written_in_a_new_order_follows_it(path, tmp_path):
    graph = _loaded(path)
    order = late_first_order(graph)
    assert order != graph.original_order
    out = tmp_path / path.name
    save_graph(graph, out, order)
    again = load_graph(out)
    fixed = ("placeholder", "output", "_operator.getitem")
    moved = [graph.nodes[i].name for i in order if graph.nodes[i].op not in fixed]
    got = [n.name for n in again.nodes if n.op not in fixed]
    assert got == moved
    for n in again.nodes:  # a getitem follows its multi-output op (or a sibling getitem)
        if n.op == "_operator.getitem" and again.nodes[n.inputs[0]].kind is not NodeKind.INPUT:
            between = again.nodes[n.inputs[0] + 1 : n.index]
            assert all(m.op == "_operator.getitem" for m in between)
    assert {n.name: n.kind for n in again.nodes} == {n.name: n.kind for n in graph.nodes}


@pytest.mark.parametrize("path", JSON, ids=IDS)
def test_json_roundtrip_is_byte_identical(path, tmp_path):
    graph = load_graph(path)
    out = tmp_path / path.name
    save_graph(graph, out)
    assert out.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("path", JSON, ids=IDS)
def test_json_written_in_a_new_order_follows_it(path, tmp_path):
    graph = load_graph(path)
    order = late_first_order(graph)
    out = tmp_path / path.name
    save_graph(graph, out, order)
    again = load_graph(out)
    assert [n.name for n in again.nodes] == [graph.nodes[i].name for i in order]
    by_name = {n.name: n for n in again.nodes}
    for n in graph.nodes:
        m = by_name[n.name]
        assert (m.kind, m.op, m.collective, m.outputs) == (n.kind, n.op, n.collective, n.outputs)


@pytest.mark.parametrize("path", PT2, ids=IDS)
def test_committed_json_is_the_conversion_of_the_pt2(path, tmp_path):
    out = tmp_path / f"{path.stem}.json"
    from_pt2 = _loaded(path)
    save_json_graph(from_pt2, out)
    assert out.read_bytes() == path.with_suffix(".json").read_bytes()
    from_json = load_graph(path.with_suffix(".json"))
    assert [(n.name, n.kind, n.collective) for n in from_json.nodes] == [
        (n.name, n.kind, n.collective) for n in from_pt2.nodes
    ]
    assert from_json.groups == from_pt2.groups


def test_a_json_graph_cannot_be_written_as_pt2(tmp_path):
    from commopt.errors import OptionError

    graph = load_graph(SAMPLES / "ws2" / "tp.json")
    with pytest.raises(OptionError, match="write it as .json"):
        save_graph(graph, tmp_path / "tp.pt2")
    assert list(tmp_path.iterdir()) == []


def test_load_graph_accepts_an_exported_program_in_memory():
    import torch

    ep = torch.export.load(str(SAMPLES / "ws2" / "moe.pt2"))
    graph = load_graph(ep, mesh="ep=2")
    assert graph.payload is ep and graph.source_format == "pt2"
    assert graph.groups["0"].ranks == (0, 1)
    assert [n.name for n in graph.nodes] == [n.name for n in _loaded(SAMPLES / "ws2" / "moe.pt2").nodes]


def test_load_graph_rejects_other_objects():
    from commopt.errors import OptionError

    with pytest.raises(OptionError, match="cannot load a dict"):
        load_graph({"nodes": []})
