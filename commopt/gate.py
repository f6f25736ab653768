"""The CI gate behind ``commopt check``: thresholds and baseline comparisons on simulated metrics.

Pure functions over :class:`~commopt.schemas.check.CheckMetrics`, so the same logic serves the
CLI, the Python API and tests. A regression is measured relative to the baseline value:
``(new - base) / base * 100`` percent; a baseline of zero tolerates only values within
:data:`ABS_TOLERANCE_US` of zero.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from commopt.errors import CommoptError, OptionError
from commopt.schemas.check import CheckMetrics, CheckOutcome, CheckResult

if TYPE_CHECKING:
    from commopt.ir.graph import Graph

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
    max_gap_to_optimal: float | None = None,
) -> list[CheckOutcome]:
    """Every requested check, in a fixed order (thresholds, then baseline comparisons).

    Thresholds must be finite numbers (a NaN compares false with everything and would fail
    or pass by accident), ``max_regression`` needs a ``baseline``, and a baseline must be of
    the same program (:func:`graph_identity`) estimated the same way
    (:func:`check_same_costs`): each is an :class:`OptionError` (exit 2).
    """
    check_thresholds(max_exposed_comm_us=max_exposed_comm_us, min_overlap=min_overlap,
                     max_peak_memory=max_peak_memory, max_regression=max_regression,
                     has_baseline=baseline is not None, max_gap_to_optimal=max_gap_to_optimal)
    if baseline is not None:
        check_same_graph(metrics, baseline)
        check_same_costs(metrics, baseline)
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
    if max_gap_to_optimal is not None:
        out.append(_gap_outcome(metrics, max_gap_to_optimal))
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


def _gap_outcome(metrics: CheckMetrics, limit_pct: float) -> CheckOutcome:
    """The gap-to-optimal check: ``makespan / lower bound - 1`` in percent, a proven upper
    bound on how far the makespan is above the optimum (:mod:`commopt.certificate`)."""
    from commopt.certificate import gap

    if metrics.lower_bound_us is None:
        raise OptionError("--max-gap-to-optimal needs a lower bound, which these metrics lack",
                          field="--max-gap-to-optimal")
    v = 100.0 * gap(metrics.makespan_us, metrics.lower_bound_us)
    return _outcome("max-gap-to-optimal", v, limit_pct, v <= limit_pct,
                    f"makespan {metrics.makespan_us:,.1f} us is within {v:.2f}% of optimal "
                    f"(proven lower bound {metrics.lower_bound_us:,.1f} us; limit {limit_pct:g}%)")


def check_thresholds(*, max_exposed_comm_us: float | None = None, min_overlap: float | None = None,
                     max_peak_memory: int | None = None, max_regression: float | None = None,
                     has_baseline: bool = False, max_gap_to_optimal: float | None = None) -> None:
    """:class:`OptionError` (exit 2) for a threshold that is not a finite number >= 0 (NaN
    compares false with everything: the gate would fail or pass by accident), an overlap
    above 1, or ``max_regression`` without a baseline (it would be silently ignored)."""
    for option, value in (("--max-exposed-comm-us", max_exposed_comm_us), ("--min-overlap", min_overlap),
                          ("--max-peak-memory", max_peak_memory), ("--max-regression", max_regression),
                          ("--max-gap-to-optimal", max_gap_to_optimal)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0):
            raise OptionError(f"{value!r} is not a finite number >= 0", field=option)
    if min_overlap is not None and min_overlap > 1:
        raise OptionError(f"{min_overlap!r} is not a fraction in [0, 1]", field="--min-overlap")
    if max_regression is not None and not has_baseline:
        raise OptionError("--max-regression compares against a baseline: give --baseline FILE",
                          field="--max-regression")


def graph_identity(graph: Graph) -> str:
    """sha256 (hex) of the program a graph is: its node names, kinds and ops, sorted.

    Neither the order (an optimized graph is the same program) nor sizes, durations or
    groups take part, so a baseline stays comparable while the numbers it gates change; a
    baseline made from another program has another identity (:func:`check_same_graph`).
    """
    lines = sorted(f"{n.kind.label}\t{n.op}\t{n.name}" for n in graph.nodes)
    lines.append("")  # every line ends with a newline
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()


def check_same_graph(metrics: CheckMetrics, baseline: CheckMetrics) -> None:
    """:class:`OptionError` when the baseline's numbers are of another program than
    ``metrics`` (both identities known and different): comparing them would be meaningless."""
    a, b = metrics.graph_digest, baseline.graph_digest
    if a is not None and b is not None and a != b:
        raise OptionError(
            f"the baseline is from another graph (identity {b[:12]}..., this graph is {a[:12]}...): "
            "make the baseline with 'commopt optimize' on this graph", field="--baseline")


def check_same_costs(metrics: CheckMetrics, baseline: CheckMetrics) -> None:
    """:class:`OptionError` when the baseline's numbers were estimated another way than
    ``metrics``: another estimator chain, hardware or compute slowdown (each compared where
    both record it; a hardware file by its name, as a path differs between checkouts). A
    regression would then be the setting's, not the order's."""
    said = {"compute slowdown": (_slowdown_words(baseline.compute_slowdown),
                                 _slowdown_words(metrics.compute_slowdown))}
    if baseline.estimator is not None and metrics.estimator is not None:
        said["estimator"] = (baseline.estimator, metrics.estimator)
    if baseline.hardware is not None and metrics.hardware is not None:
        said["hardware"] = (_hardware_name(baseline.hardware), _hardware_name(metrics.hardware))
    differ = [f"{what} {b!r} there, {a!r} here" for what, (b, a) in said.items() if a != b]
    if differ:
        raise OptionError(f"the baseline's numbers were estimated another way ({'; '.join(differ)}): "
                          "they are not comparable; give the options the baseline was made with, or "
                          "make a new baseline", field="--baseline")


def _slowdown_words(factor: float) -> str:
    return "none" if factor == 1.0 else f"{factor:g}x"


def _hardware_name(hardware: str) -> str:
    """A hardware preset as it is, a hardware file by its name."""
    return Path(hardware).name if hardware.lower().endswith(".json") else hardware


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
    after-optimization numbers) or a ``commopt check --format json`` document. Every number
    must be finite and >= 0; errors name the file and field (exit 2)."""
    from commopt.io.json_graph import read_json_file

    p = Path(path)
    if not p.exists():
        raise CommoptError("no such baseline file", file=str(p), field="--baseline")
    doc: Any = read_json_file(p, error=CommoptError)
    if not isinstance(doc, dict):
        raise CommoptError("a baseline is a JSON object", file=str(p))
    if "metrics" in doc and "checks" in doc:
        raw, where = doc["metrics"], "metrics"
        if isinstance(raw, dict) and "estimator" not in raw:  # a result from before metrics named it
            raw = {**raw, "estimator": doc.get("estimator")}
    else:
        after = doc.get("after")
        if not isinstance(after, dict):
            raise CommoptError("not a commopt summary.json or check result (missing 'after')",
                               file=str(p))
        raw = {k: after.get(k) for k in ("makespan_us", "exposed_comm_us", "overlap_ratio",
                                         "peak_memory_bytes")}
        raw["lower_bound_us"] = doc.get("lower_bound_us")
        raw["graph_digest"] = doc.get("graph_digest")
        raw["estimator"], raw["hardware"] = doc.get("estimator"), doc.get("hardware")
        slowdown = doc.get("compute_slowdown")
        if slowdown is not None:  # absent: a run without one (or made before the option)
            raw["compute_slowdown"] = slowdown.get("factor") if isinstance(slowdown, dict) else slowdown
        where = "after"
    try:
        metrics = CheckMetrics.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        if loc in ("lower_bound_us", "graph_digest", "compute_slowdown", "estimator", "hardware"):
            where = ""
        field = f"{where}.{loc}" if where and loc else loc or where
        raise CommoptError(f"not a commopt summary.json or check result: {err['msg']}",
                           file=str(p), field=field) from None
    for name in ("makespan_us", "exposed_comm_us", "peak_memory_bytes", "lower_bound_us"):
        v = getattr(metrics, name)
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise CommoptError(f"{v!r} is not a finite number >= 0", file=str(p),
                               field=f"{where}.{name}" if name != "lower_bound_us" else name)
    return metrics


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
