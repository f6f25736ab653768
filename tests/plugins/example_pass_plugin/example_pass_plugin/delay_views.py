"""example-delay-views: move every view to just before its first user."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from commopt.ir.graph import Graph, NodeKind
from commopt.passes.base import Pass, PassContext


@dataclass(frozen=True)
class DelayViews(Pass):
    """Views cost nothing and carry no ordering edges, so each can wait for its first user;
    views nobody uses stay where they were."""

    name: ClassVar[str] = "example-delay-views"
    summary: ClassVar[str] = "move every view to just before its first user (example plug-in)"

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int]:
        """The order with views delayed."""
        nodes = graph.nodes
        held: set[int] = set()
        out: list[int] = []

        def emit(i: int) -> None:
            for p in graph.preds(i):
                if p in held:
                    held.discard(p)
                    emit(p)
            out.append(i)

        for i in order:
            if nodes[i].kind is NodeKind.VIEW and graph.succs(i):
                held.add(i)
            else:
                emit(i)
        for i in order:  # views with users always meet one; this keeps the order complete
            if i in held:
                held.discard(i)
                emit(i)
        return out
