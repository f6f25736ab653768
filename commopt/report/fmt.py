"""Number formatting shared by the report renderers (terminal, Markdown, HTML)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def us(value: float) -> str:
    """Microseconds, with thousands separators: '1,234.5 us'."""
    return f"{value:,.1f} us"


def nbytes(value: int | float) -> str:
    """Bytes in binary units: '512 B', '2.0 MiB'."""
    v = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    raise AssertionError("unreachable")


def pct(ratio: float) -> str:
    """A 0..1 ratio as a percentage: '87.5%'."""
    return f"{100.0 * ratio:.1f}%"


def change(before: float, after: float) -> str:
    """Relative change from ``before`` to ``after``: '-12.3%', '0.0%', or 'n/a' from zero."""
    if before == 0:
        return "0.0%" if after == 0 else "n/a"
    return f"{100.0 * (after - before) / before:+.1f}%"


def points(before: float, after: float) -> str:
    """Change of a 0..1 ratio in percentage points: '+12.5 pt'."""
    return f"{100.0 * (after - before):+.1f} pt"


def rounded_ms(values_us: Sequence[float]) -> list[float]:
    """``round(v, 3)`` of every value (microseconds to the nanosecond), the same floats,
    for many values at once.

    Python's ``round(v, 3)`` rounds the exact binary value half to even through a decimal
    conversion (about a microsecond each). Here ``v * 1000`` is rounded in numpy and divided
    back, which gives the same float wherever the product is not within its rounding error of
    a half (IEEE division returns the float nearest the decimal); those few values, and any
    that are not finite, go through ``round`` itself.
    """
    x = np.asarray(values_us, dtype=np.float64)
    scaled = x * 1000.0
    out = (np.rint(scaled) / 1000.0).tolist()
    near_half = np.abs(np.abs(scaled - np.floor(scaled)) - 0.5) <= np.abs(scaled) * 1e-15
    for k in np.flatnonzero(near_half | ~np.isfinite(scaled)).tolist():
        out[k] = round(values_us[k], 3)
    return out
