"""The runner's check before it is written (commopt.codegen.render.check_source): the code is
compiled, the tables (STEPS and the others) are checked to be plain data."""

from __future__ import annotations

import dataclasses
import enum
import importlib
from pathlib import Path

import pytest

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
def test_checked_data_renders_a_script_that_compiles(sample):
    model = _model(SAMPLES / sample)
    render.check_source(model, "run.py")
    compile(render.render(model), "run.py", "exec")


class _Size(enum.IntEnum):
    FOUR = 4


@pytest.mark.parametrize("bad", [_Size.FOUR, float("nan"), {1, 2}, {1: "key not a str"}, b"x"])
def test_values_that_are_not_plain_data_are_refused(bad):
    model = _model(SAMPLES / "ws2" / "fsdp.pt2")
    node, name, kind, reads, *rest = model.steps[-1]
    broken = dataclasses.replace(model, steps=[*model.steps[:-1],
                                               (node, name, kind, reads, [bad])])
    with pytest.raises(AssertionError, match="runner's data"):
        render.check_source(broken, "run.py")


def test_plain_data_passes():
    render.check_data([(1, "a", None, True, 2.5, [("v", 3)], {"k": [1, (2,)]})])


def test_a_bad_value_deep_in_a_large_table_is_refused():
    # over 4,096 values a level: checked in blocks, each down to its last level
    rows = [(k, "n", "op", (k,), "relu", [{"v": k}], {}) for k in range(5000)]
    render.check_data(rows)
    rows[4321] = (4321, "n", "op", (4321,), "relu", [{"v": 4321, 7: "key not a str"}], {})
    with pytest.raises(AssertionError, match="runner's data"):
        render.check_data(rows)
