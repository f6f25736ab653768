"""The whole ``commopt optimize`` command at scale, as a user runs it.

Synthetic FSDP stacks (:func:`commopt.synth.graph_with_nodes`) saved as JSON graphs, then
``python -m commopt -v optimize GRAPH -o OUT`` in a subprocess writing every output. Per size:
wall time and CPU time (user + system) of the process, its own peak resident memory (``VmHWM``)
and the sampled peak of the memory all its processes use (summed PSS: a large graph's trace is
rendered by a forked child),
each stage's share of the wall time (the stage lines ``-v`` prints; "other" is start-up,
imports and what no stage covers), and each output's size from ``manifest.json``. Then the
generated runner: how long generating it took (its stage), its bytes per node, and how long
importing it takes in a fresh interpreter (compiling the fixed code and reading its JSON
tables, torch already imported).

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
import threading
import time
from pathlib import Path

from bench.util import table
from commopt.forked import FORK_MIN_NODES, default_jobs

ROOT = Path(__file__).resolve().parent.parent

#: The stages the optimize command reports, in the order it runs them, and their column name.
STAGES = [("load", "load"), ("estimate", "estimate"), ("footprint budget", "budget"),
          ("lower bounds", "budget"), ("passes", "passes"),
          ("simulate the final order", "summary"), ("summary", "summary"),
          ("plan buffers", "plan"), ("generate runner", "runner"), ("build report", "report"),
          ("render trace.json", "trace"), ("render buffer_plan.json", "render plan"),
          ("render graph", "render graph"),
          ("wait for the forked runner", "wait"),
          ("render report.html", "html"), ("write graph", "write graph"),
          ("write buffer plan", "write plan"), ("write runner", "write runner"),
          ("write reports", "write reports"), ("write summary", "write summary")]
#: The stage columns, in order (several stages may share one).
COLUMNS = list(dict.fromkeys(column for _, column in STAGES))
_STAGE_LINE = re.compile(r"^(?P<name>[^:\n]+): (?P<seconds>\d+\.\d+) s$", re.M)


def _save_graph(nodes: int, path: Path) -> int:
    """Save a synthetic graph of about ``nodes`` nodes as JSON; returns its node count."""
    from commopt.io.json_graph import save_json_graph
    from commopt.synth import graph_with_nodes

    g = graph_with_nodes(nodes)
    save_json_graph(g, path)
    return len(g)


#: Runs ``python -m MODULE ARGS...`` (``argv``: PEAK_FILE MODULE ARGS...) and, at exit, writes
#: the process's own peak resident set (``VmHWM``) to PEAK_FILE. ``wait4``'s ``ru_maxrss`` of a
#: child is no good here: on Linux it starts at the forking parent's peak, and this process
#: has just built a 100k-node graph (earlier tables read 1,156 MiB at 10k and 100k alike).
_PEAK_WRAPPER = """
import atexit, runpy, sys
peak_file, module = sys.argv[1], sys.argv[2]
sys.argv = [module, *sys.argv[3:]]

def _write_peak():
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith('VmHWM:'):
                with open(peak_file, 'w') as out:
                    out.write(str(int(line.split()[1]) * 1024))

atexit.register(_write_peak)
runpy.run_module(module, run_name='__main__', alter_sys=True)
"""


#: Seconds between two samples of the command's memory (all its processes).
SAMPLE_S = 0.1
#: The sampler waits at least this many times as long as its last sample took (CPU).
SAMPLE_COST_RATIO = 9.0


def _pss(pid: int) -> int:
    """Proportional set size of process ``pid`` in bytes (0 once it is gone): its private
    pages plus its share of pages it shares, so processes that share memory copy-on-write
    (the command and the child it forks to render a file) add up to what they really use."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(entry))
    return kids


class _TreeMemory(threading.Thread):
    """Samples the summed PSS of a process and its children every :data:`SAMPLE_S` seconds,
    or less often where a sample is costly: the kernel walks every page of a process to sum
    its PSS (36 ms of CPU per read of a 2.8 GB process of small Python objects), so at 1M
    nodes, with three processes of several GB, sampling every 0.1 s took most of a core from
    the command it measures on a 2-core machine. It waits at least
    :data:`SAMPLE_COST_RATIO` x its last sample's CPU time, so it uses at most a tenth of a
    core. ``peak`` is the largest sum seen (0 where ``/proc`` has no ``smaps_rollup``)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak = pid, 0
        self._done = threading.Event()

    def run(self) -> None:
        pause = SAMPLE_S
        while not self._done.wait(pause):
            t0 = time.thread_time()
            self.peak = max(self.peak, sum(_pss(p) for p in [self.pid, *_children(self.pid)]))
            pause = max(SAMPLE_S, SAMPLE_COST_RATIO * (time.thread_time() - t0))

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak


def _run(module_args: list[str], env: dict[str, str]) -> tuple[int, str, float, float, int, int]:
    """Run ``python -m`` with ``module_args``; (exit code, stderr, wall s, CPU s, peak RSS
    bytes, peak PSS bytes of it and its children) of that process. CPU time includes its
    children's. The RSS peak is the process's own (:data:`_PEAK_WRAPPER`) where ``/proc`` has
    it, else ``wait4``'s (which can include this process's peak); the PSS peak is sampled
    (:class:`_TreeMemory`)."""
    own = Path("/proc/self/status").exists()
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak"
        cmd = ([sys.executable, "-c", _PEAK_WRAPPER, str(peak_file), *module_args] if own
               else [sys.executable, "-m", *module_args])
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        sampler = _TreeMemory(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        tree_peak = sampler.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
        peak = int(peak_file.read_text()) if own and peak_file.exists() else usage.ru_maxrss * 1024
    return proc.returncode, text, wall, usage.ru_utime + usage.ru_stime, peak, tree_peak


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


def _measure(nodes: int, tmp: Path, env: dict[str, str], jobs: tuple[int, ...] = (1,)) -> list[dict[str, object]]:
    """One row per ``--jobs`` value: the command on a graph of about ``nodes`` nodes."""
    graph = tmp / f"synth_{nodes}.json"
    n = _save_graph(nodes, graph)
    rows = [_measure_run(graph, n, tmp / f"out_{nodes}_j{j}", env, j) for j in jobs]
    graph.unlink()
    return rows


def _measure_run(graph: Path, n: int, out: Path, env: dict[str, str], jobs: int) -> dict[str, object]:
    code, stderr, wall, cpu, rss, pss = _run(["commopt", "-v", "optimize", str(graph), "-o", str(out),
                                              "--jobs", str(jobs)], env)
    row: dict[str, object] = {"nodes": n, "jobs": jobs, "code": code, "wall": wall, "cpu": cpu, "rss": rss,
                              "pss": pss, "stages": _stage_seconds(stderr), "files": {}}
    if code != 0:
        row["error"] = stderr.strip().splitlines()[-1][:120] if stderr.strip() else "?"
        return row
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    row["files"] = {f["name"]: f["bytes"] for f in manifest["files"]}
    runner = next((out / name for name in row["files"] if name.startswith("run_")), None)
    row["import"] = _import_seconds(runner, env) if runner is not None else "no runner"
    return row


#: Corpus graphs (tiny tensors: hidden 64, sequence 16) whose step time is mostly host time.
HOST_GRAPHS = ["llama_tp_L8", "llama_fsdp"]


def _host_rows(tmp: Path, env: dict[str, str], iters: int = 40, warmup: int = 5) -> list[list[object]]:
    """Per corpus graph: host time per step of the generated runner (optimized order on its
    arenas) against the exported module's (under no_grad, and under inference mode), timed
    alternately in the same gloo ranks (bench/host_step.py): slowest rank's medians."""
    from commopt.api import optimize

    rows: list[list[object]] = []
    for name in HOST_GRAPHS:
        path = ROOT / "sample_graphs" / "corpus" / "ws2" / f"{name}.pt2"
        out = tmp / f"host_{name}"
        result = optimize(path, output_dir=out, timings=False)
        world = result.graph.world_size or 2
        res = tmp / f"host_{name}.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world),
               "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0",
               str(ROOT / "bench" / "host_step.py"), str(out / result.outputs.runner_name), str(path),
               str(iters), str(warmup), str(res)]
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            rows.append([name, len(result.graph), world, "failed: " + proc.stderr.strip()[-80:]]
                        + ["-"] * 8)
            continue
        ranks = json.loads(res.read_text(encoding="utf-8"))

        def slowest(program: str, field: str, ranks: list[dict] = ranks) -> float:
            return max(rank[program][field] for rank in ranks)

        setup = {program: max(rank["setup_cpu_s"][program] for rank in ranks)
                 for program in ("runner", "exported")}

        runner_cpu = slowest("runner", "cpu_us")
        rows.append([name, len(result.graph), world, f"{slowest('runner', 'wall_us'):.0f}",
                     f"{slowest('exported', 'wall_us'):.0f}", f"{runner_cpu:.0f}",
                     f"{slowest('exported', 'cpu_us'):.0f}",
                     f"{slowest('exported', 'cpu_us') / runner_cpu:.2f}",
                     f"{slowest('exported_inference', 'cpu_us'):.0f}",
                     f"{slowest('exported_inference', 'cpu_us') / runner_cpu:.2f}",
                     f"{setup['runner']:.2f}", f"{setup['exported']:.2f}"])
    return rows


def _mb(nbytes: object) -> str:
    return f"{int(nbytes) / 1e6:.1f}" if isinstance(nbytes, int) else "-"


def _compile_sources(env: dict[str, str]) -> None:
    """Compile commopt's modules to bytecode first, as installing a package does: a checkout
    run where ``PYTHONDONTWRITEBYTECODE`` is set (these machines set it) would otherwise
    compile every module again on each run, about 0.25 s of every command, which a user's
    install does not pay."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "commopt", "cli", "schemas"], cwd=ROOT,
                   env=env, check=True, stdout=subprocess.DEVNULL)


def run(quick: bool) -> str:
    """The Markdown section of this benchmark."""
    sizes = [10_000] if quick else [10_000, 100_000]
    if os.environ.get("BENCH_SCALE_1M") == "1":
        sizes.append(1_000_000)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    _compile_sources(env)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        rows = [row for n in sizes
                for row in _measure(n, Path(tmp), env, (1, 2) if n == 100_000 else (default_jobs(),))]
        host = _host_rows(Path(tmp), env)
    whole, shares, files, runner = [], [], [], []
    sized = set()  # one row per graph size in the files and runner tables: the same files either way
    for r in rows:
        stages = r["stages"]
        covered = sum(stages.values())
        whole.append([r["nodes"], r["jobs"], r["wall"], r["cpu"], f"{int(r['rss']) / 2**20:,.0f}",
                      f"{int(r['pss']) / 2**20:,.0f}" if r["pss"] else "-",
                      "ok" if r["code"] == 0 else f"exit {r['code']}: {r.get('error', '')}"])
        shares.append([r["nodes"], r["jobs"], *(f"{100 * stages.get(c, 0.0) / r['wall']:.0f}%" for c in COLUMNS),
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
        if r["nodes"] in sized:
            continue
        sized.add(r["nodes"])
        files.append([r["nodes"], *(_mb(v) for v in by_kind.values())])
        per_node = f"{by_kind['runner'] / r['nodes']:.0f}" if isinstance(by_kind["runner"], int) else "-"
        forked_runner = r["jobs"] >= 2 and r["nodes"] >= FORK_MIN_NODES
        runner.append([r["nodes"], "forked" if forked_runner else f"{stages.get('runner', 0.0):.2f}",
                       _mb(by_kind["runner"]), per_node,
                       f"{r['import']:.2f}" if isinstance(r.get("import"), float)
                       else r.get("import", "-")])
    parts = [
        "## The whole optimize command at scale\n",
        "`python -m commopt -v optimize GRAPH -o OUT` in a subprocess on synthetic FSDP JSON "
        "graphs (`commopt.synth.graph_with_nodes`, analytical estimator, default pipeline, "
        "every output written; commopt's modules compiled to bytecode first, as an installed "
        "package has them), with the command's default `--jobs` (one per core the "
        "process may use, at most 2), at 100k nodes with both `--jobs 1` and `--jobs 2` (from "
        f"{FORK_MIN_NODES:,} nodes, forked children on the other core compute the lower bounds "
        "beside the footprint budget and then the input order's robustness scenarios and "
        "buffer packing, run the first pass beside the passes, and plan the buffers and "
        "generate the runner while the main process builds the report and renders the other "
        "files). Wall and CPU (user + system, forked children included) seconds of the process; the main process's own peak resident memory (`VmHWM`, read by the "
        "process at exit: `wait4`'s figure would start at this benchmark's own peak); and the "
        "peak of the memory the command uses in all its processes: a forked child shares the "
        "parent's memory copy-on-write, so the proportional set sizes (PSS: private pages plus "
        "a share of shared ones) of the process and its children are summed, sampled every "
        f"{SAMPLE_S} s or, where a sample costs more (the kernel walks every page), often "
        f"enough to use at most a tenth of a core. On this shared 2-core machine wall time includes waiting for a "
        "core: CPU seconds are what the command used."
        + ("" if 1_000_000 in sizes else " 1M nodes are not run by default (`BENCH_SCALE_1M=1`).")
        + "\n",
        table(["nodes", "jobs", "wall s", "CPU s", "peak RSS MiB", "peak PSS MiB, all processes",
               "result"], whole),
        "\nEach stage's share of the wall time (the stage lines of `-v`; budget: the original "
        "order's footprint the passes keep to, and with `--jobs 2` waiting for the child that "
        "computes the lower bounds beside it; passes: with `--jobs 2` the first pass runs in a "
        "child while the others run from the input order; summary: robustness scenarios and the result's "
        "footprint; write summary: summary.json and the manifest, which hashes every file; "
        "other: interpreter start, imports, the certificate and the exit). With `--jobs 2` "
        "plan is starting, as soon as the passes end, the child that plans the buffers, "
        "generates the runner and has a child of its own render buffer_plan.json (summary, "
        "report, render graph, report.html's timelines (in html) and trace run meanwhile), "
        "wait: waiting for the planning child; the write stages give each rendered file its "
        "name (linked, not copied). With one process, plan includes the original order's packing and write "
        "reports the rendering of both files.\n",
        table(["nodes", "jobs", *COLUMNS, "other"], shares),
        "\nEach output's size in MB.\n",
        table(["nodes", "graph", "plan", "runner", "report.html", "trace.json", "summary"], files),
        "\nThe runner: generating it (its stage; \"forked\" where a child generated it beside "
        "other work), its size (and bytes per node: the step table "
        "holds one record per node, the code is fixed), and importing it in a fresh "
        "interpreter (compile and module body, torch already imported), in seconds.\n",
        table(["nodes", "generate s", "script MB", "bytes / node", "import s"], runner),
        "\nHost time per step: corpus graphs with tiny tensors (hidden 64, sequence 16) on gloo "
        "ranks of this CPU machine, median microseconds per step (slowest rank), the programs "
        "alternating step by step in the same ranks so they see the same load "
        "(`bench/host_step.py`): the generated runner (commopt's order on its arenas; its step "
        "runs in inference mode) against `torch.export.load(...)`'s graph module called with "
        "the archive's example inputs (original order, fresh tensors) under `torch.no_grad()`, "
        "as a user calls it, and under `torch.inference_mode()`. All include the collectives "
        "(the runner calls the process groups' own methods; the exported module, torch's "
        "functional collectives). Wall time includes waiting for the peer rank's collectives (on "
        "this shared machine, most of the step and most of its noise); host CPU is the main "
        "thread's CPU time per step (`thread_time`), the host's own share; a ratio above 1 means "
        "the runner costs the host less. Ready: CPU seconds until the first step can run: the "
        "runner's set-up (arenas, inputs, its step program built and compiled to straight-line "
        "functions) and the archive's load (`torch.export.load` and its module).\n",
        table(["graph", "nodes", "ranks", "runner wall us", "exported wall us",
               "runner CPU us", "exported CPU us", "exported / runner CPU",
               "exported inference-mode CPU us", "inference-mode / runner CPU",
               "runner ready CPU s", "exported ready CPU s"], host),
    ]
    return "\n".join(parts) + "\n"
