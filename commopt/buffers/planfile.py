"""Reading and writing ``buffer_plan.json``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from commopt import atomic
from commopt.errors import GraphError, json_path
from commopt.schemas.buffer_plan import FORMAT_NAME, BufferPlan


def plan_json(plan: BufferPlan) -> str:
    """The plan file's text: the model's fields in schema order, indented, newline at the end.

    The same plan gives the same bytes in every process (no sets, no timestamps).
    """
    return plan.model_dump_json(indent=2) + "\n"


def save_plan(plan: BufferPlan, path: str | os.PathLike[str]) -> Path:
    """Write ``plan`` to ``path`` atomically; returns the path."""
    atomic.write_text(path, plan_json(plan))
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
