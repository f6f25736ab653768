"""Reading and writing ``buffer_plan.json``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from commopt import atomic
from commopt.errors import GraphError, json_path
from commopt.json_lines import compact_each, dumps_line
from commopt.schemas.buffer_plan import FORMAT_NAME, BufferPlan, GroupArena, PlannedBuffer


def plan_json(plan: BufferPlan) -> str:
    """The plan file's text (:func:`plan_chunks` joined)."""
    return "".join(plan_chunks(plan))


def plan_chunks(plan: BufferPlan) -> Iterator[str]:
    """The plan file's text in pieces: the model's fields in schema order, indented, except
    that each buffer (and each persistent parameter) is one line of compact JSON, so a plan
    of 100,000s of buffers stays small and a diff shows one line per changed buffer; newline
    at the end. Any JSON reader reads it as before.

    The same plan gives the same bytes in every process (no sets, no timestamps).
    """
    doc = plan.model_dump(mode="json", exclude={"groups": {"__all__": {"buffers"}}})
    fields = list(GroupArena.model_fields)
    doc["groups"] = [{name: _Items(arena.buffers) if name == "buffers" else dumped[name]
                      for name in fields if name in dumped or name == "buffers"}
                     for arena, dumped in zip(plan.groups, doc["groups"], strict=True)]
    yield from _chunks(doc, 0)
    yield "\n"


class _Items(list):
    """Models dumped one at a time as the file is written (a plan's buffers are most of it)."""


def _buffer_doc(buf: PlannedBuffer) -> dict[str, Any]:
    """``buf.model_dump(mode="json")``, read straight from its fields: every field of a
    planned buffer is plain JSON data already (str, int, bool, None, lists of int or str), in
    the schema's order in a validated model and in the planner's, so only the fields its
    serializer omits while unset are left out (:meth:`PlannedBuffer.drop_unset`). pydantic's
    dump, which calls that serializer in Python per buffer, took most of writing a 100k-node
    plan."""
    return PlannedBuffer.drop_unset(dict(buf.__dict__))


#: Lists whose items are written one per line, each item as compact JSON.
_ONE_LINE_ITEMS = frozenset({"buffers", "params", "not_qualified"})
#: :data:`commopt.json_lines.dumps_line` of each of many values, C-mapped
_each_line = compact_each(ensure_ascii=False, separators=(", ", ": "))
#: Items written per chunk of a one-line-per-item list: a Python step per block, not per
#: buffer, and a plan of 100,000s of buffers still streamed in small pieces
_LINES_PER_CHUNK = 1024
_plain = json.JSONEncoder(ensure_ascii=False, indent=2).encode


def _chunks(value: Any, depth: int, key: str | None = None) -> Iterator[str]:
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict) and value:
        yield "{"
        for k, (name, item) in enumerate(value.items()):
            yield ("\n" if k == 0 else ",\n") + inner + dumps_line(name) + ": "
            yield from _chunks(item, depth + 1, name)
        yield "\n" + pad + "}"
    elif isinstance(value, list) and value and key in _ONE_LINE_ITEMS:
        lines = _each_line(map(_buffer_doc, value) if isinstance(value, _Items) else value)
        between = ",\n" + inner
        yield "[\n" + inner + between.join(islice(lines, _LINES_PER_CHUNK))
        while block := between.join(islice(lines, _LINES_PER_CHUNK)):
            yield between + block
        yield "\n" + pad + "]"
    elif isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        yield "["
        for k, item in enumerate(value):
            yield ("\n" if k == 0 else ",\n") + inner
            yield from _chunks(item, depth + 1)
        yield "\n" + pad + "]"
    else:  # a scalar, an empty container or a list of scalars: as the indented dump writes it
        yield _plain(value).replace("\n", "\n" + pad)


def save_plan(plan: BufferPlan, path: str | os.PathLike[str]) -> Path:
    """Write ``plan`` to ``path`` atomically, streamed (:func:`plan_chunks`); returns the path."""
    atomic.write_chunks(path, plan_chunks(plan))
    return Path(path)


def load_plan(path: str | os.PathLike[str]) -> BufferPlan:
    """Read and validate a plan file; problems are :class:`GraphError` naming the file and field."""
    p = Path(path)
    if not p.is_file():
        raise GraphError("no such plan file" if not p.exists() else "not a file", file=str(p))
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise GraphError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(p)) from None
    except json.JSONDecodeError as exc:
        raise GraphError(f"invalid JSON: {exc.msg}", file=str(p), line=exc.lineno, column=exc.colno) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT_NAME:
        raise GraphError(f"not a buffer plan (expected \"format\": {FORMAT_NAME!r})", file=str(p), field="$.format")
    try:
        return BufferPlan.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise GraphError(f"not a buffer plan: {err['msg']}{more}", file=str(p),
                         field=json_path(err["loc"])) from None
