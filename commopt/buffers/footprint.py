"""The memory the emitted program holds: persistent arenas plus every other live tensor.

The generated runner keeps one arena per process group for the whole step; the passes'
memory budget and the summary count that, not only the plain live-tensor peak
(:func:`commopt.sim.memory.footprint` has the model, the runner's ``--memory`` measures it).

- :func:`estimate_footprint` is cheap (no offset packing): the arenas at their lower bound
  (the largest sum of buffers live at once, which the planner reaches within a few percent,
  ``BENCHMARKS.md``), so the budget search can evaluate many orders;
- :func:`plan_footprint` is exact for a given plan: the plan's arenas, and the residents the
  runner really has (collective outputs and the producers the plan lets write in place).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from commopt.buffers.lifetimes import (
    KIND_OUTPUT,
    KIND_PERSISTENT,
    KIND_READ,
    KIND_READ_IN_PLACE,
    BufferTable,
    buffer_table,
    parse_collective_types,
)
from commopt.buffers.offsets import lower_bound
from commopt.buffers.persistent import find_persistent_params
from commopt.buffers.planner import DEFAULT_ALIGN_BYTES
from commopt.ir.graph import Graph
from commopt.ir.schedule import Schedule
from commopt.schemas.buffer_plan import BufferPlan
from commopt.sim.memory import Footprint, footprint


def estimate_footprint(graph: Graph, order: Sequence[int], *, align: int = DEFAULT_ALIGN_BYTES,
                       collective_types: str | Iterable[str] | None = None,
                       persistent_params: str | Iterable[str] | None = None) -> Footprint:
    """The footprint of the runner on ``order`` with the arenas at their lower bound (largest
    rank's sizes). Producers are assumed to copy into their buffers (no zero-copy), which can
    only overstate the other tensors. Persistent parameter slots (``persistent_params``) are
    arena bytes for the whole step, and their parameters live nowhere else."""
    order = Schedule.of(graph, order)  # positions computed once, for both passes over it
    table = buffer_table(graph, parse_collective_types(collective_types),
                         find_persistent_params(graph, persistent_params))
    first, last, _ = table.lifetimes(graph, order)
    held = _arena_held(table)
    sizes = -(-held.padded_bytes // align) * align  # commopt.buffers.planner.align_up
    arena = sum(lower_bound(sizes[rows], first[rows], last[rows]) for rows in held.group_rows)
    resident, copied = held.resident, held.copied
    return footprint(graph, order, arena, resident, copied, padded=True)


def plan_footprint(graph: Graph, order: Sequence[int], plan: BufferPlan,
                   zero_copy: Iterable[int] = ()) -> Footprint:
    """The footprint of the runner on ``order`` with ``plan`` (made for that order): what
    the runner's ``--memory`` measures, at the largest rank's sizes. ``zero_copy``: the
    producers the runner lets write straight into their buffer (they allocate nothing).
    A persistent parameter lives in its slot only (it allocates nothing either)."""
    index = graph.index_of
    resident: set[int] = set(zero_copy)
    copied: set[int] = set()
    for arena in plan.groups:
        for buf in arena.buffers:
            c = index[buf.node]
            if buf.persistent:
                resident.add(index[buf.value])
                continue
            if buf.role in ("output", "inout"):
                resident.add(c)
            if buf.role in ("input", "inout"):
                copied.add(c)
                copied.update(index[r.rpartition(":")[0]] for r in buf.shared_with)
    return footprint(graph, order, plan.totals.arena_bytes, resident, copied, padded=True)


@dataclass(frozen=True, eq=False)
class _ArenaHeld:
    """What a buffer table means for the runner's footprint, whatever the order: each
    buffer's padded bytes, the buffers of each group, the nodes whose value lives in an arena
    (``resident``: collective outputs, persistent parameters) and the collectives whose
    inputs are copied into one at the issue (``copied``)."""

    padded_bytes: np.ndarray
    group_rows: list[np.ndarray]
    resident: frozenset[int]
    copied: frozenset[int]


_HELD: weakref.WeakKeyDictionary[BufferTable, _ArenaHeld] = weakref.WeakKeyDictionary()


def _arena_held(table: BufferTable) -> _ArenaHeld:
    """``table``'s :class:`_ArenaHeld` (cached: the budget search estimates many orders)."""
    held = _HELD.get(table)
    if held is None:
        kind, collective = table.kind, table.sites.site_node[table.site]
        persistent = np.flatnonzero(kind == KIND_PERSISTENT).tolist()
        rows = table.rows
        resident = {*collective[(kind == KIND_OUTPUT) | (kind == KIND_READ_IN_PLACE)].tolist(),
                    *(rows[b][3] for b in persistent)}  # outputs, inout slots, parameters
        # collectives reading an input slot: its owner and the readers sharing it
        copied = {*collective[(kind == KIND_READ) | (kind == KIND_READ_IN_PLACE)].tolist(),
                  *table.sites.site_node[table.member_site].tolist()}
        held = _HELD[table] = _ArenaHeld(table.padded_bytes, list(table.group_rows.values()),
                                         frozenset(resident), frozenset(copied))
    return held


class FootprintBudget:
    """The runner's footprint a reordering may reach: ``budget_bytes`` (arenas at their lower
    bound plus the other live tensors, :func:`estimate_footprint`). The passes ask
    :meth:`fits` of every order they consider, next to the plain live-tensor budget.
    Memoizes the last few orders (passes check the same order more than once)."""

    def __init__(self, budget_bytes: int, *, align: int = DEFAULT_ALIGN_BYTES,
                 collective_types: str | Iterable[str] | None = None,
                 persistent_params: str | Iterable[str] | None = None,
                 base: Footprint | None = None) -> None:
        self.budget_bytes = int(budget_bytes)
        self.align = align
        self.collective_types = collective_types
        #: persistent parameter slots count as arena bytes for the whole step
        self.persistent_params = persistent_params
        #: the original order's footprint the budget was made from (None: given directly)
        self.base = base
        self._seen: dict[tuple[int, tuple[int, ...]], Footprint] = {}

    @classmethod
    def for_graph(cls, graph: Graph, max_memory_increase: float, original: Sequence[int], *,
                  align: int = DEFAULT_ALIGN_BYTES,
                  collective_types: str | Iterable[str] | None = None,
                  persistent_params: str | Iterable[str] | None = None) -> FootprintBudget:
        """``(1 + max_memory_increase)`` x the footprint of the original order (with the same
        persistent parameter slots)."""
        base = estimate_footprint(graph, original, align=align, collective_types=collective_types,
                                  persistent_params=persistent_params)
        budget = cls(int(base.peak_bytes * (1.0 + max_memory_increase)), align=align,
                     collective_types=collective_types, persistent_params=persistent_params, base=base)
        budget._remember(graph, original, base)  # the passes check the original order first
        return budget

    def footprint(self, graph: Graph, order: Sequence[int]) -> Footprint:
        """The estimated footprint of ``order`` (memoized for the last few orders)."""
        hit = self._seen.get((id(graph), tuple(order)))
        if hit is None:
            hit = estimate_footprint(graph, order, align=self.align,
                                     collective_types=self.collective_types,
                                     persistent_params=self.persistent_params)
            self._remember(graph, order, hit)
        return hit

    def _remember(self, graph: Graph, order: Sequence[int], footprint: Footprint) -> None:
        """Memoize ``order``'s footprint, forgetting the oldest beyond the last few."""
        if len(self._seen) >= 8:
            del self._seen[next(iter(self._seen))]
        self._seen[(id(graph), tuple(order))] = footprint

    def raised_to(self, peak_bytes: int) -> FootprintBudget:
        """This budget, at ``peak_bytes`` where that is more (same options, base and memoized
        footprints)."""
        if peak_bytes <= self.budget_bytes:
            return self
        raised = FootprintBudget(peak_bytes, align=self.align, collective_types=self.collective_types,
                                 persistent_params=self.persistent_params, base=self.base)
        raised._seen.update(self._seen)  # the same options: the same footprints
        return raised

    def peak(self, graph: Graph, order: Sequence[int]) -> int:
        """The estimated footprint's peak bytes of ``order``."""
        return self.footprint(graph, order).peak_bytes

    def fits(self, graph: Graph, order: Sequence[int]) -> bool:
        """Whether ``order``'s footprint is within the budget."""
        return self.peak(graph, order) <= self.budget_bytes


def footprint_summary(graph: Graph, order: Sequence[int], budget: FootprintBudget | None,
                      notes: list[str]):
    """The summary's and the report's footprint entry for ``order`` under ``budget`` (a
    :class:`FootprintBudget`; None gives None): before and after, arenas at their lower
    bound (an output set replaces ``after`` with the runner's exact figure); appends a note
    to ``notes`` when over budget."""
    from commopt.schemas.summary import MemoryFootprint

    if budget is None:
        return None
    before = budget.base  # computed once, when the budget was made
    after = budget.footprint(graph, order)  # memoized: the pass manager checked this order
    if after.peak_bytes > budget.budget_bytes:
        notes.append(f"memory budget not met: the footprint (arenas + other live tensors) is "
                     f"{after.peak_bytes:,} B, the budget {budget.budget_bytes:,} B")
    return MemoryFootprint(budget_bytes=budget.budget_bytes, before_bytes=before.peak_bytes,
                           after_bytes=after.peak_bytes, arena_before_bytes=before.arena_bytes,
                           arena_after_bytes=after.arena_bytes)
