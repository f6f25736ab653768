"""Safe Python identifiers and literals for values that come from an (untrusted) graph file.

Nothing from a graph reaches generated code raw: names become ``n_<index>_<cleaned>``
identifiers (checked with ``isidentifier()``), everything else is rendered with ``repr()`` of
a plain Python value whose type was checked first.
"""

from __future__ import annotations

import keyword
import math
import re

_NOT_WORD = re.compile(r"[^0-9A-Za-z_]+")
_MAX_CLEANED = 32


#: A text :func:`clean` returns unchanged (the common case: checked with one match).
_CLEAN = re.compile(r"[0-9A-Za-z]+(?:_[0-9A-Za-z]+)*")


def clean(text: str) -> str:
    """ASCII letters, digits and single underscores of ``text``, at most 32 characters."""
    if len(text) <= _MAX_CLEANED and _CLEAN.fullmatch(text):
        return text
    cleaned = _NOT_WORD.sub("_", text).strip("_")
    cleaned = re.sub(r"_+", "_", cleaned)
    return cleaned[:_MAX_CLEANED].rstrip("_")


def identifier(prefix: str, index: int, name: str) -> str:
    """``<prefix>_<index>_<cleaned name>``: unique per index, always a valid identifier."""
    cleaned = clean(name)
    ident = f"{prefix}_{index}_{cleaned}" if cleaned else f"{prefix}_{index}"
    if not ident.isidentifier() or keyword.iskeyword(ident):
        raise AssertionError(f"sanitizer produced a bad identifier {ident!r}")
    return ident


def literal(value: object) -> str:
    """The source text of a plain value (None, bool, int, float, str); repr() for safety."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    raise TypeError(f"not a plain literal: {type(value).__name__}")


def comment(text: str, limit: int = 80) -> str:
    """``text`` made safe for one ``#`` comment line: printable ASCII, no line breaks."""
    text = str(text)
    if text.isascii() and text.isprintable():
        safe = text
    else:
        safe = "".join(ch if " " <= ch <= "~" else "?" for ch in text)
    return safe if len(safe) <= limit else safe[: limit - 3] + "..."
