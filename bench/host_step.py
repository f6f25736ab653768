"""One rank of the host-time comparison (started by ``torchrun``; see bench_scale).

    torchrun --nproc-per-node N bench/host_step.py RUNNER ARCHIVE ITERS WARMUP OUT

Imports the generated runner script, sets it up as its ``main`` does, loads the archive's
graph module on the same ranks, and alternates, iteration by iteration, one step of each
program so all of them see the same machine load: the runner's optimized step (on its
arenas), the exported graph module called under ``torch.no_grad()`` and under
``torch.inference_mode()`` (the archive's example inputs). Rank 0 writes the median wall and
main-thread CPU microseconds of each, per rank, to OUT as JSON, and the CPU seconds each
took to be ready: the runner's set-up (buffers, inputs, its step program built and
compiled) and the archive's load (``torch.export.load`` and its module).
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _load_runner(path: str):
    """The generated script as a module (its ``main`` does not run)."""
    spec = importlib.util.spec_from_file_location("commopt_runner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(runner_path: str, archive: str, iters: int, warmup: int, out: str) -> None:
    """Time the three programs on this rank; rank 0 writes every rank's medians."""
    import torch
    import torch.distributed as dist

    from tests.distributed import (
        flat_inputs,
        load_archive,
        read_groups_record,
        recreate_groups,
        rename_groups,
    )

    runner = _load_runner(runner_path)
    args = runner.parse_args(["--backend", "gloo", "--iters", "0"])
    rt = runner.init_world(args)
    t0 = time.thread_time()
    inputs = runner.set_up(rt, args)
    rt.optimized = runner.build_program(rt, runner.OPTIMIZED_ORDER, on_arenas=True)
    runner_setup_s = time.thread_time() - t0
    mapping = recreate_groups(read_groups_record(archive))
    t0 = time.thread_time()
    exported = load_archive(archive)
    module, example = rename_groups(exported, mapping), flat_inputs(exported)
    exported_setup_s = time.thread_time() - t0

    def exported_no_grad():
        with torch.no_grad():
            module(*example)

    def exported_inference():
        with torch.inference_mode():
            module(*example)

    steps = {"runner": lambda: runner.run_optimized(rt, inputs),
             "exported": exported_no_grad, "exported_inference": exported_inference}
    wall: dict[str, list[float]] = {name: [] for name in steps}
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    for k in range(warmup + iters):
        for name, step in steps.items():
            dist.barrier()
            t0, c0 = time.perf_counter(), time.thread_time()
            step()
            if k >= warmup:
                wall[name].append((time.perf_counter() - t0) * 1e6)
                cpu[name].append((time.thread_time() - c0) * 1e6)
    medians = {name: {"wall_us": statistics.median(wall[name]), "cpu_us": statistics.median(cpu[name])}
               for name in steps}
    medians["setup_cpu_s"] = {"runner": runner_setup_s, "exported": exported_setup_s}
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, medians)
    if dist.get_rank() == 0:
        Path(out).write_text(json.dumps(every), encoding="utf-8")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
