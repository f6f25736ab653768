"""Persistent communication buffer planning: arena against the lower bound and per call site.

Three tables: every committed sample (ws8) and the realistic Llama-3-8B graphs (64 ranks)
planned on the original order and on commopt's optimized order (what overlap costs in buffer
memory); random instances of 10,000 buffers (lifetimes and sizes drawn as described in
:func:`random_instance`); planning time on synthetic FSDP+TP graphs up to 100k nodes.
Targets (issue 5): arena / lower bound <= 1.05 on every sample; 10k buffers planned in under
2 s.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from bench import graphs
from bench.util import table, time_call

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_graphs" / "ws8"


def random_instance(n: int, seed: int) -> tuple[list[int], list[int], list[int]]:
    """Sizes and inclusive lifetimes of ``n`` buffers, shaped like a long training step.

    Positions span ``4n``; 80% of buffers live briefly (exponential, mean 20 positions, like a
    collective's input between producer and wait), 15% for a while (mean 400, outputs used
    by a later layer), 5% for up to the whole step (graph inputs, saved activations). Sizes
    are log-uniform from 4 KiB to 64 MiB, rounded up to 512 B.
    """
    rng = random.Random(seed)
    horizon = 4 * n
    sizes, firsts, lasts = [], [], []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.80:
            length = int(rng.expovariate(1 / 20))
        elif kind < 0.95:
            length = int(rng.expovariate(1 / 400))
        else:
            length = rng.randrange(horizon)
        first = rng.randrange(horizon)
        size = int(2 ** rng.uniform(12, 26))
        sizes.append(-(-size // 512) * 512)
        firsts.append(first)
        lasts.append(min(horizon, first + length))
    return sizes, firsts, lasts


def _sample_rows(quick: bool) -> list[list[object]]:
    import commopt
    from commopt.buffers import compare_plans, plan_buffers, validate_plan
    from commopt.io import load_graph

    rows: list[list[object]] = []
    paths = [(p.name, p) for p in sorted(SAMPLES.glob("*.pt2"))]
    paths += [(bg.name, bg.path) for bg in graphs.realistic_graphs(quick)]
    for name, path in paths:
        graph = load_graph(path)
        seconds, plan = time_call(lambda graph=graph: plan_buffers(graph), repeat=3)
        problems = validate_plan(graph, None, plan)
        result = commopt.optimize(graph, timings=False)
        new_plan = plan_buffers(graph, result.order)
        cmp = compare_plans(graph, None, result.order, new_plan=new_plan)
        problems += validate_plan(graph, result.order, new_plan)
        t = plan.totals
        rows.append([
            name, t.buffers, t.arena_bytes, t.arena_bytes / max(1, t.lower_bound_bytes),
            t.arena_bytes / max(1, t.per_call_site_bytes),
            new_plan.totals.arena_bytes / max(1, new_plan.totals.lower_bound_bytes),
            f"{cmp.arena_increase_bytes:+d}", f"{seconds * 1e3:.1f}",
            "ok" if not problems else f"{len(problems)} problems",
        ])
    return rows


def _random_rows(quick: bool) -> tuple[list[list[object]], float]:
    from commopt.buffers.offsets import assign_offsets, lower_bound

    n = 2_000 if quick else 10_000
    seeds = range(2) if quick else range(5)
    rows: list[list[object]] = []
    worst = 0.0
    for seed in seeds:
        sizes, firsts, lasts = random_instance(n, seed)
        t0, c0 = time.perf_counter(), time.process_time()
        _, arena, heuristic = assign_offsets(sizes, firsts, lasts)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        bound = lower_bound(sizes, firsts, lasts)
        ratio = arena / bound
        worst = max(worst, ratio)
        rows.append([seed, n, ratio, arena / sum(sizes), heuristic, f"{seconds:.2f}", f"{cpu:.2f}"])
    return rows, worst


def _synth_rows(quick: bool) -> list[list[object]]:
    from commopt.buffers import plan_buffers
    from commopt.ir.op_registry import overload_schema
    from commopt.synth import graph_with_nodes

    overload_schema("aten.mm", "out")  # loading the operator registry is not planning time
    rows: list[list[object]] = []
    for target in (10_000,) if quick else (10_000, 100_000, 200_000):
        graph = graph_with_nodes(target, tp=2)
        t0, c0 = time.perf_counter(), time.process_time()
        plan = plan_buffers(graph)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        t = plan.totals
        rows.append([len(graph), t.buffers, t.arena_bytes / max(1, t.lower_bound_bytes),
                     t.arena_bytes / max(1, t.per_call_site_bytes), f"{seconds:.2f}", f"{cpu:.2f}"])
    return rows


def run(quick: bool) -> str:
    """The Markdown section of BENCHMARKS.md for buffer planning."""
    parts = ["## Communication buffer planning (bench_buffers)\n",
             "Offsets: best of greedy-by-size / area / length / start with best-fit gaps "
             "(Pisarchyk & Lee 2020). Alignment 512 B. `arena/bound`: arena over the largest sum "
             "of simultaneously live buffers (1.0 is optimal); `arena/per-site`: over one buffer "
             "per call site.\n"]
    if SAMPLES.is_dir() and any(SAMPLES.glob("*.pt2")):
        parts.append("### Samples (ws8) and realistic graphs: original order, then commopt's "
                     "optimized order\n")
        parts.append(table(
            ["sample", "buffers", "arena B", "arena/bound", "arena/per-site", "optimized arena/bound",
             "arena change B", "plan ms", "validate"],
            _sample_rows(quick),
        ) + "\n")
    rows, worst = _random_rows(quick)
    parts.append(f"### Random instances ({rows[0][1]:,} buffers)\n")
    parts.append(table(["seed", "buffers", "arena/bound", "arena/per-site", "best ordering", "plan s", "plan CPU s"], rows))
    parts.append(f"\nWorst arena/bound on random instances: {worst:.3f}. Above 4,096 buffers per "
                 "arena only greedy-by-size and greedy-by-length run. `plan CPU s` is process CPU "
                 "time (less disturbed than wall time by other load on the machine).\n")
    parts.append("### Planning time on synthetic FSDP+TP graphs (lifetimes, packing, digest)\n")
    parts.append(table(["nodes", "buffers", "arena/bound", "arena/per-site", "plan s", "plan CPU s"], _synth_rows(quick)))
    return "\n".join(parts) + "\n"
