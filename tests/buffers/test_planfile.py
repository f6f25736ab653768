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
