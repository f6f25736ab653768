"""Golden files of generated runners for small graphs (refresh: pytest tests/codegen --update-golden)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from commopt.buffers import plan_buffers
from commopt.codegen import build_model, generate_runner
from commopt.codegen.render import generated_sections, template_text
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


def _cases() -> dict[str, tuple]:
    """Golden name -> (graph, order, plan, backend) of a generated runner."""
    tiny = tiny_graph()
    durations = duration_only_graph()
    order = [0, 1, 2, 3, 4, 5]
    return {
        "run_tiny": (tiny, TINY_REORDERED, plan_buffers(tiny, TINY_REORDERED), None),
        "run_tiny_noplan": (tiny, TINY_REORDERED, None, "gloo"),
        "run_durations": (durations, order, plan_buffers(durations, order), None),
    }


def _sections_text(graph, order, plan, backend) -> str:
    """The generated sections of a runner, each under its template marker: what a golden file
    holds (the template's fixed code is not repeated in every golden file)."""
    sections = generated_sections(build_model(graph, order, plan), backend=backend)
    return "".join(f"# @@{name}@@\n{text}# @@END {name}@@\n" for name, text in sections.items())


@pytest.mark.parametrize("name", ["run_tiny", "run_tiny_noplan", "run_durations"])
def test_generated_sections_match_golden(name: str, update_golden: bool) -> None:
    graph, order, plan, backend = _cases()[name]
    source = _sections_text(graph, order, plan, backend)
    path: Path = GOLDEN / f"{name}.sections.py"
    if update_golden:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
        pytest.skip(f"rewrote {path.name}")
    assert path.exists(), f"no golden {path.name}: run pytest tests/codegen --update-golden"
    want = path.read_text(encoding="utf-8")
    if source != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), source.splitlines(True),
                                            f"golden/{path.name}", "generated", n=2))
        pytest.fail(f"generated {name} differs from its golden file "
                    f"(refresh with --update-golden if intended):\n{diff[:6000]}")


@pytest.mark.parametrize("name", ["run_tiny", "run_tiny_noplan", "run_durations"])
def test_the_script_is_the_template_with_the_generated_sections(name: str) -> None:
    graph, order, plan, backend = _cases()[name]
    script = generate_runner(graph, order, plan, backend=backend)
    sections = generated_sections(build_model(graph, order, plan), backend=backend)
    rebuilt = template_text()
    for section, text in sections.items():
        start = rebuilt.index(f"# @@{section}@@\n")
        end = rebuilt.index(f"# @@END {section}@@\n") + len(f"# @@END {section}@@\n")
        rebuilt = rebuilt[:start] + text + rebuilt[end:]
    assert script == rebuilt
