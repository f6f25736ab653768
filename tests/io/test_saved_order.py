"""The order optimize plans for is the order its written file has when read back (regression:
after a .pt2 save and reload the getitems sit next to their producer, so verify-plan said
"the plan was made for a different order" on real SimpleFSDP graphs)."""

from __future__ import annotations

from pathlib import Path

import pytest

import commopt
from commopt.buffers import validate_plan
from commopt.buffers.planfile import load_plan
from commopt.io import load_graph, saved_order
from commopt.io.pt2 import archive_order

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs"
ARCHIVES = sorted(p.relative_to(SAMPLES).as_posix() for p in SAMPLES.rglob("*.pt2"))


def test_archive_order_puts_inputs_first_and_each_getitem_after_its_op():
    g = load_graph(SAMPLES / "ws2" / "llama_tp.pt2")
    getitems = [n.index for n in g.nodes if n.op.endswith("getitem") and g.nodes[n.inputs[0]].kind.label != "input"]
    assert getitems, "the sample has no getitem of a multi-output op"
    item = getitems[0]
    producer = g.nodes[item].inputs[0]
    first_input = next(n.index for n in g.nodes if n.kind.label == "input")
    # a legal order that runs the getitem late and an input after some compute
    order = [i for i in g.original_order if i not in (item, first_input)]
    order.insert(len(order) - 1, item)
    order.insert(order.index(next(n.index for n in g.nodes if n.kind.label == "compute")) + 1, first_input)
    kept = archive_order(g, order)
    assert kept.index(item) == kept.index(producer) + 1
    assert kept[:5] == [n.index for n in g.nodes if n.kind.label == "input"][:5]
    assert sorted(kept) == g.original_order
    assert saved_order(load_graph(SAMPLES / "ws2" / "llama_tp.json"), order) == order  # JSON keeps it


@pytest.mark.parametrize("archive", ARCHIVES)
def test_written_archive_reloads_in_the_planned_order(archive: str, tmp_path: Path):
    result = commopt.optimize(SAMPLES / archive, output_dir=tmp_path, timings=False)
    written = load_graph(tmp_path / result.summary.output)
    assert [n.name for n in written.nodes] == [result.graph.nodes[i].name for i in result.order]
    assert validate_plan(written, None, load_plan(tmp_path / "buffer_plan.json")) == []


def test_a_traced_graph_without_an_exported_program_keeps_its_order():
    """Regression: a graph from a torch.fx GraphModule (source format pt2, no ExportedProgram)
    made optimize fail with 'only a graph loaded from .pt2 ... can be written as .pt2'."""
    import torch

    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()))
    g = load_graph(gm)
    order = list(reversed(g.original_order))
    assert saved_order(g, order) == order
