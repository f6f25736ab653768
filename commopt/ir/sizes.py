"""Data-dependent sizes: what a graph's sizes depend on at run time, and what commopt assumed.

A program can size tensors from values it computes: a mixture-of-experts layer reads its
all_to_all split sizes back with ``.tolist()``, so torch.export records them as *unbacked*
symbols (``u0``, ``u1``, ...) with no value. Estimating durations, simulating and planning
need numbers, so the loader assumes one value per symbol (:mod:`commopt.io.unbacked` says
how) and records here which symbols were assumed, why, and which nodes they size. Every
output that shows a number derived from them says so; the runner never uses these values:
it computes the real sizes at run time from the graph's own ops.

The record lives in ``graph.meta[DATA_DEPENDENT_KEY]`` as plain JSON (a JSON graph written
from such a graph keeps it); :func:`data_dependent_sizes` reads it back as typed values.
A node whose output sizes depend on a symbol has ``attrs["symbolic_shapes"]``: one list per
output tensor, each dimension an int or its expression (``"u2 + u3"``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from commopt.errors import OptionError
from commopt.ir.graph import Graph, Node

#: ``graph.meta`` key holding the data-dependent sizes a loader assumed (a list of dicts).
DATA_DEPENDENT_KEY = "data_dependent_sizes"
#: ``Node.attrs`` key: per output tensor, each dimension as an int or a symbolic expression.
SYMBOLIC_SHAPES_ATTR = "symbolic_shapes"
#: The name ``--assume`` uses for "every symbol not named".
EVERY_SYMBOL = "*"

_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class DataDependentSize:
    """One data-dependent size (an unbacked symbol) and the value commopt assumed for it.

    ``basis`` says where the value comes from: ``"given"`` (``--assume SYMBOL=N``),
    ``"given-default"`` (``--assume '*=N'``), ``"even-split"`` (an all_to_all split with
    every rank sending as many rows to every peer), ``"range"`` (the largest value the
    program allows); ``reason`` says it in words. ``defined_by`` is the node that computes
    it at run time, ``collectives`` the collectives whose sizes or splits it sets, ``nodes``
    how many nodes have a value depending on it (tensors sized by it, size arithmetic).
    ``low``/``high``: the range torch.export proved (``high`` None: unbounded).
    """

    symbol: str
    assumed: int
    basis: str
    reason: str
    defined_by: str | None
    collectives: tuple[str, ...] = ()
    nodes: int = 0
    low: int | None = None
    high: int | None = None

    def to_json(self) -> dict:
        """The plain-JSON form kept in ``graph.meta``."""
        d = asdict(self)
        d["collectives"] = list(self.collectives)
        return d


def data_dependent_sizes(graph: Graph) -> list[DataDependentSize]:
    """The data-dependent sizes ``graph``'s loader assumed, in symbol order (empty: none)."""
    out = []
    for d in graph.meta.get(DATA_DEPENDENT_KEY, ()):
        out.append(DataDependentSize(**{**d, "collectives": tuple(d.get("collectives", ()))}))
    return out


def symbolic_shapes(node: Node) -> list[list[int | str]] | None:
    """Per output tensor, each dimension as an int or its expression; None when every
    output size of ``node`` is static."""
    return node.attrs.get(SYMBOLIC_SHAPES_ATTR)


def has_data_dependent_output(node: Node, k: int | None = None) -> bool:
    """Whether output ``k`` of ``node`` (any output when None) has a data-dependent size."""
    shapes = symbolic_shapes(node)
    if not shapes:
        return False
    picked = shapes if k is None else shapes[k:k + 1]
    return any(isinstance(d, str) for shape in picked for d in shape)


def parse_assumptions(items: Iterable[str] | Mapping[str, int] | None) -> dict[str, int]:
    """``["u2=40", "*=16"]`` (or a mapping) as ``{symbol: value}``; ``"*"`` sets every
    symbol not named. Values are integers >= 0. A malformed item is an OptionError."""
    if items is None:
        return {}
    pairs = items.items() if isinstance(items, Mapping) else (_split(s) for s in items)
    out: dict[str, int] = {}
    for name, value in pairs:
        name = str(name).strip()
        if name != EVERY_SYMBOL and not _SYMBOL.match(name):
            raise OptionError(f"--assume: {name!r} is not a symbol name (like u2) or '*'",
                              field="--assume")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise OptionError(f"--assume {name}: the value must be an integer >= 0, got {value!r}",
                              field="--assume")
        out[name] = value
    return out


def _split(item: str) -> tuple[str, int]:
    name, sep, value = str(item).partition("=")
    if not sep:
        raise OptionError(f"--assume takes SYMBOL=N (or '*=N'), got {item!r}", field="--assume")
    try:
        return name, int(value.strip())
    except ValueError:
        raise OptionError(f"--assume {name.strip()}: the value must be an integer >= 0, got "
                          f"{value.strip()!r}", field="--assume") from None


def describe_assumptions(sizes: list[DataDependentSize], limit: int = 8) -> str:
    """The assumed values in one line, symbols sharing a value and basis together:
    ``u0, u1, u2, u3 = 32 (even-split); u4 = 40 (given)``."""
    groups: dict[tuple[int, str], list[str]] = {}
    for s in sizes:
        groups.setdefault((s.assumed, s.basis), []).append(s.symbol)
    parts = []
    for (value, basis), names in groups.items():
        shown = ", ".join(names[:limit]) + (f" (+{len(names) - limit} more)" if len(names) > limit else "")
        parts.append(f"{shown} = {value} ({basis})")
    return "; ".join(parts)
