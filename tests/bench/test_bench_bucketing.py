"""The bucketing benchmark's summary of where commopt+bucket trails torch+bucketing."""

from __future__ import annotations

from bench.bench_bucketing import _misses


def _row(graph: str, schedule: str, ms: str, peak: str, check: str = "ok") -> list:
    return [graph, "1/node", schedule, ms, "-", peak, 1, "-", check, ""]


def test_a_miss_is_named_with_its_reason():
    rows = [_row("g", "original", "42.0", "552.02"),
            _row("g", "torch+bucketing", "36.9", "528.02", "inv2: 9 (unmerged)"),
            _row("g", "commopt", "42.0", "552.02"), _row("g", "commopt+bucket", "42.0", "552.02"),
            _row("h", "original", "2.0", "1.00"), _row("h", "torch+bucketing", "1.5", "1.20"),
            _row("h", "commopt", "1.4", "1.10"), _row("h", "commopt+bucket", "1.4", "1,100.10")]
    text = _misses(rows)
    assert ("- g at 1/node: commopt+bucket 42.0 ms vs torch+bucketing 36.9 ms (torch's order "
            "reorders collectives within a group (inv2: 9 (unmerged)) where one order on every rank "
            "is not proven") in text
    assert "- h " not in text
    slower = _misses([_row("k", "torch+bucketing", "1.0", "1.00"), _row("k", "commopt+bucket", "1.1", "1.00")])
    assert "(commopt's order is slower at this budget)" in slower


def test_no_miss_says_so():
    rows = [_row("h", "original", "2.0", "1.00"), _row("h", "torch+bucketing", "1.5", "1.20"),
            _row("h", "commopt+bucket", "1.5", "1.10")]
    assert "at or below torch+bucketing on every graph" in _misses(rows)
