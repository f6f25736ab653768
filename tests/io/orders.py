"""Valid non-trivial orders of a graph, for write-back tests."""

from __future__ import annotations

import heapq

from commopt.ir.graph import Graph


def late_first_order(graph: Graph) -> list[int]:
    """A topological order of all data and ordering edges that, whenever several nodes are
    ready, runs the one that came last in the original order: far from the original order,
    yet legal."""
    n = len(graph)
    indeg = [len(graph.preds(i)) for i in range(n)]
    ready = [-i for i in range(n) if indeg[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = -heapq.heappop(ready)
        order.append(i)
        for j in graph.succs(i):
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, -j)
    assert len(order) == n, "graph has a cycle"
    return order
