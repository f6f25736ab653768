"""How an order's makespan moves when the cost estimates are wrong.

Measured collective times differ from any estimate by 25-50% on real traces, and compute
estimates are off too. An order that is best under the estimates may lose most of its gain
when communication is slower than estimated. :func:`makespan_range` simulates an order under
a few deterministic perturbations of the durations, each within :data:`COST_ERROR`:

- every collective x(1 - e) and x(1 + e) (``comm x0.7``, ``comm x1.3``);
- every compute node x(1 - e) and x(1 + e) (``compute x0.7``, ``compute x1.3``);
- :data:`RANDOM_DRAWS` draws scaling each node by its own factor in [1 - e, 1 + e], from a
  fixed seed (``random #k``), so the same graph gives the same numbers in every process.

The result is the makespan per scenario with its range; ``worst_us`` is what the passes
compare when they choose between nearly equal orders (they prefer the one that degrades least).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import accumulate

import numpy as np
from dataclasses import dataclass

from commopt.ir.graph import Graph, NodeKind

#: The relative error of every estimate the scenarios explore (+-30%).
COST_ERROR = 0.30
#: Seeded random per-node perturbations among the scenarios.
RANDOM_DRAWS = 2
_SEED = 20_260_101


@dataclass(frozen=True, slots=True)
class MakespanRange:
    """One order's makespan at the estimates (``nominal_us``) and under each perturbed
    scenario (``scenarios``: (name, makespan us) in a fixed order)."""

    nominal_us: float
    scenarios: tuple[tuple[str, float], ...]

    @property
    def min_us(self) -> float:
        """The smallest makespan over the nominal durations and every scenario."""
        return min([self.nominal_us, *(m for _, m in self.scenarios)])

    @property
    def worst_us(self) -> float:
        """The largest makespan over the nominal durations and every scenario."""
        return max([self.nominal_us, *(m for _, m in self.scenarios)])


def perturbations(graph: Graph, durations_us: Sequence[float],
                  error: float = COST_ERROR) -> list[tuple[str, list[float]]]:
    """The perturbed duration lists, one per scenario (module docstring), named."""
    is_comm = np.array([n.kind is NodeKind.COLLECTIVE for n in graph.nodes], dtype=bool)
    base = np.array([float(d) for d in durations_us], dtype=float)
    if base.shape != is_comm.shape:
        raise ValueError(f"{len(base)} durations for a graph of {len(is_comm)} nodes")
    lo, hi = 1.0 - error, 1.0 + error
    out = []
    # numpy applies the same IEEE operations in the same order as d * f and
    # d * rng.uniform(lo, hi) == d * (lo + (hi - lo) * rng.random()): the same floats
    for label, f in ((f"{lo:g}", lo), (f"{hi:g}", hi)):
        out.append((f"comm x{label}", np.where(is_comm, base * f, base).tolist()))
    for label, f in ((f"{lo:g}", lo), (f"{hi:g}", hi)):
        out.append((f"compute x{label}", np.where(is_comm, base, base * f).tolist()))
    for k in range(RANDOM_DRAWS):
        rng = random.Random(_SEED + k)
        draws = np.array([rng.random() for _ in range(len(base))], dtype=float)
        out.append((f"random #{k + 1}", (base * (lo + (hi - lo) * draws)).tolist()))
    return out


def makespan_range(graph: Graph, order: Sequence[int], durations_us: Sequence[float], *,
                   nominal_us: float | None = None,
                   scenarios: list[tuple[str, list[float]]] | None = None) -> MakespanRange:
    """``order``'s makespan under every perturbation of ``durations_us`` (module docstring).
    ``nominal_us`` (the makespan at the estimates, if already simulated) and ``scenarios``
    (:func:`perturbations`, to share between orders) save work. The scenarios share one
    reading of the order (:func:`makespans`)."""
    from commopt.ir.schedule import Schedule
    from commopt.sim.engine import makespan_us

    order = Schedule.of(graph, order)
    if scenarios is None:
        scenarios = perturbations(graph, durations_us)
    if nominal_us is None:
        nominal_us = makespan_us(graph, order, durations_us)
    spans = makespans(graph, order, [durs for _, durs in scenarios])
    return MakespanRange(nominal_us, tuple((name, m) for (name, _), m in zip(scenarios, spans, strict=True)))


def makespans(graph: Graph, order: Sequence[int], duration_lists: Sequence[Sequence[float]]) -> list[float]:
    """The makespan :func:`commopt.sim.engine.makespan_us` gives ``order`` under each of
    ``duration_lists``, equal to the last bit: the order is read once into runs of nodes
    whose inputs are provably ready when the compute stream reaches them (their clock is a
    running sum, added in the engine's order) and the steps between (collectives, waits,
    reads of a value that may be in flight), which replay the engine's rules per list. An
    order the engine refuses (a wait before its collective) is replayed by the engine, which
    raises."""
    from commopt.ir.schedule import Schedule
    from commopt.sim.engine import makespan_us
    from commopt.sim.model import ZERO_TIME_KINDS, step_durations

    order = Schedule.of(graph, order)
    program = _ReplayProgram.of(graph, order)
    if program is None:
        return [makespan_us(graph, order, durs) for durs in duration_lists]
    zero = np.array([n.kind in ZERO_TIME_KINDS for n in graph.nodes], dtype=bool)
    spans = []
    for durs in duration_lists:
        dur = np.array(durs, dtype=float)
        if dur.shape != zero.shape or not np.all((dur >= 0.0) & (dur < np.inf)):
            step_durations(graph, durs)  # raises the engine's error
        dur[zero] = 0.0
        spans.append(program.makespan(dur.tolist()))
    return spans


_COLLECTIVE, _STREAM, _VIEW = 0, 1, 2  # how a step between runs advances the clock


@dataclass(frozen=True, slots=True)
class _ReplayProgram:
    """One order as :func:`makespans` replays it: ``plain`` the nodes of the runs in order
    (each adds its duration to the compute clock: its inputs are ready by then), and
    ``segments`` (start, stop, kept, step): the run ``plain[start:stop]``, the (node, offset)
    pairs of its nodes whose end a later step reads, then the step (kind, node, inputs,
    group) or None after the last run."""

    n: int
    plain: list[int]
    segments: list[tuple[int, int, list[tuple[int, int]], tuple | None]]

    @classmethod
    def of(cls, graph: Graph, order: Sequence[int]) -> _ReplayProgram | None:
        """Read ``order`` once (None when a wait comes before its collective)."""
        from commopt.sim.model import stream_of

        nodes = graph.nodes
        n = len(nodes)
        late = bytearray(n)  # a value that may still be in flight when read
        issued = bytearray(n)
        seg_of, off_of = [-1] * n, [0] * n
        plain: list[int] = []
        segments: list[tuple[int, int, list[tuple[int, int]], tuple | None]] = []
        start = 0
        coll_kind, wait_kind, view_kind = NodeKind.COLLECTIVE, NodeKind.WAIT, NodeKind.VIEW
        for i in order:
            node = nodes[i]
            kind = node.kind
            ins = node.inputs
            if kind is coll_kind:
                step = (_COLLECTIVE, i, ins, stream_of(node))
                late[i] = issued[i] = 1
            elif kind is wait_kind:
                if node.wait_of is None or not issued[node.wait_of]:
                    return None
                step = (_STREAM, i, ins, None)
            else:
                for p in ins:
                    if late[p] and _still_late(nodes, late, p):
                        break
                else:  # every input is ready: the node only adds its duration
                    seg_of[i], off_of[i] = len(segments), len(plain) - start + 1
                    plain.append(i)
                    continue
                step = (_VIEW if kind is view_kind else _STREAM, i, ins, None)
                late[i] = kind is view_kind
            if step[0] == _STREAM:  # the compute stream waited for every input: all ready
                for p in ins:
                    _settle(nodes, late, p)
            segments.append((start, len(plain), [], step))
            start = len(plain)
            for p in ins:
                if seg_of[p] >= 0:
                    segments[seg_of[p]][2].append((p, off_of[p]))
        segments.append((start, len(plain), [], None))
        return cls(n, plain, segments)

    def makespan(self, dur: list[float]) -> float:
        """The makespan under per-node step durations ``dur`` (the engine's rules)."""
        end = [0.0] * self.n
        run = [dur[i] for i in self.plain]
        stream_free: dict[str, float] = {}
        t = 0.0
        comm_end = t
        for start, stop, kept, step in self.segments:
            if stop > start:
                clock = list(accumulate(run[start:stop], initial=t))
                for node, off in kept:
                    end[node] = clock[off]
                t = clock[-1]
            if step is None:
                break
            kind, i, ins, group = step
            ready = 0.0
            for p in ins:
                if end[p] > ready:
                    ready = end[p]
            if kind == _COLLECTIVE:
                s = max(stream_free.get(group, 0.0), t, ready)
                end[i] = stream_free[group] = s + dur[i]
                if end[i] > comm_end:
                    comm_end = end[i]
            elif kind == _STREAM:
                t = end[i] = (ready if ready > t else t) + dur[i]
            else:
                end[i] = ready if ready > t else t
        return max(t, comm_end)


def _still_late(nodes, late: bytearray, p: int) -> bool:
    """Whether ``p``'s value may still be in flight: a collective no compute-stream step has
    waited for, or a view of one (a view's end is its sources' or its own start)."""
    if nodes[p].kind is NodeKind.VIEW and not any(late[q] and _still_late(nodes, late, q)
                                                  for q in nodes[p].inputs):
        late[p] = 0
    return bool(late[p])


def _settle(nodes, late: bytearray, p: int) -> None:
    """``p`` (and, through views, what it reads) is known ready: a compute-stream step read it."""
    if late[p]:
        late[p] = 0
        if nodes[p].kind is NodeKind.VIEW:
            for q in nodes[p].inputs:
                _settle(nodes, late, q)


def robustness_summary(graph: Graph, before_order: Sequence[int], after_order: Sequence[int],
                       durations_us: Sequence[float], before_makespan_us: float,
                       after_makespan_us: float, *, after_graph: Graph | None = None,
                       after_durations_us: Sequence[float] | None = None):
    """The summary's and the report's robustness entry
    (:class:`~commopt.schemas.summary.Robustness`): both orders' makespans under every
    scenario, the same perturbed durations for both. ``after_graph`` (with its
    ``after_durations_us``): the program ``after_order`` orders when a pass rewrote
    ``graph``; its scenarios are drawn the same way for its own nodes."""
    from commopt.schemas.summary import Robustness, ScenarioMakespans

    scenarios = perturbations(graph, durations_us)
    before = makespan_range(graph, before_order, durations_us, nominal_us=before_makespan_us,
                            scenarios=scenarios)
    if after_graph is not None and after_graph is not graph:
        graph, durations_us = after_graph, after_durations_us
        scenarios = perturbations(graph, durations_us)
    after = makespan_range(graph, after_order, durations_us, nominal_us=after_makespan_us,
                           scenarios=scenarios)
    return Robustness(
        cost_error=COST_ERROR,
        scenarios=[ScenarioMakespans(scenario=name, before_us=b, after_us=a)
                   for (name, b), (_, a) in zip(before.scenarios, after.scenarios, strict=True)],
        before_min_us=before.min_us, before_max_us=before.worst_us,
        after_min_us=after.min_us, after_max_us=after.worst_us)
