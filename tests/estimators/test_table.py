"""The table estimator: JSON and CSV, by name and by op, unknown names reported."""

from __future__ import annotations

import json

import pytest

from commopt.errors import OptionError
from commopt.estimators import EstimatorOptions, resolve
from commopt.estimators.table import load_table
from commopt.ir.builder import GraphBuilder


def _graph():
    b = GraphBuilder()
    x = b.input("x", (8, 8))
    y = b.compute("y", "aten.relu.default", [x], (8, 8))
    z = b.compute("z", "aten.mm.default", [y, y], (8, 8))
    u = b.compute("u", "aten.mm.default", [z, y], (8, 8))
    b.output([u])
    return b.build()


def test_json_by_name_then_op(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"nodes": {"z": 5.0, "ghost": 1.0}, "ops": {"aten.mm": 3.0, "aten.nope": 2}}))
    chain = resolve("table", EstimatorOptions(table=str(p)))
    g = _graph()
    d = chain.durations(g)
    assert d[g.index_of["z"]] == 5.0  # by name beats by op
    assert d[g.index_of["u"]] == 3.0  # by op without overload
    assert chain.sources[g.index_of["y"]] == "analytical"
    (note,) = chain.notes
    assert "2 entries match no node or op" in note and "'ghost'" in note and "'aten.nope'" in note


def test_csv_and_flat_json(tmp_path):
    c = tmp_path / "t.csv"
    c.write_text("op,duration_us\naten.relu.default,1.5\naten.mm,4\n")
    g = _graph()
    d = resolve("table", EstimatorOptions(table=str(c))).durations(g)
    assert (d[g.index_of["y"]], d[g.index_of["z"]]) == (1.5, 4.0)
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"u": 9, "aten.mm": 2}))
    d = resolve("table", EstimatorOptions(table=str(flat))).durations(g)
    assert (d[g.index_of["u"]], d[g.index_of["z"]]) == (9.0, 2.0)


def test_bad_tables(tmp_path):
    c = tmp_path / "t.csv"
    c.write_text("name,duration_us\nz,-1\n")
    with pytest.raises(OptionError, match="line 2 duration_us"):
        load_table(c)
    c.write_text("name,time\nz,1\n")
    with pytest.raises(OptionError, match="'duration_us' column"):
        load_table(c)
    j = tmp_path / "t.json"
    j.write_text('{"nodes": {"z": "fast"}}')
    with pytest.raises(OptionError, match="field nodes.z"):
        load_table(j)
    with pytest.raises(OptionError, match="needs --table"):
        resolve("table")
