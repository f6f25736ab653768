"""The latency/bandwidth line a collective's time follows over its sizes: the profile
estimator fits it per collective type (:mod:`commopt.estimators.profile`) and the report's
advice reads a fixed latency off it (:mod:`commopt.report.explain`). Its own module, so the
report does not import the trace reader and profile schema with it."""

from __future__ import annotations

import statistics


def fit_line_explained(xs: list[int], ys: list[float]) -> tuple[float, float, str]:
    """Least-squares ``y = a + x / (bw * 1e3)`` with a >= 0: (a in us, bw in GB/s, how).

    ``how`` is a short note of how the fit was made, for the user to judge it: a line over
    the sizes (:func:`statistics.linear_regression`), or a line through the origin (latency
    forced to 0) when there are fewer than 2 sizes or the free line has a negative latency or
    a slope <= 0; bandwidth 0 means it could not be fitted (time does not grow with size).
    """
    sizes = len(set(xs))
    if sizes < 2:
        why = "fewer than 2 sizes"
        slope = statistics.fmean(ys) / xs[0] if xs and xs[0] > 0 else 0.0
        a = 0.0
    else:
        slope, a = statistics.linear_regression(xs, ys)
        why = ""
        if a < 0:
            why = "the free line had a negative latency"
        elif slope <= 0:
            why = "time does not grow with size"
        if why:
            slope, a = statistics.linear_regression(xs, ys, proportional=True)
    how = f"latency forced to 0: {why}" if why else f"least-squares line over {sizes} sizes"
    if slope <= 0:  # only through the origin: the free line's slope was > 0
        return 0.0, 0.0, how + "; bandwidth unknown (0)"
    return max(a, 0.0), 1.0 / slope / 1e3, how


def fit_line(xs: list[int], ys: list[float]) -> tuple[float, float]:
    """(latency us, bandwidth GB/s) of :func:`fit_line_explained`, without the note."""
    latency, bw, _how = fit_line_explained(xs, ys)
    return latency, bw
