"""The application object every command receives: verbosity, colour and consoles.

Payload goes to stdout, diagnostics and progress to stderr (see :mod:`commopt.cli.output`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from rich.console import Console


@dataclass
class App:
    """Global options, set by the root group and passed to every command."""

    verbosity: int = 0
    color: str = "auto"
    _out: Console | None = field(default=None, repr=False)
    _err: Console | None = field(default=None, repr=False)

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
