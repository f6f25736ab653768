"""buffer_plan.json: written atomically and byte-stable, read back with located errors."""

from __future__ import annotations

import json

import pytest

from commopt.buffers import load_plan, plan_buffers, plan_json, save_plan
from commopt.errors import GraphError
from commopt.synth import fsdp_tp_stack


@pytest.fixture(scope="module")
def plan():
    return plan_buffers(fsdp_tp_stack(2, dp=2, tp=2, hidden=64, tokens=32))


def test_round_trip_is_byte_identical(plan, tmp_path):
    path = save_plan(plan, tmp_path / "sub" / "buffer_plan.json")
    assert load_plan(path) == plan
    assert path.read_text() == plan_json(load_plan(path))
    assert [p.name for p in path.parent.iterdir()] == ["buffer_plan.json"]  # no temp file left


def test_broken_json_names_line_and_column(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"format": "commopt-buffer-plan",\n  "version": }')
    with pytest.raises(GraphError) as exc:
        load_plan(path)
    assert exc.value.line == 2 and "invalid JSON" in str(exc.value)


def test_schema_violation_names_the_field(plan, tmp_path):
    raw = json.loads(plan_json(plan))
    raw["groups"][0]["buffers"][1]["offset_bytes"] = -512
    path = tmp_path / "p.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(GraphError) as exc:
        load_plan(path)
    assert exc.value.field == "$.groups[0].buffers[1].offset_bytes"


def test_one_line_per_buffer_and_the_same_document_as_the_indented_dump(plan):
    text = plan_json(plan)
    assert json.loads(text) == json.loads(plan.model_dump_json(indent=2))
    lines = text.splitlines()
    for group in plan.groups:
        for buf in group.buffers:
            line = next(ln for ln in lines if ln.lstrip().startswith(f'{{"name": "{buf.name}"'))
            assert json.loads(line.strip().rstrip(",")) == buf.model_dump(mode="json")


def test_a_plan_written_indented_reads_back(plan, tmp_path):
    """Plans written before one-line buffers (the pydantic indented dump) still load."""
    path = tmp_path / "old.json"
    path.write_text(plan.model_dump_json(indent=2) + "\n")
    assert load_plan(path) == plan


def test_a_corpus_plan_with_persistent_params_keeps_its_document(tmp_path):
    from pathlib import Path

    from commopt.io import load_graph

    g = load_graph(Path(__file__).resolve().parents[2] / "sample_graphs/corpus/ws2/llama_fsdp.pt2")
    p = plan_buffers(g, persistent_params="all")
    path = save_plan(p, tmp_path / "buffer_plan.json")
    assert json.loads(path.read_text()) == json.loads(p.model_dump_json())
    assert load_plan(path) == p
