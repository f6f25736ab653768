"""The real-model corpus (sample_graphs/corpus, plus llama_tp): what `commopt optimize` does to
each graph with default options, and the buffer arena against its lower bound on both orders.

The same graphs are run for real by the test suite (tests/corpus): every one is optimized,
verified and its plan checked; the ws2/ws4 ones compute bitwise what the original computes
under gloo and their generated runners pass ``--verify`` under torchrun.
"""

from __future__ import annotations

import time

from bench.util import table


def run(quick: bool = False) -> str:
    """One row per corpus graph (analytical estimator, H100 preset, default budget)."""
    import commopt
    from commopt.buffers import plan_buffers
    from tests.corpus.graphs import corpus_graphs

    rows = []
    for g in corpus_graphs():
        if quick and g.world_size == 8:
            continue
        graph = commopt.load_graph(g.path)
        t0 = time.perf_counter()
        result = commopt.optimize(graph, timings=False)
        seconds = time.perf_counter() - t0
        s = result.summary
        ratios = []
        for order in (graph.original_order, list(result.order)):
            totals = plan_buffers(graph, order).totals
            ratios.append(totals.arena_bytes / totals.lower_bound_bytes if totals.lower_bound_bytes else 1.0)
        rows.append((
            g.name, g.world_size, "runs (gloo)" if g.runnable else "analysis", s.nodes, s.collectives,
            f"{s.before.makespan_us:,.1f} -> {s.after.makespan_us:,.1f}",
            f"{s.before.exposed_comm_us:,.1f} -> {s.after.exposed_comm_us:,.1f}",
            f"{s.makespan_over_lower_bound:.3f}",
            f"{ratios[0]:.3f} / {ratios[1]:.3f}",
            f"{seconds:.2f}",
        ))
    worst = max((float(r[8].split(" / ")[0]), float(r[8].split(" / ")[1])) for r in rows)
    return (
        "## Real-model corpus (bench_corpus)\n\n"
        "Graphs exported from transformers' Llama with PyTorch's parallelism APIs (TP, TP+SP, "
        "SimpleFSDP fp32/bf16, FSDP x TP on 2-D meshes, 8 layers, forward-only); "
        "`sample_graphs/corpus/MANIFEST.json` describes each. `commopt optimize` with default "
        "options, analytical estimator, H100 preset; simulated microseconds. Arena / bound: the "
        "buffer plan's arena over its lower bound, original order / optimized order.\n\n"
        + table(["graph", "ranks", "use", "nodes", "collectives", "makespan us", "exposed comm us",
                 "makespan / bound", "arena / bound", "optimize s"], rows)
        + f"\n\nWorst arena / bound over both orders: {max(worst):.3f}. Every graph above "
        "optimizes, verifies and passes verify-plan in `make test` (tests/corpus); the ones "
        "marked 'runs' also compute bitwise what the original computes under gloo, and their "
        "runners pass `--verify` under torchrun.\n"
    )
