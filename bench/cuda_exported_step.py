"""Time one step of a ``torch.export`` archive's graph module on one CUDA rank (NCCL, world 1).

The peer of the generated runner's ``--out`` timings on a GPU machine, measured the same way:
CUDA events around each step (no synchronization between steps) and the main thread's CPU
time per step, after warm-up. The archive must have been exported at world size 1, so that
its collectives name the world group (``"0"``) that this process creates. Run from a
checkout (it uses the test harness's ``flat_inputs``)::

    python bench/cuda_exported_step.py GRAPH.pt2 [--iters 200] [--warmup 10]

prints one JSON line: ``{"graph", "median_us", "host_cpu_median_us", "iters"}``. An archive
exported on CPU records ``device=cpu`` in the operators that make tensors; like the generated
runner, this script points every such ``device`` keyword at the GPU before running.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def _on_device(gm, device):
    """``gm`` with every operator's ``device`` keyword set to ``device`` (recompiled)."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and "device" in node.kwargs:
            node.kwargs = {**node.kwargs, "device": device}
    gm.recompile()
    return gm


def main(argv: list[str] | None = None) -> int:
    """Load the archive, run it on CUDA under a one-rank NCCL world, print its step timings."""
    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.distributed import flat_inputs  # the test harness's placeholder values

    parser = argparse.ArgumentParser(prog="cuda_exported_step.py")
    parser.add_argument("archive")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args(argv)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=device)
    try:
        ep = torch.export.load(args.archive)
        gm = _on_device(ep.graph_module, device)
        inputs = [v.to(device) if isinstance(v, torch.Tensor) else v for v in flat_inputs(ep)]
        with torch.no_grad():
            for _ in range(args.warmup):
                gm(*inputs)
            torch.cuda.synchronize()
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                     for _ in range(args.iters)]
            cpu = []
            for start, end in pairs:
                c0 = time.thread_time()
                start.record()
                gm(*inputs)
                end.record()
                cpu.append((time.thread_time() - c0) * 1e6)
            torch.cuda.synchronize()
        times = [start.elapsed_time(end) * 1000.0 for start, end in pairs]
        print(json.dumps({"graph": os.path.basename(args.archive), "median_us": statistics.median(times),
                          "host_cpu_median_us": statistics.median(cpu), "iters": args.iters}))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
