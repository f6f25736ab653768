"""Finding estimators by name: built-ins, entry-point plug-ins and ``module:attr`` one-offs.

A spec is a name (``analytical``), a comma chain (``profile,analytical``), a
``package.module:attr`` reference, or the name of a plug-in registered in the entry-point
group ``commopt.estimators``. Plug-ins are discovered sorted by name; the same name from two
sources is an error naming both; a plug-in that fails to import is listed as broken and
only an error when it is asked for.

A plug-in's entry point (or ``module:attr``) names either an estimator object (it has
``estimate``), or a factory (a class or function) called with one argument, the
:class:`~commopt.estimators.options.EstimatorOptions`. Names are kept in a
:class:`commopt.plugins.Registry`, like the passes.
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

from commopt.errors import CommoptError, OptionError
from commopt.estimators.base import Estimator, EstimatorChain, EstimatorError
from commopt.estimators.options import EstimatorOptions
from commopt.plugins import PluginEntry, PluginError, Registry
from commopt.plugins import discover as discover_plugins

ENTRY_POINT_GROUP = "commopt.estimators"

#: Built-in estimator name -> "module:factory". Factories take EstimatorOptions.
BUILTINS: dict[str, str] = {
    "analytical": "commopt.estimators.analytical:from_options",
    "profile": "commopt.estimators.profile:from_options",
    "table": "commopt.estimators.table:from_options",
    "benchmark": "commopt.estimators.benchmark:from_options",
}


#: One estimator name and where it comes from; ``error`` is set when it cannot load.
EstimatorInfo = PluginEntry


def _estimator_or_factory(name: str, obj: Any) -> Any:
    """``obj`` when it is an estimator (has ``estimate``) or a factory (callable); TypeError
    otherwise."""
    if not callable(getattr(obj, "estimate", None)) and not callable(obj):
        raise TypeError(f"{obj!r} is neither an estimator (no estimate method) nor a factory")
    return obj


def registry(entry_points: Any = None) -> Registry[Any]:
    """The estimators: built-ins, then entry-point plug-ins sorted by name (nothing is
    imported until used; see :func:`commopt.plugins.discover`)."""
    entries = discover_plugins(ENTRY_POINT_GROUP, BUILTINS, entry_points)
    return Registry("estimator", entries, _estimator_or_factory, field="--estimator")


def discover() -> dict[str, EstimatorInfo]:
    """Every estimator name and where it comes from (nothing is imported)."""
    return registry().entries


def list_estimators() -> list[EstimatorInfo]:
    """Every known estimator with its status; plug-ins are imported to find broken ones."""
    reg = registry()
    broken = {b.name: b for b in reg.check_all()}
    return [broken.get(name, info) for name, info in reg.entries.items()]


def _instantiate(obj: Any, options: EstimatorOptions, label: str) -> Estimator:
    """The estimator ``obj`` is, or the one its factory makes: ``factory(options)`` with the
    :class:`EstimatorOptions` (one rule, no guessing at signatures)."""
    if callable(getattr(obj, "estimate", None)) and not inspect.isclass(obj):
        est = obj
    else:
        try:
            est = obj(options)
        except (CommoptError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # any way, SystemExit included: name it, do not end the run
            raise PluginError(f"estimator {label!r}: its factory failed: {type(exc).__name__}: {exc}",
                              field="--estimator") from None
    if not callable(getattr(est, "estimate", None)):
        raise EstimatorError(f"estimator {label!r} has no estimate(node, graph) method", field="--estimator")
    name = getattr(est, "name", None)
    if not name:
        try:
            est.name = label
        except AttributeError:
            raise EstimatorError(f"estimator {label!r} has no name and none can be set",
                                 field="--estimator") from None
    elif not isinstance(name, str):
        raise EstimatorError(f"estimator {label!r} has a name that is not a string: {name!r}",
                             field="--estimator")
    return est


def load_one(name: str, options: EstimatorOptions, known: Registry[Any] | None = None) -> Estimator:
    """Build the estimator ``name`` (a registered name or ``module:attr``)."""
    reg = registry() if known is None else known
    obj = reg.load_target(name) if ":" in name else reg.load(name)
    return _instantiate(obj, options, name)


def resolve(spec: str | None = None, options: EstimatorOptions | None = None, **opts: Any) -> EstimatorChain:
    """The chain for ``spec`` (default: ``options.estimator``), ending with analytical.

    ``opts`` override fields of ``options`` (``hardware="h200"``, ``profile="p.json"``, ...).
    """
    options = options or EstimatorOptions()
    if opts:
        options = replace(options, **opts)
    spec = spec if spec is not None else options.estimator
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise OptionError("empty estimator spec", field="--estimator")
    known = registry()
    chain = [load_one(n, options, known) for n in names]
    if chain[-1].name != "analytical":
        chain.append(load_one("analytical", options, known))
    calibrated = str(options.compute_slowdown).strip().lower() == "calibrated"  # reads the profile
    notes = [f"--{flag} {value} is not used: the estimator chain {spec!r} has no {flag!r} "
             f"(add --estimator {flag})"
             for flag, value in (("profile", options.profile if not calibrated else None),
                                 ("table", options.table))
             if value and flag not in names]
    from commopt.estimators.slowdown import applied_slowdown

    result = EstimatorChain(chain, notes=notes)
    model = next((e.model for e in chain if e.name == "profile" and hasattr(e, "model")), None)
    result.slowdown = applied_slowdown(options.compute_slowdown, options.profile, model)
    return result
