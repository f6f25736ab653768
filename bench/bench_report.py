"""Overlap report generation time at 100,000 nodes (issue 7).

A synthetic FSDP stack (``commopt.synth``) of at least 100,000 nodes, durations from the
analytical estimator, before = the original order and after = the sink-waits pass. Timed
separately: the two simulations, ``build_report`` (with the top-10 exposure explanations),
the HTML page, the Chrome trace, the JSON report, the Markdown summary and the terminal
report (40 timeline rows); plus output sizes.
"""

from __future__ import annotations

import io
import tempfile
import time
from pathlib import Path

from bench.util import table, time_call


def _timed(fn, repeat: int):
    """(wall seconds, CPU seconds of this process, result): the median wall time from
    ``time_call`` and the CPU time of one more run, which a busy machine inflates less."""
    wall, result = time_call(fn, repeat=repeat)
    t0 = time.process_time()
    fn()
    return wall, time.process_time() - t0, result


def _graph(target_nodes: int):
    from commopt.synth import graph_with_nodes

    # graph_with_nodes undershoots its target: scale by the node count of a small probe
    ratio = len(graph_with_nodes(5_000)) / 5_000
    return graph_with_nodes(int(target_nodes / ratio) + 50)


def run(quick: bool) -> str:
    """Markdown section: report-generation time per stage for a 100k-node graph."""
    from rich.console import Console

    from commopt.estimators import resolve
    from commopt.passes import PassContext
    from commopt.passes.registry import get_registry
    from commopt.report.build import build_report, write_json
    from commopt.report.html import write_html
    from commopt.report.markdown import render_markdown
    from commopt.report.text import render_text
    from commopt.report.trace import write_trace
    from commopt.sim import simulate

    target = 10_000 if quick else 100_000
    graph = _graph(target)
    chain = resolve("analytical")
    durations = chain.durations(graph)
    before = graph.original_order
    ctx = PassContext.for_graph(graph, durations)
    after = get_registry().create("sink-waits").run(graph, before, ctx)
    repeat = 1 if not quick else 3
    rows = []
    totals = [0.0, 0.0]

    def stage(name: str, fn, size=None, *, in_total: bool = False):
        wall, cpu, result = _timed(fn, repeat)
        if in_total:
            totals[0] += wall
            totals[1] += cpu
        rows.append([name, wall, cpu, size() if size is not None else ""])
        return result

    sims = stage("simulate before + after", lambda: (simulate(graph, before, durations),
                                                     simulate(graph, after, durations)),
                 in_total=True)
    report = stage("build_report (incl. top-10 reasons)", lambda: build_report(
        graph, before, after, durations, estimator_name=chain.name, before_sim=sims[0],
        after_sim=sims[1], memory_budget_bytes=ctx.memory_budget_bytes), in_total=True)

    def mib(path: Path):
        return lambda: f"{path.stat().st_size / 2**20:.1f} MiB"

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        stage("write_html", lambda: write_html(report, out / "report.html"),
              mib(out / "report.html"), in_total=True)
        stage("write_trace", lambda: write_trace(report, out / "trace.json"),
              mib(out / "trace.json"), in_total=True)
        stage("write_json", lambda: write_json(report, out / "report.json"),
              mib(out / "report.json"))
    md = stage("render_markdown", lambda: render_markdown(report))
    rows[-1][3] = f"{len(md.encode()) / 1024:.1f} KiB"
    stage("render_text (40 timeline rows)",
          lambda: render_text(report, Console(file=io.StringIO(), width=120)))
    rows.append(["**simulate + build + HTML + trace**", totals[0], totals[1], ""])
    events = len(report.before.events) + len(report.after.events)
    return "\n".join([
        "## Overlap report generation",
        "",
        f"{len(graph):,} nodes ({len(graph.collectives()):,} collectives), {events:,} timeline "
        f"spans over both schedules; estimator `{chain.name}`; after = sink-waits. "
        f"Wall: median of {repeat} run(s); CPU: this process, one more run (a shared, busy "
        "machine inflates wall time more).",
        "",
        table(["stage", "wall s", "CPU s", "output size"], rows),
        "",
    ])
