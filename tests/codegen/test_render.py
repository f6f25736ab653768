"""The runner's syntax check in pieces (commopt.codegen.render.syntax_pieces)."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import pytest

from commopt import codegen
from commopt.buffers import plan_buffers
from commopt.codegen.model import build_model
from commopt.io import load_graph

# the module (the package exports a function of the same name)
render = importlib.import_module("commopt.codegen.render")

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs"


def _model(path: Path):
    g = load_graph(path)
    order = list(g.original_order)
    return build_model(g, order, plan_buffers(g, order))


@pytest.mark.parametrize("sample", ["ws2/fsdp.pt2", "ws8/mesh2d.pt2"])
def test_pieces_cover_every_statement_and_compile(sample, monkeypatch):
    monkeypatch.setattr(render, "SYNTAX_CHUNK_STATEMENTS", 7)  # many cuts on a small graph
    model = _model(SAMPLES / sample)
    pieces = list(render.syntax_pieces(model))
    assert len(pieces) > 3
    for piece in pieces:
        compile(piece, "run.py", "exec")
    bodies = "".join(p.split("\n", 1)[1] for p in pieces[1:])
    assert bodies == "".join(f"    {line}\n" for line in [*model.optimized, *model.original])


def test_a_bad_statement_is_reported_at_its_line_in_the_script(monkeypatch):
    monkeypatch.setattr(render, "SYNTAX_CHUNK_STATEMENTS", 7)
    model = _model(SAMPLES / "ws2" / "fsdp.pt2")
    bad = dataclasses.replace(model, optimized=[*model.optimized[:10], "x = = 1", *model.optimized[10:]])
    source = render.render(bad)
    with pytest.raises(SyntaxError) as info:
        codegen._check_compiles(bad, source, "run.py", None)
    assert source.splitlines()[info.value.lineno - 1].strip() == "x = = 1"
