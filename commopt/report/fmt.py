"""Number formatting shared by the report renderers (terminal, Markdown, HTML)."""

from __future__ import annotations


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
