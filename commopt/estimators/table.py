"""The table estimator: durations given in a JSON or CSV file, by node name or by op.

JSON: ``{"nodes": {"fwd_mm0": 12.5}, "ops": {"aten.mm": 10.0}}`` (either part optional), or
a flat ``{"key": us}`` whose keys match node names first, then ops.
CSV: a header row with ``duration_us`` and one of ``name`` / ``node`` / ``op`` (or ``key``).
Ops match with or without their overload (``aten.mm.default`` or ``aten.mm``). Entries that
match no node of the graph are reported once, by name, in :attr:`TableEstimator.notes`.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from commopt.errors import OptionError
from commopt.estimators.analytical import op_base_name
from commopt.ir.graph import Graph, Node


class TableEstimator:
    """Looks up a node by name, then its op (full, then without overload)."""

    name = "table"

    def __init__(self, by_name: dict[str, float], by_op: dict[str, float], *,
                 flat: dict[str, float] | None = None, source: str = "table") -> None:
        self.by_name = dict(by_name)
        self.by_op = dict(by_op)
        self.flat = dict(flat or {})
        self.source = source
        self.notes: list[str] = []
        self._checked: set[int] = set()

    def _check_names(self, graph: Graph) -> None:
        if id(graph) in self._checked:
            return
        self._checked.add(id(graph))
        ops = {n.op for n in graph.nodes} | {op_base_name(n.op) for n in graph.nodes}
        unknown = [k for k in self.by_name if k not in graph.index_of]
        unknown += [k for k in self.by_op if k not in ops]
        unknown += [k for k in self.flat if k not in graph.index_of and k not in ops]
        if unknown:
            shown = ", ".join(repr(k) for k in sorted(unknown)[:10])
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            self.notes.append(f"{self.source}: {len(unknown)} entr{'y' if len(unknown) == 1 else 'ies'} "
                              f"match no node or op of {graph.name!r}: {shown}{more}")

    def estimate(self, node: Node, graph: Graph) -> float | None:
        """The table's duration for the node's name or op, or None."""
        self._check_names(graph)
        for table, key in ((self.by_name, node.name), (self.flat, node.name), (self.by_op, node.op),
                           (self.flat, node.op), (self.by_op, op_base_name(node.op)),
                           (self.flat, op_base_name(node.op))):
            v = table.get(key)
            if v is not None:
                return v
        return None


def _number(value, path: str, where: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise OptionError(f"duration {value!r} is not a number", file=path, field=where) from None
    if not (v >= 0 and math.isfinite(v)):
        raise OptionError(f"duration {value!r} must be finite and >= 0", file=path, field=where)
    return v


def load_table(path: str | Path) -> TableEstimator:
    """Read a JSON or CSV duration table (see the module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise OptionError("no such table file", file=str(p), field="--table")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionError(f"cannot read table: {exc}", file=str(p)) from None
    by_name: dict[str, float] = {}
    by_op: dict[str, float] = {}
    flat: dict[str, float] = {}
    if p.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        cols = [c.strip() for c in reader.fieldnames or []]
        if "duration_us" not in cols:
            raise OptionError("CSV table needs a 'duration_us' column", file=str(p))
        key_col = next((c for c in ("name", "node", "op", "key") if c in cols), None)
        if key_col is None:
            raise OptionError("CSV table needs a 'name', 'node', 'op' or 'key' column", file=str(p))
        target = {"name": by_name, "node": by_name, "op": by_op, "key": flat}[key_col]
        for row_no, row in enumerate(reader, start=2):
            row = {k.strip(): v for k, v in row.items() if k is not None}
            key = (row.get(key_col) or "").strip()
            if not key:
                raise OptionError(f"empty {key_col!r}", file=str(p), line=row_no)
            target[key] = _number(row.get("duration_us"), str(p), f"line {row_no} duration_us")
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OptionError(f"invalid JSON: {exc.msg}", file=str(p), line=exc.lineno, column=exc.colno) from None
        if not isinstance(data, dict):
            raise OptionError("a JSON table is an object", file=str(p))
        if set(data) <= {"nodes", "ops"} and all(isinstance(v, dict) for v in data.values()):
            for k, v in (data.get("nodes") or {}).items():
                by_name[str(k)] = _number(v, str(p), f"nodes.{k}")
            for k, v in (data.get("ops") or {}).items():
                by_op[str(k)] = _number(v, str(p), f"ops.{k}")
        else:
            for k, v in data.items():
                flat[str(k)] = _number(v, str(p), str(k))
    return TableEstimator(by_name, by_op, flat=flat, source=p.name)


def from_options(options) -> TableEstimator:
    """The table estimator for ``options.table``."""
    if not options.table:
        raise OptionError("the table estimator needs --table FILE (JSON or CSV)", field="--table")
    return load_table(options.table)
