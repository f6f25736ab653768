"""What a simulation yields: a timeline plus the numbers reports, checks and passes use.

All times are estimates in microseconds from the estimator that produced the durations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from commopt.sim.bounds import LowerBounds

COMPUTE_LANE = "compute"


def comm_lane(group: str) -> str:
    """Lane name of a process group's communication stream."""
    return f"comm:{group}"


class SimEvent(NamedTuple):
    """One node's span on one lane (compute stream or a group's comm stream). A named tuple:
    a simulation of 100k nodes makes ~70k of them, and a tuple is made in half the time of a
    frozen dataclass."""

    node: int
    lane: str
    start_us: float
    end_us: float


class CollectiveTiming(NamedTuple):
    """When a collective was issued, ran and was waited for, and what it exposed.

    ``exposed_us`` is the time the compute stream sat idle in this collective's wait(s).
    A named tuple, like :class:`SimEvent` (one per collective of every simulation).
    """

    node: int
    group: str
    issue_us: float
    start_us: float
    end_us: float
    wait_node: int | None
    wait_start_us: float | None
    exposed_us: float


@dataclass(frozen=True)
class SimResult:
    """Outcome of simulating one order.

    - ``makespan_us``: end of the last event on any lane;
    - ``exposed_comm_us``: total time the compute stream waited on communication;
    - ``overlap_ratio``: share of communication time hidden behind compute (1.0 when none);
    - ``lower_bound_us``: the best cheap lower bound on every valid order's makespan
      (``lower_bounds``, :mod:`commopt.sim.bounds`): total compute, busiest comm stream,
      critical path, and the compute and group streams with heads and tails;
    - ``peak_memory_bytes``: peak of live tensor bytes along the order (views allocate
      nothing; storage is freed after the last use of any of its aliases);
    - ``events``: every compute and communication span, for reports;
    - ``memory_curve``: (time_us, live bytes) after each change;
    - ``compute_slowdown``: the factor compute ran at beside communication (1: not modelled);
      ``slowed_compute_us``: the time it added (``total_compute_us`` is without it).
    """

    makespan_us: float
    total_compute_us: float
    comm_us_by_group: dict[str, float]
    exposed_comm_us: float
    overlap_ratio: float
    lower_bound_us: float
    critical_path_us: float
    peak_memory_bytes: int
    events: list[SimEvent] = field(default_factory=list)
    collectives: list[CollectiveTiming] = field(default_factory=list)
    memory_curve: list[tuple[float, int]] = field(default_factory=list)
    lower_bounds: LowerBounds | None = None
    compute_slowdown: float = 1.0
    slowed_compute_us: float = 0.0

    @property
    def total_comm_us(self) -> float:
        """Communication time summed over all groups."""
        return sum(self.comm_us_by_group.values())
