"""The summary's ``bucketing`` entry: what the bucket pass merged and what it saved."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from commopt.bucketing.rewrite import Rewritten
from commopt.ir.graph import Graph


def bucketing_summary(source: Graph, changes: Sequence[tuple[Any, Any]]):
    """A :class:`~commopt.schemas.summary.Bucketing` for the rewrites of ``changes`` (the
    pipeline's (record, GraphChange) pairs) that merged collectives of ``source``; None
    when none did."""
    from commopt.schemas.summary import Bucket, Bucketing

    found = [(rec, ch.detail) for rec, ch in changes if isinstance(ch.detail, Rewritten)]
    if not found:
        return None
    buckets = []
    for _, rw in found:
        g = rw.graph
        for members, name in rw.buckets:
            node = g.node(name)
            buckets.append(Bucket(collective=name, type=node.collective.type, group=node.collective.group,
                                  dtype=node.outputs[0].dtype, members=list(members),
                                  bytes=node.collective.in_bytes))
    last = found[-1][1].graph
    return Bucketing(buckets=buckets, collectives_before=len(source.collectives()),
                     collectives_after=len(last.collectives()), nodes_after=len(last),
                     makespan_before_us=found[0][0].before.makespan_us,
                     makespan_after_us=found[-1][0].after.makespan_us)
