"""The overlap simulator: turns an order plus per-node durations into a timeline.

``simulate(graph, order, durations_us) -> SimResult`` (``simulate_numbers``: its numbers
alone, without the per-event records) and ``peak_memory(graph, order)``, the one
implementation of live-memory accounting along an order.
"""

from commopt.sim.bounds import LowerBounds, critical_path_us, lower_bounds
from commopt.sim.engine import simulate, simulate_numbers
from commopt.sim.memory import peak_memory
from commopt.sim.result import COMPUTE_LANE, CollectiveTiming, SimEvent, SimResult, comm_lane

__all__ = [
    "COMPUTE_LANE",
    "CollectiveTiming",
    "LowerBounds",
    "SimEvent",
    "SimResult",
    "comm_lane",
    "critical_path_us",
    "lower_bounds",
    "peak_memory",
    "simulate",
    "simulate_numbers",
]
