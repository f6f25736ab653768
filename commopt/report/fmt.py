"""Number formatting shared by the report renderers (terminal, Markdown, HTML)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from itertools import accumulate, pairwise

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
    """``json.dumps(round(v, 3))`` of every value, for many values at once (the texts of
    :func:`number_rows` of one :data:`MS` column)."""
    if not len(values_us):
        return []
    return number_rows([(MS, values_us)])[0][:-1].split(",")


#: The kinds of :func:`number_rows`' columns: integers (or bools, as 0 and 1), and times in
#: microseconds written as ``json.dumps(round(v, 3))`` (to the nanosecond).
INT, MS = "int", "ms"


def number_rows(columns: Sequence[tuple[str, Sequence[float]]]) -> tuple[str, list[int]]:
    """Rows of numbers as text: row ``k`` holds the ``k``-th value of each column (a kind,
    :data:`INT` or :data:`MS`, and its values), each value followed by a comma; with the
    offset where each row starts in the text, and its length last. Rows ``a`` to ``b`` are
    ``text[offsets[a]:offsets[b] - 1]``.

    A rounded time below 10**12 us is the float nearest ``k / 1000`` for a whole ``k``
    below 10**15, so ``v * 1000`` rounds back to ``k`` exactly and its repr (the shortest
    text that reads back as that float) is the decimal ``k / 1000`` itself: the whole part,
    then the decimals of the rest (``.0`` for none). Those texts, and those of non-negative
    integers, are written by numpy, one character position at a time for all rows (a
    float's repr is the slow part of JSON encoding, and a string per number the slow part
    of the rest); a row holding a negative, huge or non-finite time, or a negative integer,
    is written by ``json`` and ``str`` themselves."""
    n = len(columns[0][1])
    text = _Text(n)
    slow = np.zeros(n, dtype=bool)
    general: list[Callable[[int], str]] = []
    for kind, values in columns:
        if kind == MS:
            rounded = _rounded_ms_array(values)
            ns = np.rint(rounded * 1000.0)
            fast = (ns >= 0.0) & (ns < 1e15) & ~np.signbit(rounded)  # NaN is neither
            whole, rest = np.divmod(np.where(fast, ns, 0.0).astype(np.int64), 1000)
            text.digits(whole)
            text.decimals(rest)
            general.append(lambda k, r=rounded: json.dumps(float(r[k])))
        else:
            ints = np.asarray(values, dtype=np.int64)
            fast = ints >= 0
            text.digits(np.where(fast, ints, 0))
            general.append(lambda k, v=ints: str(int(v[k])))
        text.char(",")
        slow |= ~fast
    out, offsets = text.joined()
    if slow.any():
        rows = [out[a:b] for a, b in pairwise(offsets)]
        for k in np.flatnonzero(slow).tolist():
            rows[k] = "".join(f"{write(k)}," for write in general)
        offsets = [0, *accumulate(map(len, rows))]
        out = "".join(rows)
    return out, offsets


class _Text:
    """Rows of ASCII text made one character position at a time, for all rows at once:
    each position holds a character per row and whether the row's text keeps it."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.chars: list[np.ndarray] = []
        self.keep: list[np.ndarray | None] = []  # None: every row keeps it

    def char(self, c: str) -> None:
        """``c`` in every row."""
        self.chars.append(np.full(self.n, ord(c), dtype=np.uint8))
        self.keep.append(None)

    def digits(self, values: np.ndarray) -> None:
        """The decimal digits of non-negative integers (no leading zeros)."""
        width = len(str(int(values.max()))) if self.n else 1
        for p in range(width - 1, 0, -1):
            scale = 10**p
            self.chars.append((values // scale % 10 + 48).astype(np.uint8))
            self.keep.append(values >= scale)
        self.chars.append((values % 10 + 48).astype(np.uint8))
        self.keep.append(None)

    def decimals(self, thousandths: np.ndarray) -> None:
        """A point and the decimals of whole thousandths: three digits less the trailing
        zeros, and at least one (``.0`` for none)."""
        self.char(".")
        for scale, keep in ((100, None), (10, thousandths % 100 != 0),
                            (1, thousandths % 10 != 0)):
            self.chars.append((thousandths // scale % 10 + 48).astype(np.uint8))
            self.keep.append(keep)

    def joined(self) -> tuple[str, list[int]]:
        """The rows' texts one after the other, and the offset where each starts (the
        length of all last)."""
        chars = np.stack(self.chars, axis=1)
        always = np.ones(self.n, dtype=bool)
        keep = np.stack([always if k is None else k for k in self.keep], axis=1)
        lengths = np.full(self.n, sum(k is None for k in self.keep), dtype=np.int64)
        for k in self.keep:
            if k is not None:
                lengths += k
        offsets = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return chars[keep].tobytes().decode("ascii"), offsets.tolist()


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
