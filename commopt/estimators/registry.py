"""Finding estimators by name: built-ins, entry-point plug-ins and ``module:attr`` one-offs.

A spec is a name (``analytical``), a comma chain (``profile,analytical``), a
``package.module:attr`` reference, or the name of a plug-in registered in the entry-point
group ``commopt.estimators``. Plug-ins are discovered sorted by name; the same name from two
sources is an error naming both; a plug-in that fails to import is listed as broken and
only an error when it is asked for.

A plug-in's entry point (or ``module:attr``) names either an estimator object (it has
``estimate``), or a factory (a class or function) called with the
:class:`~commopt.estimators.options.EstimatorOptions` as ``options=`` when it has a parameter
of that name, as its first argument when it requires one, else with no argument.
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

from commopt.errors import OptionError, suggest
from commopt.estimators.base import Estimator, EstimatorChain, EstimatorError
from commopt.estimators.options import EstimatorOptions
from commopt.plugins import BUILTIN_SOURCE, PluginEntry, import_target
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


def discover() -> dict[str, EstimatorInfo]:
    """Every estimator name: built-ins, then entry-point plug-ins sorted by name (nothing is
    imported; see :func:`commopt.plugins.discover`)."""
    return discover_plugins(ENTRY_POINT_GROUP, BUILTINS)


def list_estimators() -> list[EstimatorInfo]:
    """Every known estimator with its status; plug-ins are imported to find broken ones."""
    out = []
    for _name, info in sorted(discover().items()):
        if info.error is None and info.source != BUILTIN_SOURCE:
            try:
                import_target(info.target)
            except Exception as exc:  # a broken plug-in must not break the listing
                info = replace(info, error=f"failed to import: {type(exc).__name__}: {exc}")
        out.append(info)
    return out


def _instantiate(obj: Any, options: EstimatorOptions, label: str) -> Estimator:
    if hasattr(obj, "estimate") and not inspect.isclass(obj):
        est = obj
    elif callable(obj):
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            params = {}
        required = [p for p in params.values() if p.default is inspect.Parameter.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if "options" in params:
            est = obj(options=options)
        elif required:
            est = obj(options)
        else:
            est = obj()
    else:
        raise EstimatorError(f"estimator {label!r} is neither an estimator nor a factory", field="--estimator")
    if not hasattr(est, "estimate") or not callable(est.estimate):
        raise EstimatorError(f"estimator {label!r} has no estimate(node, graph) method", field="--estimator")
    if not getattr(est, "name", None):
        try:
            est.name = label
        except AttributeError:
            pass
    return est


def load_one(name: str, options: EstimatorOptions, known: dict[str, EstimatorInfo] | None = None) -> Estimator:
    """Build the estimator ``name`` (a known name or ``module:attr``)."""
    if ":" in name:
        try:
            obj = import_target(name)
        except Exception as exc:
            raise OptionError(f"cannot load estimator {name!r}: {type(exc).__name__}: {exc}",
                              field="--estimator") from None
        return _instantiate(obj, options, name)
    known = discover() if known is None else known
    info = known.get(name)
    if info is None:
        raise OptionError(f"unknown estimator {name!r}{suggest(name, sorted(known))}; known: "
                          f"{', '.join(sorted(known))}", field="--estimator")
    if info.error is not None:
        raise OptionError(f"estimator {name!r}: {info.error}", field="--estimator")
    try:
        obj = import_target(info.target)
    except Exception as exc:
        raise OptionError(f"estimator {name!r} ({info.source}) failed to import: "
                          f"{type(exc).__name__}: {exc}", field="--estimator") from None
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
    known = discover()
    chain = [load_one(n, options, known) for n in names]
    if chain[-1].name != "analytical":
        chain.append(load_one("analytical", options, known))
    notes = [f"--{flag} {value} is not used: the estimator chain {spec!r} has no {flag!r} "
             f"(add --estimator {flag})"
             for flag, value in (("profile", options.profile), ("table", options.table))
             if value and flag not in names]
    return EstimatorChain(chain, notes=notes)
