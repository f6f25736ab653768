"""Number formatting shared by the report renderers (terminal, Markdown, HTML)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import add

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
    for many values at once (:func:`_rounded_ms_array`)."""
    return _rounded_ms_array(values_us).tolist()


def rounded_ms_json(values_us: Sequence[float]) -> list[str]:
    """``json.dumps(round(v, 3))`` of every value, for many values at once.

    A rounded value below 10**12 us is the float nearest ``k / 1000`` for a whole ``k``
    below 10**15, so ``v * 1000`` rounds back to ``k`` exactly and its repr (the shortest
    text that reads back as that float) is the decimal ``k / 1000`` itself: the whole part,
    then the decimals of the rest (``.0`` for none). Those texts are made from ``k`` without
    a float repr (the slow part of JSON encoding); negative, huge and non-finite values are
    encoded by ``json`` itself."""
    rounded = _rounded_ms_array(values_us)
    ns = np.rint(rounded * 1000.0)
    fast = (ns >= 0.0) & (ns < 1e15) & ~np.signbit(rounded)  # NaN is neither
    k = np.where(fast, ns, 0.0).astype(np.int64)
    out = list(map(add, map(str, (k // 1000).tolist()),
                   map(_FLOAT_DECIMALS.__getitem__, (k % 1000).tolist())))
    for i in np.flatnonzero(~fast).tolist():
        out[i] = json.dumps(float(rounded[i]))
    return out


#: The text after the whole part of a float's repr, by its thousandths (``.0`` for none).
_FLOAT_DECIMALS = [f".{k:03d}".rstrip("0") if k else ".0" for k in range(1000)]


def _rounded_ms_array(values_us: Sequence[float]) -> np.ndarray:
    """``round(v, 3)`` of every value, as a float64 array.

    Python's ``round(v, 3)`` rounds the exact binary value half to even through a decimal
    conversion (about a microsecond each). Here ``v * 1000`` is rounded in numpy and divided
    back, which gives the same float wherever the product is not within its rounding error of
    a half (IEEE division returns the float nearest the decimal); those few values, and any
    that are not finite, go through ``round`` itself.
    """
    x = np.asarray(values_us, dtype=np.float64)
    scaled = x * 1000.0
    out = np.rint(scaled) / 1000.0
    with np.errstate(invalid="ignore"):  # a value that is not finite is rounded just below
        near_half = np.abs(np.abs(scaled - np.floor(scaled)) - 0.5) <= np.abs(scaled) * 1e-15
    for k in np.flatnonzero(near_half | ~np.isfinite(scaled)).tolist():
        out[k] = round(values_us[k], 3)
    return out
