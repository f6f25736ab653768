"""The estimator chain and name resolution."""

from __future__ import annotations

import pytest

from commopt.errors import OptionError
from commopt.estimators import EstimatorError, EstimatorOptions, resolve
from commopt.estimators.base import FILE_SOURCE, ZERO_SOURCE, EstimatorChain
from commopt.ir.builder import GraphBuilder


def _graph():
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (64, 64))
    y = b.compute("y", "aten.relu.default", [x], (64, 64))
    z = b.compute("z", "aten.relu.default", [y], (64, 64), duration_us=42.0)
    c = b.collective("ar", "all_reduce", "g", z)
    w = b.wait("w", c)
    v = b.view("v", w, (4096,))
    b.output([v])
    return b.build()


class Fixed:
    """Gives every compute node the same duration (a test estimator)."""

    name = "fixed"

    def __init__(self, options=None):  # an estimator factory takes the EstimatorOptions
        self.options = options

    def estimate(self, node, graph):
        return 7.0 if node.kind.label == "compute" else None


class Broken:
    name = "broken"

    def __init__(self, options=None):  # an estimator factory takes the EstimatorOptions
        self.options = options

    def estimate(self, node, graph):
        raise KeyError("boom")


def test_chain_rules_then_estimators_in_order():
    g = _graph()
    chain = resolve("tests.estimators.test_chain:Fixed")
    assert chain.name == "fixed,analytical"
    d = chain.durations(g)
    assert d[g.index_of["y"]] == 7.0
    assert d[g.index_of["z"]] == 42.0  # the graph file wins
    assert d[g.index_of["ar"]] > 0 and chain.sources[g.index_of["ar"]] == "analytical"
    for name in ("x", "w", "v", "output"):
        assert d[g.index_of[name]] == 0.0 and chain.sources[g.index_of[name]] == ZERO_SOURCE
    assert chain.sources[g.index_of["z"]] == FILE_SOURCE
    assert chain.sources[g.index_of["y"]] == "fixed"


def test_a_chain_always_ends_with_analytical():
    assert [e.name for e in resolve("analytical").estimators] == ["analytical"]
    assert resolve("tests.estimators.test_chain:Fixed").estimators[-1].name == "analytical"


def test_an_estimator_that_raises_is_named_with_the_node():
    g = _graph()
    chain = EstimatorChain([Broken()])
    with pytest.raises(EstimatorError) as err:
        chain.durations(g)
    assert "node 'y'" in str(err.value) and "'broken' failed: KeyError" in str(err.value)


def test_unknown_names_suggest_the_closest():
    with pytest.raises(OptionError, match="did you mean 'profile'"):
        resolve("profle")
    with pytest.raises(OptionError, match="cannot load estimator 'nope.mod:x'"):
        resolve("nope.mod:x")
    with pytest.raises(OptionError, match="empty"):
        resolve(" , ")


def test_options_pass_through_to_builtins():
    chain = resolve("analytical", EstimatorOptions(hardware="a100", gpus_per_node=4))
    est = chain.estimators[0]
    assert est.hw.name.startswith("NVIDIA A100") and est.gpus_per_node == 4
    assert resolve(options=EstimatorOptions(), hardware="b200").estimators[0].hw.name == "NVIDIA B200"


def test_an_unused_profile_or_table_is_noted(tmp_path):
    table = tmp_path / "t.json"
    table.write_text("{}")
    chain = resolve("analytical", EstimatorOptions(table=str(table)))
    assert any("--table" in n and "is not used" in n for n in chain.notes)
    assert not resolve("table", EstimatorOptions(table=str(table))).notes


class WithOptions:
    name = "with-options"

    def __init__(self, options=None):
        self.options = options

    def estimate(self, node, graph):
        return None


def test_factories_get_the_options_by_name():
    chain = resolve("tests.estimators.test_chain:WithOptions", EstimatorOptions(hardware="b200"))
    assert chain.estimators[0].options.hardware == "b200"
