"""The generated runner on CUDA with NCCL: does it run, verify, keep its memory promise, and
what does a step cost the host against the exported module and a CUDA graph.

On a machine with CUDA this measures (and rewrites ``bench/gpu_results.json``); on one without
(CI, the shared CPU machines) it renders the results last recorded there, saying where and
when. One GPU means one rank: NCCL refuses two ranks on one device, and the real-model corpus
loses its collectives at world size 1 (DTensor skips collectives over a mesh dimension of
size 1), so the graphs are the hand-written samples exported at world size 1
(``make_samples.py --one NAME 1``), whose functional collectives stay in the graph.

Per sample: the runner with ``--verify --memory`` (eager, arenas in the mode ``auto`` picks),
the same with ``--cuda-graph``, and ``bench/cuda_exported_step.py`` (the archive's graph
module, timed the same way: CUDA events around each step, main-thread CPU time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.util import table

ROOT = Path(__file__).resolve().parent.parent
RECORDED = Path(__file__).resolve().parent / "gpu_results.json"
SAMPLES = ["ddp", "fsdp", "moe", "tp"]


def _tail(text: str) -> str:
    """The last non-empty line of ``text`` (a failure's reason), shortened for a table."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else "no output")[-120:]


def _torchrun(script: Path, args: list[str], cwd: Path) -> tuple[dict | None, str]:
    """Run ``script`` on one rank with torchrun; (its --out document or None, its output)."""
    res = cwd / f"res_{os.getpid()}.json"
    res.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
           str(script), *args, "--out", str(res)]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    text = proc.stdout + proc.stderr
    if proc.returncode != 0 or not res.exists():
        return None, text
    return json.loads(res.read_text(encoding="utf-8")), text


def _measure_one(name: str, work: Path, iters: int) -> dict:
    """Export ``name`` at world size 1, optimize it, and run its runner and archive on CUDA."""
    from commopt.api import optimize

    env = dict(os.environ, PYTHONHASHSEED="0")
    export = subprocess.run([sys.executable, str(ROOT / "sample_graphs" / "make_samples.py"),
                             "--one", name, "1", str(work)], capture_output=True, text=True,
                            env=env, timeout=600, check=False)
    if export.returncode != 0:
        return {"sample": name, "error": "export: " + _tail(export.stderr)}
    archive = work / f"{name}.pt2"
    result = optimize(archive, output_dir=work / f"opt_{name}", timings=False)
    script = work / f"opt_{name}" / result.outputs.runner_name
    row: dict = {"sample": name, "nodes": len(result.graph),
                 "collectives": len(result.graph.collectives())}
    eager, text = _torchrun(script, ["--iters", str(iters), "--warmup", "10", "--verify", "--memory"], work)
    if eager is None:
        row["error"] = "runner: " + _tail(text)
        return row
    memory = (eager.get("memory") or [{}])[0]
    row.update(buffer_mode=eager["buffer_mode"], verified="identical to the original order" in text,
               predicted_bytes=eager["predicted_peak_bytes"], measured_bytes=memory.get("peak_bytes"),
               allocator_bytes=memory.get("cuda_step_peak_bytes"), eager_us=eager["median_us"],
               eager_host_us=eager["host_cpu_median_us"])
    graph, text = _torchrun(script, ["--iters", str(iters), "--warmup", "10", "--cuda-graph"], work)
    row.update(graph_us=graph["median_us"] if graph else None,
               graph_host_us=graph["host_cpu_median_us"] if graph else None)
    if graph is None:
        row["graph_error"] = _tail(text)
    exported = subprocess.run([sys.executable, str(ROOT / "bench" / "cuda_exported_step.py"), str(archive),
                               "--iters", str(iters)], capture_output=True, text=True, timeout=600,
                              check=False)
    if exported.returncode == 0:
        doc = json.loads(exported.stdout.strip().splitlines()[-1])
        row.update(exported_us=doc["median_us"], exported_host_us=doc["host_cpu_median_us"])
    else:
        row["exported_error"] = _tail(exported.stderr)
    return row


def measure(quick: bool) -> dict:
    """Every sample on this machine's first GPU; the document ``gpu_results.json`` holds."""
    import datetime

    import torch

    iters = 50 if quick else 200
    with tempfile.TemporaryDirectory() as tmp:
        rows = [_measure_one(name, Path(tmp) / name, iters) for name in SAMPLES]
    return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "date": datetime.date.today().isoformat(), "iters": iters, "samples": rows}


def _us(v: object) -> str:
    return f"{v:,.1f}" if isinstance(v, (int, float)) else "-"


def render(doc: dict, live: bool) -> str:
    """The section: what ran, memory against the prediction, and step times."""
    where = ("measured in this run" if live else
             "recorded by the last run on a machine with CUDA (this one has none); "
             "`make bench` on a GPU machine re-measures and rewrites bench/gpu_results.json")
    out = [
        "## The runner on CUDA with NCCL (bench_gpu)\n",
        f"{doc['device']}, torch {doc['torch']}, NCCL {doc['nccl']}, {doc['date']}; {where}. One "
        "rank (one GPU: NCCL refuses two ranks on one device), so the graphs are the samples "
        "exported at world size 1, whose collectives stay in the graph (the corpus graphs lose "
        "theirs at world size 1); NCCL runs a one-rank collective as a device-to-device copy. "
        f"Medians of {doc['iters']} steps after 10 warm-up steps.\n",
    ]
    rows, failures = [], []
    for r in doc["samples"]:
        if "error" in r:
            failures.append(f"- {r['sample']}: {r['error']}")
            continue
        ratio = (f"{r['allocator_bytes'] / r['predicted_bytes']:.3f}"
                 if r.get("allocator_bytes") and r["predicted_bytes"] else "-")
        rows.append([r["sample"], r["nodes"], r["collectives"], r["buffer_mode"],
                     "yes" if r["verified"] else "NO", r["predicted_bytes"], r["measured_bytes"],
                     r.get("allocator_bytes") or "-", ratio])
    out.append("`--verify` (the optimized order on the arenas against the original order, bitwise) "
               "and `--memory` (one optimized step: live storages seen by a dispatch mode, and "
               "the CUDA caching allocator's peak for the same step, 512-byte block rounding "
               "included):\n")
    out.append(table(["sample", "nodes", "collectives", "buffer mode", "verified", "predicted B",
                      "measured B", "allocator B", "allocator / predicted"], rows))
    times = [[r["sample"], _us(r["eager_us"]), _us(r["eager_host_us"]), _us(r.get("graph_us")),
              _us(r.get("graph_host_us")), _us(r.get("exported_us")), _us(r.get("exported_host_us"))]
             for r in doc["samples"] if "error" not in r]
    out.append("\nStep time (CUDA events) and the main thread's CPU time per step, us: the runner "
               "eager, the runner replaying a CUDA graph of the step, and the exported graph "
               "module (`bench/cuda_exported_step.py`). These tensors are tiny, so an eager step "
               "is launch-bound: its GPU time is the host's time.\n")
    out.append(table(["sample", "runner us", "runner host us", "CUDA graph us",
                      "CUDA graph host us", "exported us", "exported host us"], times))
    notes = failures + [f"- {r['sample']}: the exported module did not run on CUDA: "
                        f"{r['exported_error']}" for r in doc["samples"] if r.get("exported_error")]
    notes += [f"- {r['sample']}: --cuda-graph failed: {r['graph_error']}"
              for r in doc["samples"] if r.get("graph_error")]
    if notes:
        out.append("\n" + "\n".join(notes))
    return "\n".join(out) + "\n"


def run(quick: bool) -> str:
    """Measure on CUDA when there is one (and record it), else render the recorded results."""
    import torch

    if torch.cuda.is_available():
        doc = measure(quick)
        RECORDED.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        return render(doc, live=True)
    if not RECORDED.exists():
        return ("## The runner on CUDA with NCCL (bench_gpu)\n\nNo CUDA here and no recorded "
                "results (bench/gpu_results.json): run `make bench` on a GPU machine.\n")
    return render(json.loads(RECORDED.read_text(encoding="utf-8")), live=False)
