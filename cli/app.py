"""The application object every command receives: verbosity, colour, consoles, configuration.

Payload goes to stdout (:attr:`App.out`), diagnostics and progress to stderr (:attr:`App.err`,
:meth:`App.info`, :meth:`App.warn`). The configuration is read once per run (:attr:`App.config`)
and every command layers its flags over it.

Names in the output come from input files (graph, node, group and file names), so nothing
reaches the terminal as it is: the consoles escape control characters in every piece of text
they render (:func:`terminal_safe`) and never read markup in it; the few lines that are not
printed through a console (errors, warnings, JSON) go through :func:`echo`, which escapes
the same way.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import click
from rich.console import Console, RenderHook
from rich.segment import Segment

#: Control characters (C0 but tab and newline, DEL, C1) and surrogates (which only occur
#: unpaired in a str, e.g. from an undecodable file name): what :func:`terminal_safe` escapes.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_UNSAFE_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character and lone surrogate written as a visible escape
    (ESC -> ``\\x1b``, CSI -> ``\\x9b``, a surrogate -> ``\\udcff``).

    A name from an input file could otherwise clear the screen, move the cursor or set the
    window title, and a surrogate would make the write itself fail. Tabs and newlines are
    kept unless ``one_line`` (an error line must stay one line).
    """
    pattern = _UNSAFE_ONE_LINE if one_line else _UNSAFE
    return pattern.sub(_escape, text)


def echo(text: str, *, err: bool = False, one_line: bool = False) -> None:
    """``click.echo`` of :func:`terminal_safe` text: for output not printed by a console."""
    click.echo(terminal_safe(text, one_line=one_line), err=err)


class _Escaped:
    """A renderable whose text segments are :func:`terminal_safe` (control segments, which
    rich makes itself to move the cursor, are kept)."""

    def __init__(self, renderable) -> None:
        self.renderable = renderable

    def __rich_console__(self, console, options):
        for seg in console.render(self.renderable, options):
            if seg.control or not _UNSAFE.search(seg.text):
                yield seg
            else:
                yield Segment(terminal_safe(seg.text), seg.style, seg.control)


class _EscapeHook(RenderHook):
    """Wraps everything a console prints in :class:`_Escaped`: the one place text is escaped."""

    def process_renderables(self, renderables):
        return [_Escaped(r) for r in renderables]

if TYPE_CHECKING:
    from commopt.config import Config


#: What commands asked to keep until the process ends (:meth:`App.keep_until_exit`).
_KEPT_UNTIL_EXIT: list[object] = []


@dataclass
class App:
    """Global options, set by the root group and passed to every command. ``exit_follows``:
    the process ends as soon as the command returns, without teardown (the ``commopt``
    script, :func:`commopt.cli.main.run`), not a caller that goes on (tests, other tools)."""

    verbosity: int = 0
    color: str = "auto"
    exit_follows: bool = False
    _out: Console | None = field(default=None, repr=False)
    _err: Console | None = field(default=None, repr=False)
    _config: Config | None = field(default=None, repr=False)

    def keep_until_exit(self, value: object) -> None:
        """Keep ``value`` (a command's result) alive until the process ends, when it ends
        right after the command (:attr:`exit_follows`): at 100k nodes a result holds millions
        of objects, and dropping them one by one as the command returns took 0.2 s of a
        command's wall time that the operating system's reclaim does not cost. A caller that
        goes on keeps nothing."""
        if self.exit_follows:
            _KEPT_UNTIL_EXIT.append(value)

    @property
    def config(self) -> Config:
        """The settings of ``commopt.toml`` / ``[tool.commopt]`` over the defaults, read once."""
        if self._config is None:
            from commopt.config import load_config

            self._config = load_config()
        return self._config

    def _console(self, stream) -> Console:
        # NO_COLOR (https://no-color.org) removes every style, bold and italic too (rich's
        # no_color keeps them); FORCE_COLOR styles output that is not a terminal.
        auto = self.color == "auto"
        plain = self.color == "never" or (auto and bool(os.environ.get("NO_COLOR")))
        force = True if self.color == "always" or (auto and not plain and os.environ.get("FORCE_COLOR")) else None
        console = Console(
            file=stream,
            no_color=plain,
            color_system=None if plain else "auto",
            force_terminal=force,
            highlight=False,
            markup=False,
            soft_wrap=True,
            emoji=False,
        )
        console.push_render_hook(_EscapeHook())
        return console

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
