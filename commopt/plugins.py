"""Entry-point plug-ins: one discovery rule for every plug-in group commopt has.

Groups: ``commopt.estimators`` and ``commopt.passes``. Built-ins come first, then installed
entry points sorted by (name, value) so the result never depends on installation order. A
name claimed twice — by two plug-ins, or by a plug-in and a built-in — is kept as a broken
entry whose ``error`` names both sources. Nothing is imported during discovery: a plug-in
that fails to import is only an error when it is used (and is listed as broken).
:class:`Registry` is the one registry type every plug-in kind uses.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from commopt.errors import OptionError, suggest

BUILTIN_SOURCE = "built-in"
T = TypeVar("T")


@dataclass(frozen=True)
class PluginEntry:
    """A registered name, where it comes from and what it points to (``module:attr``)."""

    name: str
    source: str
    target: str
    error: str | None = None

    @property
    def broken(self) -> bool:
        """Whether the entry cannot be used (defined twice, or failed to import)."""
        return self.error is not None


def import_target(target: str) -> Any:
    """The object ``package.module:attr.sub`` names (imports the module)."""
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def discover(group: str, builtins: Mapping[str, str], entry_points: Iterable[Any] | None = None,
             ) -> dict[str, PluginEntry]:
    """Built-ins plus the entry points of ``group`` (``entry_points`` replaces the installed
    ones, for tests), as name -> entry, built-ins first then plug-ins by name."""
    if entry_points is None:
        from importlib.metadata import entry_points as installed

        entry_points = installed(group=group)
    found = {name: PluginEntry(name, BUILTIN_SOURCE, target) for name, target in builtins.items()}
    for ep in sorted(entry_points, key=lambda e: (e.name, e.value)):
        dist = getattr(ep, "dist", None)
        source = f"plug-in {dist.name} {dist.version}" if dist is not None else "plug-in"
        prev = found.get(ep.name)
        if prev is None:
            found[ep.name] = PluginEntry(ep.name, source, ep.value)
        elif not (prev.source == source and prev.target == ep.value):  # not one dist seen twice
            found[ep.name] = replace(prev, error=f"defined twice: by {prev.source} ({prev.target}) "
                                                 f"and by {source} ({ep.value})")
    return found


class PluginError(OptionError):
    """A plug-in is broken (failed to import, wrong type, name claimed twice) or raised."""


class Registry(Generic[T]):
    """Names of one plug-in kind (passes, estimators) -> the objects they point to.

    Built from :func:`discover`'s entries; nothing is imported until a name is used. Loading
    imports the entry's target and checks it with ``check(name, obj) -> T`` (which raises
    ``TypeError``/``ValueError`` for a wrong object). Whatever fails — a name claimed twice,
    an import error, a failed check — makes *that* entry broken: using it is a
    :class:`PluginError` naming it and why, listing shows it, and every other name works.
    ``module:attr`` targets that are not registered load through the same check
    (:meth:`load_target`). Errors name ``field`` (the option that chose the name).
    """

    def __init__(self, kind: str, entries: Mapping[str, PluginEntry],
                 check: Callable[[str, Any], T], *, field: str) -> None:
        self.kind, self.field, self._check = kind, field, check
        self.entries = dict(sorted(entries.items()))
        self._loaded: dict[str, T] = {}
        self._errors: dict[str, str] = {}

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return list(self.entries)

    def load(self, name: str) -> T:
        """The checked object registered as ``name``: OptionError (with a suggestion) when the
        name is unknown, PluginError when its entry is broken."""
        if name in self._loaded:
            return self._loaded[name]
        entry = self.entries.get(name)
        if entry is None:
            raise OptionError(f"no {self.kind} {name!r}{suggest(name, self.names())}; "
                              f"known: {', '.join(self.names())}", field=self.field)
        if entry.broken:  # claimed twice: unusable, but the other names are not affected
            self._errors[name] = entry.error
            raise PluginError(f"{self.kind} {name!r} is broken: {entry.error}", field=self.field)
        try:
            target = import_target(entry.target)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # any way, SystemExit included; report it, do not crash
            self._errors[name] = f"failed to import: {type(exc).__name__}: {exc}"
        else:
            try:
                self._loaded[name] = self._check(name, target)
                return self._loaded[name]
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                self._errors[name] = f"{type(exc).__name__}: {exc}"
        raise PluginError(f"{self.kind} {name!r} from {entry.source} is broken: {self._errors[name]}",
                          field=self.field) from None

    def load_target(self, target: str) -> T:
        """The checked object a ``package.module:attr`` reference names (a one-off plug-in)."""
        try:
            return self._check(target, import_target(target))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            raise PluginError(f"cannot load {self.kind} {target!r}: {type(exc).__name__}: {exc}",
                              field=self.field) from None

    def check_all(self) -> list[PluginEntry]:
        """Load every entry; the broken ones, each with its ``error`` (they stay registered)."""
        for name in self.entries:
            try:
                self.load(name)
            except PluginError:
                pass
        return [replace(self.entries[n], error=self._errors[n]) for n in sorted(self._errors)]
