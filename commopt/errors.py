"""Errors commopt reports to its users, and the exit codes they map to.

A :class:`CommoptError` is a *user* error: bad input, a bad option, a failed check. The CLI
prints it as one line (``where: message``) without a traceback and exits with its
``exit_code``. Anything else that escapes is a bug in commopt and is shown as one.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes, defined once for every command."""

    OK = 0
    CHECK_FAILED = 1
    USER_ERROR = 2
    INTERNAL_ERROR = 3


class CommoptError(Exception):
    """A problem the user can fix, reported as one line naming where it is.

    ``file``, ``node`` and ``field`` locate the problem (any may be ``None``); ``line`` and
    ``column`` locate it inside a text file.
    """

    exit_code: ExitCode = ExitCode.USER_ERROR

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        node: str | None = None,
        field: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.node = node
        self.field = field
        self.line = line
        self.column = column

    def where(self) -> str:
        """The location as ``file:line:column: node 'x': field y``, or '' when unknown."""
        parts: list[str] = []
        if self.file is not None:
            loc = str(self.file)
            if self.line is not None:
                loc += f":{self.line}"
                if self.column is not None:
                    loc += f":{self.column}"
            parts.append(loc)
        if self.node is not None:
            parts.append(f"node {self.node!r}")
        if self.field is not None:
            parts.append(f"field {self.field}")
        return ", ".join(parts)

    def __str__(self) -> str:
        where = self.where()
        text = " ".join(self.message.split("\n"))
        return f"{where}: {text}" if where else text


class GraphError(CommoptError):
    """The graph file or object is malformed (syntax, schema, structure)."""


class OptionError(CommoptError):
    """A command-line option or API argument is out of range or unknown."""


class OutputError(CommoptError):
    """An output cannot be written where asked: it would overwrite an input or another output
    of the same run, or the operating system refused the write (the reason is named)."""


class PassError(CommoptError):
    """A plug-in pass raised: the message names the pass and the passes that ran before it."""


class CheckFailed(CommoptError):
    """A `commopt check` threshold or an invariant was not met."""

    exit_code = ExitCode.CHECK_FAILED


class InvariantViolation(Exception):
    """A pass produced an order that breaks an invariant: a bug in commopt or in a plug-in."""


def json_path(loc: tuple | list) -> str:
    """A pydantic error location as a JSON path: ``("nodes", 3, "kind")`` -> ``$.nodes[3].kind``."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def suggest(name: str, choices: list[str] | tuple[str, ...]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or '' when nothing is close."""
    import difflib

    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
