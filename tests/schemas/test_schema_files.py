"""The committed JSON Schema files match the pydantic models they are generated from."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys

import commopt.schemas
from commopt.schemas.generate import model_modules, render_all, stale_files, write_all


def test_committed_schema_files_are_up_to_date():
    problems = stale_files()
    assert problems == [], "schema files drifted from the models; run `make schemas`: " + "; ".join(problems)


def test_every_schema_module_names_its_root_model():
    modules = {m.name for m in pkgutil.iter_modules(commopt.schemas.__path__)} - {"generate"}
    assert set(model_modules()) == {m for m in modules if not m.startswith("_")}


def test_generation_is_deterministic_under_any_hash_seed():
    code = "import json, sys; from commopt.schemas.generate import render_all; json.dump(render_all(), sys.stdout)"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(out.stdout) == render_all()


def test_drift_is_detected_and_fixed_by_write_all(tmp_path):
    write_all(tmp_path)
    assert stale_files(tmp_path) == []
    (tmp_path / "graph.schema.json").write_text("{}\n")
    (tmp_path / "gone.schema.json").write_text("{}\n")
    assert stale_files(tmp_path) == ["gone.schema.json: no schema module defines it",
                                     "graph.schema.json: out of date"]
    written = write_all(tmp_path)
    assert [p.name for p in written] == ["graph.schema.json"]
    assert stale_files(tmp_path) == [] and not (tmp_path / "gone.schema.json").exists()


def test_the_graph_schema_describes_the_document():
    schema = json.loads(render_all()["graph.schema.json"])
    assert schema["title"] == "GraphDocument" and "nodes" in schema["required"]
