"""Layered configuration: built-in defaults < config file < command-line flags.

The config file is the nearest ``commopt.toml``, or ``pyproject.toml`` with a
``[tool.commopt]`` table, found by walking up from the starting directory (the current
directory by default); ``commopt.toml`` wins when both sit in the same directory.

A relative path in the file (:data:`PATH_KEYS`) means a path next to the file: it is resolved
against the file's directory, so the same file works from any working directory. An error
about a value that came from the file names the file and key (:func:`relabel_error`), not the
command-line flag the user never passed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from commopt.errors import CommoptError, OptionError
from commopt.schemas.config import ConfigFile

DEFAULT_SOURCE = "default"
CLI_SOURCE = "command line"

#: Keys whose value is a file path (``hardware`` also takes a preset name).
PATH_KEYS = ("hardware", "profile", "table")


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

    def key_name(self, key: str) -> str:
        """``key`` as the config file spells it (see :func:`file_key`)."""
        return file_key(self.file, key) if self.file is not None else key

    def from_file(self, key: str) -> bool:
        """Whether ``key``'s value comes from the config file (not a default, not a flag)."""
        return self.file is not None and self.sources.get(key) == str(self.file)


def file_key(path: Path, key: str) -> str:
    """``key`` as the file at ``path`` spells it: ``tool.commopt.align`` in a pyproject.toml."""
    return f"tool.commopt.{key}" if path.name == "pyproject.toml" else key


def relabel_error(exc: CommoptError, config: Config, flag_given: Callable[[str], bool]) -> CommoptError:
    """``exc`` located at the config file and key when it is about a value from the file.

    Library code names the flag (``field="--align"``); when ``--align`` was not given
    (``flag_given("--align")`` is false) and ``align`` came from the config file, the user
    never typed that flag: the error becomes ``FILE: key tool.commopt.align: MESSAGE`` (a
    file the message was about, e.g. a missing profile, is kept in parentheses). Any other
    error is returned as it is.
    """
    flag = exc.field
    if not isinstance(flag, str) or not flag.startswith("--"):
        return exc
    key = flag[2:].replace("-", "_")
    if key not in ConfigFile.model_fields or not config.from_file(key) or flag_given(flag):
        return exc
    message = f"key {config.key_name(key)}: {exc.message}"
    if exc.file is not None and exc.file != str(config.file):
        message += f" ({exc.file})"
    return type(exc)(message, file=str(config.file), node=exc.node)


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


def resolve_path_value(key: str, value: Any, base: Path) -> Any:
    """``value`` of ``key`` with a relative file path made absolute against ``base`` (the
    config file's directory); other keys, absolute paths and hardware preset names unchanged."""
    if key not in PATH_KEYS or not isinstance(value, str) or not value:
        return value
    path = Path(value).expanduser()
    if path.is_absolute():
        return str(path)
    if key == "hardware" and path.suffix.lower() != ".json" and len(path.parts) == 1 \
            and not (base / path).exists():
        return value  # a preset name (or an unknown one, which load_hardware words)
    return str(base / path)


def read_config_file(path: Path) -> dict[str, Any]:
    """The validated settings a file sets (only keys present in the file); relative paths
    are resolved against the file's directory (:func:`resolve_path_value`)."""
    data = _read_toml(path)
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("commopt", {})
    try:
        model = ConfigFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            from commopt.errors import suggest

            hint = suggest(key, list(ConfigFile.model_fields))
            raise CommoptError(f"key {file_key(path, key)}: unknown setting{hint}", file=str(path)) from None
        raise CommoptError(f"key {file_key(path, key)}: bad setting: {err['msg']}", file=str(path)) from None
    base = path.resolve().parent
    return {k: resolve_path_value(k, v, base) for k, v in model.model_dump(exclude_unset=True).items()}


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
