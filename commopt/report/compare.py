"""The report of a graph file against a reordered copy of it: what ``commopt report`` runs.

Durations come from the estimator chain (:func:`commopt.estimators.resolve`), which itself
prefers durations recorded in the graph file; the memory budget used to explain exposure is
the passes' own (:meth:`commopt.passes.PassContext.for_graph`).
"""

from __future__ import annotations

import os

from commopt.assumed_sizes import data_dependent_entry, range_line, sim_numbers
from commopt.cross_group import keeps_group_order
from commopt.ir.graph import Graph
from commopt.ir.sizes import data_dependent_sizes
from commopt.report.build import TOP_EXPOSED, build_report, match_order
from commopt.schemas.report import OverlapReport


def compare_graphs(
    graph: Graph,
    reordered: Graph | None = None,
    *,
    estimator_options=None,
    max_memory_increase: float | None = None,
    top: int = TOP_EXPOSED,
    own_output: bool = False,
) -> OverlapReport:
    """Report ``graph`` in its own order and, when given, in ``reordered``'s order.

    ``reordered`` is the same graph in another order (e.g. written by ``commopt optimize``),
    matched by node names. ``estimator_options`` is an
    :class:`~commopt.estimators.EstimatorOptions` (default: analytical). The graph's load
    warnings (e.g. unknown group ranks) lead the report's notes. ``own_output``: ``graph``
    alone is commopt's own output (:func:`commopt.outputs.written_by_commopt`), reported as
    already optimized: no advice to reorder it.
    """
    from commopt.estimators import EstimatorOptions, resolve
    from commopt.sim.memory import DEFAULT_MAX_MEMORY_INCREASE, memory_budget

    options = estimator_options if estimator_options is not None else EstimatorOptions()
    chain = resolve(None, options)
    durations = chain.durations(graph)
    if reordered is not None and reordered.meta.get("buckets"):
        return _bucketed(graph, reordered, chain, durations, max_memory_increase, top)
    after = None
    notes = [*graph.meta.get("load_warnings", ()), *chain.notes, *_slowdown_notes(chain)]
    if reordered is not None:
        after = match_order(graph, reordered, file=reordered.source_path)
        if not keeps_group_order(graph, after):
            # its lower bounds, and so its certificate, are over the orders that may do so
            graph = graph.without_group_order()
            notes.append(f"{_name(reordered)} changes the order of collectives within a process "
                         "group (commopt optimize does where every rank provably runs the "
                         "program in one order): bounds are over every order that may do so")
    increase = DEFAULT_MAX_MEMORY_INCREASE if max_memory_increase is None else max_memory_increase
    budget = memory_budget(graph, increase)
    if after is not None:
        notes.append(f"'after' is the order of {_name(reordered)}, matched to "
                     f"{_name(graph)} by node name")
    optimized = None
    if after is None and own_output:
        optimized = True
        notes.append(f"{_name(graph)} was written by commopt optimize (listed in the manifest "
                     "beside it): its order is the optimized one")
    from commopt.sim import simulate

    # each order is simulated once: the report, the size sweep and the robustness share it
    slow = chain.compute_slowdown
    before_sim = simulate(graph, graph.original_order, durations, compute_slowdown=slow)
    after_sim = simulate(graph, after, durations, compute_slowdown=slow) if after is not None else None
    final_sim = after_sim or before_sim
    entry = _data_dependent(graph, after, chain.durations, before_sim, final_sim, slow)
    if entry is not None:
        notes[:0] = [entry.statement, range_line(entry)]
    footprint, robustness = _footprint_and_robustness(graph, after, durations, increase, notes,
                                                      before_sim, final_sim, compute_slowdown=slow)
    return build_report(graph, graph.original_order, after, durations,
                        estimator_name=chain.name, top=top, memory_budget_bytes=budget,
                        notes=notes, data_dependent=entry, optimized=optimized,
                        before_sim=before_sim, after_sim=after_sim,
                        footprint=footprint, robustness=robustness)


def _bucketed(graph: Graph, bucketed: Graph, chain, durations, max_memory_increase, top: int) -> OverlapReport:
    """The report of ``graph`` before and of ``bucketed`` (a program the bucket pass wrote
    from it: :func:`commopt.invariants.verify_reordered` checks it) after, each in its own
    order and with its own nodes' durations."""
    from commopt.sim import simulate
    from commopt.sim.memory import DEFAULT_MAX_MEMORY_INCREASE, memory_budget

    increase = DEFAULT_MAX_MEMORY_INCREASE if max_memory_increase is None else max_memory_increase
    after_durations = chain.durations(bucketed)
    slow = chain.compute_slowdown
    before_sim = simulate(graph, graph.original_order, durations, compute_slowdown=slow)
    after_sim = simulate(bucketed, bucketed.original_order, after_durations, compute_slowdown=slow)
    notes = [*graph.meta.get("load_warnings", ()), *chain.notes, *_slowdown_notes(chain),
             f"'after' is {_name(bucketed)}, which merges {len(graph.collectives())} collectives into "
             f"{len(bucketed.collectives())} (buckets recorded in the file), in its own order"]
    footprint, robustness = _footprint_and_robustness(
        graph, bucketed.original_order, durations, increase, notes, before_sim, after_sim,
        after_graph=bucketed, after_durations=after_durations, compute_slowdown=slow)
    return build_report(bucketed, graph.original_order, bucketed.original_order, after_durations,
                        estimator_name=chain.name, top=top,
                        memory_budget_bytes=memory_budget(graph, increase), notes=notes,
                        before_sim=before_sim, after_sim=after_sim, footprint=footprint,
                        robustness=robustness, before_graph=graph, before_durations_us=durations)


def _footprint_and_robustness(graph: Graph, after, durations, increase: float, notes: list[str],
                              before_sim, final_sim, *, after_graph: Graph | None = None,
                              after_durations=None, compute_slowdown: float = 1.0):
    """The summary's footprint and robustness entries for both orders (None without
    collectives): what the runner would hold with the default buffer plan, and the makespans
    under +-30% cost errors. ``after_graph`` (with ``after_durations``): the program ``after``
    orders when it is a rewrite of ``graph`` (bucketing); ``compute_slowdown`` as in
    :func:`commopt.sim.simulate`."""
    from commopt.buffers.footprint import FootprintBudget, footprint_summary
    from commopt.sim.robustness import robustness_summary

    if not graph.collectives():
        return None, None
    final_graph = graph if after_graph is None else after_graph
    final = after if after is not None else graph.original_order
    budget = FootprintBudget.for_graph(graph, increase, graph.original_order)
    footprint = footprint_summary(final_graph, final, budget, notes)
    robustness = robustness_summary(graph, graph.original_order, final, durations,
                                    before_sim.makespan_us, final_sim.makespan_us,
                                    after_graph=after_graph, after_durations_us=after_durations,
                                    compute_slowdown=compute_slowdown)
    return footprint, robustness


def _data_dependent(graph: Graph, after, durations_of, before_sim, final_sim, compute_slowdown: float = 1.0):
    """The data-dependent sizes entry of the report (None: every size is static)."""
    if not data_dependent_sizes(graph):
        return None
    final = after if after is not None else graph.original_order
    return data_dependent_entry(graph, graph.original_order, final, durations_of,
                                (sim_numbers(before_sim), sim_numbers(final_sim)),
                                compute_slowdown=compute_slowdown)


def _slowdown_notes(chain) -> list[str]:
    """The applied compute slowdown's note, if the chain's options asked for one."""
    from commopt.estimators.slowdown import slowdown_note

    return [slowdown_note(chain.slowdown)] if chain.slowdown is not None else []


def _name(graph: Graph) -> str:
    return os.path.basename(graph.source_path) if graph.source_path else graph.name
