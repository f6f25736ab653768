"""Helpers shared by the built-in passes: the global collective chain, the
demand-driven mover behind sink-waits and raise-comms, the memory-budget search, and the
preference for orders that degrade least when the cost estimates are off.

Everything is linear in nodes plus edges (the budget search multiplies that by the few
windows it tries); no pass keeps an ancestor set per collective.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np

from commopt.ir.graph import Graph, NodeKind
from commopt.ir.schedule import Schedule

#: Window factors tried by the budget search, widest first; 0 keeps the input order.
WINDOW_FACTORS: tuple[float, ...] = (math.inf, 16.0, 8.0, 4.0, 2.0, 1.0, 0.5, 0.0)


def collective_chain(graph: Graph, order: Sequence[int], allow_cross_group: bool) -> dict[int, int]:
    """Extra edges ``prev -> next`` between consecutive collectives of ``order`` (any group),
    unless cross-group reordering is allowed (then ``{}``: same-group edges are in the graph)."""
    if allow_cross_group:
        return {}
    return _consecutive_collectives(graph, order, by_group=False)


def group_chain(graph: Graph, order: Sequence[int]) -> dict[int, int]:
    """Each collective's next collective of the same group in ``order``: the queue its
    group's stream runs them in when ``order`` is kept."""
    return _consecutive_collectives(graph, order, by_group=True)


def _consecutive_collectives(graph: Graph, order: Sequence[int], *, by_group: bool) -> dict[int, int]:
    """``prev -> next`` for consecutive collectives of ``order``, per group or across all."""
    order_arr = np.fromiter(order, dtype=np.int64, count=len(order))
    colls = order_arr[node_kinds(graph)[order_arr] == NodeKind.COLLECTIVE].tolist()
    if not by_group:
        return dict(zip(colls[:-1], colls[1:], strict=True))
    nodes = graph.nodes
    chain: dict[int, int] = {}
    last: dict[str | None, int] = {}
    for i in colls:
        info = nodes[i].collective
        key = info.group if info is not None else None
        if key in last:
            chain[last[key]] = i
        last[key] = i
    return chain


def neighbour_lists(graph: Graph, extra: dict[int, int], *, successors: bool) -> list[tuple[int, ...]]:
    """Per node, its predecessors (or ``successors``) in the graph's CSR arrays plus
    ``extra[v]`` when present (e.g. the collective chain's edge), so the hot loops of
    :mod:`commopt.passes.compute_overlap` index a tuple instead of slicing the arrays per visit. A new list
    per call; the tuples without ``extra`` are made once per graph."""
    out = list(_edge_tuples(graph, successors))
    for v, w in extra.items():
        out[v] = (*out[v], w)
    return out


_EDGE_TUPLES: weakref.WeakKeyDictionary[Graph, dict[bool, tuple[tuple[int, ...], ...]]] = (
    weakref.WeakKeyDictionary())


def forget_graph(graph: Graph) -> None:
    """Drop ``graph``'s edge tuples (:func:`neighbour_lists`): the pass manager calls it when
    its pipeline ends, so they do not live through the later stages (~12 MB at 100k nodes;
    another pipeline on the graph makes them again)."""
    _EDGE_TUPLES.pop(graph, None)


def _edge_tuples(graph: Graph, successors: bool) -> tuple[tuple[int, ...], ...]:
    """Each node's CSR neighbours as a tuple (cached per graph: every pass asks)."""
    cache = _EDGE_TUPLES.setdefault(graph, {})
    found = cache.get(successors)
    if found is None:
        ptr, idx = graph.succ_arrays() if successors else graph.pred_arrays()
        bounds, flat = ptr.tolist(), idx.tolist()  # list slices: faster than the arrays'
        found = cache[successors] = tuple([tuple(flat[a:b]) for a, b in pairwise(bounds)])
    return found


def node_kinds(graph: Graph) -> np.ndarray:
    """Each node's :class:`NodeKind` value as a read-only int8 array (cached per graph), for
    the passes' whole-graph masks (``node_kinds(g) == NodeKind.WAIT``)."""
    kinds = _KINDS.get(graph)
    if kinds is None:
        kinds = np.fromiter((node.kind for node in graph.nodes), dtype=np.int8, count=len(graph.nodes))
        kinds.flags.writeable = False
        _KINDS[graph] = kinds
    return kinds


_KINDS: weakref.WeakKeyDictionary[Graph, np.ndarray] = weakref.WeakKeyDictionary()


def compute_steps(graph: Graph, durations_us: Sequence[float]) -> list[float]:
    """Per node, the time it advances the demand-driven mover's clock: its duration for
    compute, 0 for every other kind."""
    return np.where(node_kinds(graph) == NodeKind.COMPUTE,
                    np.asarray(durations_us, dtype=float), 0.0).tolist()


def bounded_windows(is_bounded: np.ndarray, base_us: np.ndarray, factor: float) -> np.ndarray:
    """Per node, ``factor x base_us`` where ``is_bounded``, else unbounded: the windows of
    :meth:`DemandMover.order` for one factor of :data:`WINDOW_FACTORS`."""
    if factor == math.inf:
        return np.full(len(base_us), math.inf)
    return np.where(is_bounded, factor * base_us, math.inf)


def lazy_neighbours(graph: Graph, lazy: bytearray, extra: dict[int, int], *,
                    successors: bool) -> list[tuple[int, ...]]:
    """Per node, its lazy predecessors (or ``successors``) in the graph's CSR arrays, then
    ``extra[v]`` when present and lazy (e.g. the collective chain's edge): the only
    neighbours :class:`DemandMover` may find not yet emitted (``()`` for most nodes)."""
    n = len(graph.nodes)
    ptr, idx = graph.succ_arrays() if successors else graph.pred_arrays()
    idx = np.asarray(idx, dtype=np.int64)
    is_lazy = np.frombuffer(lazy, dtype=np.uint8).astype(bool)
    keep = is_lazy[idx]
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(np.asarray(ptr, dtype=np.int64)))[keep]
    out: list[tuple[int, ...]] = [()] * n
    if owner.size:
        starts = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))
        ends = [*starts[1:].tolist(), owner.size]
        nbrs = idx[keep].tolist()
        for v, a, b in zip(owner[starts].tolist(), starts.tolist(), ends, strict=True):
            out[v] = tuple(nbrs[a:b])
    for v, w in extra.items():
        if lazy[w]:
            out[v] = (*out[v], w)
    return out


class DemandMover:
    """Walks ``seq`` emitting non-lazy nodes in place and holding lazy ones back.

    A held lazy node is emitted just before the first node that needs it (through
    ``needs[i]``, the lazy nodes ``i`` needs: :func:`lazy_neighbours`; transitively through
    other held nodes), before any ``fence`` node, or before the node that would take it more
    than ``window_us[i]`` of ``step_time_us`` away from its place in ``seq``; whatever is
    still held at the end comes last. ``seq`` must be a topological order of the graph (so
    every node's non-lazy neighbours are out before it), steps and windows >= 0. With
    ``seq`` forward and waits lazy this sinks waits; on the reversed order with successors
    as ``needs`` it raises collectives.

    Everything that does not depend on the windows is set up once, for every window
    :meth:`order` is asked for: the walk then visits only the nodes where something can
    happen (a need, a fence, a window running out) and copies the runs of non-lazy nodes
    between them in bulk. A window runs out at the first non-lazy node whose step ends past
    the node's deadline: the clock only advances on non-lazy nodes, so its values are one
    running sum (numpy's accumulate adds in the same order as a loop), searched per node.
    """

    def __init__(self, seq: Sequence[int], lazy: bytearray, fence: bytes,
                 needs: list[tuple[int, ...]], step_time_us: Sequence[float]) -> None:
        n = len(seq)
        sched = seq if isinstance(seq, Schedule) else Schedule(seq, n)  # a Schedule: checked once
        self.pos, self.lazy, self.fence, self.needs = sched.positions, lazy, fence, needs
        order = np.fromiter(sched.order, dtype=np.int64, count=n)
        lazy_at = np.frombuffer(lazy, dtype=np.uint8).astype(bool)[order]
        self.kept_at = np.flatnonzero(~lazy_at)  # positions of the non-lazy nodes
        self.kept = order[self.kept_at].tolist()
        self.held_at = np.flatnonzero(lazy_at)
        self.held = order[self.held_at].tolist()
        self.held_nodes = order[self.held_at]
        self.held_positions = self.held_at.tolist()
        # the clock after each non-lazy node, and at each lazy node (0 before the first step)
        self.clock_after = np.add.accumulate(np.asarray(step_time_us, dtype=float)[order[self.kept_at]])
        self.first_after = np.searchsorted(self.kept_at, self.held_at)  # first non-lazy after each lazy node
        before = self.first_after - 1
        self.clock_at = np.where(before >= 0, self.clock_after[np.maximum(before, 0)], 0.0) \
            if self.clock_after.size else np.zeros(len(self.held))
        kept_nodes = order[self.kept_at]
        has_needs = np.fromiter(map(len, needs), dtype=np.int64, count=n) > 0
        self.visit = np.flatnonzero(has_needs[kept_nodes]
                                    | (np.frombuffer(fence, dtype=np.uint8)[kept_nodes] > 0))

    def order(self, window_us: np.ndarray) -> list[int]:
        """The order for these windows (class docstring)."""
        kept, held, pos, needs, fence = self.kept, self.held, self.pos, self.needs, self.fence
        w = np.asarray(window_us, dtype=float)[self.held_nodes]
        bounded = np.flatnonzero(w != math.inf)
        deadline = self.clock_at[bounded] + w[bounded]
        due = np.maximum(self.first_after[bounded],
                         np.searchsorted(self.clock_after, deadline, side="right"))
        live = due < len(kept)
        bounded, deadline, due = bounded[live], deadline[live], due[live]
        by_due = np.lexsort((self.held_at[bounded], deadline, due))
        due_at = due[by_due].tolist()
        due_node = self.held_nodes[bounded[by_due]].tolist()
        visit = np.union1d(self.visit, due).tolist()

        emitted = bytearray(len(pos))
        out: list[int] = []
        append = out.append

        def emit(u: int) -> None:
            """Emit ``u`` after whatever it needs that is still held, earliest in ``seq`` first."""
            if emitted[u]:
                return
            for p in needs[u]:
                if not emitted[p]:
                    break
            else:  # every lazy neighbour is out already: no stack walk
                emitted[u] = 1
                append(u)
                return
            stack = [u]
            pop, push = stack.pop, stack.append
            while stack:
                v = stack[-1]
                if emitted[v]:
                    pop()
                    continue
                todo = [p for p in needs[v] if not emitted[p]]
                if todo:
                    if len(todo) == 1:
                        push(todo[0])
                    else:
                        todo.sort(key=lambda p: -pos[p])  # earliest first off the stack
                        stack.extend(todo)
                    continue
                emitted[v] = 1
                append(v)
                pop()

        held_at = self.held_positions
        flushed = 0  # held[:flushed] are all emitted
        k = 0  # due_at[:k] are done
        done = 0  # kept[:done] are out
        for j in visit:
            out.extend(kept[done:j])
            done = j + 1
            while k < len(due_at) and due_at[k] == j:
                emit(due_node[k])
                k += 1
            u = kept[j]
            if fence[u]:
                limit = self.kept_at[j]
                while flushed < len(held_at) and held_at[flushed] < limit:
                    emit(held[flushed])
                    flushed += 1
            emit(u)
        out.extend(kept[done:])
        for v in held:  # most are out already: no call for those (100k nodes: ~150k calls)
            if not emitted[v]:
                emit(v)
        return out


def memory_lean_order(graph: Graph, order: Sequence[int], allow_cross_group: bool) -> list[int]:
    """``order`` with every node that allocates more than it frees there (net of the
    storages whose last use it is in ``order``) held back to just before the first node that
    needs it: an all_gather's output, a cast or a matmul then lives from its first reader
    instead of from where the input order happened to put it. Nodes that free memory stay
    where they are, so the peak usually drops (an FSDP stack: 552 -> 520 MiB); callers keep
    the result only when it does. Linear in nodes plus edges (:class:`DemandMover`).
    """
    from commopt.sim.model import memory_model

    nodes = graph.nodes
    n = len(nodes)
    model = memory_model(graph, padded=True)
    pos = Schedule.of(graph, order).positions
    last = [-1] * n  # the position of each storage's last use in ``order``
    for i in order:
        for r in model.releases[i]:
            if pos[i] > last[r]:
                last[r] = pos[i]
    net = list(model.alloc)
    for r in range(n):
        if last[r] >= 0 and not model.is_input[r]:
            net[order[last[r]]] -= model.alloc[r]
    lazy = bytearray(n)
    fence = bytearray(n)
    for node in nodes:
        i = node.index
        if node.kind is NodeKind.OUTPUT:
            fence[i] = 1
        elif node.kind is not NodeKind.INPUT and net[i] > 0:
            lazy[i] = 1
    chain = collective_chain(graph, order, allow_cross_group)
    needs = lazy_neighbours(graph, lazy, {b: a for a, b in chain.items()}, successors=False)
    return DemandMover(order, lazy, fence, needs, [0.0] * n).order(np.full(n, math.inf))


def within_budget(graph: Graph, order: Sequence[int], budget_bytes: int | None) -> bool:
    """Whether ``order``'s padded peak live memory (commopt.sim.peak_memory) fits the budget."""
    if budget_bytes is None:
        return True
    from commopt.sim import peak_memory

    return peak_memory(graph, order, padded=True)[0] <= budget_bytes


def widest_fitting(
    order: Sequence[int],
    fits: Callable[[Sequence[int]], bool],
    build: Callable[[float], Sequence[int]],
) -> Sequence[int]:
    """The order ``build(factor)`` for the widest window factor that ``fits`` the memory
    budgets (:meth:`commopt.passes.base.PassContext.fits`).

    Tries the unbounded window first (one evaluation when memory is no issue), then a
    binary search over :data:`WINDOW_FACTORS` (peak memory grows with the window); falls
    back to ``order`` when nothing fits.
    """
    first = build(WINDOW_FACTORS[0])
    if fits(first):
        return first
    lo, hi = 1, len(WINDOW_FACTORS) - 1  # search the first fitting index in [lo, hi]
    best: Sequence[int] | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        cand = build(WINDOW_FACTORS[mid])
        if fits(cand):
            best, hi = cand, mid - 1
        else:
            lo = mid + 1
    return best if best is not None else list(order)


def zero_cost_view_mask(graph: Graph) -> bytes:
    """1 for nodes that never read data: views and metadata-only ops (no fake uses).
    Cached per graph (every pass asks)."""
    mask = _VIEW_MASKS.get(graph)
    if mask is None:
        mask = _VIEW_MASKS[graph] = bytes(
            not (node.side_effect or node.rng or node.mutates)
            and (node.kind is NodeKind.VIEW or node.op in METADATA_OPS) for node in graph.nodes)
    return mask


_VIEW_MASKS: weakref.WeakKeyDictionary[Graph, bytes] = weakref.WeakKeyDictionary()


#: Compute-kind ops that only read metadata or alias: they are not real uses of a value.
METADATA_OPS = frozenset({
    "aten.detach.default",
    "aten.alias.default",
    "aten.lift_fresh.default",
    "aten.sym_size.int",
    "aten.sym_numel.default",
    "aten.sym_stride.int",
    "aten.sym_storage_offset.default",
})


#: Orders whose makespans differ by less than this fraction count as nearly equal: the passes
#: then prefer the one whose makespan degrades least when the cost estimates are off.
NEAR_EQUAL = 0.005
#: At most this many node-replays (orders x scenarios x nodes) go into that preference, so
#: large graphs keep their pass times (1k nodes: any number of orders; 100k: none).
ROBUST_WORK = 400_000
#: A nearly equal order replaces the best one only when its worst case is this much lower.
ROBUST_GAIN = 0.001


def most_robust(graph: Graph, ctx, found: list[tuple[tuple, list[int]]]) -> list[int]:
    """The order of ``found`` ((key, order) pairs, key starting with the makespan, smallest
    best) to keep: the best key's, unless an order within :data:`NEAR_EQUAL` of its makespan
    has a worst makespan under the cost perturbations of :mod:`commopt.sim.robustness` lower
    by more than :data:`ROBUST_GAIN`; then the lowest of those (ties: the smaller key).
    Skipped past :data:`ROBUST_WORK`."""
    from commopt.sim.robustness import RANDOM_DRAWS, makespan_range, perturbations

    found = sorted(found, key=lambda kc: kc[0])
    best_key, best = found[0]
    near, seen = [], set()
    for k, c in found:
        if k[0] <= best_key[0] * (1.0 + NEAR_EQUAL) and tuple(c) not in seen:
            seen.add(tuple(c))
            near.append((k, c))
    if len(near) < 2 or len(near) * (4 + RANDOM_DRAWS) * len(graph) > ROBUST_WORK:
        return best
    scenarios = perturbations(graph, ctx.durations_us)
    scored = [(makespan_range(graph, c, ctx.durations_us, nominal_us=k[0], scenarios=scenarios,
                              compute_slowdown=ctx.compute_slowdown).worst_us, k, c)
              for k, c in near]
    worst_of_best = scored[0][0]
    better = [t for t in scored if t[0] < worst_of_best * (1.0 - ROBUST_GAIN)]
    return min(better, key=lambda t: (t[0], t[1]))[2] if better else best


def degrades_no_more(graph: Graph, ctx, current: list[int], current_us: float, cand: list[int],
                     cand_us: float, memo: dict) -> bool:
    """Whether ``cand``'s worst makespan under the cost perturbations is at most
    ``current``'s (``*_us``: their nominal makespans): a tie-break between nearly equal orders.
    True past :data:`ROBUST_WORK`. ``memo`` keeps the perturbations and the current order's
    worst case between calls."""
    from commopt.sim.robustness import RANDOM_DRAWS, makespan_range, perturbations

    if 2 * (4 + RANDOM_DRAWS) * len(graph) > ROBUST_WORK:
        return True
    if "scenarios" not in memo:
        memo["scenarios"] = perturbations(graph, ctx.durations_us)
    sc = memo["scenarios"]
    key = tuple(current)
    if memo.get("order") != key:
        memo["order"] = key
        memo["worst"] = makespan_range(graph, current, ctx.durations_us, nominal_us=current_us,
                                       scenarios=sc, compute_slowdown=ctx.compute_slowdown).worst_us
    worst = makespan_range(graph, cand, ctx.durations_us, nominal_us=cand_us, scenarios=sc,
                           compute_slowdown=ctx.compute_slowdown).worst_us
    return worst <= memo["worst"] * (1.0 + 1e-9)
