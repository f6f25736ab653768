"""What ``commopt estimate`` shows: per-node durations, totals by kind, the costliest nodes."""

from __future__ import annotations

from collections import Counter

from commopt.estimators.options import EstimatorOptions
from commopt.estimators.registry import resolve
from commopt.ir.graph import Graph, NodeKind
from commopt.schemas.estimate import EstimateReport, NodeEstimate, SimulatedOriginal


def estimate_report(graph: Graph, options: EstimatorOptions | None = None, *, top: int = 10) -> EstimateReport:
    """Estimate every node of ``graph`` with the chain ``options`` describe, and summarize."""
    from commopt.sim import simulate

    chain = resolve(options=options or EstimatorOptions())
    durations = chain.durations(graph)
    sources = chain.sources
    per_node = [NodeEstimate(name=n.name, kind=n.kind.label, op=n.op, duration_us=durations[n.index],
                             source=sources[n.index]) for n in graph.nodes]
    totals: dict[str, float] = {}
    for kind in NodeKind:
        totals[kind.label] = 0.0
    for n in graph.nodes:
        totals[n.kind.label] += durations[n.index]
    totals = {k: v for k, v in totals.items() if v > 0 or k in ("compute", "collective")}
    ranked = sorted(range(len(graph.nodes)), key=lambda i: (-durations[i], i))
    top_nodes = [per_node[i] for i in ranked[:top] if durations[i] > 0]
    sim = simulate(graph, graph.original_order, durations, compute_slowdown=chain.compute_slowdown)
    hw = next((getattr(e, "hw", None) for e in chain.estimators if e.name == "analytical"), None)
    profile = next((e.model for e in chain.estimators if e.name == "profile" and hasattr(e, "model")), None)
    return EstimateReport(
        graph=graph.name, estimator=chain.name, hardware=hw.name if hw is not None else None,
        nodes=len(graph.nodes), total_us_by_kind=totals, comm_us_by_group=sim.comm_us_by_group,
        nodes_by_source=dict(sorted(Counter(sources).items())), top=top_nodes,
        simulated=SimulatedOriginal(makespan_us=sim.makespan_us, exposed_comm_us=sim.exposed_comm_us,
                                    overlap_ratio=sim.overlap_ratio, lower_bound_us=sim.lower_bound_us,
                                    peak_memory_bytes=sim.peak_memory_bytes),
        notes=chain.notes, durations=per_node,
        collective_waiting=list(profile.waiting) if profile is not None else [],
        compute_slowdown=profile.compute_slowdown if profile is not None else None)
