"""The most work a set of kernels can place into a set of disjoint flights: a maximum flow.

Kernel ``x`` has ``supply[x]`` microseconds of work and may run during the flights listed in
``eligible[x]``; flight ``c`` has room for ``room[c]`` microseconds. The most work placed is
the maximum flow of the bipartite network source -> kernel -> flight -> sink
(:func:`max_placement`, Dinic's algorithm: breadth-first levels, then blocking flows by
depth-first search). The bounds (:mod:`commopt.sim.bounds`) use it where no order of the
flights is fixed; work may be split between flights.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

#: Residual capacity below this share of the total supply counts as none (float round-off).
_EPS = 1e-12


def max_placement(supply: Sequence[float], room: Sequence[float], eligible: Sequence[Sequence[int]]) -> float:
    """The maximum total work placed (module docstring): each kernel at most its supply,
    each flight at most its room, kernel ``x`` only into flights ``eligible[x]``. Kernels
    that may run beside the same flights are one kernel of their summed supply (the same
    flow: a layer's kernels mostly share their flights)."""
    merged: dict[tuple[int, ...], float] = {}
    for s, flights in zip(supply, eligible, strict=True):
        if s > 0.0 and flights:
            key = tuple(flights)
            merged[key] = merged.get(key, 0.0) + float(s)
    supply, eligible = list(merged.values()), list(merged)
    n_left, n_right = len(supply), len(room)
    source, sink = n_left + n_right, n_left + n_right + 1
    to: list[int] = []
    cap: list[float] = []
    adj: list[list[int]] = [[] for _ in range(n_left + n_right + 2)]

    def arc(u: int, v: int, c: float) -> None:
        adj[u].append(len(to))
        to.append(v)
        cap.append(c)
        adj[v].append(len(to))
        to.append(u)
        cap.append(0.0)

    total = float(sum(supply))
    for x, s in enumerate(supply):
        arc(source, x, s)
        for c in eligible[x]:
            arc(x, n_left + c, total)
    for c, r in enumerate(room):
        if r > 0.0:
            arc(n_left + c, sink, float(r))
    eps = _EPS * max(total, 1.0)
    flow = 0.0
    while True:
        level = _levels(adj, to, cap, source, sink, eps)
        if level[sink] < 0:
            return flow
        nxt = [0] * len(adj)
        while True:
            pushed = _push(adj, to, cap, level, nxt, source, sink, total, eps)
            if pushed <= eps:
                break
            flow += pushed


def _levels(adj, to, cap, source: int, sink: int, eps: float) -> list[int]:
    """Breadth-first distance from the source over arcs with room (-1: unreachable)."""
    level = [-1] * len(adj)
    level[source] = 0
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for e in adj[u]:
            v = to[e]
            if level[v] < 0 and cap[e] > eps:
                level[v] = level[u] + 1
                queue.append(v)
    return level


def _push(adj, to, cap, level, nxt, source: int, sink: int, limit: float, eps: float) -> float:
    """One augmenting path along increasing levels (iterative depth-first search, each
    arc's scan resuming at ``nxt``); returns the flow it carried (0: none left)."""
    path: list[int] = []  # arcs from the source
    u = source
    while True:
        if u == sink:
            pushed = min([limit, *(cap[e] for e in path)])
            for e in path:
                cap[e] -= pushed
                cap[e ^ 1] += pushed
            return pushed
        advanced = False
        while nxt[u] < len(adj[u]):
            e = adj[u][nxt[u]]
            v = to[e]
            if cap[e] > eps and level[v] == level[u] + 1:
                path.append(e)
                u = v
                advanced = True
                break
            nxt[u] += 1
        if advanced:
            continue
        if not path:
            return 0.0
        level[u] = -1  # a dead end: no path to the sink through it in this phase
        e = path.pop()
        u = to[e ^ 1]
        nxt[u] += 1
