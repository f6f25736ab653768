"""What the emitted runner holds (arenas + other live tensors) on the real-model corpus, and
what the memory budget on that footprint costs in makespan.

Per corpus graph at world size 8: the footprint of the original and of the optimized order
(arenas at their lower bound, largest rank's sizes), the arenas' part of it, and the simulated
makespan with ``--max-memory-increase`` 0, 5%, 10% (the default), 25% and with no limit
(1000%), all applied to the footprint.
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
