"""The bucketing benchmark's summary of where commopt+bucket trails torch+bucketing."""

from __future__ import annotations

from bench.bench_bucketing import _misses


def _row(graph: str, schedule: str, ms: str, peak: str) -> list:
    return [graph, "1/node", schedule, ms, "-", peak, 1, "-", "ok", ""]


def test_a_miss_from_an_over_budget_start_is_named_with_its_reason():
    rows = [_row("g", "original", "42.0", "552.02"), _row("g", "torch+bucketing", "36.9", "528.02"),
            _row("g", "commopt", "42.0", "552.02"), _row("g", "commopt+bucket", "42.0", "552.02"),
            _row("h", "original", "2.0", "1.00"), _row("h", "torch+bucketing", "1.5", "1.20"),
            _row("h", "commopt", "1.4", "1.10"), _row("h", "commopt+bucket", "1.4", "1,100.10")]
    text = _misses(rows)
    assert "- g at 1/node: commopt+bucket 42.0 ms vs torch+bucketing 36.9 ms (torch's order peaks below" in text
    assert "- h " not in text


def test_no_miss_says_so():
    rows = [_row("h", "original", "2.0", "1.00"), _row("h", "torch+bucketing", "1.5", "1.20"),
            _row("h", "commopt+bucket", "1.5", "1.10")]
    assert "at or below torch+bucketing on every graph" in _misses(rows)
