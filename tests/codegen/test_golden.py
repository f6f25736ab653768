"""Golden files of generated runners for small graphs (refresh: pytest tests/codegen --update-golden)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from commopt.buffers import plan_buffers
from commopt.codegen import generate_runner
from commopt.io.json_graph import graph_from_document
from commopt.ir.graph import Graph
from tests.codegen.conftest import GOLDEN, TINY_REORDERED, tiny_graph


def duration_only_graph() -> Graph:
    """A JSON graph from another framework: free op labels with durations, one reduce_scatter."""
    doc = {
        "format": "commopt-graph", "version": 1, "name": "durations", "world_size": 2,
        "process_groups": [{"name": "dp", "size": 2, "ranks": [0, 1]}],
        "nodes": [
            {"name": "grad", "kind": "input", "op": "placeholder",
             "outputs": [{"dtype": "bfloat16", "shape": [8, 4]}]},
            {"name": "bwd", "kind": "compute", "op": "backward_kernel", "inputs": ["grad"],
             "duration_us": 40.0, "outputs": [{"dtype": "bfloat16", "shape": [8, 4]}]},
            {"name": "rs", "kind": "collective", "op": "reduce_scatter", "inputs": ["bwd"],
             "collective": {"type": "reduce_scatter", "group": "dp", "reduce_op": "avg",
                            "in_bytes": 64, "out_bytes": 32},
             "outputs": [{"dtype": "bfloat16", "shape": [4, 4]}]},
            {"name": "other", "kind": "compute", "op": "optimizer_kernel", "inputs": ["grad"],
             "duration_us": 25.0, "outputs": [{"dtype": "bfloat16", "shape": [8, 4]}]},
            {"name": "rs_wait", "kind": "wait", "op": "wait", "inputs": ["rs"], "wait_of": "rs",
             "alias_of": "rs", "outputs": [{"dtype": "bfloat16", "shape": [4, 4]}]},
            {"name": "out", "kind": "output", "op": "output", "inputs": ["rs_wait", "other"],
             "args": [[{"ref": "rs_wait"}, {"ref": "other"}]]},
        ],
    }
    return graph_from_document(doc, name_default="durations")


def _cases() -> dict[str, str]:
    tiny = tiny_graph()
    durations = duration_only_graph()
    order = [0, 1, 2, 3, 4, 5]
    return {
        "run_tiny.py": generate_runner(tiny, TINY_REORDERED, plan_buffers(tiny, TINY_REORDERED)),
        "run_tiny_noplan.py": generate_runner(tiny, TINY_REORDERED, None, backend="gloo"),
        "run_durations.py": generate_runner(durations, order, plan_buffers(durations, order)),
    }


@pytest.mark.parametrize("name", ["run_tiny.py", "run_tiny_noplan.py", "run_durations.py"])
def test_generated_script_matches_golden(name: str, update_golden: bool) -> None:
    source = _cases()[name]
    path: Path = GOLDEN / name
    if update_golden:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
        pytest.skip(f"rewrote {path.name}")
    assert path.exists(), f"no golden {path.name}: run pytest tests/codegen --update-golden"
    want = path.read_text(encoding="utf-8")
    if source != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), source.splitlines(True),
                                            f"golden/{name}", "generated", n=2))
        pytest.fail(f"generated {name} differs from its golden file "
                    f"(refresh with --update-golden if intended):\n{diff[:6000]}")
