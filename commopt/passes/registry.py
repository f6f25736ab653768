"""Pass names -> pass classes: the built-ins plus plug-ins from the ``commopt.passes``
entry-point group.

Classes are imported lazily, when a pass is first used. Plug-ins are read sorted by entry
point name; two passes with one name are an error naming both sources; a plug-in that
fails to import (or whose class does not match its name) is listed as broken and does not
stop anything else.
"""

from __future__ import annotations

from functools import lru_cache

from commopt.errors import OptionError, suggest
from commopt.passes.base import Pass
from commopt.plugins import PluginEntry, PluginError, Registry
from commopt.plugins import discover as discover_plugins

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "PassRegistry", "PluginError", "discover", "get_registry",
           "parse_pipeline"]

ENTRY_POINT_GROUP = "commopt.passes"

#: Built-in passes: name -> "module:Class".
BUILTIN: dict[str, str] = {
    "bucket": "commopt.passes.bucket:BucketPass",
    "compute-overlap": "commopt.passes.compute_overlap:ComputeOverlap",
    "polish": "commopt.passes.polish:Polish",
    "raise-comms": "commopt.passes.raise_comms:RaiseComms",
    "sink-waits": "commopt.passes.sink_waits:SinkWaits",
}


class PassRegistry(Registry[type[Pass]]):
    """The registered passes (a :class:`~commopt.plugins.Registry` of pass classes);
    :func:`get_registry` returns the process-wide one."""

    def __init__(self, entries: dict[str, PluginEntry]) -> None:
        super().__init__("pass", entries, _validate, field="passes")

    def create(self, name: str, **options) -> Pass:
        """An instance of the pass ``name`` with ``options`` as its fields."""
        cls = self.load(name)
        try:
            return cls(**options)
        except TypeError as exc:
            raise OptionError(f"bad options for pass {name!r}: {exc}", field="passes") from None
        except (OptionError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # a plug-in's constructor, SystemExit included: name it
            raise PluginError(f"pass {name!r}: creating it failed: {type(exc).__name__}: {exc}",
                              field="passes") from None


def _validate(name: str, cls: object) -> type[Pass]:
    """``cls`` when it is a Pass subclass named ``name``; TypeError/ValueError otherwise."""
    if not (isinstance(cls, type) and issubclass(cls, Pass)):
        raise TypeError(f"{cls!r} is not a subclass of commopt.passes.base.Pass")
    if cls.name != name:
        raise ValueError(f"class {cls.__name__} is named {cls.name!r}, registered as {name!r}")
    return cls


def discover(entry_points=None) -> PassRegistry:
    """Build a registry from the built-ins and the ``commopt.passes`` entry points
    (:func:`commopt.plugins.discover`). A name claimed twice is a broken entry naming both
    sources: using it is an error, listing it shows why, every other pass works.

    ``entry_points`` (for tests) replaces what :mod:`importlib.metadata` finds.
    """
    return PassRegistry(discover_plugins(ENTRY_POINT_GROUP, BUILTIN, entry_points))


@lru_cache(maxsize=1)
def get_registry() -> PassRegistry:
    """The process-wide registry (discovered once)."""
    return discover()


def parse_pipeline(spec: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """Pass names from ``"a,b,c"`` or a list; None gives the default pipeline.

    Unknown names are an OptionError suggesting the closest registered name.
    """
    from commopt.passes.base import DEFAULT_PIPELINE

    if spec is None:
        return list(DEFAULT_PIPELINE)
    names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s).strip() for s in spec]
    if not names or any(not s for s in names):
        raise OptionError(f"empty pass name in {spec!r}", field="passes")
    reg = get_registry()
    for s in names:
        if s not in reg.entries:
            raise OptionError(f"no pass {s!r}{suggest(s, reg.names())}; known: {', '.join(reg.names())}",
                              field="passes")
    return names
