"""The CP-SAT model of a :class:`~commopt.solver.problem.Problem`, and its solution read back
as an order.

Variables per placed node: a compute-stream node's start (its interval, of its duration,
on one no-overlap resource: intervals of size zero count too, so a wait never sits inside
a kernel); a collective's issue and start (start >= issue), its end start + duration.
Edges: a successor's clock (start, or issue for a collective) >= the predecessor's
clock-after (end, or issue for a collective); *finish* edges out of a collective also make
the successor start after its end. Collectives of one group queue in their fixed order
through those edges. The objective is the latest end.

Every order the simulator can replay gives a solution (its times), so the model's optimum
is a lower bound; and any solution read back by sorting (compute-stream nodes by end, then
start; collectives by issue; index order on ties, which is topological) replays no later
than the solution's times, node by node. So the model's optimum is the simulator's.

In a window (:mod:`commopt.solver.window`) the nodes outside it are fixed: the ones before
it give constants, the ones after it are left out, and the window starts no earlier than
the clock where it begins.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from commopt.ir.graph import NodeKind
from commopt.solver.problem import Problem, Storage

#: Share of the time limit for the makespan; the rest shortens lifetimes at that makespan.
MAKESPAN_SHARE = 0.7


@dataclass(frozen=True)
class Fixed:
    """A node outside the window: its clock-after and end, in units."""

    clock_after: int
    end: int


@dataclass(frozen=True)
class Solution:
    """What the solver found: orders of the placed nodes, the most memory-friendly first
    (empty: nothing found), its status, the objective (units) and the proven bound (units)."""

    sequences: list[list[int]]
    status: str
    objective: int | None
    bound: int | None


@dataclass
class _Model:
    """A built model and its variables; ``derived``: more variables, each with how its value
    follows from per-node (clock, start) values (so a hint can be complete)."""

    model: object
    start: dict
    issue: dict
    makespan: object
    derived: list = field(default_factory=list)


def solve(prob: Problem, nodes: Sequence[int], *, hint: Mapping[int, tuple[int, int]],
          horizon: int, time_limit_s: float, workers: int,
          fixed: Mapping[int, Fixed] | None = None, floor: int = 0,
          stores: Mapping[int, Storage] | None = None, capacity: int | None = None) -> Solution:
    """Solve the model of ``nodes`` (all placed nodes, or a window with ``fixed`` nodes
    before it and the clock ``floor`` where it starts). ``hint``: per node (clock, start)
    of a known schedule ending by ``horizon``. With ``stores``, a second phase keeps the
    best makespan found and shortens the storages' lifetimes, weighted by their bytes (so
    the order stays near the memory budget); with ``capacity`` too, live bytes never exceed
    it (:func:`_memory`; the proven bound is then of that stricter problem)."""
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    mv = _build(prob, nodes, fixed or {}, floor, horizon)
    if stores is not None and capacity is not None:
        _memory(mv, prob, nodes, stores, capacity, floor, horizon)
    _hint(mv, prob, nodes, hint)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = max(1, workers)
    solver.parameters.max_time_in_seconds = max(0.01, MAKESPAN_SHARE * float(time_limit_s))
    code = solver.Solve(mv.model)
    status = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible"}.get(code, "no solution")
    if status == "no solution":
        return Solution([], status, None, None)
    objective, bound = int(solver.ObjectiveValue()), int(solver.BestObjectiveBound())
    found = _values(solver, mv, nodes)
    sequences = [_sequence(prob, nodes, found)]
    left = float(time_limit_s) - (time.perf_counter() - t0)
    if stores and left > 0.05:  # second phase: at that makespan, the shortest lifetimes
        mv.model.Add(mv.makespan <= objective)
        mv.model.Minimize(_lifetimes(mv, prob, nodes, stores, floor, horizon))
        mv.model.ClearHints()
        _hint(mv, prob, nodes, found)
        solver.parameters.max_time_in_seconds = left
        if solver.Solve(mv.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            sequences.insert(0, _sequence(prob, nodes, _values(solver, mv, nodes)))
    return Solution(sequences, status, objective, bound)


def _build(prob: Problem, nodes: Sequence[int], fixed: Mapping[int, Fixed], floor: int,
           horizon: int) -> _Model:
    """The model of ``nodes`` (module docstring), minimizing the makespan."""
    from ortools.sat.python import cp_model

    units = prob.units
    m = cp_model.CpModel()
    start: dict[int, cp_model.IntVar] = {}
    issue: dict[int, cp_model.IntVar] = {}
    intervals = []
    for i in nodes:
        start[i] = m.NewIntVar(floor, horizon - units[i], f"s{i}")
        if prob.on_compute_stream(i):
            intervals.append(m.NewFixedSizeIntervalVar(start[i], units[i], f"k{i}"))
        else:
            issue[i] = m.NewIntVar(floor, horizon, f"i{i}")
            m.Add(start[i] >= issue[i])
    m.AddNoOverlap(intervals)
    inside = set(nodes)

    def clock(i: int):
        if i in fixed:
            return fixed[i].clock_after
        return issue[i] if i in issue else start[i] + units[i]

    def end(i: int):
        return fixed[i].end if i in fixed else start[i] + units[i]

    for p, s, finish in prob.edges:
        if s not in inside or (p not in inside and p not in fixed):
            continue
        m.Add((issue[s] if s in issue else start[s]) >= clock(p))
        if finish and not prob.on_compute_stream(p):
            m.Add(start[s] >= end(p))
    if not prob.graph.group_order:
        _free_group_streams(m, prob, nodes, fixed, start)
    makespan = m.NewIntVar(floor, horizon, "makespan")
    for i in nodes:
        m.Add(makespan >= start[i] + units[i])
    m.Minimize(makespan)
    return _Model(m, start, issue, makespan)


def _free_group_streams(m, prob: Problem, nodes: Sequence[int], fixed: Mapping[int, Fixed],
                        start: Mapping[int, object]) -> None:
    """Where a group's collectives may be issued in any order (no edges queue them): they
    still run one at a time on the group's stream, after the group's collectives fixed
    before the window. A relaxation of the stream's first-in-first-out rule (the read-back
    order is simulated and checked before it is kept), so the model's optimum stays a
    lower bound."""
    graph = prob.graph
    by_group: dict[str, list[int]] = {}
    for i in nodes:
        if not prob.on_compute_stream(i):
            by_group.setdefault(graph.nodes[i].collective.group, []).append(i)
    busy: dict[str, int] = {}
    for f, place in fixed.items():
        node = graph.nodes[f]
        if node.kind is NodeKind.COLLECTIVE and node.collective is not None:
            g = node.collective.group
            busy[g] = max(busy.get(g, 0), place.end)
    for g, colls in by_group.items():
        m.AddNoOverlap([m.NewFixedSizeIntervalVar(start[c], prob.units[c], f"q{c}") for c in colls])
        for c in colls:
            if g in busy:
                m.Add(start[c] >= busy[g])


def _hint(mv: _Model, prob: Problem, nodes: Sequence[int], values: Mapping[int, tuple[int, int]]) -> None:
    """Warm-start ``mv`` with per node (clock, start) values (a complete hint: CP-SAT only
    takes a hint it can check as a whole as its first solution)."""
    for i in nodes:
        c, s = values[i]
        mv.model.AddHint(mv.start[i], s)
        if i in mv.issue:
            mv.model.AddHint(mv.issue[i], c)
    mv.model.AddHint(mv.makespan, max((values[i][1] + prob.units[i] for i in nodes), default=0))
    for var, value in mv.derived:
        mv.model.AddHint(var, value(values))


def _values(solver, mv: _Model, nodes: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Per node (clock, start) of the solver's solution (clock: a collective's issue)."""
    out = {}
    for i in nodes:
        s = solver.Value(mv.start[i])
        out[i] = (solver.Value(mv.issue[i]) if i in mv.issue else s, s)
    return out


def _sequence(prob: Problem, nodes: Sequence[int], values: Mapping[int, tuple[int, int]]) -> list[int]:
    """The placed nodes in the order that replays ``values`` (module docstring)."""
    def key(i: int) -> tuple[int, int, int]:
        c, s = values[i]
        if prob.on_compute_stream(i):
            return (s + prob.units[i], s, i)
        return (c, c, i)

    return sorted(nodes, key=key)


#: Lifetime weights are storage bytes scaled to 1..this (keeps the objective in 64 bits).
MAX_WEIGHT = 1000


def _event(mv: _Model, prob: Problem, i: int):
    """Node ``i``'s place in time as the read-back order sorts it: a compute-stream node's
    end, a collective's issue."""
    return mv.issue[i] if i in mv.issue else mv.start[i] + prob.units[i]


def _last_use(mv: _Model, prob: Problem, r: int, st: Storage, inside: set[int], floor: int,
              horizon: int):
    """A variable >= the event of every node of the window using storage ``r`` (plus one, so
    a storage is live at its last use; the end + 1 when the output uses it)."""
    last = mv.model.NewIntVar(floor, horizon + 1, f"l{r}")
    using = [r, *(u for u in st.users if u in inside)]
    for u in using:
        mv.model.Add(last >= _event(mv, prob, u) + 1)
    if st.to_end:
        mv.model.Add(last == horizon + 1)
        mv.derived.append((last, lambda values: horizon + 1))
    else:
        mv.derived.append((last, lambda values: max(_event_value(prob, u, values) for u in using) + 1))
    return last


def _event_value(prob: Problem, i: int, values: Mapping[int, tuple[int, int]]) -> int:
    """:func:`_event` of node ``i`` in per-node (clock, start) ``values``."""
    c, s = values[i]
    return s + prob.units[i] if prob.on_compute_stream(i) else c


def _lifetimes(mv: _Model, prob: Problem, nodes: Sequence[int], stores: Mapping[int, Storage],
               floor: int, horizon: int):
    """Sum over storages allocated in ``nodes`` of weight x lifetime (last use - allocation):
    short lifetimes keep the peak low."""
    inside = set(nodes)
    top = max((st.nbytes for st in stores.values()), default=1)
    terms = []
    for r, st in stores.items():
        if r in inside and not st.to_end:
            weight = max(1, MAX_WEIGHT * st.nbytes // top)
            terms.append(weight * (_last_use(mv, prob, r, st, inside, floor, horizon) - _event(mv, prob, r)))
    return sum(terms)


def _memory(mv: _Model, prob: Problem, nodes: Sequence[int], stores: Mapping[int, Storage],
            capacity: int, floor: int, horizon: int) -> None:
    """Live bytes at every moment <= ``capacity``: each storage holds its bytes from its
    allocation to its last use, both included. Positions that share a moment count
    together, so this is stricter than the budget along the order (a solution keeps it)."""
    inside = set(nodes)
    intervals, demands = [], []
    for r, st in stores.items():
        if r not in inside:
            continue
        a = _event(mv, prob, r)
        last = _last_use(mv, prob, r, st, inside, floor, horizon)
        size = mv.model.NewIntVar(1, horizon + 1, f"z{r}")
        mv.derived.append((size, lambda values, r=r, last_hint=mv.derived[-1][1]:
                           last_hint(values) - _event_value(prob, r, values)))
        intervals.append(mv.model.NewIntervalVar(a, size, last, f"m{r}"))
        demands.append(st.nbytes)
    mv.model.AddCumulative(intervals, demands, capacity)
