"""Lower bounds on the makespan of every valid order of a graph (the certificate's cheap part).

Each bound holds for any topological order the simulator (:mod:`commopt.sim.engine`) can
replay, because it only uses facts every such replay obeys (:mod:`commopt.sim.model`):

- the clock ``t`` of the compute stream when the order reaches a node is at least the end
  of every compute-stream node before it (inputs, compute, waits, the output advance it;
  collectives and views do not), and at least the clock of every other node before it;
- a compute-stream node starts at ``max(t, its inputs' ends)`` and runs its duration; a
  collective starts at ``max(t, its inputs' ends, its group's previous collective's end)``;
  a view ends at ``max(t, its inputs' ends)``.

From these, per node: heads (earliest clock, start and end: :func:`heads`) and tails (the
least time that must pass after its clock or its end before the makespan: :func:`tails`).
The bounds (:class:`LowerBounds`):

- ``compute_us``: the compute stream's total work;
- ``busiest_stream_us``: the busiest group's total communication;
- ``critical_path_us``: the longest chain of heads (a collective's successors that need only
  its issue follow its clock, not its start);
- ``compute_heads_tails_us``: the compute stream as one machine with release times (heads)
  and delivery times (tails), relaxed to preemption and solved exactly (Jackson's preemptive
  schedule): it adds to the compute the communication no compute can hide at the start and
  the end;
- ``group_streams_us``: per group, its collectives queue on one stream in a fixed order; for
  any run ``c_i..c_j`` of them, the makespan is at least the earliest start of ``c_i`` (its
  head, or the compute of all its ancestors, which the compute stream runs before issuing
  it), plus their durations, plus the tail of ``c_j`` (or the compute that cannot start
  before ``c_j`` ends). Where a group's order is free, only the whole group's run counts.
"""

from __future__ import annotations

import heapq
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from commopt.ir.graph import Graph, NodeKind
from commopt.sim.model import needs_finish

#: Kinds whose node advances the compute stream's clock to its end.
CLOCK_KINDS = (NodeKind.INPUT, NodeKind.OUTPUT, NodeKind.COMPUTE, NodeKind.WAIT)

#: The collective-chain bound tracks, per node, which collectives it follows or precedes:
#: nodes x collectives bits, twice. Above this many it is not computed: it costs about 0.2 s
#: on the 10k-node synthetic stack (14M), where it is not the best bound, and every corpus
#: and benchmark graph is far below (the 64-layer FSDP stack: 1.2M).
CHAIN_BOUND_MAX_CELLS = 4_000_000
#: A group's flights get the maximum-flow refinement (:func:`_group_flight_idle`) up to this
#: many (kernel, collective it may run beside) pairs: about 0.1 s of pure-Python flow.
FLOW_MAX_PAIRS = 200_000


@dataclass(frozen=True)
class LowerBounds:
    """Lower bounds on the makespan of every valid order (module docstring); ``value`` is
    the best of them."""

    compute_us: float
    busiest_stream_us: float
    critical_path_us: float
    compute_heads_tails_us: float
    group_streams_us: float
    collective_chain_us: float = 0.0

    @property
    def value(self) -> float:
        """The best (largest) of the bounds."""
        return max(self.compute_us, self.busiest_stream_us, self.critical_path_us,
                   self.compute_heads_tails_us, self.group_streams_us, self.collective_chain_us)

    def as_dict(self) -> dict[str, float]:
        """Each bound by name (for summaries and reports)."""
        return {"compute": self.compute_us, "busiest_stream": self.busiest_stream_us,
                "critical_path": self.critical_path_us,
                "compute_heads_tails": self.compute_heads_tails_us,
                "group_streams": self.group_streams_us,
                "collective_chain": self.collective_chain_us}


@dataclass(frozen=True)
class Heads:
    """Per node, lower bounds on the clock when the order reaches it (``t``), its start and
    its end, over every valid order."""

    t: list[float]
    start: list[float]
    end: list[float]


_LAST: weakref.WeakKeyDictionary[Graph, dict[float, tuple[list[float], LowerBounds]]] = weakref.WeakKeyDictionary()


def lower_bounds(graph: Graph, durations: Sequence[float], compute_slowdown: float = 1.0) -> LowerBounds:
    """Every cheap lower bound of ``graph`` with ``durations`` (step durations: 0 for inputs,
    outputs and views). The last result per graph and slowdown is cached (passes simulate
    many orders with the same durations). With a ``compute_slowdown`` (:mod:`commopt.sim.engine`) every
    bound still holds, as compute only runs longer; only the collective-chain bound uses it
    (a flight of ``d`` has room for ``d / factor`` of compute), the others are the ones
    without it."""
    durations = list(durations)
    last = _LAST.setdefault(graph, {})
    cached = last.get(compute_slowdown)
    if cached is not None and cached[0] == durations:
        return cached[1]
    if compute_slowdown != 1.0:
        result = replace(lower_bounds(graph, durations),
                         collective_chain_us=_collective_chain_bound(graph, durations, compute_slowdown))
        last[compute_slowdown] = (durations, result)
        return result
    head = heads(graph, durations)
    _, tail_end = tails(graph, durations)
    streams = [sum(durations[c] for c in chain) for chain in _structure(graph).chains]
    result = LowerBounds(
        compute_us=sum([durations[i] for i, a in enumerate(_structure(graph).advances) if a]),
        busiest_stream_us=max(streams, default=0.0),
        critical_path_us=max(head.end, default=0.0),
        compute_heads_tails_us=_compute_stream_bound(graph, durations, head, tail_end),
        group_streams_us=_group_streams_bound(graph, durations, head, tail_end),
        collective_chain_us=_collective_chain_bound(graph, durations, compute_slowdown),
    )
    last[compute_slowdown] = (durations, result)
    return result


def computed_lower_bounds(graph: Graph) -> dict[float, LowerBounds]:
    """The lower bounds :func:`lower_bounds` last computed for ``graph``, by compute slowdown
    (what :func:`remember_lower_bounds` takes), e.g. to hand them from a forked child to its
    parent."""
    return {slowdown: bounds for slowdown, (_, bounds) in _LAST.get(graph, {}).items()}


def remember_lower_bounds(graph: Graph, durations: Sequence[float],
                          computed: dict[float, LowerBounds]) -> None:
    """Keep ``computed`` (:func:`computed_lower_bounds` of a process that had the same
    ``graph``, such as a forked child) as :func:`lower_bounds`' results for ``durations``, so
    the next call with them returns them instead of computing them again."""
    durations = list(durations)
    last = _LAST.setdefault(graph, {})
    for slowdown, bounds in computed.items():
        last[slowdown] = (durations, bounds)


def critical_path_us(graph: Graph, durations_us: Sequence[float]) -> float:
    """Longest chain of durations through data and ordering edges, order-independent
    (the latest head end, :func:`heads`)."""
    return lower_bounds(graph, durations_us).critical_path_us


def _group(node) -> str:
    return node.collective.group if node.collective is not None else "?"


@dataclass(frozen=True, eq=False)
class _Structure:
    """Order- and duration-independent facts the bounds sweep, computed once per graph:
    which nodes advance the clock, which are collectives, the CSR edge arrays with a flag
    per edge (the successor needs the predecessor finished:
    :func:`commopt.sim.model.needs_finish`), and each group's collectives in order."""

    advances: bytearray
    is_coll: bytearray
    is_view: bytearray
    pred_ptr: object
    pred_idx: object
    pred_finish: bytearray
    succ_ptr: object
    succ_idx: object
    succ_finish: bytearray
    chains: list[list[int]]


_STRUCTURE: weakref.WeakKeyDictionary[Graph, _Structure] = weakref.WeakKeyDictionary()


def _structure(graph: Graph) -> _Structure:
    cached = _STRUCTURE.get(graph)
    if cached is not None:
        return cached
    nodes = graph.nodes
    n = len(nodes)
    kinds = np.fromiter((node.kind for node in nodes), dtype=np.int8, count=n)
    advances = bytearray(np.isin(kinds, [int(k) for k in CLOCK_KINDS]).tobytes())
    coll = kinds == NodeKind.COLLECTIVE
    is_coll = bytearray(coll.tobytes())
    is_view = bytearray((kinds == NodeKind.VIEW).tobytes())
    pred_ptr, pred_idx = graph.pred_arrays()
    succ_ptr, succ_idx = graph.succ_arrays()
    asked: dict[tuple[int, int], bool] = {}  # (collective, successor) -> needs_finish: each edge is in both arrays
    pred_finish = _finish_flags(graph, coll, pred_ptr, pred_idx, asked, from_pred=True)
    succ_finish = _finish_flags(graph, coll, succ_ptr, succ_idx, asked, from_pred=False)
    by_group: dict[str, list[int]] = {}
    for c in graph.collectives():
        by_group.setdefault(_group(nodes[c]), []).append(c)
    made = _Structure(advances, is_coll, is_view, pred_ptr, pred_idx, pred_finish, succ_ptr,
                      succ_idx, succ_finish, list(by_group.values()))
    _STRUCTURE[graph] = made
    return made


def _finish_flags(graph: Graph, coll: np.ndarray, ptr, idx, asked: dict[tuple[int, int], bool],
                  *, from_pred: bool) -> bytearray:
    """Per CSR edge (``idx[ptr[v]:ptr[v + 1]]``: ``v``'s predecessors when ``from_pred``,
    else its successors), 1 when the successor needs the predecessor finished
    (:func:`commopt.sim.model.needs_finish`; always, unless the predecessor is a collective).
    ``asked`` keeps the answer per edge, for the other direction's arrays."""
    nbr = np.asarray(idx, dtype=np.int64)
    own = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(np.asarray(ptr, dtype=np.int64)))
    pred, succ = (nbr, own) if from_pred else (own, nbr)
    flags = bytearray((~coll[pred]).tobytes())
    edges = np.flatnonzero(coll[pred])  # only a collective may be merely issued
    for k, p, s in zip(edges.tolist(), pred[edges].tolist(), succ[edges].tolist(), strict=True):
        known = asked.get((p, s))
        if known is None:
            known = asked[(p, s)] = needs_finish(graph, p, s)
        flags[k] = 1 if known else 0
    return flags


def heads(graph: Graph, durations: Sequence[float]) -> Heads:
    """Earliest clock, start and end of every node over all valid orders (module docstring).
    Index order is topological, so one forward sweep suffices."""
    st = _structure(graph)
    n = len(graph.nodes)
    ptr, idx, finish, advances, is_view = st.pred_ptr, st.pred_idx, st.pred_finish, st.advances, st.is_view
    t = [0.0] * n
    start = [0.0] * n
    end = [0.0] * n
    for i in range(n):
        clock = 0.0
        ready = 0.0
        for k in range(ptr[i], ptr[i + 1]):
            p = idx[k]
            e = end[p]
            v = e if advances[p] else t[p]
            if v > clock:
                clock = v
            if finish[k] and e > ready:  # reads it, waits for it or queues behind it
                ready = e
        t[i] = clock
        if is_view[i]:
            start[i] = clock
            end[i] = ready if ready > clock else clock
        else:
            s = ready if ready > clock else clock
            start[i] = s
            end[i] = s + durations[i]
    return Heads(t, start, end)


def tails(graph: Graph, durations: Sequence[float]) -> tuple[list[float], list[float]]:
    """Per node, the least time between the clock reaching it and the makespan (``tail_t``),
    and between its end and the makespan (``tail_end``), over all valid orders: the mirror
    of :func:`heads`, one backward sweep."""
    st = _structure(graph)
    n = len(graph.nodes)
    ptr, idx, finish, advances = st.succ_ptr, st.succ_idx, st.succ_finish, st.advances
    tail_t = [0.0] * n
    tail_end = [0.0] * n
    for p in range(n - 1, -1, -1):
        adv = advances[p]
        qt = qe = 0.0
        for k in range(ptr[p], ptr[p + 1]):
            s = idx[k]
            v = tail_t[s]  # the clock at s follows p's end (p advances it) or p's clock
            if adv:
                if v > qe:
                    qe = v
            elif v > qt:
                qt = v
            if finish[k]:  # s starts (a view: ends) after p's end
                v = durations[s] + tail_end[s]
                if v > qe:
                    qe = v
        tail_end[p] = qe
        v = durations[p] + qe
        tail_t[p] = v if v > qt else qt
    return tail_t, tail_end


def _compute_stream_bound(graph: Graph, durations: Sequence[float], head: Heads,
                          tail_end: Sequence[float]) -> float:
    """Jackson's preemptive schedule of the compute stream's work: release at its earliest
    start, delivery time its tail; the largest end + tail is optimal for the preemptive
    one-machine relaxation, so no order does better. The jobs are put in release order with
    numpy (start, then index: the order sorting the pairs gives); the schedule itself is the
    sequential loop, so every sum is made in the same order."""
    advances = _structure(graph).advances
    work = np.asarray(durations, dtype=float)
    jobs = np.flatnonzero((np.frombuffer(advances, dtype=np.uint8) > 0) & (work > 0.0))
    starts = np.asarray(head.start, dtype=float)[jobs]
    by_release = np.lexsort((jobs, starts))  # by start, then index: as sorting (start, index) pairs
    release, job = starts[by_release].tolist(), jobs[by_release].tolist()
    ready: list[tuple[float, int, float]] = []  # (-tail, index, remaining)
    heappush, heappop = heapq.heappush, heapq.heappop
    clock = 0.0
    best = 0.0
    k = 0
    m = len(job)
    while k < m or ready:
        if not ready and clock < release[k]:
            clock = release[k]
        while k < m and release[k] <= clock:
            i = job[k]
            heappush(ready, (-tail_end[i], i, durations[i]))
            k += 1
        neg_tail, i, left = heappop(ready)
        until = release[k] if k < m else float("inf")
        if clock + left <= until:
            clock += left
            if clock - neg_tail > best:
                best = clock - neg_tail
        else:  # preempted by the next release; it goes back with what is left
            heappush(ready, (neg_tail, i, left - (until - clock)))
            clock = until
    return best


def _group_streams_bound(graph: Graph, durations: Sequence[float], head: Heads,
                         tail_end: Sequence[float]) -> float:
    """Per group, the best run of consecutive collectives: earliest start of its first,
    their durations, the least time after its last (module docstring). Where a group's
    collectives may run in any order (:meth:`Graph.without_group_order`), only the whole
    group counts: the earliest start of any, all durations, the least tail of any."""
    st = _structure(graph)
    best = 0.0
    if not graph.group_order:
        for chain in st.chains:
            first = min(head.start[c] for c in chain)
            last = min(tail_end[c] for c in chain)
            best = max(best, first + sum(durations[c] for c in chain) + last)
        return best
    for chain in st.chains:
        before = _compute_before(st, durations, chain)
        after = _compute_after(st, durations, chain)
        run = 0.0
        for j, c in enumerate(chain):
            earliest = max(head.start[c], before[j])
            run = max(run, earliest) + durations[c]
            best = max(best, run + max(tail_end[c], after[j]))
    return best


def _compute_before(st: _Structure, durations: Sequence[float], chain: list[int]) -> list[float]:
    """Per collective of ``chain`` (one group, in order): the compute-stream work of all its
    ancestors, which every order runs before issuing it. Ancestor sets grow along the chain,
    so one backward search serves the whole chain."""
    ptr, idx, advances = st.pred_ptr, st.pred_idx, st.advances
    seen = bytearray(len(advances))
    total = 0.0
    out = []
    for c in chain:
        stack = list(idx[ptr[c]:ptr[c + 1]])
        pop, extend = stack.pop, stack.extend
        while stack:
            p = pop()
            if seen[p]:
                continue
            seen[p] = 1
            if advances[p]:
                total += durations[p]
            extend(idx[ptr[p]:ptr[p + 1]])
        out.append(total)
    return out


_NONE, _WEAK, _STRONG = 0, 1, 2


def _compute_after(st: _Structure, durations: Sequence[float], chain: list[int]) -> list[float]:
    """Per collective ``c`` of ``chain``: the compute-stream work that cannot start before
    ``c`` ends. A node is *weak* when its start (a view: its end) follows ``c``'s end, *strong*
    when the clock reaching it does; a strong node or a compute-stream member makes every
    successor strong, a weak collective or view makes only the successors that need it
    finished weak. The sets shrink along the chain (the next collective of the group starts
    after ``c`` ends), so one forward search, run from the chain's end, serves it all."""
    ptr, idx, finish, advances = st.succ_ptr, st.succ_idx, st.succ_finish, st.advances
    status = bytearray(len(advances))
    total = 0.0
    out = [0.0] * len(chain)
    for j in range(len(chain) - 1, -1, -1):
        c = chain[j]
        weak = [idx[k] for k in range(ptr[c], ptr[c + 1]) if finish[k]]
        strong: list[int] = []
        weak_pop, weak_extend, strong_pop, strong_extend = weak.pop, weak.extend, strong.pop, strong.extend
        while weak or strong:
            if strong:
                i = strong_pop()
                was = status[i]
                if was == _STRONG:
                    continue
                if was == _NONE and advances[i]:
                    total += durations[i]
                status[i] = _STRONG
                strong_extend(idx[ptr[i]:ptr[i + 1]])
                continue
            i = weak_pop()
            if status[i] != _NONE:
                continue
            status[i] = _WEAK
            if advances[i]:  # a compute-stream member: everything after it is strong
                total += durations[i]
                strong_extend(idx[ptr[i]:ptr[i + 1]])
            else:
                weak_extend([idx[k] for k in range(ptr[i], ptr[i + 1]) if finish[k]])
        out[j] = total
    return out


def _collective_chain_bound(graph: Graph, durations: Sequence[float], compute_slowdown: float = 1.0) -> float:
    """The compute plus the longest chain of flight idle (module docstring).

    One forward sweep gives, per node, the collectives it cannot start before the end of
    (``after``: the *weak* and *strong* statuses of :func:`_compute_after`, as bit sets), one
    backward sweep the collectives it is an ancestor of (``before``). A collective's
    independent work is the compute less the work of both sets; its flight idles for at least
    its duration less that. Chains follow ``after``: a collective that cannot start before
    another ends flies after it.

    Summing each flight's idle counts a kernel independent of several collectives of the
    chain once per flight, though it runs only once: :func:`_shared_work_idle` refines the
    best chain, and the chain with the most communication, by giving each kernel's work to
    at most one flight. A group's collectives share one FIFO stream, so their flights are
    disjoint in any order too: :func:`_group_flight_idle` gives each group's flights the most
    work a maximum flow can place in them.

    With a compute slowdown ``f`` a flight of ``d`` has room for only ``d / f`` of compute
    (compute runs ``f`` times as long beside a collective): at least ``d - d / f`` of it idles
    whatever runs beside it. Only compute is slowed, so where a wait has a duration of its own
    (a graph file may set one) the bound is taken without the slowdown."""
    st = _structure(graph)
    colls = graph.collectives()
    n, m = len(graph.nodes), len(colls)
    if m == 0 or n * m > CHAIN_BOUND_MAX_CELLS:
        return 0.0
    bit = {c: 1 << k for k, c in enumerate(colls)}
    ptr, idx, finish, advances, is_coll = st.pred_ptr, st.pred_idx, st.pred_finish, st.advances, st.is_coll
    strong = [0] * n  # the clock reaching the node follows these collectives' ends
    after = [0] * n  # its start does (strong included)
    for i in range(n):
        s = w = 0
        for k in range(ptr[i], ptr[i + 1]):
            p = idx[k]
            s |= strong[p]
            if advances[p]:  # p ran on the compute stream: whatever follows p's end, i's clock does
                s |= after[p]
            elif finish[k]:
                w |= after[p]
            if is_coll[p] and finish[k]:
                w |= bit[p]
        strong[i] = s
        after[i] = w | s
    sptr, sidx = st.succ_ptr, st.succ_idx
    before = [0] * n  # the collectives the node is an ancestor of
    for i in range(n - 1, -1, -1):
        b = 0
        for k in range(sptr[i], sptr[i + 1]):
            q = sidx[k]
            b |= before[q]
            if is_coll[q]:
                b |= bit[q]
        before[i] = b
    work = [i for i in range(n) if advances[i] and durations[i] > 0.0]
    weights = np.asarray([durations[i] for i in work], dtype=float)
    compute = float(weights.sum())
    work_after = _bit_rows([after[i] for i in work], m)
    work_before = _bit_rows([before[i] for i in work], m)
    dependent = weights @ work_after + weights @ work_before
    comm = np.asarray([durations[c] for c in colls], dtype=float)
    if any(durations[i] > 0.0 for i in graph.waits()):
        compute_slowdown = 1.0  # a wait's own time is not slowed: the room argument needs all work slowed
    room = comm / compute_slowdown
    idle = comm - np.minimum(np.maximum(0.0, compute - dependent), room)
    follows = _bit_rows([after[c] for c in colls], m).astype(bool)
    best = 0.0
    for weight in (idle, comm):
        chain = _longest_chain(follows, weight)
        best = max(best, float(idle[chain].sum()),
                   _shared_work_idle(chain, comm, room, weights, work_after, work_before))
    column = {c: k for k, c in enumerate(colls)}
    for group in st.chains:
        best = max(best, _group_flight_idle(np.asarray([column[c] for c in group], dtype=np.int64),
                                            comm, room, weights, work_after, work_before))
    return compute + best


def _longest_chain(follows: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The chain of collectives (column indices, in order) with the largest total ``weight``,
    where collective ``k`` may follow ``j`` when ``follows[k, j]``."""
    m = len(weight)
    longest = np.zeros(m)
    prev = np.full(m, -1)
    for k in range(m):  # index order is topological: a chain's earlier collectives come first
        earlier = np.flatnonzero(follows[k])
        if earlier.size:
            j = earlier[np.argmax(longest[earlier])]
            prev[k] = j
            longest[k] = weight[k] + longest[j]
        else:
            longest[k] = weight[k]
    chain = [int(np.argmax(longest))] if m else []
    while chain and prev[chain[-1]] >= 0:
        chain.append(int(prev[chain[-1]]))
    return np.asarray(chain[::-1], dtype=np.int64)


def _shared_work_idle(chain: np.ndarray, comm: np.ndarray, room_us: np.ndarray, work_us: np.ndarray,
                      after: np.ndarray, before: np.ndarray) -> float:
    """The least idle of the compute stream during the flights of ``chain`` (disjoint, in
    order), with each kernel's work (``work_us``) placed in at most one flight, split as
    needed. A kernel can only run during the flights after the last chain collective it
    cannot start before the end of (``after``, rows of bits per kernel) and before the first
    it is an ancestor of (``before``): an interval of flights. Filling each flight in turn with
    the eligible work whose interval closes first places the most work (the greedy rule is
    optimal when every kernel's flights form an interval), so the idle is the chain's
    communication less that. A flight holds at most ``room_us`` of work (its duration over
    the compute slowdown)."""
    if chain.size == 0:
        return 0.0
    length = len(chain)
    a = after[:, chain] > 0
    b = before[:, chain] > 0
    first = np.where(a.any(axis=1), length - np.argmax(a[:, ::-1], axis=1), 0)  # first eligible flight
    last = np.where(b.any(axis=1), np.argmax(b, axis=1), length) - 1  # last eligible flight
    eligible = np.flatnonzero(first <= last)
    releases = sorted(eligible.tolist(), key=lambda x: first[x])
    ready: list[tuple[int, int]] = []  # (last eligible flight, kernel)
    left = work_us.astype(float).copy()
    placed = 0.0
    r = 0
    for k in range(length):
        while r < len(releases) and first[releases[r]] <= k:
            x = releases[r]
            heapq.heappush(ready, (int(last[x]), x))
            r += 1
        room = float(room_us[chain[k]])
        while room > 0.0 and ready:
            closes, x = ready[0]
            if closes < k:
                heapq.heappop(ready)
                continue
            take = min(room, float(left[x]))
            room -= take
            left[x] -= take
            placed += take
            if left[x] <= 0.0:
                heapq.heappop(ready)
    return float(comm[chain].sum()) - placed


def _group_flight_idle(cols: np.ndarray, comm: np.ndarray, room_us: np.ndarray, work_us: np.ndarray,
                       after: np.ndarray, before: np.ndarray) -> float:
    """The least idle of the compute stream during the flights of one group's collectives
    (``cols``), which its stream runs one at a time in whatever order: their communication
    less the most kernel work that can run beside them (:func:`commopt.sim.flow.max_placement`;
    a kernel beside a collective is neither its ancestor nor unable to start before it ends).
    A flight holds at most ``room_us`` of work. 0 above :data:`FLOW_MAX_PAIRS` (not computed)."""
    from commopt.sim.flow import max_placement

    if cols.size < 2:
        return 0.0
    beside = (after[:, cols] == 0) & (before[:, cols] == 0)
    if int(beside.sum()) > FLOW_MAX_PAIRS:
        return 0.0
    rows = np.flatnonzero(beside.any(axis=1))
    placed = max_placement(work_us[rows].tolist(), room_us[cols].tolist(),
                           [np.flatnonzero(beside[r]).tolist() for r in rows])
    room = float(comm[cols].sum())
    return max(0.0, room - placed - 1e-12 * room)  # round-off never raises the bound


def _bit_rows(sets: list[int], width: int) -> np.ndarray:
    """Bit sets (Python ints) as rows of 0/1 of ``width`` columns (bit k: column k)."""
    nbytes = (width + 7) // 8
    raw = b"".join(x.to_bytes(nbytes, "little") for x in sets)
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8).reshape(len(sets), nbytes), axis=1,
                         bitorder="little")
    return bits[:, :width].astype(np.float64)
