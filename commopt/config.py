"""Layered configuration: built-in defaults < config file < command-line flags.

The config file is the nearest ``commopt.toml``, or ``pyproject.toml`` with a
``[tool.commopt]`` table, found by walking up from the starting directory (the current
directory by default); ``commopt.toml`` wins when both sit in the same directory.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from commopt.errors import CommoptError, OptionError
from commopt.schemas.config import ConfigFile

DEFAULT_SOURCE = "default"
CLI_SOURCE = "command line"


def builtin_defaults() -> dict[str, Any]:
    """The library's own defaults for every configurable key."""
    from commopt.defaults import DEFAULTS

    return dict(DEFAULTS)


@dataclass
class Config:
    """Effective settings with the source of each value."""

    values: dict[str, Any]
    sources: dict[str, str]
    file: Path | None = None
    _cli: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The effective value of ``key`` (``default`` when unset everywhere)."""
        value = self.values.get(key)
        return default if value is None else value

    def with_overrides(self, overrides: Mapping[str, Any]) -> Config:
        """A copy where every non-None value in ``overrides`` (command-line flags) wins."""
        values = dict(self.values)
        sources = dict(self.sources)
        for key, value in overrides.items():
            if value is None:
                continue
            if key not in ConfigFile.model_fields:
                raise OptionError(f"unknown setting {key!r}")
            values[key] = value
            sources[key] = CLI_SOURCE
        return Config(values, sources, self.file)


def find_config_file(start: Path | None = None) -> Path | None:
    """The nearest commopt.toml or pyproject.toml with [tool.commopt], walking upwards."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "commopt.toml"
        if candidate.is_file():
            return candidate
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file() and "commopt" in _read_toml(pyproject).get("tool", {}):
            return pyproject
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise CommoptError(f"invalid TOML: {exc}", file=str(path)) from None
    except UnicodeDecodeError as exc:
        raise CommoptError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(path)) from None
    except RecursionError:
        raise CommoptError("invalid TOML: nested too deeply", file=str(path)) from None
    except ValueError as exc:  # an integer beyond int_max_str_digits
        raise CommoptError(f"invalid TOML: {str(exc).split(':')[0].lower()}", file=str(path)) from None
    except OSError as exc:
        raise CommoptError(f"cannot read: {exc.strerror}", file=str(path)) from None


def read_config_file(path: Path) -> dict[str, Any]:
    """The validated settings a file sets (only keys present in the file)."""
    data = _read_toml(path)
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("commopt", {})
        prefix = "tool.commopt."
    else:
        prefix = ""
    try:
        model = ConfigFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            from commopt.errors import suggest

            hint = suggest(key, list(ConfigFile.model_fields))
            raise CommoptError(f"unknown setting{hint}", file=str(path), field=prefix + key) from None
        raise CommoptError(f"bad setting: {err['msg']}", file=str(path), field=prefix + key) from None
    return model.model_dump(exclude_unset=True)


def load_config(start: Path | None = None, *, file: Path | None = None) -> Config:
    """Defaults overlaid with the config file (``file``, or the nearest one from ``start``)."""
    values = builtin_defaults()
    sources = {key: DEFAULT_SOURCE for key in values}
    path = file if file is not None else find_config_file(start)
    if path is not None:
        if not path.is_file():
            raise CommoptError("no such config file", file=str(path))
        for key, value in read_config_file(path).items():
            values[key] = value
            sources[key] = str(path)
    return Config(values, sources, path)
