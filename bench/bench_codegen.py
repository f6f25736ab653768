"""The generated runner: generation time at scale, what the plan leaves to copy, measured steps.

Three tables: generating the runner (model, render, compile) for synthetic FSDP graphs up to
100k nodes; every ws8 sample's runner on commopt's optimized order with its buffer plan
(buffers, copies and zero-copy producers per step); and, unless quick, ws2 samples' runners
started with torchrun on 2 gloo ranks with ``--compare`` (median step of the optimized order
on arenas vs the original order on fresh tensors, CPU, perf_counter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.util import table

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_graphs"


def _generation_rows(sizes: list[int]) -> list[list[object]]:
    from commopt.buffers import plan_buffers
    from commopt.codegen.model import build_model
    from commopt.codegen.render import render
    from commopt.synth import graph_with_nodes

    rows = []
    for target in sizes:
        g = graph_with_nodes(target)
        plan = plan_buffers(g, g.original_order)
        t0 = time.perf_counter()
        model = build_model(g, g.original_order, plan)
        t1 = time.perf_counter()
        source = render(model)
        t2 = time.perf_counter()
        compile(source, "run.py", "exec")
        t3 = time.perf_counter()
        rows.append([len(g), len(g.collectives()), t1 - t0, t2 - t1, t3 - t2, t3 - t0,
                     len(source.encode()) // 1024])
    return rows


def _sample_rows(world_dir: str) -> list[list[object]]:
    from commopt.api import optimize
    from commopt.buffers import plan_buffers
    from commopt.codegen.model import build_model
    from commopt.io import load_graph

    rows = []
    for path in sorted((SAMPLES / world_dir).glob("*.pt2")):
        g = load_graph(path)
        order = optimize(g, timings=False).order
        model = build_model(g, order, plan_buffers(g, order))
        rows.append([path.stem, len(g), len(g.collectives()), len(model.buffers),
                     sum(b for _, b in model.arenas) // 1024, model.copies_per_iter,
                     model.zero_copy_per_iter, len(model.emulated)])
    return rows


def _measured_rows(names: list[str], iters: int) -> list[list[object]]:
    from commopt.api import optimize
    from commopt.buffers import plan_buffers
    from commopt.codegen import write_runner
    from commopt.io import load_graph

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-codegen-") as tmp:
        for name in names:
            g = load_graph(SAMPLES / "ws2" / f"{name}.pt2")
            world = g.world_size or 2
            order = optimize(g, timings=False).order
            script = Path(tmp) / f"run_{name}.py"
            write_runner(g, script, order, plan_buffers(g, order))
            out = Path(tmp) / f"{name}.json"
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world),
                   "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", str(script),
                   "--compare", "--iters", str(iters), "--warmup", "3", "--out", str(out)]
            env = dict(os.environ, OMP_NUM_THREADS="1")
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                                  timeout=600)
            if proc.returncode != 0:
                rows.append([name, world, "failed", "", "", proc.stderr.strip()[-120:]])
                continue
            res = json.loads(out.read_text(encoding="utf-8"))
            rows.append([name, world, res["median_us"], res["original_median_us"],
                         res["speedup"], res["buffer_mode"]])
    return rows


def run(quick: bool) -> str:
    """The Markdown section of this benchmark."""
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    parts = [
        "## Runner generation (`commopt.codegen`)\n",
        "Generating the runner script for synthetic FSDP graphs (original order, planned "
        "arenas): building the model, rendering the template, and `compile()` of the result, "
        "in seconds.\n",
        table(["nodes", "collectives", "model s", "render s", "compile s", "total s", "script KiB"],
              _generation_rows(sizes)),
        "\nEvery ws8 sample's runner on commopt's optimized order with its buffer plan: "
        "what each step still copies into communication buffers and how many producers write "
        "there directly (out= variants).\n",
        table(["sample", "nodes", "collectives", "buffers", "arena KiB", "copies/step",
               "zero-copy/step", "emulated"], _sample_rows("ws8")),
    ]
    if not quick:
        parts += [
            "\nMeasured with torchrun on 2 gloo ranks on this CPU machine, `--compare`: median "
            "step in microseconds of the optimized order on the arenas vs the original order on "
            "fresh tensors, alternating iteration by iteration (slowest rank). gloo runs "
            "collectives on background threads, so some overlap happens even here, but on 2 "
            "shared cores these numbers are noisy and say little about the speed-up on GPUs.\n",
            table(["sample", "ranks", "optimized us", "original us", "speed-up", "buffer mode"],
                  _measured_rows(["ddp", "fsdp", "tp"], iters=30)),
        ]
    return "\n".join(parts) + "\n"
