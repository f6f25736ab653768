"""Shared helpers for benchmark modules: timing and Markdown tables."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def time_call(fn: Callable[[], Any], *, repeat: int = 3) -> tuple[float, Any]:
    """Median wall time in seconds of ``fn()`` over ``repeat`` runs, and the last result."""
    times = []
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table; floats are shown with 3 significant decimals."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
