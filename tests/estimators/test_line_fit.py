"""The latency/bandwidth line over a collective's sizes (commopt.estimators.line_fit)."""

import pytest

from commopt.estimators.line_fit import fit_line, fit_line_explained


def test_line_fit_on_exact_data_gives_its_slope_and_intercept():
    # 7.5 us + bytes / (40 GB/s): slope 1 / 40e3 us per byte, intercept 7.5 us
    xs = [1 << 10, 1 << 16, 1 << 20, 1 << 24]
    latency, bw, how = fit_line_explained(xs, [7.5 + x / 40e3 for x in xs])
    assert latency == pytest.approx(7.5, rel=1e-9) and bw == pytest.approx(40, rel=1e-9)
    assert how == "least-squares line over 4 sizes"
    assert fit_line(xs, [7.5 + x / 40e3 for x in xs]) == (latency, bw)


def test_one_size_or_a_negative_latency_forces_the_line_through_the_origin():
    latency, bw, how = fit_line_explained([1_000_000, 1_000_000], [10.0, 10.0])
    assert latency == 0.0 and bw == pytest.approx(100) and "fewer than 2 sizes" in how
    latency, bw, how = fit_line_explained([1_000, 2_000_000], [0.0, 30.0])  # free line: latency < 0
    assert latency == 0.0 and bw > 0 and "negative latency" in how


def test_time_that_does_not_grow_with_size_has_no_bandwidth():
    latency, bw, how = fit_line_explained([1_000, 2_000], [0.0, 0.0])
    assert (latency, bw) == (0.0, 0.0) and "bandwidth unknown" in how
