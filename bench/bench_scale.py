"""The whole ``commopt optimize`` command at scale, as a user runs it.

Synthetic FSDP stacks (:func:`commopt.synth.graph_with_nodes`) saved as JSON graphs, then
``python -m commopt -v optimize GRAPH -o OUT`` in a subprocess writing every output. Per size:
wall time and CPU time (user + system) of the process, its peak resident memory (``wait4``),
each stage's share of the wall time (the stage lines ``-v`` prints; "other" is start-up,
imports and what no stage covers), and each output's size from ``manifest.json``. Then the
generated runner: how long generating it took (its stage), and how long importing it takes in
a fresh interpreter (compiling and executing the module body, torch already imported).

On a shared 2-core machine wall time includes time spent waiting for a core; CPU time is
what the command itself used. 1M nodes run only with ``BENCH_SCALE_1M=1`` (generating and
saving the graph alone takes minutes on these machines).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.util import table

ROOT = Path(__file__).resolve().parent.parent

#: The stages the optimize command reports, in the order it runs them, and their column name.
STAGES = [("load", "load"), ("estimate", "estimate"), ("passes", "passes"),
          ("plan buffers", "plan"), ("generate runner", "runner"), ("build report", "report"),
          ("write graph", "write graph"), ("write reports", "write reports")]
_STAGE_LINE = re.compile(r"^(?P<name>[^:\n]+): (?P<seconds>\d+\.\d+) s$", re.M)


def _save_graph(nodes: int, path: Path) -> int:
    """Save a synthetic graph of about ``nodes`` nodes as JSON; returns its node count."""
    from commopt.io.json_graph import save_json_graph
    from commopt.synth import graph_with_nodes

    g = graph_with_nodes(nodes)
    save_json_graph(g, path)
    return len(g)


def _run(cmd: list[str], env: dict[str, str]) -> tuple[int, str, float, float, int]:
    """Run ``cmd``; (exit code, stderr, wall s, CPU s, peak RSS bytes) of that process."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    return proc.returncode, text, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def _stage_seconds(stderr: str) -> dict[str, float]:
    """Seconds per stage column from the ``-v`` stage lines."""
    out: dict[str, float] = {}
    for m in _STAGE_LINE.finditer(stderr):
        name = m["name"]
        for prefix, column in STAGES:
            if name == prefix or name.startswith(prefix + " "):
                out[column] = out.get(column, 0.0) + float(m["seconds"])
    return out


def _import_seconds(script: Path, env: dict[str, str]) -> float | str:
    """Seconds to import the runner module in a fresh interpreter (torch imported first)."""
    code = ("import importlib.util, sys, time, torch\n"
            "spec = importlib.util.spec_from_file_location('runner', sys.argv[1])\n"
            "m = importlib.util.module_from_spec(spec)\n"
            "t = time.perf_counter(); spec.loader.exec_module(m)\n"
            "print(time.perf_counter() - t)\n")
    proc = subprocess.run([sys.executable, "-B", "-c", code, str(script)], capture_output=True,
                          text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        return "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:80]
    return float(proc.stdout.strip().splitlines()[-1])


def _measure(nodes: int, tmp: Path, env: dict[str, str]) -> dict[str, object]:
    graph = tmp / f"synth_{nodes}.json"
    n = _save_graph(nodes, graph)
    out = tmp / f"out_{nodes}"
    cmd = [sys.executable, "-m", "commopt", "-v", "optimize", str(graph), "-o", str(out)]
    code, stderr, wall, cpu, rss = _run(cmd, env)
    row: dict[str, object] = {"nodes": n, "code": code, "wall": wall, "cpu": cpu, "rss": rss,
                              "stages": _stage_seconds(stderr), "files": {}}
    if code != 0:
        row["error"] = stderr.strip().splitlines()[-1][:120] if stderr.strip() else "?"
        return row
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    row["files"] = {f["name"]: f["bytes"] for f in manifest["files"]}
    runner = next((out / name for name in row["files"] if name.startswith("run_")), None)
    row["import"] = _import_seconds(runner, env) if runner is not None else "no runner"
    graph.unlink()
    return row


def _mb(nbytes: object) -> str:
    return f"{int(nbytes) / 1e6:.1f}" if isinstance(nbytes, int) else "-"


def run(quick: bool) -> str:
    """The Markdown section of this benchmark."""
    sizes = [10_000] if quick else [10_000, 100_000]
    if os.environ.get("BENCH_SCALE_1M") == "1":
        sizes.append(1_000_000)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        rows = [_measure(n, Path(tmp), env) for n in sizes]
    whole, shares, files, runner = [], [], [], []
    for r in rows:
        stages = r["stages"]
        covered = sum(stages.values())
        whole.append([r["nodes"], r["wall"], r["cpu"], f"{int(r['rss']) / 2**20:,.0f}",
                      "ok" if r["code"] == 0 else f"exit {r['code']}: {r.get('error', '')}"])
        shares.append([r["nodes"], *(f"{100 * stages.get(c, 0.0) / r['wall']:.0f}%" for _, c in STAGES),
                       f"{100 * max(0.0, r['wall'] - covered) / r['wall']:.0f}%"])
        by_kind = {"graph": None, "plan": None, "runner": None, "report": None, "trace": None,
                   "summary": None}
        for name, size in r["files"].items():
            kind = ("plan" if name == "buffer_plan.json" else "runner" if name.startswith("run_")
                    else "report" if name == "report.html" else "trace" if name == "trace.json"
                    else "summary" if name == "summary.json" else None if name == "manifest.json"
                    else "graph")
            if kind is not None:
                by_kind[kind] = size
        files.append([r["nodes"], *(_mb(v) for v in by_kind.values())])
        runner.append([r["nodes"], f"{stages.get('runner', 0.0):.2f}", _mb(by_kind["runner"]),
                       f"{r['import']:.2f}" if isinstance(r.get("import"), float) else r.get("import", "-")])
    parts = [
        "## The whole optimize command at scale\n",
        "`python -m commopt -v optimize GRAPH -o OUT` in a subprocess on synthetic FSDP JSON "
        "graphs (`commopt.synth.graph_with_nodes`, analytical estimator, default pipeline, "
        "every output written). Wall and CPU (user + system) seconds of the process and its "
        "peak resident memory. On this shared 2-core machine wall time includes waiting for a "
        "core: CPU seconds are what the command used."
        + ("" if 1_000_000 in sizes else " 1M nodes are not run by default (`BENCH_SCALE_1M=1`).")
        + "\n",
        table(["nodes", "wall s", "CPU s", "peak RSS MiB", "result"], whole),
        "\nEach stage's share of the wall time (the stage lines of `-v`; other: interpreter "
        "start, imports, summary and manifest).\n",
        table(["nodes", *(c for _, c in STAGES), "other"], shares),
        "\nEach output's size in MB.\n",
        table(["nodes", "graph", "plan", "runner", "report.html", "trace.json", "summary"], files),
        "\nThe runner: generating it (its stage), its size, and importing it in a fresh "
        "interpreter (compile and module body, torch already imported), in seconds.\n",
        table(["nodes", "generate s", "script MB", "import s"], runner),
    ]
    return "\n".join(parts) + "\n"
