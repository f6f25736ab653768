"""Pass names -> pass classes: the built-ins plus plug-ins from the ``commopt.passes``
entry-point group.

Classes are imported lazily, when a pass is first used. Plug-ins are read sorted by entry
point name; two passes with one name are an error naming both sources; a plug-in that
fails to import (or whose class does not match its name) is listed as broken and does not
stop anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from commopt.errors import CommoptError, OptionError, suggest
from commopt.passes.base import Pass
from commopt.plugins import PluginEntry, import_target
from commopt.plugins import discover as discover_plugins

ENTRY_POINT_GROUP = "commopt.passes"

#: Built-in passes: name -> "module:Class".
BUILTIN: dict[str, str] = {
    "compute-overlap": "commopt.passes.compute_overlap:ComputeOverlap",
    "polish": "commopt.passes.polish:Polish",
    "raise-comms": "commopt.passes.raise_comms:RaiseComms",
    "sink-waits": "commopt.passes.sink_waits:SinkWaits",
}


class PluginError(CommoptError):
    """A pass plug-in is broken or clashes with another pass."""


@dataclass(frozen=True)
class BrokenPass:
    """A plug-in that could not be loaded, and why."""

    name: str
    source: str
    error: str


class PassRegistry:
    """The registered passes; :func:`get_registry` returns the process-wide one."""

    def __init__(self, entries: dict[str, PluginEntry]) -> None:
        self.entries = dict(sorted(entries.items()))
        self._loaded: dict[str, type[Pass]] = {}
        self._broken: dict[str, BrokenPass] = {}

    def names(self) -> list[str]:
        """Registered pass names, sorted."""
        return list(self.entries)

    def load(self, name: str) -> type[Pass]:
        """The pass class called ``name``; OptionError (with a suggestion) if unknown,
        PluginError if its plug-in is broken."""
        if name not in self.entries:
            raise OptionError(f"no pass {name!r}{suggest(name, self.names())}; "
                              f"known: {', '.join(self.names())}", field="passes")
        if name in self._loaded:
            return self._loaded[name]
        entry = self.entries[name]
        if entry.broken:  # claimed twice: unusable, but the other passes are not affected
            self._broken[name] = BrokenPass(name, entry.source, entry.error)
            raise PluginError(f"pass {name!r} is broken: {entry.error}", field="passes")
        try:
            cls = import_target(entry.target)
            _validate(name, cls)
        except Exception as exc:  # a plug-in may fail any way; report it, do not crash
            broken = BrokenPass(name, entry.source, f"{type(exc).__name__}: {exc}")
            self._broken[name] = broken
            raise PluginError(f"pass {name!r} from {entry.source} is broken: {broken.error}",
                              field="passes") from None
        self._loaded[name] = cls
        return cls

    def create(self, name: str, **options) -> Pass:
        """An instance of the pass ``name`` with ``options`` as its fields."""
        cls = self.load(name)
        try:
            return cls(**options)
        except TypeError as exc:
            raise OptionError(f"bad options for pass {name!r}: {exc}", field="passes") from None

    def check_all(self) -> list[BrokenPass]:
        """Load every pass; the broken ones (they stay registered but unusable)."""
        for name in self.entries:
            try:
                self.load(name)
            except PluginError:
                pass
        return [self._broken[n] for n in sorted(self._broken)]


def _validate(name: str, cls: object) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Pass)):
        raise TypeError(f"{cls!r} is not a subclass of commopt.passes.base.Pass")
    if cls.name != name:
        raise ValueError(f"class {cls.__name__} is named {cls.name!r}, registered as {name!r}")


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
