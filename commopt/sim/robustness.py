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
from dataclasses import dataclass

import numpy as np

from commopt.ir.graph import Graph

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
    from commopt.sim.engine import collective_mask

    is_comm = collective_mask(graph)
    base = np.fromiter(map(float, durations_us), dtype=float)
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
                   scenarios: list[tuple[str, list[float]]] | None = None,
                   compute_slowdown: float = 1.0) -> MakespanRange:
    """``order``'s makespan under every perturbation of ``durations_us`` (module docstring).
    ``nominal_us`` (the makespan at the estimates, if already simulated) and ``scenarios``
    (:func:`perturbations`, to share between orders) save work; ``compute_slowdown`` as in
    :func:`commopt.sim.simulate`."""
    from commopt.ir.schedule import Schedule
    from commopt.sim.engine import makespan_us

    order = Schedule.of(graph, order)
    if scenarios is None:
        scenarios = perturbations(graph, durations_us)
    if nominal_us is None:
        nominal_us = makespan_us(graph, order, durations_us, compute_slowdown=compute_slowdown)
    spans = makespans(graph, order, [durs for _, durs in scenarios], compute_slowdown=compute_slowdown)
    return MakespanRange(nominal_us, tuple((name, m) for (name, _), m in zip(scenarios, spans, strict=True)))


def makespans(graph: Graph, order: Sequence[int], duration_lists: Sequence[Sequence[float]], *,
              compute_slowdown: float = 1.0) -> list[float]:
    """The makespan :func:`commopt.sim.engine.makespan_us` gives ``order`` under each of
    ``duration_lists`` (the engine replays an order without events: about 0.07 s per
    100,000-node order, so the scenarios need no simulator of their own)."""
    from commopt.ir.schedule import Schedule
    from commopt.sim.engine import makespan_us

    order = Schedule.of(graph, order)
    return [makespan_us(graph, order, durs, compute_slowdown=compute_slowdown) for durs in duration_lists]


def robustness_summary(graph: Graph, before_order: Sequence[int], after_order: Sequence[int],
                       durations_us: Sequence[float], before_makespan_us: float,
                       after_makespan_us: float, *, after_graph: Graph | None = None,
                       after_durations_us: Sequence[float] | None = None,
                       compute_slowdown: float = 1.0,
                       before_makespans: Sequence[float] | None = None):
    """The summary's and the report's robustness entry
    (:class:`~commopt.schemas.summary.Robustness`): both orders' makespans under every
    scenario, the same perturbed durations for both. ``after_graph`` (with its
    ``after_durations_us``): the program ``after_order`` orders when a pass rewrote
    ``graph``; its scenarios are drawn the same way for its own nodes. ``compute_slowdown``
    as in :func:`commopt.sim.simulate`. ``before_makespans``: ``before_order``'s makespan
    under each scenario (:func:`makespans`) when already simulated, e.g. by a process that
    ran beside the passes."""
    from commopt.schemas.summary import Robustness, ScenarioMakespans

    scenarios = perturbations(graph, durations_us)
    if before_makespans is None:
        before = makespan_range(graph, before_order, durations_us, nominal_us=before_makespan_us,
                                scenarios=scenarios, compute_slowdown=compute_slowdown)
    else:
        before = MakespanRange(before_makespan_us, tuple(
            (name, m) for (name, _), m in zip(scenarios, before_makespans, strict=True)))
    if after_graph is not None and after_graph is not graph:
        graph, durations_us = after_graph, after_durations_us
        scenarios = perturbations(graph, durations_us)
    after = makespan_range(graph, after_order, durations_us, nominal_us=after_makespan_us,
                           scenarios=scenarios, compute_slowdown=compute_slowdown)
    return Robustness(
        cost_error=COST_ERROR,
        scenarios=[ScenarioMakespans(scenario=name, before_us=b, after_us=a)
                   for (name, b), (_, a) in zip(before.scenarios, after.scenarios, strict=True)],
        before_min_us=before.min_us, before_max_us=before.worst_us,
        after_min_us=after.min_us, after_max_us=after.worst_us)
