"""The application object every command receives: verbosity, colour, consoles, configuration.

Payload goes to stdout (:attr:`App.out`), diagnostics and progress to stderr (:attr:`App.err`,
:meth:`App.info`, :meth:`App.warn`). The configuration is read once per run (:attr:`App.config`)
and every command layers its flags over it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from commopt.config import Config


@dataclass
class App:
    """Global options, set by the root group and passed to every command."""

    verbosity: int = 0
    color: str = "auto"
    _out: Console | None = field(default=None, repr=False)
    _err: Console | None = field(default=None, repr=False)
    _config: Config | None = field(default=None, repr=False)

    @property
    def config(self) -> Config:
        """The settings of ``commopt.toml`` / ``[tool.commopt]`` over the defaults, read once."""
        if self._config is None:
            from commopt.config import load_config

            self._config = load_config()
        return self._config

    def _console(self, stream) -> Console:
        no_color = self.color == "never" or (self.color == "auto" and "NO_COLOR" in os.environ)
        force = True if self.color == "always" else None
        return Console(
            file=stream,
            no_color=no_color,
            force_terminal=force,
            highlight=False,
            soft_wrap=True,
            emoji=False,
        )

    @property
    def out(self) -> Console:
        """Console for the command's payload (stdout)."""
        if self._out is None:
            self._out = self._console(sys.stdout)
        return self._out

    @property
    def err(self) -> Console:
        """Console for diagnostics and progress (stderr)."""
        if self._err is None:
            self._err = self._console(sys.stderr)
        return self._err

    def info(self, message: str) -> None:
        """A diagnostic line on stderr, hidden by ``-q``."""
        if self.verbosity >= 0:
            self.err.print(message, markup=False)

    def debug(self, message: str) -> None:
        """A diagnostic line shown only with ``-v``."""
        if self.verbosity > 0:
            self.err.print(message, markup=False)

    def warn(self, message: str) -> None:
        """A warning on stderr (shown even with ``-q``)."""
        self.err.print(f"warning: {message}", markup=False, style="yellow")
