"""What a pass is and what it is given.

A pass is a small frozen dataclass: a ``name`` class attribute and its options as fields.
``run(graph, order, ctx)`` returns a new order (a permutation of node indices) and never
mutates the graph, the order it was given or the context.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from commopt.errors import OptionError
from commopt.ir.graph import Graph, Node
from commopt.ir.schedule import Schedule
from commopt.sim.memory import DEFAULT_MAX_MEMORY_INCREASE, memory_budget

#: The default pipeline, chosen from measurements (analytical estimator, H100, the six
#: world-size-8 samples and four exported stacks of bench/graphs.py; makespan over the lower
#: bound, averaged): compute-overlap first builds the schedule within the memory budget, then
#: sink-waits moves the waits it placed early (to release memory) back down to their first
#: use, raise-comms lifts collectives into whatever budget is left, and polish keeps only
#: local moves the simulator confirms (never worse than its input). At +10% memory: this
#: order 1.135; sink-waits,raise-comms,compute-overlap 1.166; compute-overlap alone 1.192
#: (at +30%: 1.090, 1.112, 1.123). It was not worse than those on any graph measured.
DEFAULT_PIPELINE: tuple[str, ...] = ("compute-overlap", "sink-waits", "raise-comms", "polish")
#: The default with the bucket pass, after raise-comms (collectives issued early are the ones
#: that can be merged) and before polish. On the FSDP-like corpus graphs at world size 8 it
#: shortened the default's makespan by 3-9% with 8 GPUs per node and 10-36% with 1
#: (bench_bucketing); run first instead, it missed every bf16 merge (the casts feeding the
#: all_gathers come later). Not the default yet: candidate merges are replayed, not rewritten
#: (corpus ws8: the pass takes 0.0-0.7 s), but where memory is tight each kept bucket is
#: still proven on the rewritten graph (13,500-node realistic llama3_8b_L32, 8 GPUs per node:
#: 25 rewrites, ~50 s, 0.7% shorter; docs/bucketing.md).
BUCKETED_PIPELINE: tuple[str, ...] = ("compute-overlap", "sink-waits", "raise-comms", "bucket", "polish")


@dataclass(frozen=True)
class PassContext:
    """Everything a pass may use besides the graph and the order.

    - ``durations_us``: estimated duration of every node (rank-independent);
    - ``memory_budget_bytes``: the peak live memory no pass may exceed (None: no budget),
      normally ``(1 + max_memory_increase) * peak of the original order``, counted with
      padded sizes (``peak_memory(..., padded=True)``) so it is the same on every rank;
    - ``footprint_budget``: with persistent buffers (the runner's arenas), the footprint
      (arenas + other live tensors, :class:`commopt.buffers.footprint.FootprintBudget`) no
      pass may exceed either; None: only the live-tensor budget;
    - ``allow_cross_group_reorder``: collectives of different groups may change their
      relative order (same-group order is always kept);
    - ``options``: free-form options for plug-in passes;
    - ``estimate``: the duration of a node a pass adds (``estimate(node, graph)``, the run's
      estimator chain); None when durations were given per node, so no pass may add nodes;
    - ``not_one_program``: why it is not proven that every rank runs this same program
      (:func:`commopt.cross_group.not_one_program`); None: proven. A pass that changes which
      collectives exist (bucketing) needs the proof: every rank must merge alike;
    - ``compute_slowdown``: compute runs this many times as long beside communication in
      every simulation of an order (:mod:`commopt.sim.engine`; 1: not modelled). A pass that
      replays orders itself passes it on (``simulate(..., compute_slowdown=...)``).
    """

    durations_us: Sequence[float]
    memory_budget_bytes: int | None = None
    max_memory_increase: float = DEFAULT_MAX_MEMORY_INCREASE
    allow_cross_group_reorder: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    footprint_budget: Any = None
    estimate: Callable[[Node, Graph], float] | None = None
    not_one_program: str | None = None
    compute_slowdown: float = 1.0
    _sims: dict[tuple[int, tuple[int, ...]], Any] = field(
        default_factory=dict, compare=False, repr=False)
    _fitting: dict[tuple[int, tuple[int, ...]], tuple[Graph, bool]] = field(
        default_factory=dict, compare=False, repr=False)
    _numbers: dict[tuple[int, tuple[int, ...]], Any] = field(
        default_factory=dict, compare=False, repr=False)

    def simulate(self, graph: Graph, order: Sequence[int]):
        """:func:`commopt.sim.simulate` of ``order`` with these durations, memoized for the
        last few orders (the pass manager and the passes simulate the same orders)."""
        from commopt.sim import simulate

        key = _order_key(graph, order)
        hit = self._sims.get(key)  # values hold the graph, so its id is not reused meanwhile
        if hit is None:
            hit = (graph, simulate(graph, key[1], self.durations_us, compute_slowdown=self.compute_slowdown))
            if len(self._sims) >= 4:
                del self._sims[next(iter(self._sims))]
            self._sims[key] = hit
        return hit[1]

    def simulated(self, graph: Graph, order: Sequence[int]):
        """The numbers of ``order``'s simulation (:func:`commopt.sim.simulate_numbers`: no
        events, collective timings or memory curve), memoized like :meth:`simulate`, whose
        full result it returns when it holds one. The pass manager records each pass's order
        with these: only the input and final orders need a full result (for the reports),
        which costs about three times as much at 100k nodes."""
        from commopt.sim import simulate_numbers

        key = _order_key(graph, order)
        hit = self._sims.get(key) or self._numbers.get(key)
        if hit is None:
            hit = (graph, simulate_numbers(graph, key[1], self.durations_us,
                                           compute_slowdown=self.compute_slowdown))
            if len(self._numbers) >= 4:
                del self._numbers[next(iter(self._numbers))]
            self._numbers[key] = hit
        return hit[1]

    def fits(self, graph: Graph, order: Sequence[int]) -> bool:
        """Whether ``order`` keeps every memory budget: the padded live-tensor peak and, with
        persistent buffers, the footprint. Passes ask this of every order they keep."""
        key = _order_key(graph, order)
        hit = self._fitting.get(key)  # memoized like :meth:`simulate`: the manager asks again
        if hit is None:
            hit = (graph, self._fits_now(graph, order))
            if len(self._fitting) >= 4:
                del self._fitting[next(iter(self._fitting))]
            self._fitting[key] = hit
        return hit[1]

    def forget_orders(self) -> None:
        """Drop the memoized simulations and budget checks (:meth:`simulate`,
        :meth:`simulated`, :meth:`fits`): the pass manager is done with them once its
        pipeline ends, and their keys hold whole orders (what lives on is in its result)."""
        self._sims.clear()
        self._numbers.clear()
        self._fitting.clear()

    def _fits_now(self, graph: Graph, order: Sequence[int]) -> bool:
        """:meth:`fits`, computed."""
        from commopt.passes._common import within_budget

        if not within_budget(graph, order, self.memory_budget_bytes):
            return False
        return self.footprint_budget is None or self.footprint_budget.fits(graph, order)

    def capped_at(self, graph: Graph, order: Sequence[int]) -> PassContext:
        """This context with each budget ``order`` exceeds raised to what ``order`` holds:
        for a budget no order was found to meet, the passes then look for a better order
        that holds no more than ``order``."""
        from commopt.sim.memory import peak_memory

        live = self.memory_budget_bytes
        if live is not None:
            live = max(live, peak_memory(graph, order, padded=True)[0])
        fb = self.footprint_budget
        if fb is not None:
            fb = fb.raised_to(fb.peak(graph, order))
        return replace(self, memory_budget_bytes=live, footprint_budget=fb, _sims={}, _fitting={},
                       _numbers={})

    @classmethod
    def for_graph(
        cls,
        graph: Graph,
        durations_us: Sequence[float],
        *,
        max_memory_increase: float = DEFAULT_MAX_MEMORY_INCREASE,
        allow_cross_group_reorder: bool = False,
        original_order: Sequence[int] | None = None,
        options: dict[str, Any] | None = None,
        footprint_budget: Any = None,
        estimate: Callable[[Node, Graph], float] | None = None,
        not_one_program: str | None = None,
        compute_slowdown: float = 1.0,
    ) -> PassContext:
        """A context whose budget is :func:`commopt.sim.memory.memory_budget` of the original
        order (padded peak x ``(1 + max_memory_increase)``, the same on every rank)."""
        if len(durations_us) != len(graph):
            raise OptionError(f"{len(durations_us)} durations for a graph of {len(graph)} nodes",
                              field="durations_us")
        return cls(
            durations_us=tuple(float(d) for d in durations_us),
            memory_budget_bytes=memory_budget(graph, max_memory_increase, original_order),
            max_memory_increase=max_memory_increase,
            allow_cross_group_reorder=allow_cross_group_reorder,
            options=dict(options or {}),
            footprint_budget=footprint_budget,
            estimate=estimate,
            not_one_program=not_one_program,
            compute_slowdown=compute_slowdown,
        )

    def with_durations(self, durations_us: Sequence[float]) -> PassContext:
        """This context for a graph a pass rewrote: its durations, the same budgets (in
        bytes: they bound what the program holds, whatever its nodes)."""
        return replace(self, durations_us=tuple(float(d) for d in durations_us), _sims={},
                       _fitting={}, _numbers={})


def _order_key(graph: Graph, order: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    """The memo key of ``order`` of ``graph``: a Schedule's own tuple (no copy of 100k
    nodes), any other sequence as a tuple."""
    return id(graph), order.order if isinstance(order, Schedule) else tuple(order)


@dataclass(frozen=True)
class GraphChange:
    """What a pass that rewrites the graph returns instead of an order: the new graph, its
    order, the durations of its nodes, and one line saying what changed (for the pass
    record). ``detail`` is the pass's own account (e.g. the buckets), kept on the result."""

    graph: Graph
    order: list[int]
    durations_us: tuple[float, ...]
    note: str
    detail: Any = None


@dataclass(frozen=True)
class Pass:
    """Base of every pass: subclasses set ``name`` and implement :meth:`run`."""

    name: ClassVar[str] = ""
    #: One sentence: the heuristic, shown by ``commopt passes``.
    summary: ClassVar[str] = ""

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int] | GraphChange:
        """A new order of ``graph``'s nodes; must keep the invariants (commopt.invariants).
        A pass that rewrites the graph returns a :class:`GraphChange`; the passes after it
        work on the new graph."""
        raise NotImplementedError
