"""Digests that every rank and every process compute identically."""

from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Sequence

from commopt.ir.graph import Graph
from commopt.schemas.buffer_plan import BufferPlan


def canonical_json(data: object) -> bytes:
    """Canonical JSON bytes: sorted keys, no whitespace, ASCII only."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def plan_digest(plan: BufferPlan) -> str:
    """sha256 (hex) of the canonical JSON of ``plan`` without its ``digest`` field.

    The plan holds only ints, strings, bools and lists in a fixed order, so the digest does
    not depend on the process, the platform or ``PYTHONHASHSEED``.
    """
    return document_digest(plan.model_dump(mode="json", exclude={"digest"}))


def document_digest(doc: object) -> str:
    """sha256 (hex) of the canonical JSON of a plan's plain data without ``digest`` (what
    :func:`plan_digest` hashes; the planner has it before the models are built)."""
    return hashlib.sha256(canonical_json(doc)).hexdigest()


def order_digest(graph: Graph, order: Sequence[int]) -> str:
    """sha256 (hex) of the node names in ``order``, one per line: identifies the planned order.

    The last order digested is remembered with its graph (weakly; a graph's nodes do not
    change): the runner's check digests the order its plan was just made for, and asking
    again costs a comparison of the two orders, not the names' text and hash again."""
    global _last_digest
    key = tuple(order)
    last = _last_digest
    if last is not None and last[0]() is graph and last[1] == key:
        return last[2]
    nodes = graph.nodes
    # one join and one update: 100,000s of small updates cost more than the hashing itself
    lines = "".join([f"{nodes[i].name}\n" for i in key])
    digest = hashlib.sha256(lines.encode("utf-8")).hexdigest()
    _last_digest = (weakref.ref(graph), key, digest)
    return digest


#: (graph, order, digest) of the last :func:`order_digest`.
_last_digest: tuple[weakref.ref[Graph], tuple[int, ...], str] | None = None
