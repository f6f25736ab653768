"""The one plug-in registry (commopt.plugins.Registry) that passes and estimators share."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from commopt.errors import OptionError
from commopt.estimators import registry as estimators
from commopt.estimators.options import EstimatorOptions
from commopt.passes import registry as passes
from commopt.plugins import PluginError


class NeedsTwoArguments:
    """A factory that does not follow the rule (one argument: the EstimatorOptions)."""

    name = "two"

    def __init__(self, options, extra):
        pass

    def estimate(self, node, graph):
        return None


class KeepsOptions:
    name = "keeps"

    def __init__(self, options):
        self.options = options

    def estimate(self, node, graph):
        return None


NOT_A_PLUGIN = 42


def test_passes_and_estimators_are_one_registry_type():
    assert type(passes.discover()).__mro__[1].__name__ == "Registry"
    assert type(estimators.registry()).__name__ == "Registry"


def test_a_factory_is_called_with_the_options_and_nothing_is_guessed():
    opts = EstimatorOptions(hardware="b200")
    est = estimators.load_one("tests.test_plugins:KeepsOptions", opts)
    assert est.options is opts
    with pytest.raises(PluginError, match="'tests.test_plugins:NeedsTwoArguments': its factory failed: TypeError"):
        estimators.load_one("tests.test_plugins:NeedsTwoArguments", opts)


def test_a_target_that_is_neither_estimator_nor_factory_is_refused_on_load():
    with pytest.raises(PluginError, match="neither an estimator"):
        estimators.resolve("tests.test_plugins:NOT_A_PLUGIN")


def test_broken_entries_are_listed_with_their_reason_and_the_rest_load():
    reg = estimators.registry([
        EntryPoint("ok", "tests.test_plugins:KeepsOptions", estimators.ENTRY_POINT_GROUP),
        EntryPoint("gone", "no_such_module_xyz:Est", estimators.ENTRY_POINT_GROUP),
        EntryPoint("number", "tests.test_plugins:NOT_A_PLUGIN", estimators.ENTRY_POINT_GROUP),
    ])
    broken = {b.name: b.error for b in reg.check_all()}
    assert set(broken) == {"gone", "number"}
    assert broken["gone"].startswith("failed to import: ModuleNotFoundError")
    assert "neither an estimator" in broken["number"]
    assert reg.load("ok") is KeepsOptions
    with pytest.raises(OptionError, match="no estimator 'analytcal' \\(did you mean 'analytical'\\?\\)"):
        reg.load("analytcal")
