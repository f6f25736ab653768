"""The CI gate behind ``commopt check``: thresholds and baseline comparisons on simulated metrics.

Pure functions over :class:`~commopt.schemas.check.CheckMetrics`, so the same logic serves the
CLI, the Python API and tests. A regression is measured relative to the baseline value:
``(new - base) / base * 100`` percent; a baseline of zero tolerates only values within
:data:`ABS_TOLERANCE_US` of zero.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from commopt.errors import CommoptError
from commopt.schemas.check import CheckMetrics, CheckOutcome, CheckResult

#: Absolute slack for comparisons against a zero baseline (microseconds).
ABS_TOLERANCE_US = 0.5

#: Baseline metrics compared for regressions: a lower value is better for each.
REGRESSION_METRICS = ("exposed_comm_us", "makespan_us")


def evaluate(
    metrics: CheckMetrics,
    *,
    max_exposed_comm_us: float | None = None,
    min_overlap: float | None = None,
    max_peak_memory: int | None = None,
    baseline: CheckMetrics | None = None,
    max_regression: float | None = None,
) -> list[CheckOutcome]:
    """Every requested check, in a fixed order (thresholds, then baseline comparisons)."""
    out: list[CheckOutcome] = []
    if max_exposed_comm_us is not None:
        v = metrics.exposed_comm_us
        out.append(_outcome("max-exposed-comm-us", v, max_exposed_comm_us, v <= max_exposed_comm_us,
                            f"exposed communication {v:,.1f} us (limit {max_exposed_comm_us:,.1f} us)"))
    if min_overlap is not None:
        v = metrics.overlap_ratio
        out.append(_outcome("min-overlap", v, min_overlap, v >= min_overlap,
                            f"overlap {v:.1%} (minimum {min_overlap:.1%})"))
    if max_peak_memory is not None:
        v = metrics.peak_memory_bytes
        out.append(_outcome("max-peak-memory", v, max_peak_memory, v <= max_peak_memory,
                            f"peak memory {v:,} B (limit {max_peak_memory:,} B)"))
    if baseline is not None:
        pct = 0.0 if max_regression is None else max_regression
        for name in REGRESSION_METRICS:
            new, base = getattr(metrics, name), getattr(baseline, name)
            allowed = base * (1 + pct / 100) if base > 0 else ABS_TOLERANCE_US
            change = (new - base) / base * 100 if base > 0 else (0.0 if new <= allowed else float("inf"))
            out.append(_outcome(
                f"regression:{name}", new, allowed, new <= allowed,
                f"{name} {new:,.1f} us vs baseline {base:,.1f} us ({change:+.1f}%, allowed +{pct:g}%)",
            ))
    return out


def _outcome(name: str, value: float, limit: float, passed: bool, message: str) -> CheckOutcome:
    return CheckOutcome(name=name, value=float(value), limit=float(limit), passed=passed, message=message)


def verdict_line(graph: str, outcomes: list[CheckOutcome]) -> str:
    """One line: PASS with the count of checks, or FAIL with every failed check's message."""
    failed = [o for o in outcomes if not o.passed]
    if failed:
        return f"FAIL {graph}: " + "; ".join(o.message for o in failed)
    if not outcomes:
        return f"PASS {graph}: no thresholds or baseline given (metrics reported only)"
    return f"PASS {graph}: {len(outcomes)} check(s) passed"


def result(graph: str, estimator: str, optimized: bool, metrics: CheckMetrics,
           outcomes: list[CheckOutcome], baseline: CheckMetrics | None) -> CheckResult:
    """Bundle a check run into its JSON document."""
    return CheckResult(
        graph=graph, passed=all(o.passed for o in outcomes), verdict=verdict_line(graph, outcomes),
        estimator=estimator, optimized=optimized, metrics=metrics, baseline=baseline, checks=outcomes,
    )


def load_baseline(path: str | Path) -> CheckMetrics:
    """Metrics from a baseline: a ``summary.json`` written by ``commopt optimize`` (its
    after-optimization numbers) or a ``commopt check --format json`` document."""
    p = Path(path)
    try:
        doc: Any = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CommoptError("no such baseline file", file=str(p)) from None
    except json.JSONDecodeError as exc:
        raise CommoptError(f"invalid JSON: {exc.msg}", file=str(p), line=exc.lineno, column=exc.colno) from None
    if not isinstance(doc, dict):
        raise CommoptError("a baseline is a JSON object", file=str(p))
    if "metrics" in doc and "checks" in doc:
        return CheckMetrics.model_validate(doc["metrics"])
    try:
        after = doc["after"]
        return CheckMetrics(
            makespan_us=after["makespan_us"],
            exposed_comm_us=after["exposed_comm_us"],
            overlap_ratio=after["overlap_ratio"],
            peak_memory_bytes=after["peak_memory_bytes"],
            lower_bound_us=doc.get("lower_bound_us"),
        )
    except (KeyError, TypeError) as exc:
        raise CommoptError(
            f"not a commopt summary.json or check result (missing {exc})", file=str(p)
        ) from None


def markdown(res: CheckResult) -> str:
    """A Markdown summary for CI job pages."""
    icon = "✅" if res.passed else "❌"
    lines = [
        f"### {icon} commopt check: `{res.graph}`",
        "",
        res.verdict,
        "",
        f"Estimates from the `{res.estimator}` estimator on "
        f"{'commopt-optimized' if res.optimized else 'as-is'} order.",
        "",
        "| check | value | limit | result |",
        "|---|---:|---:|---|",
    ]
    for o in res.checks:
        lines.append(f"| {o.name} | {o.value:,.3f} | {o.limit:,.3f} | {'pass' if o.passed else '**FAIL**'} |")
    m = res.metrics
    lines += [
        "",
        f"makespan {m.makespan_us:,.1f} us, exposed communication {m.exposed_comm_us:,.1f} us, "
        f"overlap {m.overlap_ratio:.1%}, peak memory {m.peak_memory_bytes:,} B",
        "",
    ]
    return "\n".join(lines)


def github_annotations(res: CheckResult) -> list[str]:
    """``::error`` workflow commands for every failed check (GitHub Actions)."""
    out = []
    for o in res.checks:
        if not o.passed:
            msg = o.message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
            file = res.graph.replace(",", "%2C").replace(":", "%3A")
            out.append(f"::error file={file},title=commopt {o.name}::{msg}")
    return out
