"""Overlap reports: terminal, HTML, Chrome trace, JSON and Markdown.

Build the report once, then render it as many ways as wanted::

    report = build_report(graph, before_order, after_order, durations_us, estimator_name=name)
    render_text(report, console)
    write_html(report, "report.html")
    write_trace(report, "trace.json")   # or, into an open file: fh.writelines(trace_chunks(report))
    text = render_markdown(report)
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "build_report": "commopt.report.build:build_report",
    "match_order": "commopt.report.build:match_order",
    "explain_exposed": "commopt.report.explain:explain_exposed",
    "render_text": "commopt.report.text:render_text",
    "render_html": "commopt.report.html:render_html",
    "timeline_data": "commopt.report.html:timeline_data",
    "write_html": "commopt.report.html:write_html",
    "render_trace": "commopt.report.trace:render_trace",
    "write_trace": "commopt.report.trace:write_trace",
    "trace_chunks": "commopt.report.trace:trace_chunks",
    "render_markdown": "commopt.report.markdown:render_markdown",
    "write_markdown": "commopt.report.markdown:write_markdown",
    "append_step_summary": "commopt.report.markdown:append_step_summary",
    "write_json": "commopt.report.build:write_json",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'commopt.report' has no attribute {name!r}")
    module, attr = target.split(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
