"""``OptimizeResult``: what :func:`commopt.optimize` found, frozen; and the output set's types.

The result holds the graph, the new schedule, the durations it was scored with, the pass
pipeline's record and the summary. It never changes after it is made: the output set is built
from it by :func:`commopt.outputs.build_outputs` with explicit options and written by
:func:`commopt.outputs.write_outputs`; when ``optimize`` was given an output directory, the
outputs it built and the files it wrote are part of the result it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from commopt.ir.graph import Graph
from commopt.ir.schedule import Schedule

if TYPE_CHECKING:
    from commopt.passes.manager import PipelineResult
    from commopt.schemas.buffer_plan import BufferPlan
    from commopt.schemas.report import OverlapReport
    from commopt.schemas.summary import Summary


@dataclass(frozen=True, slots=True)
class OutputOptions:
    """How the output set is made: buffer alignment (None: the planner's default, 512 B; else
    a power of two up to :data:`~commopt.buffers.planner.MAX_ALIGN_BYTES`), the collective
    types that get persistent buffers (None: all) and the groups whose parameters live in
    the arena (:mod:`commopt.buffers.persistent`; None: none)."""

    align: int | None = None
    comm_buffers: str | None = None
    #: process groups whose all_gathered parameters live in the arena (None/'none': off)
    persistent_params: str | None = None

    def __post_init__(self) -> None:
        """Refuse a bad alignment when the options are made, before any work is done."""
        if self.align is not None:
            from commopt.buffers.planner import check_align

            check_align(self.align)
        from commopt.buffers.persistent import parse_persistent_params

        parse_persistent_params(self.persistent_params)


T = TypeVar("T")


class Deferred(Generic[T]):
    """A value made by ``make()`` the first time it is asked for (:meth:`get`), then kept; or
    one made already (:meth:`made`). For an artifact that another process rendered into its
    file: this process makes its own copy only if a caller asks for it."""

    __slots__ = ("_make", "_value")

    def __init__(self, make: Callable[[], T]) -> None:
        self._make: Callable[[], T] | None = make
        self._value: T | None = None

    @classmethod
    def made(cls, value: T) -> Deferred[T]:
        """A Deferred holding ``value`` already."""
        deferred = cls(lambda: value)
        deferred.get()
        return deferred

    def get(self) -> T:
        """The value, made now if it never was."""
        if self._make is not None:
            self._value = self._make()
            self._make = None
        return self._value  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Outputs:
    """Every artifact of an output set, built once: nothing here is computed when written.

    The buffer plan and the runner's source are :class:`Deferred`: when forked children
    rendered their files (``commopt optimize`` on a large graph, :mod:`commopt.forked`), this
    process plans and generates its own equal copies only if :attr:`plan` or
    :attr:`runner_source` is read (both are deterministic, so the copies equal the files)."""

    summary: Summary
    graph_file: str
    deferred_plan: Deferred[BufferPlan | None]
    runner_name: str | None
    deferred_runner_source: Deferred[str | None]
    report: OverlapReport | None

    @property
    def plan(self) -> BufferPlan | None:
        """The buffer plan of the new order."""
        return self.deferred_plan.get()

    @property
    def runner_source(self) -> str | None:
        """The runner script's source (None when no runner was generated)."""
        return self.deferred_runner_source.get()


@dataclass(frozen=True, slots=True)
class OptimizeResult:
    """The optimized schedule of a graph and everything known about it.

    ``order`` is the new schedule; ``pipeline`` has the simulation before and after and a
    record per pass; ``summary`` is what ``summary.json`` holds (with the output set's
    entries when ``outputs`` were built). ``outputs`` and ``written`` are set when
    ``optimize`` wrote an output directory. When a pass rewrote the program (bucketing),
    ``graph`` and ``durations_us`` are the rewritten program's and ``source_graph`` /
    ``source_durations_us`` the loaded one's, which "before" numbers describe; otherwise
    both are None.
    """

    graph: Graph
    order: Schedule
    durations_us: tuple[float, ...]
    estimator: str
    pipeline: PipelineResult
    summary: Summary
    outputs: Outputs | None = None
    written: tuple[Path, ...] = ()
    source_graph: Graph | None = None
    source_durations_us: tuple[float, ...] | None = None

    @property
    def before_graph(self) -> Graph:
        """The program the "before" numbers describe: the loaded graph."""
        return self.graph if self.source_graph is None else self.source_graph

    @property
    def before_durations_us(self) -> tuple[float, ...]:
        """The durations of :attr:`before_graph`'s nodes."""
        return self.durations_us if self.source_durations_us is None else self.source_durations_us

    @property
    def plan(self) -> BufferPlan | None:
        """The buffer plan on the new order, when outputs were built."""
        return self.outputs.plan if self.outputs is not None else None

    @property
    def report(self) -> OverlapReport | None:
        """The before/after overlap report, when outputs were built."""
        return self.outputs.report if self.outputs is not None else None

    @property
    def has_collectives(self) -> bool:
        """Whether the graph had anything to overlap."""
        return self.summary.collectives > 0
