"""What the emitted runner holds (arenas + other live tensors) on the real-model corpus, and
what the memory budget on that footprint costs in makespan.

Per corpus graph at world size 8: the footprint of the original and of the optimized order
(arenas at their lower bound, largest rank's sizes), the arenas' part of it, and the simulated
makespan with ``--max-memory-increase`` 0, 5%, 10% (the default), 25% and with no limit
(1000%), all applied to the footprint. Then, per FSDP-like corpus graph, the copies the runner
makes per step with and without persistent parameter buffers (``--persistent-params all``).
"""

from __future__ import annotations

from bench.util import table

BUDGETS = (0.0, 0.05, 0.10, 0.25, 10.0)


def run(quick: bool = False) -> str:
    """One row per ws8 corpus graph (analytical estimator, H100 preset)."""
    import commopt
    from tests.corpus.graphs import corpus_graphs

    rows = []
    for g in corpus_graphs():
        if g.world_size != 8 or (quick and g.name not in ("llama_fsdp_bf16", "mixtral_ep")):
            continue
        graph = commopt.load_graph(g.path)
        makespans = []
        default = None
        for budget in BUDGETS:
            result = commopt.optimize(graph, max_memory_increase=budget, timings=False)
            makespans.append(result.summary.after.makespan_us)
            if budget == 0.10:
                default = result.summary
        fp = default.footprint
        mib = 2 ** 20
        rows.append((
            g.name,
            f"{fp.before_bytes / mib:.3f} -> {fp.after_bytes / mib:.3f}",
            f"{fp.arena_before_bytes / mib:.3f} -> {fp.arena_after_bytes / mib:.3f}",
            f"{default.before.peak_memory_bytes / mib:.3f} -> {default.after.peak_memory_bytes / mib:.3f}",
            f"{default.before.makespan_us:,.1f}",
            *(f"{m:,.1f}" for m in makespans),
        ))
    return (
        _budget_section(rows) + "\n\n" + _persistent_section(quick)
    )


def _persistent_section(quick: bool) -> str:
    """Copies per step, arenas and footprint without and with persistent parameters, on the
    order optimized with the option (the runner's own counts, largest rank's sizes)."""
    import commopt
    from commopt.buffers import plan_buffers
    from commopt.codegen import build_model
    from tests.corpus.graphs import corpus_graphs, is_simple_fsdp

    rows = []
    mib, kib = 2 ** 20, 2 ** 10
    for g in corpus_graphs():
        if g.world_size != 8 or not is_simple_fsdp(g.name) or (quick and g.name != "llama_fsdp"):
            continue
        # the optimized order may reorder a group's collectives: plan it on the graph it is
        # an order of (the result's, with that freedom), not the loaded one
        result = commopt.optimize(commopt.load_graph(g.path), persistent_params="all", timings=False)
        graph, order = result.graph, list(result.order)
        cells = []
        for option in (None, "all"):
            plan = plan_buffers(graph, order, persistent_params=option)
            model = build_model(graph, order, plan)
            cells.append((model.copies_per_iter, model.copy_bytes_per_iter, plan.totals.arena_bytes,
                          model.predicted_peak_bytes, plan.persistent_params))
        (c0, b0, a0, f0, _), (c1, b1, a1, f1, entry) = cells
        gathers = len(entry.params) + len({r.param for r in entry.not_qualified})
        rows.append((g.name, f"{len(entry.params)} of {gathers}", f"{c0} / {b0 / kib:,.1f}",
                     f"{c1} / {b1 / kib:,.1f}", f"{a0 / mib:.3f} -> {a1 / mib:.3f}",
                     f"{f0 / mib:.3f} -> {f1 / mib:.3f}"))
    return (
        "### Copies per step with and without persistent parameter buffers\n\n"
        "`--persistent-params all` keeps each parameter an all_gather reads directly or through "
        "reshaping views in its group's arena for the whole step (FSDP's flat-parameter layout): "
        "the runner copies it in once, at setup, instead of every step; a cast in between "
        "(bf16 `param_dtype`) disqualifies it. FSDP-like corpus graphs at world size 8, the order "
        "optimized with the option; copies into comm buffers per step as the generated runner "
        "makes them (count / KiB, largest rank's sizes), the arenas and the runner's footprint "
        "(arenas + other live tensors: the parameters now live only in the arena) without -> "
        "with the option.\n\n"
        + table(["graph", "parameters in the arena", "copies/step without (n / KiB)",
                 "with (n / KiB)", "arenas MiB", "footprint MiB"], rows)
    )


def _budget_section(rows) -> str:
    """The footprint and budget table."""
    return (
        "## Memory footprint of the runner (bench_footprint)\n\n"
        "The generated runner holds one arena per process group for the whole step; its footprint "
        "is the arenas plus the other live tensors at their peak (graph inputs included), the "
        "number `--max-memory-increase` bounds (the runner's `--memory` measures it within 0.4% "
        "on every runnable corpus graph, tests/corpus). World size 8, analytical estimator, H100 "
        "preset, MiB with the largest rank's sizes; the footprint and arenas are before -> after "
        "with the default budget (10%), next to the plain live-tensor peak. Then the simulated "
        "makespan (us) of the original order and of the optimized one under each budget on the "
        "footprint.\n\n"
        + table(["graph", "footprint MiB", "arenas MiB", "live tensors MiB", "original us",
                 *(f"{b:.0%}" if b < 1 else "no limit" for b in BUDGETS)], rows)
    )
