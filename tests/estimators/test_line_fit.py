"""The latency/bandwidth line over a collective's sizes (commopt.estimators.line_fit)."""

import pytest

from commopt.estimators.line_fit import fit_line, fit_line_explained


def test_a_line_over_sizes_gives_its_latency_and_bandwidth():
    # 10 us latency, 100 GB/s: y = 10 + x / (100 * 1e3)
    xs = [1_000_000, 2_000_000, 4_000_000]
    latency, bw, how = fit_line_explained(xs, [10 + x / 1e5 for x in xs])
    assert latency == pytest.approx(10) and bw == pytest.approx(100)
    assert how == "least-squares line over 3 sizes"
    assert fit_line(xs, [10 + x / 1e5 for x in xs]) == pytest.approx((10, 100))


def test_one_size_or_a_negative_latency_forces_the_line_through_the_origin():
    latency, bw, how = fit_line_explained([1_000_000, 1_000_000], [10.0, 10.0])
    assert latency == 0.0 and bw == pytest.approx(100) and "fewer than 2 sizes" in how
    latency, bw, how = fit_line_explained([1_000, 2_000_000], [0.0, 30.0])  # free line: latency < 0
    assert latency == 0.0 and bw > 0 and "negative latency" in how


def test_time_that_does_not_grow_with_size_has_no_bandwidth():
    latency, bw, how = fit_line_explained([1_000, 2_000], [0.0, 0.0])
    assert (latency, bw) == (0.0, 0.0) and "bandwidth unknown" in how
