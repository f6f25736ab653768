"""``Schedule``: one order of a graph's nodes, checked once.

Every stage after loading works on an order of the graph's nodes: the passes produce one, the
simulator scores one, the buffer planner, the runner and the reports are built for one. An
order is only meaningful when it is a permutation of the node indices ``0 .. n-1``; a
:class:`Schedule` is checked for that when it is made and is immutable afterwards, so no stage
has to check it again, and every stage gets a node's position in O(1) without rebuilding it.

    schedule = Schedule.of(graph, order)       # ScheduleError unless a permutation
    schedule.order[k]                          # the node at position k
    schedule.position(i)                       # the position of node i
    schedule.original(graph)                   # the input program's order

Whether the order is also *legal* (dependencies, collective order, waits) is the invariant
checker's question (:mod:`commopt.invariants`): a schedule only promises it is a permutation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from commopt.errors import CommoptError

if TYPE_CHECKING:
    from commopt.ir.graph import Graph


class ScheduleError(CommoptError):
    """An order that is not a permutation of the graph's node indices."""


class Schedule(Sequence[int]):
    """A permutation of ``range(n)``: ``order[k]`` runs at position ``k``.

    It behaves as a read-only sequence of node indices (``len``, iteration, indexing, slices
    as tuples), so code that reads an order reads a schedule unchanged. Equal orders compare
    and hash equal.
    """

    __slots__ = ("_order", "_pos")

    def __init__(self, order: Sequence[int], n: int | None = None) -> None:
        """Check ``order`` is a permutation of ``range(n)`` (``n`` defaults to its length)."""
        order = tuple(order)
        n = len(order) if n is None else n
        if len(order) != n:
            raise ScheduleError(f"the order has {len(order)} entries, the graph has {n} nodes",
                                field="order")
        pos = _fast_positions(order, n)
        if pos is None:
            pos = _checked_positions(order, n)
        self._order = order
        self._pos = tuple(pos)

    @classmethod
    def of(cls, graph: Graph, order: Sequence[int] | Schedule) -> Schedule:
        """``order`` as a schedule of ``graph``; a schedule of the right size is returned as is."""
        if isinstance(order, Schedule) and len(order) == len(graph.nodes):
            return order
        return cls(order, len(graph.nodes))

    @classmethod
    def original(cls, graph: Graph) -> Schedule:
        """The order of the input program (node indices ascending)."""
        return cls(range(len(graph.nodes)))

    @property
    def order(self) -> tuple[int, ...]:
        """The node indices in execution order."""
        return self._order

    @property
    def positions(self) -> tuple[int, ...]:
        """``positions[i]`` is the position of node ``i``."""
        return self._pos

    def position(self, node: int) -> int:
        """The position of node index ``node`` in this schedule."""
        return self._pos[node]

    def __len__(self) -> int:
        return len(self._order)

    def __getitem__(self, k):  # type: ignore[override]
        return self._order[k]

    def __iter__(self) -> Iterator[int]:
        return iter(self._order)

    def __contains__(self, node: object) -> bool:
        return type(node) is int and 0 <= node < len(self._order)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Schedule):
            return self._order == other._order
        if isinstance(other, (list, tuple)):
            return self._order == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._order)

    def __repr__(self) -> str:
        head = ", ".join(map(str, self._order[:8]))
        return f"Schedule([{head}{', ...' if len(self._order) > 8 else ''}], n={len(self._order)})"


def _checked_positions(order: tuple, n: int) -> list[int]:
    """Each node's position, raising :class:`ScheduleError` at the first entry that is not a
    node index or appears twice."""
    pos = [-1] * n
    for k, i in enumerate(order):
        if type(i) is not int or not 0 <= i < n or pos[i] != -1:
            what = "appears twice" if type(i) is int and 0 <= i < n else "is not a node index"
            raise ScheduleError(f"entry {k} of the order ({i!r}) {what}: the order must be "
                                f"a permutation of the {n} node indices", field="order")
        pos[i] = k
    return pos


def _fast_positions(order: tuple, n: int) -> list[int] | None:
    """Each node's position when ``order`` is a permutation of ``range(n)`` of plain ints,
    else None (the caller's checking loop then names the first bad entry). A few C-speed
    passes instead of a checked loop: orders of 100k nodes are made often."""
    if not order or set(map(type, order)) != {int} or min(order) < 0 or max(order) >= n:
        return None
    import numpy as np

    pos = np.full(n, -1, dtype=np.int64)
    pos[np.fromiter(order, dtype=np.int64, count=len(order))] = np.arange(len(order), dtype=np.int64)
    return None if (pos < 0).any() else pos.tolist()  # a repeat leaves some node without one
