"""Small graphs for the report tests, with hand-computed simulations.

``two_groups()`` has two all-gathers in flight at once on group ``dp`` (the second queues
behind the first) while an all-reduce runs on group ``tp``: the case Inductor's overlap
visualizer cannot show.
"""

from __future__ import annotations

from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import Graph
from commopt.sim.result import COMPUTE_LANE, CollectiveTiming, SimEvent, SimResult, comm_lane

DURATIONS = {
    "ag_a": 40.0, "ag_b": 30.0, "ar": 25.0,
    "mm1": 20.0, "mm2": 30.0, "use_a": 10.0, "final": 15.0,
}


def two_groups() -> Graph:
    """x, w1, w2 -> ag_a, ag_b (dp), ar (tp) issued first; compute; waits; final."""
    b = GraphBuilder(name="two_groups", world_size=4)
    b.group("dp", ranks=[0, 2])
    b.group("tp", ranks=[0, 1])
    x = b.input("x", (64, 256))
    w1 = b.input("w1", (32, 256), role="parameter")
    w2 = b.input("w2", (32, 256), role="parameter")
    ag_a = b.collective("ag_a", "all_gather", "dp", w1)
    ag_b = b.collective("ag_b", "all_gather", "dp", w2)
    ar = b.collective("ar", "all_reduce", "tp", x)
    mm1 = b.compute("mm1", "aten.mm.default", [x], (64, 256))
    mm2 = b.compute("mm2", "aten.relu.default", [mm1], (64, 256))
    wa = b.wait("ag_a_wait", ag_a)
    use_a = b.compute("use_a", "aten.mm.default", [mm2, wa], (64, 64))
    wr = b.wait("ar_wait", ar)
    wb = b.wait("ag_b_wait", ag_b)
    final = b.compute("final", "aten.add.Tensor", [use_a, wr, wb], (64, 64))
    b.output([final])
    return b.build()


def durations(graph: Graph) -> list[float]:
    """One duration per node: the table above, 0 elsewhere."""
    return [DURATIONS.get(n.name, 0.0) for n in graph.nodes]


def hand_sim(graph: Graph) -> SimResult:
    """The original order of ``two_groups()`` simulated by hand (FIFO stream per group).

    t=0 issue ag_a (runs 0-40), ag_b (queued, 40-70), ar (tp, 0-25); mm1 0-20, mm2 20-50;
    ag_a_wait at 50 (done), use_a 50-60, ar_wait at 60 (done), ag_b_wait 60-70 exposed 10,
    final 70-85.
    """
    i = graph.index_of
    dp, tp = comm_lane("dp"), comm_lane("tp")
    events = [
        SimEvent(i["ag_a"], dp, 0.0, 40.0),
        SimEvent(i["ag_b"], dp, 40.0, 70.0),
        SimEvent(i["ar"], tp, 0.0, 25.0),
        SimEvent(i["mm1"], COMPUTE_LANE, 0.0, 20.0),
        SimEvent(i["mm2"], COMPUTE_LANE, 20.0, 50.0),
        SimEvent(i["use_a"], COMPUTE_LANE, 50.0, 60.0),
        SimEvent(i["ag_b_wait"], COMPUTE_LANE, 60.0, 70.0),
        SimEvent(i["final"], COMPUTE_LANE, 70.0, 85.0),
    ]
    colls = [
        CollectiveTiming(i["ag_a"], "dp", 0.0, 0.0, 40.0, i["ag_a_wait"], 50.0, 0.0),
        CollectiveTiming(i["ag_b"], "dp", 0.0, 40.0, 70.0, i["ag_b_wait"], 60.0, 10.0),
        CollectiveTiming(i["ar"], "tp", 0.0, 0.0, 25.0, i["ar_wait"], 60.0, 0.0),
    ]
    return SimResult(
        makespan_us=85.0,
        total_compute_us=75.0,
        comm_us_by_group={"dp": 70.0, "tp": 25.0},
        exposed_comm_us=10.0,
        overlap_ratio=1.0 - 10.0 / 95.0,
        lower_bound_us=85.0,  # critical path: ag_a, ag_b queued behind it, ag_b_wait, final
        critical_path_us=85.0,
        peak_memory_bytes=458752,
        events=events,
        collectives=colls,
        # inputs 128 KiB; +64 KiB per collective output and per mm output
        memory_curve=[(0.0, 131072), (0.0, 196608), (0.0, 262144), (0.0, 327680),
                      (0.0, 393216), (20.0, 458752), (50.0, 393216), (50.0, 409600),
                      (60.0, 278528), (70.0, 294912), (85.0, 147456)],
    )


def naive_order(graph: Graph) -> list[int]:
    """Every collective waited for right after its issue, compute last: nothing overlaps."""
    names = ["x", "w1", "w2", "ag_a", "ag_a_wait", "ag_b", "ag_b_wait", "ar", "ar_wait",
             "mm1", "mm2", "use_a", "final", "output"]
    return [graph.index_of[n] for n in names]


def naive_sim(graph: Graph) -> SimResult:
    """``naive_order`` simulated by hand: each collective fully exposed, then the compute.

    ag_a 0-40 (exposed 40), ag_b 40-70 (30), ar 70-95 (25); mm1 95-115, mm2 115-145,
    use_a 145-155, final 155-170.
    """
    i = graph.index_of
    dp, tp = comm_lane("dp"), comm_lane("tp")
    events = [
        SimEvent(i["ag_a"], dp, 0.0, 40.0),
        SimEvent(i["ag_a_wait"], COMPUTE_LANE, 0.0, 40.0),
        SimEvent(i["ag_b"], dp, 40.0, 70.0),
        SimEvent(i["ag_b_wait"], COMPUTE_LANE, 40.0, 70.0),
        SimEvent(i["ar"], tp, 70.0, 95.0),
        SimEvent(i["ar_wait"], COMPUTE_LANE, 70.0, 95.0),
        SimEvent(i["mm1"], COMPUTE_LANE, 95.0, 115.0),
        SimEvent(i["mm2"], COMPUTE_LANE, 115.0, 145.0),
        SimEvent(i["use_a"], COMPUTE_LANE, 145.0, 155.0),
        SimEvent(i["final"], COMPUTE_LANE, 155.0, 170.0),
    ]
    colls = [
        CollectiveTiming(i["ag_a"], "dp", 0.0, 0.0, 40.0, i["ag_a_wait"], 0.0, 40.0),
        CollectiveTiming(i["ag_b"], "dp", 40.0, 40.0, 70.0, i["ag_b_wait"], 40.0, 30.0),
        CollectiveTiming(i["ar"], "tp", 70.0, 70.0, 95.0, i["ar_wait"], 70.0, 25.0),
    ]
    return SimResult(
        makespan_us=170.0,
        total_compute_us=75.0,
        comm_us_by_group={"dp": 70.0, "tp": 25.0},
        exposed_comm_us=95.0,
        overlap_ratio=0.0,
        lower_bound_us=85.0,
        critical_path_us=85.0,
        peak_memory_bytes=458752,
        events=events,
        collectives=colls,
        memory_curve=[(0.0, 131072), (0.0, 196608), (40.0, 262144), (70.0, 327680),
                      (95.0, 393216), (115.0, 458752), (145.0, 409600), (155.0, 294912),
                      (170.0, 147456)],
    )


def sunk_order(graph: Graph) -> list[int]:
    """``graph``'s order with every wait moved as late as its users allow (a valid reorder)."""
    order = [i for i in graph.original_order if graph.nodes[i].kind.label != "wait"]
    for w in graph.waits():
        at = min((order.index(u) for u in graph.succs(w) if u in order), default=len(order))
        order.insert(at, w)
    return order
