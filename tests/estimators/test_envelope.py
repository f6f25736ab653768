"""The lower envelope of duration vs size (one rank's trace)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commopt.estimators.envelope import lower_envelope


def test_fastest_per_size_then_monotone_then_the_log_log_hull():
    env = lower_envelope({1000: [50.0, 20.0], 2000: [400.0], 4000: [30.0], 8000: [1000.0], 16000: [90.0]})
    # 1000: fastest 20; 2000 waited (slower than 4000): at most 30, and above the hull of
    # (1000, 20) and (4000, 30): sqrt(20 * 30); 8000 waited: the hull's sqrt(30 * 90)
    assert env[1000] == 20.0 and env[4000] == 30.0 and env[16000] == 90.0
    assert env[2000] == pytest.approx(math.sqrt(20 * 30)) and env[8000] == pytest.approx(math.sqrt(30 * 90))


def test_measured_points_on_the_hull_keep_their_exact_times():
    env = lower_envelope({424: [7.775, 7.648], 212480: [30.975, 30.848]})
    assert env == {424: 7.648, 212480: 30.848}


def test_zero_bytes_keep_their_fastest_time_outside_the_hull():
    assert lower_envelope({0: [5.0, 3.0], 100: [10.0]}) == {0: 3.0, 100: 10.0}


_sizes = st.lists(st.integers(1, 1 << 30), min_size=1, max_size=8, unique=True)


@given(_sizes, st.floats(0.5, 50), st.floats(1, 500), st.data())
def test_transfer_is_recovered_when_each_size_has_an_instance_without_waiting(sizes, latency, gbps, data):
    def f(b):
        return latency + b / (gbps * 1e3)

    by_size = {b: [f(b)] + data.draw(st.lists(st.floats(f(b), 100 * f(b)), max_size=3)) for b in sizes}
    env = lower_envelope(by_size)
    assert all(env[b] == pytest.approx(f(b), rel=1e-9) for b in sizes)


@given(_sizes, st.floats(0.5, 50), st.floats(1, 500), st.data())
def test_between_the_transfer_and_the_fastest_measured(sizes, latency, gbps, data):
    # latency + size / bandwidth is convex in log-log space and increasing: an envelope of
    # durations that are that plus any waiting never goes below it nor above the fastest
    def f(b):
        return latency + b / (gbps * 1e3)

    by_size = {b: data.draw(st.lists(st.floats(f(b), 100 * f(b)), min_size=1, max_size=3)) for b in sizes}
    env = lower_envelope(by_size)
    for b in sizes:
        assert f(b) * (1 - 1e-9) <= env[b] <= min(by_size[b])


def test_a_time_of_zero_does_not_pull_smaller_sizes_down():
    # a kernel shorter than the trace's 1 us resolution records 0
    assert lower_envelope({100: [5.0], 1000: [0.0], 10000: [50.0]}) == {100: 5.0, 1000: 0.0, 10000: 50.0}
