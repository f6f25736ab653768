"""Entry-point plug-ins: one discovery rule for every plug-in group commopt has.

Groups: ``commopt.estimators`` and ``commopt.passes``. Built-ins come first, then installed
entry points sorted by (name, value) so the result never depends on installation order. A
name claimed twice — by two plug-ins, or by a plug-in and a built-in — is kept as a broken
entry whose ``error`` names both sources. Nothing is imported during discovery: a plug-in
that fails to import is only an error when it is used (and is listed as broken).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

BUILTIN_SOURCE = "built-in"


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
