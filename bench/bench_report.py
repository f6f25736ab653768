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
from pathlib import Path

from bench.util import table, time_call


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
    t_sim, sims = time_call(lambda: (simulate(graph, before, durations),
                                     simulate(graph, after, durations)), repeat=repeat)
    rows.append(["simulate before + after", t_sim, ""])
    t_build, report = time_call(
        lambda: build_report(graph, before, after, durations, estimator_name=chain.name,
                             before_sim=sims[0], after_sim=sims[1],
                             memory_budget_bytes=ctx.memory_budget_bytes), repeat=repeat)
    rows.append(["build_report (incl. top-10 reasons)", t_build, ""])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        t_html, _ = time_call(lambda: write_html(report, out / "report.html"), repeat=repeat)
        rows.append(["write_html", t_html, f"{(out / 'report.html').stat().st_size / 2**20:.1f} MiB"])
        t_trace, _ = time_call(lambda: write_trace(report, out / "trace.json"), repeat=repeat)
        rows.append(["write_trace", t_trace, f"{(out / 'trace.json').stat().st_size / 2**20:.1f} MiB"])
        t_json, _ = time_call(lambda: write_json(report, out / "report.json"), repeat=repeat)
        rows.append(["write_json", t_json, f"{(out / 'report.json').stat().st_size / 2**20:.1f} MiB"])
    t_md, md = time_call(lambda: render_markdown(report), repeat=repeat)
    rows.append(["render_markdown", t_md, f"{len(md.encode()) / 1024:.1f} KiB"])
    t_text, _ = time_call(lambda: render_text(report, Console(file=io.StringIO(), width=120)),
                          repeat=repeat)
    rows.append(["render_text (40 timeline rows)", t_text, ""])
    total = t_sim + t_build + t_html + t_trace
    rows.append(["**simulate + build + HTML + trace**", total, ""])
    events = len(report.before.events) + len(report.after.events)
    return "\n".join([
        "## Overlap report generation",
        "",
        f"{len(graph):,} nodes ({len(graph.collectives()):,} collectives), {events:,} timeline "
        f"spans over both schedules; estimator `{chain.name}`; after = sink-waits. "
        f"Median of {repeat} run(s), seconds.",
        "",
        table(["stage", "seconds", "output size"], rows),
        "",
    ])
