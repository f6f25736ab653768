"""A lower envelope of collective duration vs message size, for one rank's trace.

One rank's trace cannot say when the other ranks started, so it cannot split a kernel's
time into waiting and transfer. What it can say: waiting only ever adds time, so the
*fastest* instances are the closest to pure transfer. The envelope takes, per message size,
the fastest measured instance; then makes time non-decreasing in size (a larger message of
the same collective never moves faster: a smaller one measured slower than a larger one
waited); then takes the lower convex hull in (log size, log time). Latency + size /
bandwidth is convex in log-log space, so a point above the hull of the others waited too.
Every measured size gets the hull's value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def lower_envelope(by_size: Mapping[int, Sequence[float]]) -> dict[int, float]:
    """Per measured size: the envelope's time (see the module docstring).

    ``by_size`` maps message bytes to the durations measured at that size (each non-empty).
    Sizes of 0 bytes, and times of 0, keep their fastest time and stay out of the hull (no
    logarithm).
    """
    fastest = {b: min(ts) for b, ts in by_size.items()}
    sizes = sorted(fastest)
    running = math.inf
    for b in reversed(sizes):  # non-decreasing in size: min over this size and every larger one
        if fastest[b] > 0:  # a time of 0 (below the trace's resolution) bounds nothing
            running = min(running, fastest[b])
            fastest[b] = running
    hull_sizes = [b for b in sizes if b > 0 and fastest[b] > 0]
    hull = _lower_hull([(math.log(b), math.log(fastest[b])) for b in hull_sizes])
    vertices = {x for x, _ in hull}
    out = dict(fastest)
    for b in hull_sizes:
        x = math.log(b)
        if x not in vertices:  # a vertex keeps its measured time exactly
            out[b] = min(fastest[b], math.exp(_on_hull(hull, x)))
    return out


def _cross(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _lower_hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The lower convex hull of points sorted by x (monotone chain)."""
    hull: list[tuple[float, float]] = []
    for p in points:
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) <= 0:
            hull.pop()
        hull.append(p)
    return hull


def _on_hull(hull: list[tuple[float, float]], x: float) -> float:
    """The hull's y at x (x within the hull's range)."""
    for (x0, y0), (x1, y1) in zip(hull, hull[1:], strict=False):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (x - x0) / (x1 - x0) * (y1 - y0)
    return hull[0][1] if x <= hull[0][0] else hull[-1][1]
