"""compute-overlap: list scheduling on a simulated clock so compute hides communication.

The scheduler replays the order on the simulator's model (one compute stream, one FIFO
stream per process group) and at every step picks the next node:

1. views and metadata ops as soon as they are ready (they cost nothing);
2. waits whose collective has already finished (they cost nothing either);
3. the next collective of the global order, issued as soon as it is ready unless its
   group's stream stays busy past the next compute step anyway (issuing later starts it at
   the same time and holds its output for less long) or its output does not fit the memory
   budget (some policies issue just in time, or the collective needed first: :class:`_Policy`);
4. compute, preferring nodes the next unissued collectives depend on (so the next
   collective can start while the current one runs), then the input order;
5. only when nothing else is ready, the wait whose collective finishes first.

Memory: the scheduler tracks live bytes (padded, the rules of :mod:`commopt.sim.memory`).
When the next compute node would exceed the budget it takes a ready wait first (a wait
releases its collective's inputs and unblocks the consumers that free storage) and
otherwise follows the input order, which keeps the input's memory profile.

Several collectives can be in flight at once, one stream per group. Priorities are tuples
ending with the node's position in the input order, so the result is deterministic. Time is
O((nodes + edges) log nodes): need-ranks come from one reverse sweep, not ancestor sets.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from commopt.estimators.analytical import heavy_op
from commopt.ir.graph import Graph, NodeKind
from commopt.ir.schedule import Schedule
from commopt.passes._common import (
    NEAR_EQUAL,
    collective_chain,
    group_chain,
    memory_lean_order,
    most_robust,
    neighbour_lists,
    node_kinds,
    zero_cost_view_mask,
)
from commopt.passes.base import Pass, PassContext
from commopt.sim.engine import makespan_and_exposed_us
from commopt.sim.memory import peak_memory
from commopt.sim.model import ZERO_TIME_KINDS, MemoryModel, memory_model, needs_finish

_INF = float("inf")
#: Node-schedules spent at most, over all policies, on schedules within the live-tensor budget
#: but over the footprint budget (the scheduler does not track the arenas), each followed by a
#: retry at a lower internal budget: 50 at 1k nodes, 5 at 10k, none at 100k. Once it is spent
#: with nothing found, the search stops: on the 100k-node FSDP stack every policy reached the
#: lower bound over the footprint budget, 3 schedules for none (raise-comms then fits).
_FOOTPRINT_WORK = 50_000
#: A schedule over the footprint budget by more than this fraction of it is not retried at a
#: lower internal budget. On the synthetic FSDP stacks every lower-bound schedule was about 40%
#: over (218 of 566 MiB at 10k nodes); the retries ended near the input order (27,125 us), from
#: which raise-comms reached 17,189 us, against 16,445 us (the bound) from the input order
#: itself; 1k nodes: 1,844 -> 1,642 us (bound 1,630). No corpus graph changed.
_FOOTPRINT_HOPELESS = 0.1
#: Largest graph whose schedules are also searched from a second input order
#: (:meth:`ComputeOverlap._other_starts`), which costs up to as much again as the first
#: search: the corpus graphs (up to 2.2k nodes) gain up to 20% from it; the 10k-node
#: stitched FSDP stack gained nothing (makespan / bound 1.022 either way) for passes of
#: 9.9 s instead of 7.2, so above this size one start.
_SECOND_START_MAX_NODES = 10_000
#: A schedule this close to the lower bound is kept without the second start, which could
#: finish at most this fraction sooner.
_SECOND_START_SLACK = 0.001


@dataclass(frozen=True)
class ComputeOverlap(Pass):
    """Reorders compute around the collectives so each collective runs behind compute.

    ``lookahead``: how many of the next unissued collectives get their dependencies
    scheduled first. The memory budgets are enforced on the result (the live-tensor peak and,
    with persistent buffers, the footprint: :meth:`PassContext.fits`); when a schedule exceeds
    either, the scheduler retries with an internal budget lowered by the overshoot, and finally
    keeps the input order (an input already over the budget: see :meth:`run`).
    """

    name: ClassVar[str] = "compute-overlap"
    summary: ClassVar[str] = "list-schedule on the simulated clock: collectives early, waits late, compute that feeds the next collective first"
    lookahead: int = 1

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int]:
        """The overlapped order (see the module docstring).

        Schedules with each of a few compute priorities (:meth:`_policies`: bottom level or
        the next collectives' needs, with or without a reservation for the input order's
        future peak) and keeps the schedule that finishes first on the scheduler's own
        clock (the simulator's model), stopping early at the lower bound — among schedules
        within :data:`~commopt.passes._common.NEAR_EQUAL` of that makespan, the one whose
        makespan degrades least when the costs are off (:func:`most_robust`); that one
        replaces the input order only when the simulator confirms it is better (makespan,
        then exposed communication). Unless the first search found a schedule near the lower
        bound (and up to :data:`_SECOND_START_MAX_NODES` nodes), the :data:`_SECOND_ROUND`
        policies run too, and the first ones also run from a second input order
        (:meth:`_other_starts`).

        An input order over a memory budget (one set below its peak) is first made leaner
        (:func:`_leaner`) and scheduled from there; any schedule within the budget then
        replaces it. When none is, the budget is out of reach for this scheduler: the best
        schedule that uses no more memory than the leaner order replaces the input (the
        result never holds more than the input; the summary says the budget was not met).
        """
        if not graph.collectives():
            return list(order)
        model = memory_model(graph, padded=True)
        before = ctx.simulate(graph, order)
        if ctx.fits(graph, order):
            found_all = self._search(graph, order, ctx, model, before, before.makespan_us)
            near_us = _unslowed_bound(graph, ctx, before) * (1.0 + _SECOND_START_SLACK)
            if not (found_all and min(k[0] for k, _ in found_all) <= near_us) \
                    and len(graph) <= _SECOND_START_MAX_NODES:
                rank0 = len(self._attempts(len(graph), ctx))  # later searches rank after

                def search(start: Sequence[int], tries: list[tuple[_Policy, PassContext]]) -> None:
                    nonlocal rank0
                    found_all.extend(((m, e, rank0 + r, jit), c) for (m, e, r, jit), c in self._search(
                        graph, start, ctx, model, before, before.makespan_us, tries))
                    rank0 += len(tries)

                search(order, [(p, ctx) for p in _SECOND_ROUND])
                for start in self._other_starts(graph, order, ctx):
                    search(start, [(p, ctx) for p in self._policies(len(graph))])
            if not found_all:
                return list(order)
            chosen = most_robust(graph, ctx, _prefer_eager(found_all))
            after = makespan_and_exposed_us(graph, chosen, ctx.durations_us,
                                            compute_slowdown=ctx.compute_slowdown)
            if after < (before.makespan_us, before.exposed_comm_us):
                return chosen
            return list(order)
        lean = _leaner(graph, order, ctx)
        found_all = self._search(graph, lean, ctx, model, before, _INF)
        if not found_all:
            within = ctx.capped_at(graph, lean)
            found_all = self._search(graph, lean, within, model, before, _INF)
        return most_robust(graph, ctx, _prefer_eager(found_all)) if found_all else lean

    def _search(self, graph: Graph, order: Sequence[int], ctx: PassContext, model: MemoryModel,
                before, ceiling_us: float, tries: list[tuple[_Policy, PassContext]] | None = None,
                ) -> list[tuple[tuple[float, float, int], list[int]]]:
        """((makespan, exposed, rank), order) of every policy's best schedule within ``ctx``'s
        budgets, tried in ``tries`` order (default :meth:`_attempts`) up to :meth:`_cap`
        schedules, stopping at the lower bound of ``before`` (the input's simulation), or
        with nothing found once :data:`_FOOTPRINT_WORK` is spent."""
        floor_us = _unslowed_bound(graph, ctx, before) * (1.0 + 1e-9)
        found_all: list[tuple[tuple[float, float, int], list[int]]] = []
        cap = self._cap(len(graph))
        retries = [_FOOTPRINT_WORK // max(1, len(graph))]  # footprint retries left, all policies
        prepared: dict[bool, _Prepared] = {}  # by the collective-chain rule
        for rank, (policy, pctx) in enumerate(tries or self._attempts(len(graph), ctx)):
            if rank >= cap and found_all:
                break
            if rank >= cap and pctx is ctx:
                continue  # past the cap only the kept-order fallback runs, while nothing fits
            if retries[0] < 0 and not found_all:
                break  # nothing fits the footprint budget and the work for it is spent
            rule = pctx.allow_cross_group_reorder
            if rule not in prepared:
                prepared[rule] = _Prepared(graph, order, pctx, model)
            found = self._fitting(graph, order, pctx, policy, model, ceiling_us, retries,
                                  prepared[rule])
            if found is not None:
                cand, makespan_us, exposed_us = found
                found_all.append(((makespan_us, exposed_us, rank, policy.just_in_time), cand))
                if makespan_us <= floor_us:
                    break  # at the lower bound: no other policy can do better
        return found_all

    def _other_starts(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[list[int]]:
        """Input orders the policies are also tried from when the first start ends more than
        :data:`_SECOND_START_SLACK` above the lower bound (:meth:`run`): ``order`` with every
        collective raised and every wait sunk as far as the budget allows (raise-comms, then
        sink-waits), under ``ctx``'s rule only (the kept cross-group order never won from
        there on the corpus). The scheduler breaks ties by input position and, under memory pressure,
        follows the input's memory profile, so a prefetching input leads it elsewhere: on
        the corpus's expert-parallel graphs it wins by 10-20%, on the 2-D ones the input
        order does (see :meth:`run`). Empty when it equals ``order``. Both passes keep to
        the budgets (or return their input, which fits here), so the start fits them."""
        from commopt.passes.raise_comms import RaiseComms
        from commopt.passes.sink_waits import SinkWaits

        start = list(SinkWaits().run(graph, RaiseComms().run(graph, order, ctx), ctx))
        return [start] if start != list(order) else []

    @staticmethod
    def _cap(nodes: int) -> int:
        """How many schedules are tried: ``max(2, 300k // nodes)``, so large graphs stay
        near-linear."""
        return max(2, 300_000 // max(1, nodes))

    def _attempts(self, nodes: int, ctx: PassContext) -> list[tuple[_Policy, PassContext]]:
        """(policy, context) pairs in the order tried. Where collectives of different groups
        may be reordered, every policy is also tried keeping their global order: that
        constraint sometimes gives the greedy scheduler a better schedule or one within the
        memory budget (the 2-D sample: 116 us kept, none fitting reordered), and any order
        valid with it is valid without. :meth:`run` stops at :meth:`_cap` schedules, except
        that a kept-order schedule is still tried when nothing fitted."""
        policies = self._policies(nodes)
        tries = [(p, ctx) for p in policies]
        if ctx.allow_cross_group_reorder:
            kept = dataclasses.replace(ctx, allow_cross_group_reorder=False)
            tries += [(p, kept) for p in policies]
        return tries

    def _policies(self, nodes: int) -> list[_Policy]:
        """The compute priorities tried, in the order they most often won on the samples and
        benchmark stacks (see :class:`_Policy`); at most ``max(2, 300k // nodes)`` of them,
        so large graphs stay near-linear."""
        found = [_Policy("bottom-level", 0, memory="frees"),
                 _Policy("need", self.lookahead),
                 _Policy("need", self.lookahead, memory="frees", reserve=True),
                 _Policy("bottom-level", 0, stall=True, memory="frees"),
                 _Policy("bottom-level", 0, stall=True, memory="frees", reserve=True),
                 _Policy("need", self.lookahead, memory="frees", reserve=True, just_in_time=True),
                 _Policy("bottom-level", 0, stall=True, memory="frees", reserve=True, just_in_time=True),
                 _Policy("need", self.lookahead, memory="frees", reserve=True, just_in_time=True,
                         by_deadline=True),
                 _Policy("bottom-level", 0, stall=True, memory="frees", reserve=True, just_in_time=True,
                         by_deadline=True)]
        return list(dict.fromkeys(found))

    def _fitting(self, graph: Graph, order: Sequence[int], ctx: PassContext, policy: _Policy,
                 model: MemoryModel, ceiling_us: float, retries: list[int],
                 prepared: _Prepared | None = None) -> tuple[list[int], float, float] | None:
        """The best schedule found within the memory budgets (None: none fits).

        The scheduler's own peak follows the simulator's memory rules (padded), so when a
        schedule overshoots the live-tensor budget, or fits it but not the footprint budget
        (arenas + other live tensors, which the scheduler does not track), the internal budget
        is lowered by the overshoot (up to six rounds). Retries for a footprint overshoot
        stop once the schedule is slower than ``ceiling_us`` (the input order's makespan:
        lower budgets only slow it down further), when ``retries[0]``, the schedules over
        the footprint budget every policy may still spend, runs out (:data:`_FOOTPRINT_WORK`:
        large graphs stay near-linear), or when the overshoot exceeds
        :data:`_FOOTPRINT_HOPELESS` of the footprint budget: the live-tensor budget is then no
        proxy for it, and what fits at last is the input order with a few moves, a worse start
        for the passes after this one (which check the footprint themselves) than the input
        itself. Greedy issue decisions make the peak non-monotonic in the
        internal budget, so after that it bisects between 0 (the scheduler then follows the
        input order's memory profile) and the lowest failing budget, keeping the fastest
        schedule that fits. The result is confirmed with :meth:`PassContext.fits`.
        """
        budget = ctx.memory_budget_bytes
        best: tuple[tuple[float, float], list[int]] | None = None
        hopeless = False

        def attempt(internal: int | None) -> int:
            nonlocal best, hopeless
            cand, makespan_us, exposed_us, peak = _schedule(graph, order, ctx, internal, policy, model,
                                                            prepared)
            over = _overshoot(graph, ctx, cand, peak)
            if over <= 0:
                key = (makespan_us, exposed_us)
                if best is None or key < best[0]:
                    best = (key, cand)
            elif budget is not None and peak <= budget:  # over the footprint budget only
                retries[0] -= 1
                hopeless = hopeless or makespan_us > ceiling_us or retries[0] < 0 \
                    or over > ctx.footprint_budget.budget_bytes * _FOOTPRINT_HOPELESS
            return over

        internal = budget
        for _ in range(6):
            over = attempt(internal)
            if budget is None or over <= 0 or hopeless:
                break
            internal -= over + budget // 100
            if internal <= 0:
                break
        if best is None and budget is not None and not hopeless:
            lo, hi = 0, max(0, min(internal, budget))
            attempt(lo)
            for _ in range(3):
                mid = (lo + hi) // 2
                if attempt(mid) <= 0:
                    lo = mid
                else:
                    hi = mid
        if best is None or not ctx.fits(graph, best[1]):
            return None
        return best[1], best[0][0], best[0][1]


def _unslowed_bound(graph: Graph, ctx: PassContext, before) -> float:
    """The lower bound the list scheduler's own makespans compare with: ``before``'s, or
    with a compute slowdown (which the scheduler's clock does not model, and which raises
    the bound) the bound without it."""
    if ctx.compute_slowdown == 1.0:
        return before.lower_bound_us
    from commopt.sim.bounds import lower_bounds
    from commopt.sim.model import step_durations

    return lower_bounds(graph, step_durations(graph, ctx.durations_us)).value


def _prefer_eager(found: list[tuple[tuple, list[int]]]) -> list[tuple[tuple, list[int]]]:
    """``found`` without the just-in-time schedules that do not beat the best eager one by
    more than :data:`~commopt.passes._common.NEAR_EQUAL`. The passes after this one raise
    collectives from an eager schedule, rarely from one that issues them just in time:
    corpus llama_tp_sp_2d at world size 2, +10% live tensors, compute-overlap's best
    schedules were 680.7 us just in time and 683.5 us eager, and the pipeline ended at
    680.7 and 667.1 from them. Where communication is the bottleneck the just-in-time
    schedule is far ahead (mesh2d_dp4tp2_L32 at one GPU per node: 259.5 against 265.9 ms)."""
    eager = [k[0] for k, _ in found if not k[3]]
    if not eager:
        return found
    bar = min(eager) * (1.0 - NEAR_EQUAL)
    return [(k, c) for k, c in found if not k[3] or k[0] < bar]


def _leaner(graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int]:
    """An order that holds less than ``order``, which exceeds a memory budget: rounds of
    :func:`~commopt.passes._common.memory_lean_order` while each lowers the live-tensor or
    footprint peak and raises neither, at most four (each is linear), stopping once the
    budgets are met. The scheduler then starts from it, so a schedule that follows its
    memory profile fits where one following the input's could not (an FSDP stack: 552 ->
    520 MiB). ``order`` itself when no round helps."""
    best, best_use = list(order), _usage(graph, ctx, order)
    for _ in range(4):
        cand = memory_lean_order(graph, best, ctx.allow_cross_group_reorder)
        use = _usage(graph, ctx, cand)
        if use == best_use or any(u > b for u, b in zip(use, best_use, strict=True)):
            break
        best, best_use = cand, use
        if ctx.fits(graph, best):
            break
    return best


def _usage(graph: Graph, ctx: PassContext, order: Sequence[int]) -> tuple[int, int]:
    """What ``order`` holds at its peak: padded live tensors, and the footprint (arenas +
    other live tensors; 0 without persistent buffers)."""
    fb = ctx.footprint_budget
    return peak_memory(graph, order, padded=True)[0], 0 if fb is None else fb.peak(graph, order)


def _overshoot(graph: Graph, ctx: PassContext, order: list[int], peak: int) -> int:
    """Bytes by which ``order`` exceeds its memory budgets (<= 0: it fits them): the
    live-tensor budget (``peak``: the scheduler's padded peak), then the footprint budget."""
    budget = ctx.memory_budget_bytes
    over = 0 if budget is None else peak - budget
    fb = ctx.footprint_budget
    if over > 0 or fb is None:
        return over
    return max(over, fb.peak(graph, order) - fb.budget_bytes)


@dataclass(frozen=True)
class _Policy:
    """How the scheduler picks the next compute node.

    - ``"need"``: compute that one of the next ``lookahead`` unissued collectives depends on
      first, then the input order;
    - ``"bottom-level"``: the longest remaining path first (compute durations, collective
      durations where a successor needs the result, the global collective order), so the
      chain the makespan hangs on runs first and compute with slack fills the gaps while
      collectives are in flight; with ``stall`` the compute stream idles for a wait that
      finishes before the picked compute node would, when the wait's path is longer;
    - ``"domination"``: compute in the order of the heavy compute (matmuls, attention) it
      leads to (:func:`domination_ranks`): each heavy node's inputs right before it, in
      input order, and work no heavy node needs (what feeds only collectives, such as a
      weight gradient's cast before its reduce_scatter) as soon as its inputs are done. The
      rule of torch's overlap scheduler for its compute; bottom levels instead run the longest
      chain first, which can starve a group's stream of ready collectives.
    """

    priority: str
    lookahead: int
    stall: bool = False
    #: under memory pressure: ``"frees"`` runs the ready compute node that frees the most
    #: (net of what it allocates) before stalling on a wait; ``"input"`` takes waits first,
    #: then follows the input order.
    memory: str = "input"
    #: reserve room for the input order's future peak: a node ahead of the input order's
    #: frontier (the first node not yet scheduled) runs without pressure only while the
    #: input order's live bytes, plus what nodes run ahead hold over the input positions
    #: before their own, fit the budget from the frontier up to the node (:class:`_MaxProfile`).
    reserve: bool = False
    #: while no compute is ready, issue a collective only if its group's stream would idle
    #: before the first wait ends (the next decision); without it, every collective that
    #: fits is issued, which front-loads prefetches and holds their outputs for nothing
    #: where communication is the bottleneck.
    just_in_time: bool = False
    #: the ready collective whose result the input order uses first is issued first (its
    #: own position where nothing but the output uses it, as a gradient's reduce_scatter):
    #: a backward pass re-gathers its layers' parameters in an order its first uses reverse
    #: pairwise (mesh2d_dp4tp2_L32: the second all_gather of a layer is needed first), and
    #: by input position the collective needed first queues behind the other. Without it,
    #: ready collectives go by input position. Only where the collective chain lets a
    #: group's collectives change their order does it change anything.
    by_deadline: bool = False


#: Policies tried, from the input order, only when the first search ends above the lower
#: bound (before the second start, :meth:`ComputeOverlap.run`): corpus ws8 llama_fsdp_bf16 at
#: torch's peak, 737.7 -> 723.7 us with it (torch's order: 728.5); no other corpus graph
#: changed. Tried from the second start too it changed nothing on the corpus and cost time.
_SECOND_ROUND = (_Policy("domination", 0, memory="frees"),)


def domination_ranks(graph: Graph, order: Sequence[int]) -> list[int]:
    """Per node, the rank in ``order`` of the first heavy compute node
    (:data:`~commopt.estimators.analytical.HEAVY_OPS`) that is it or depends on it; a node no
    heavy compute depends on ranks with the latest of its inputs, so it runs as soon as they
    are done (its heavy inputs' rank, not later)."""
    nodes = graph.nodes
    inf = len(nodes) + 1
    own = [inf] * len(nodes)  # a heavy node's own rank
    heavy = (i for i in order if nodes[i].kind is NodeKind.COMPUTE and heavy_op(nodes[i].op))
    for rank, i in enumerate(heavy):
        own[i] = rank
    sptr, sidx = graph.succ_arrays()
    dom = [inf] * len(nodes)
    for i in order[::-1]:  # a slice: reversed() of a Schedule indexes it node by node
        best = own[i]
        for k in range(sptr[i], sptr[i + 1]):
            v = dom[sidx[k]]
            if v < best:
                best = v
        dom[i] = best
    pptr, pidx = graph.pred_arrays()
    for i in order:  # off the heavy path: with the latest of its inputs
        if dom[i] == inf:
            dom[i] = max((dom[pidx[k]] for k in range(pptr[i], pptr[i + 1])), default=0)
    return dom


def bottom_levels_us(graph: Graph, order: Sequence[int], durations_us: Sequence[float],
                     chain: dict[int, int]) -> list[float]:
    """Longest path (us) from the start of each node to the end of the graph.

    A collective's duration counts towards the successors that need it finished
    (:func:`commopt.sim.model.needs_finish`: its waits, readers of its value, the next
    collective of its group); its other successors only need it issued, as do chain successors (``chain``: the kept global collective order). Inputs,
    outputs and views take no time. One reverse sweep over ``order`` (a topological order).

    A group's stream runs its collectives one at a time in any order, so where the graph
    leaves their order free (:meth:`~commopt.ir.graph.Graph.without_group_order`) the next
    collective of the group in ``order`` still counts as needing the collective finished:
    without that queue a collective's path ends at its own wait, compute feeding the
    group's collectives ranks last, and they pile up at the end (corpus ws8 llama_fsdp: 773
    vs 647 us for the bottom-level policy).
    """
    n = len(graph.nodes)
    succ = neighbour_lists(graph, {}, successors=True)
    kinds = node_kinds(graph)
    is_coll = (kinds == NodeKind.COLLECTIVE).tobytes()
    zero_time = np.isin(kinds, [int(k) for k in ZERO_TIME_KINDS])
    dur = np.where(zero_time, 0.0, np.asarray(durations_us, dtype=float)).tolist()
    queue = {} if graph.group_order else group_chain(graph, order)
    chained = bytearray(n)
    for i in chain:
        chained[i] = 1
    bl = [0.0] * n
    for i in order[::-1]:  # a slice: reversed() of a Schedule indexes it node by node
        d = dur[i]
        best = 0.0
        if is_coll[i]:
            for s in succ[i]:
                v = bl[s] + d if needs_finish(graph, i, s) else bl[s]
                if v > best:
                    best = v
            if d > best:
                best = d
            q = queue.get(i)
            if q is not None and bl[q] + d > best:
                best = bl[q] + d
        else:
            for s in succ[i]:
                v = bl[s]
                if v > best:
                    best = v
            best += d
        if chained[i] and bl[chain[i]] > best:
            best = bl[chain[i]]
        bl[i] = best
    return bl


class _MaxProfile:
    """The input order's live-bytes curve plus bytes held early, with range max queries.

    A node run ahead of the input order's frontier holds its bytes over the input
    positions before its own (where the input order did not hold them): ``add(p, b)`` adds
    ``b`` over positions ``[0, p)``; ``max(lo, hi)`` is the largest value over ``[lo, hi)``.
    A segment tree with lazy additions, O(log n) per call.
    """

    def __init__(self, curve: Sequence[int]) -> None:
        n = max(1, len(curve))
        self.n = n
        self.h = n.bit_length()
        t = np.zeros(2 * n, dtype=np.int64)
        t[n:n + len(curve)] = curve
        for k in range(self.h - 1, -1, -1):  # a level at a time, children first
            lo, hi = 1 << k, min(2 << k, n)
            if lo < hi:
                t[lo:hi] = np.maximum(t[2 * lo:2 * hi:2], t[2 * lo + 1:2 * hi:2])
        self.t = t.tolist()
        self.d = [0] * n

    def _build(self, p: int) -> None:
        """Recompute the ancestors of ``p`` from their children and pending additions."""
        t, d = self.t, self.d
        while p > 1:
            p >>= 1
            a, b = t[2 * p], t[2 * p + 1]
            t[p] = (a if a > b else b) + d[p]

    def _push(self, p: int) -> None:
        """Hand the pending additions of ``p``'s ancestors down to their children."""
        t, d, n = self.t, self.d, self.n
        for s in range(self.h, 0, -1):
            i = p >> s
            if i and d[i]:
                v, c = d[i], 2 * i
                t[c] += v
                t[c + 1] += v
                if c < n:
                    d[c] += v
                if c + 1 < n:
                    d[c + 1] += v
                d[i] = 0

    def add(self, stop: int, value: int) -> None:
        """Add ``value`` over positions ``[0, stop)``."""
        t, d, n = self.t, self.d, self.n
        lo, hi = n, stop + n
        while lo < hi:
            if lo & 1:
                t[lo] += value
                if lo < n:
                    d[lo] += value
                lo += 1
            if hi & 1:
                hi -= 1
                t[hi] += value
                if hi < n:
                    d[hi] += value
            lo >>= 1
            hi >>= 1
        self._build(n)
        self._build(stop + n - 1)

    def max(self, start: int, stop: int) -> int:
        """The largest value over positions ``[start, stop)`` (``stop > start``)."""
        lo, hi = start + self.n, stop + self.n
        self._push(lo)
        self._push(hi - 1)
        t = self.t
        best = t[lo]
        while lo < hi:
            if lo & 1:
                if t[lo] > best:
                    best = t[lo]
                lo += 1
            if hi & 1:
                hi -= 1
                if t[hi] > best:
                    best = t[hi]
            lo >>= 1
            hi >>= 1
        return best


def _schedule(graph: Graph, order: Sequence[int], ctx: PassContext, budget: int | None,
              policy: _Policy, model: MemoryModel,
              prepared: _Prepared | None = None) -> tuple[Schedule, float, float, int]:
    """One list schedule: the order, its makespan and exposed communication on the
    scheduler's clock (the simulator's model) and its padded peak memory. ``prepared``: the
    facts every schedule of ``order`` under ``ctx``'s chain rule shares (made when None)."""
    if prepared is None:
        prepared = _Prepared(graph, order, ctx, model)
    return _ListScheduler(graph, order, ctx, budget, policy, model, prepared).run()


_heappush, _heappop = heapq.heappush, heapq.heappop  # module globals: the scheduler's loops call them per node
#: The ready queue each node goes to (:attr:`_Prepared.queue`): graph inputs and views share
#: one (inputs allocate nothing when they run), compute, waits, collectives, the output.
_Q_INPUT, _Q_VIEW, _Q_COMPUTE, _Q_WAIT, _Q_COLL, _Q_OUT = range(6)
#: The compute priorities whose key is a level (largest first), with the :class:`_Prepared`
#: method that makes it; any other priority ranks by need.
_LEVELS = {"bottom-level": "level", "domination": "domination"}


class _Prepared:
    """What every list schedule of one input order shares, whatever its policy and budget:
    positions, the collective chain (``ctx``'s rule), each node's ready queue, need ranks,
    in-degrees, the nodes ready at the start and the graph inputs' bytes; bottom levels, the
    ranks of the priority keys, the users of each storage and the input order's live-bytes
    curve on first use. Made once per order and chain rule, so the policies tried
    (:meth:`ComputeOverlap.run`) do not each redo the sweeps."""

    def __init__(self, graph: Graph, order: Sequence[int], ctx: PassContext, model: MemoryModel) -> None:
        self.graph, self.order, self.model, self.dur = graph, order, model, ctx.durations_us
        self.n = n = len(graph.nodes)
        schedule = Schedule.of(graph, order)
        self.pos = schedule.positions
        self.sequence = schedule.order  # a tuple: the scheduler indexes it per node
        self.sptr, self.sidx = graph.succ_arrays()
        self.chain = collective_chain(graph, order, ctx.allow_cross_group_reorder)
        self.succ = neighbour_lists(graph, self.chain, successors=True)  # data edges, then the chain's
        kinds = node_kinds(graph)
        self.queue = _queues(graph, kinds)
        #: whether every node of the compute queue is compute, so :meth:`users_of` re-ranks
        #: each one whose net allocation drops (else the scheduler tracks nets from the start)
        self.nets_tracked = not np.any((kinds != NodeKind.COMPUTE) & (self.queues() == _Q_COMPUTE))
        self.seq, self.colls, self.need = self._need_ranks()
        nodes = graph.nodes
        self.group = {c: nodes[c].collective.group for c in self.colls}
        #: each wait's collective, ``n`` for none (the scheduler's collective ends have a
        #: slot there that stays 0.0)
        self.wait_of = [n] * n
        for w in np.flatnonzero(kinds == NodeKind.WAIT).tolist():
            c = nodes[w].wait_of
            if c is not None:
                self.wait_of[w] = c
        ptr, _ = graph.pred_arrays()
        indeg = np.diff(np.asarray(ptr, dtype=np.int64))
        np.add.at(indeg, np.fromiter(self.chain.values(), dtype=np.int64, count=len(self.chain)), 1)
        self.indeg = indeg.tolist()
        sequence = np.asarray(self.sequence, dtype=np.int64)
        self.sources = sequence[indeg[sequence] == 0].tolist()  # in input order
        alloc = model.alloc
        self.inputs_bytes = sum([alloc[i] for i in np.flatnonzero(kinds == NodeKind.INPUT).tolist()])
        self._level: list[float] | None = None
        self._domination: list[float] | None = None
        self._users: dict[int, list[int]] | None = None
        self._curve = None
        self._deadline: list[int] | None = None
        self._ranks: dict[str, tuple[list[int], list[int]]] = {}

    def deadline(self) -> list[int]:
        """Per collective: the first input position that uses its result through its waits
        (the graph's output excluded), else its own position; computed on first use."""
        if self._deadline is None:
            pos, queue, sptr, sidx = self.pos, self.queue, self.sptr, self.sidx
            used_at: dict[int, int] = {}  # collective -> first position using it
            for w, c in enumerate(self.wait_of):
                if c == self.n:
                    continue
                for k in range(sptr[w], sptr[w + 1]):
                    if queue[sidx[k]] != _Q_OUT:
                        used_at[c] = min(used_at.get(c, self.n), pos[sidx[k]])
            self._deadline = [used_at.get(i, p) for i, p in enumerate(pos)]
        return self._deadline

    def level(self) -> list[float]:
        """Bottom levels (:func:`bottom_levels_us`), computed on first use."""
        if self._level is None:
            self._level = bottom_levels_us(self.graph, self.order, self.dur, self.chain)
        return self._level

    def domination(self) -> list[float]:
        """Minus each node's domination rank (:func:`domination_ranks`), on first use."""
        if self._domination is None:
            self._domination = [-float(r) for r in domination_ranks(self.graph, self.order)]
        return self._domination

    def ranks(self, key: str) -> tuple[list[int], list[int]]:
        """``(rank, at)``: every node's rank by (``key``, input position) and the node at
        each rank, so a ready queue holds ranks (plain ints) instead of tuples. ``key``:
        ``"need"``, ``"deadline"``, or a :data:`_LEVELS` priority (larger levels first).
        Computed on first use."""
        if key not in self._ranks:
            if key in _LEVELS:
                keys = -np.asarray(getattr(self, _LEVELS[key])(), dtype=float)
            else:
                keys = np.asarray(self.need if key == "need" else self.deadline(), dtype=np.int64)
            at = np.lexsort((np.asarray(self.pos, dtype=np.int64), keys))
            rank = np.empty(self.n, dtype=np.int64)
            rank[at] = np.arange(self.n)
            self._ranks[key] = rank.tolist(), at.tolist()
        return self._ranks[key]

    def queues(self) -> np.ndarray:
        """:attr:`queue` as an array."""
        return np.frombuffer(self.queue, dtype=np.int8)

    def users_of(self) -> dict[int, list[int]]:
        """Compute nodes (of the compute queue) by the storage roots they release (to
        re-rank them as uses drop)."""
        if self._users is None:
            users: dict[int, list[int]] = {}
            releases = self.model.releases
            order = np.asarray(self.order, dtype=np.int64)
            compute = (node_kinds(self.graph) == NodeKind.COMPUTE) & (self.queues() == _Q_COMPUTE)
            for i in order[compute[order]].tolist():
                for r in releases[i]:
                    users.setdefault(r, []).append(i)
            self._users = users
        return self._users

    def input_curve(self):
        """The input order's padded live bytes per position (:func:`commopt.sim.peak_memory`)."""
        if self._curve is None:
            from commopt.sim import peak_memory

            self._curve = peak_memory(self.graph, self.order, padded=True)[1]
        return self._curve

    def _need_ranks(self) -> tuple[list[int], list[int], list[int]]:
        """Each collective's sequence number in the input order, the collectives in that
        order, and ``need[i]``: the smallest sequence number of a collective that depends on
        ``i`` (one reverse sweep)."""
        n, succ = self.n, self.succ
        order = np.asarray(self.order, dtype=np.int64)
        colls = order[node_kinds(self.graph)[order] == NodeKind.COLLECTIVE].tolist()
        seq = [-1] * n
        for k, c in enumerate(colls):
            seq[c] = k
        big = len(colls) + 1
        need = [big] * n
        for i in self.order[::-1]:  # a slice: reversed() of a Schedule indexes it node by node
            best = seq[i] if seq[i] >= 0 else big
            for s in succ[i]:  # data edges and the chain's
                v = need[s]
                if v < best:
                    best = v
            need[i] = best
        return seq, colls, need


def _queues(graph: Graph, kinds: np.ndarray) -> bytes:
    """Each node's ready queue (``_Q_*``): the output, collectives, waits, then graph inputs
    and views (:func:`zero_cost_view_mask`), then compute, the first that applies."""
    queue = np.full(len(kinds), _Q_COMPUTE, dtype=np.int8)
    queue[np.frombuffer(zero_cost_view_mask(graph), dtype=np.uint8) != 0] = _Q_VIEW
    for kind, q in ((NodeKind.INPUT, _Q_INPUT), (NodeKind.WAIT, _Q_WAIT),
                    (NodeKind.COLLECTIVE, _Q_COLL), (NodeKind.OUTPUT, _Q_OUT)):
        queue[kinds == kind] = q
    return queue.tobytes()


class _ListScheduler:
    """One list schedule of ``order`` on the simulated clock (see the module docstring).

    State: the clock ``t``, live and peak bytes, ready queues by kind (views, the next
    collectives in input order, waits by their collective's end, compute by priority and by
    input position, compute by net allocation under memory pressure), and each group's
    stream. The queues of views, collectives and compute hold ranks (:meth:`_Prepared.ranks`;
    input positions where that is the key). Compute by input position and by net allocation
    are only kept once first asked for (:meth:`by_position`, :meth:`by_net`): most schedules
    never need them. :meth:`run` takes one decision per step until every node is scheduled.
    """

    def __init__(self, graph: Graph, order: Sequence[int], ctx: PassContext,
                 budget: int | None, policy: _Policy, model: MemoryModel, prepared: _Prepared) -> None:
        self.order, self.budget = order, budget
        self.n = n = len(graph.nodes)
        self.dur = ctx.durations_us
        p = prepared
        self.pos, self.succ, self.sequence = p.pos, p.succ, p.sequence
        self.queue, self.wait_of, self.group = p.queue, p.wait_of, p.group
        self.lookahead = policy.lookahead
        self.by_level = policy.priority in _LEVELS
        self.stall = policy.priority == "bottom-level" and policy.stall
        self.just_in_time = policy.just_in_time
        self.level = getattr(p, _LEVELS[policy.priority])() if self.by_level else None
        self.comp_rank, self.comp_at = p.ranks(policy.priority if self.by_level else "need")
        self.coll_rank, self.coll_at = p.ranks("deadline") if policy.by_deadline else (p.pos, p.sequence)
        self.seq, self.colls, self.need = p.seq, p.colls, p.need
        self.indeg, self.sources = list(p.indeg), p.sources
        self.alloc, uses0, self.releases = model.alloc, model.uses, model.releases
        self.by_memory = policy.memory == "frees"
        self.prepared = p
        self.users_of: dict[int, list[int]] = {}  # by :meth:`by_net`
        self.reserve = policy.reserve and budget is not None
        self.profile: _MaxProfile | None = None
        if self.reserve:
            self.profile = _MaxProfile(p.input_curve())
        self.uses = list(uses0)
        self.live = self.peak = p.inputs_bytes
        self.ahead, self.done = bytearray(n), bytearray(n)
        self.front, self.exposed, self.t = 0, 0.0, 0.0
        self.out: list[int] = []
        self.views: list[int] = []  # input positions
        self.colls_q: list[int] = []  # collective ranks
        self.waits_q: list[tuple[float, int, int]] = []  # (end, input position, node)
        self.comp_need: list[int] = []  # compute ranks
        self.comp_pos: list[int] | None = None  # input positions
        self.mem_q: list[tuple[int, int, int]] | None = None  # (net bytes, input position, node)
        if self.by_memory and not p.nets_tracked:
            self.by_net()
        self.coll_end = [0.0] * (n + 1)  # the last slot: waits of no collective
        self.stream_free: dict[str, float] = {}
        self.issued = bytearray(len(self.colls))
        self.next_seq = 0
        self.output_node = -1

    def run(self) -> tuple[Schedule, float, float, int]:
        """The schedule (checked once here: the budget checks and the simulator reuse its
        positions), its makespan and exposed communication, and its padded peak."""
        for i in self.sources:
            self.push(i)
        step = self.step
        for _ in range(self.n):  # each step schedules one node
            step()
        makespan_us = max([self.t, *self.stream_free.values()])
        return Schedule(self.out, self.n), makespan_us, self.exposed, self.peak

    def step(self) -> None:
        """Schedule one node, by the rules of the module docstring, in priority order."""
        if self.views:
            i = self.sequence[_heappop(self.views)]
            if self.queue[i] != _Q_INPUT:
                self.live += self.alloc[i]
            self.finish(i)
            return
        waits_q = self.waits_q
        if waits_q and waits_q[0][0] <= self.t:
            self.stall_on_wait()  # already finished: no stall
            return
        nc = self.next_compute(False)
        budget = self.budget
        if budget is not None and nc >= 0 and (self.live + self.alloc[nc] > budget
                                               or self.reserve and self.reserved(nc)):
            self.under_memory_pressure(nc)
        elif self.colls_q and self.issue_now(nc):
            self.issue(self.coll_at[self.colls_q[0]])
        elif self.stall and nc >= 0 and waits_q and self.wait_path_is_longer(nc):
            self.stall_on_wait()  # the wait's path is longer: idle rather than delay it
        elif nc >= 0:
            self.run_compute(nc)
        elif waits_q:
            self.stall_on_wait()
        elif self.output_node >= 0 and len(self.out) == self.n - 1:
            self.finish(self.output_node)
        else:
            raise AssertionError("compute-overlap: no node is ready; the graph has a cycle")

    def issue_now(self, nc: int) -> bool:
        """Issue the next collective now unless its group's stream stays busy past the next
        compute step anyway (issuing later starts it at the same time and holds its output
        for less long) or it does not fit the memory budget; always when nothing else can
        run."""
        c = self.coll_at[self.colls_q[0]]
        if nc < 0 and not self.waits_q:
            return True
        budget = self.budget
        fits = budget is None or (self.live + self.alloc[c] <= budget and not self.reserved(c))
        if nc < 0 and not self.just_in_time:
            return fits
        horizon = self.t + self.dur[nc] if nc >= 0 else self.waits_q[0][0]
        return fits and self.stream_free.get(self.group[c], 0.0) <= horizon

    def wait_path_is_longer(self, nc: int) -> bool:
        """With ``stall``: the first wait ends before compute ``nc`` would, and the longest
        path through the wait is longer than through ``nc``."""
        end, _, w = self.waits_q[0]
        return end < self.t + self.dur[nc] and self.level[w] > self.level[nc]

    def under_memory_pressure(self, nc: int) -> None:
        """Compute ``nc`` does not fit (or would eat the input order's reserved room).

        If only the reservation is in the way, the input order's next compute node runs (it
        is not short of memory, it just may not run ahead). Otherwise: compute that frees
        more than it allocates, then a wait (it releases storage), then the input order,
        which keeps the input's memory profile. A collective due earlier in the input order
        is issued first.
        """
        budget = self.budget
        if self.live + self.alloc[nc] <= budget:
            first = self.next_compute(True)
            if self.live + self.alloc[first] <= budget and not self.reserved(first):
                self.run_in_input_order(first)
                return
        if self.by_memory:
            m, net = self.most_freeing()
            if m >= 0 and net <= 0:
                c = self.first_collective()
                if c >= 0 and self.pos[c] < self.pos[m] and self.live + self.alloc[c] <= budget:
                    self.issue(c)
                else:
                    self.run_compute(m)
                return
        if self.waits_q:
            self.stall_on_wait()
            return
        self.run_in_input_order(self.next_compute(True))

    def first_collective(self) -> int:
        """The collective the queue issues next; -1: none is ready."""
        return self.coll_at[self.colls_q[0]] if self.colls_q else -1

    def run_in_input_order(self, nc: int) -> None:
        """Compute ``nc``, unless a collective comes before it in the input order."""
        c = self.first_collective()
        if c >= 0 and self.pos[c] < self.pos[nc]:
            self.issue(c)
        else:
            self.run_compute(nc)

    def run_compute(self, i: int) -> None:
        """Run compute node ``i`` on the compute stream."""
        self.live += self.alloc[i]
        self.t += self.dur[i]
        self.finish(i)

    def push(self, i: int) -> None:
        """``i`` became ready: queue it by its kind."""
        q = self.queue[i]
        if q == _Q_COMPUTE:
            _heappush(self.comp_need, self.comp_rank[i])
            if self.comp_pos is not None:
                _heappush(self.comp_pos, self.pos[i])
            if self.mem_q is not None:
                _heappush(self.mem_q, (self.net_bytes(i), self.pos[i], i))
        elif q <= _Q_VIEW:
            _heappush(self.views, self.pos[i])
        elif q == _Q_WAIT:
            _heappush(self.waits_q, (self.coll_end[self.wait_of[i]], self.pos[i], i))
        elif q == _Q_COLL:
            _heappush(self.colls_q, self.coll_rank[i])
        else:
            self.output_node = i

    def net_bytes(self, i: int) -> int:
        """What running ``i`` now adds to live memory, net of the storage it frees."""
        uses, alloc = self.uses, self.alloc
        freed = 0
        for r in self.releases[i]:
            if uses[r] == 1:
                freed += alloc[r]
        return alloc[i] - freed

    def finish(self, i: int) -> None:
        """``i`` is scheduled: release its uses, free storage, ready its successors."""
        live = self.live
        if live > self.peak:
            self.peak = live
        self.done[i] = 1
        self.out.append(i)
        if self.reserve:
            self.hold_ahead(i)
        uses, alloc = self.uses, self.alloc
        for r in self.releases[i]:
            left = uses[r] = uses[r] - 1
            if left == 0:
                live -= alloc[r]
                if self.reserve:
                    self.drop_ahead(r)
            elif left == 1 and self.mem_q is not None:
                self.rerank_users(r)
        self.live = live
        indeg, push = self.indeg, self.push
        for s in self.succ[i]:
            left = indeg[s] = indeg[s] - 1
            if left == 0:
                push(s)
        if self.reserve:
            self.advance_front()

    def hold_ahead(self, i: int) -> None:
        """With ``reserve``: ``i``, run ahead of the input order's frontier, holds its bytes
        over the input positions before its own until it is freed."""
        pos, alloc = self.pos, self.alloc
        if alloc[i] and self.queue[i] != _Q_INPUT and pos[i] > self.front:
            self.ahead[i] = 1
            self.profile.add(pos[i], alloc[i])

    def drop_ahead(self, r: int) -> None:
        """With ``reserve``: storage ``r`` is freed; it no longer holds bytes ahead."""
        if self.ahead[r]:
            self.ahead[r] = 0
            self.profile.add(self.pos[r], -self.alloc[r])

    def advance_front(self) -> None:
        """With ``reserve``: move the frontier past the input order's scheduled nodes."""
        front, order, n, done = self.front, self.sequence, self.n, self.done
        while front < n and done[order[front]]:
            front += 1
        self.front = front

    def rerank_users(self, r: int) -> None:
        """Storage ``r`` has one use left: its ready compute users, which may now free it,
        queue again by their new net allocation."""
        indeg, done, pos = self.indeg, self.done, self.pos
        for u in self.users_of.get(r, ()):
            if not indeg[u] and not done[u]:
                _heappush(self.mem_q, (self.net_bytes(u), pos[u], u))

    def reserved(self, i: int) -> bool:
        """Whether running ``i`` now would eat into the room the input order's future peak
        needs (always False for the frontier itself or without ``reserve``)."""
        pos = self.pos
        return (self.reserve and pos[i] > self.front
                and self.profile.max(self.front, pos[i]) + self.alloc[i] > self.budget)

    def next_compute(self, pressure: bool) -> int:
        """The compute node to run next: by priority (bottom level, or what the next
        ``lookahead`` collectives need), or in input order under ``pressure``; -1: none.
        Both queues hold every ready compute node (done ones leave them lazily), so either
        tells whether one is ready."""
        done = self.done
        if not pressure:
            comp_need, comp_at = self.comp_need, self.comp_at
            while comp_need and done[comp_at[comp_need[0]]]:
                _heappop(comp_need)
            if not comp_need:
                return -1
            first = comp_at[comp_need[0]]
            if self.by_level or (self.lookahead > 0 and self.need[first] < self.next_seq + self.lookahead):
                return first
        comp_pos, sequence = self.by_position(), self.sequence
        while comp_pos and done[sequence[comp_pos[0]]]:
            _heappop(comp_pos)
        return sequence[comp_pos[0]] if comp_pos else -1

    def ready_compute(self) -> list[int]:
        """The ready compute nodes not yet run (from the priority queue)."""
        comp_at, done = self.comp_at, self.done
        return [i for i in map(comp_at.__getitem__, self.comp_need) if not done[i]]

    def by_position(self) -> list[int]:
        """The queue of ready compute by input position, started on first use."""
        if self.comp_pos is None:
            pos = self.pos
            self.comp_pos = [pos[i] for i in self.ready_compute()]
            heapq.heapify(self.comp_pos)
        return self.comp_pos

    def by_net(self) -> list[tuple[int, int, int]]:
        """The queue of ready compute by net allocation, started on first use. Each node
        queues again whenever its net drops (:meth:`rerank_users`; a net never rises before
        the node runs), so its latest entry is current and older ones are larger."""
        if self.mem_q is None:
            pos, net_bytes = self.pos, self.net_bytes
            self.users_of = self.prepared.users_of()
            self.mem_q = [(net_bytes(i), pos[i], i) for i in self.ready_compute()]
            heapq.heapify(self.mem_q)
        return self.mem_q

    def most_freeing(self) -> tuple[int, int]:
        """The ready compute node with the smallest net allocation, and that net."""
        mem_q = self.by_net()
        while mem_q:
            net, p, i = mem_q[0]
            if self.done[i]:
                heapq.heappop(mem_q)
                continue
            cur = self.net_bytes(i)
            if cur != net:
                heapq.heapreplace(mem_q, (cur, p, i))
                continue
            return i, net
        return -1, 0

    def issue(self, c: int) -> None:
        """Issue collective ``c`` (the head of the collective queue) on its group's stream."""
        _heappop(self.colls_q)
        group, stream_free, t = self.group[c], self.stream_free, self.t
        free_at = stream_free.get(group, 0.0)
        end = self.coll_end[c] = (free_at if free_at > t else t) + self.dur[c]
        stream_free[group] = end
        self.live += self.alloc[c]
        self.issued[self.seq[c]] = 1
        while self.next_seq < len(self.colls) and self.issued[self.next_seq]:
            self.next_seq += 1
        self.finish(c)

    def stall_on_wait(self) -> None:
        """Take the wait whose collective ends first; the compute stream idles until then."""
        end, _, i = _heappop(self.waits_q)
        if end > self.t:
            self.exposed += end - self.t
            self.t = end
        self.t += self.dur[i]
        self.finish(i)
