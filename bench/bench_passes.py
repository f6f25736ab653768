"""The reordering passes: schedule quality on the samples and optimizer time vs graph size.

Quality: every world-size-8 sample, durations from the analytical estimator (H100 preset),
simulated before and after each single pass and the default pipeline; makespan over the
lower bound max(total compute, busiest comm stream, critical path) says how much is left.
Speed: the default pipeline (including the invariant check and the simulations the pass
manager runs after every pass) on synthetic FSDP+TP stacks of about 10k, 30k and 100k nodes.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.util import table

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_graphs" / "ws8"
HARDWARE = "h100"
SIZES = (10_000, 30_000, 100_000)
QUICK_SIZES = (2_000, 10_000)


def _durations(graph):
    from commopt.estimators import resolve

    return resolve("analytical", hardware=HARDWARE).durations(graph)  # fresh chain per graph


def _quality() -> str:
    from commopt.io import load_graph
    from commopt.passes.base import DEFAULT_PIPELINE, PassContext
    from commopt.passes.manager import PassManager
    from commopt.passes.registry import get_registry

    reg = get_registry()
    pipelines = [("sink-waits",), ("raise-comms",), ("compute-overlap",), tuple(DEFAULT_PIPELINE)]
    rows = []
    for path in sorted(SAMPLES.glob("*.pt2")):
        g = load_graph(path)
        d = _durations(g)
        ctx = PassContext.for_graph(g, d)
        for names in pipelines:
            r = PassManager([reg.create(n) for n in names]).run(g, g.original_order, ctx)
            b, a = r.initial, r.final
            label = "default: " + ",".join(names) if len(names) > 1 else names[0]
            rows.append([path.stem, label, b.makespan_us, a.makespan_us, b.exposed_comm_us,
                         a.exposed_comm_us, a.lower_bound_us, a.makespan_us / a.lower_bound_us,
                         f"{a.peak_memory_bytes / b.peak_memory_bytes:.3f}"])
    return table(["sample", "passes", "makespan before us", "after us", "exposed before us",
                  "exposed after us", "lower bound us", "makespan / bound", "peak after / before"],
                 rows)


def _synthetic(target_nodes: int):
    from commopt.synth import fsdp_tp_stack

    # dp=8 x tp=2: 4 collectives per layer (forward all-gather, TP all-reduce, backward
    # all-gather and reduce-scatter) in 24 nodes per layer
    layers = max(1, round(target_nodes / 24))
    return fsdp_tp_stack(layers, dp=8, tp=2, hidden=512, tokens=1024, seed=0)


def _speed(sizes) -> str:
    from commopt.passes.base import DEFAULT_PIPELINE, PassContext
    from commopt.passes.manager import PassManager
    from commopt.passes.registry import get_registry

    reg = get_registry()
    rows = []
    for target in sizes:
        g = _synthetic(target)
        d = _durations(g)
        t0, c0 = time.perf_counter(), time.process_time()
        ctx = PassContext.for_graph(g, d)
        r = PassManager([reg.create(n) for n in DEFAULT_PIPELINE]).run(g, g.original_order, ctx)
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
        per_pass = ", ".join(f"{x.name} {x.seconds:.2f}" for x in r.records)
        rows.append([len(g), len(g.collectives()), total, cpu, cpu / len(g) * 1e6, per_pass,
                     r.initial.makespan_us / r.final.makespan_us, r.final.makespan_us / r.final.lower_bound_us])
    return table(["nodes", "collectives", "wall s", "CPU s", "CPU us per node", "passes alone (wall s)",
                  "speed-up (simulated)", "makespan / bound"], rows)


def run(quick: bool) -> str:
    """Markdown section: quality per sample and pass, optimizer time vs size."""
    parts = [
        "## Passes\n",
        "Simulated with the analytical estimator, H100 preset (estimates). Memory budget: the "
        "default +10% over the original order's peak. `peak after / before` is the peak live "
        "memory ratio.\n",
        _quality(),
        "\nOptimizer wall time of the default pipeline on synthetic FSDP(dp=8)+TP(tp=2) "
        "stacks: memory budget, every pass, the invariant check and the simulation after each "
        "pass; `passes alone` is each pass's own time. Wall time depends on how busy the shared "
        "machine is; CPU time (this process) is the steadier number.\n",
        _speed(QUICK_SIZES if quick else SIZES),
    ]
    return "\n".join(parts) + "\n"
