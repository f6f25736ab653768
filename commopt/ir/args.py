"""Operation arguments in the IR, and their JSON encoding.

A node keeps its full call (``args``/``kwargs``) so the runner can call the op. Values are
plain Python scalars, strings, ``None``, lists, dicts, :class:`~commopt.ir.graph.Ref` for node
values and :class:`Symbol` for torch enum-like values (dtype, device, layout, memory
format). In JSON a reference is ``{"ref": "node_name"}``, a symbol ``{"dtype": "float32"}``,
and a non-finite float ``{"float": "inf"}``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from commopt.ir.graph import Ref

SYMBOL_KINDS = ("dtype", "device", "layout", "memory_format")


@dataclass(frozen=True, slots=True)
class Symbol:
    """A torch enum-like value by name, e.g. ``Symbol("dtype", "bfloat16")``."""

    kind: str
    value: str


class ArgError(ValueError):
    """An argument value that cannot be encoded or decoded; the caller adds the location."""


def iter_refs(value: Any) -> Iterator[int]:
    """Every node index referenced inside an argument structure, in order."""
    return iter(collect_refs(value, []))


def collect_refs(value: Any, out: list[int]) -> list[int]:
    """Append every node index referenced inside ``value`` to ``out``, in order; returns
    ``out``. No generator per nesting level and scalars skipped by exact type: codegen asks
    this of every node's arguments."""
    if isinstance(value, Ref):
        out.append(value.index)
        return out
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple)):
        return out
    for v in value:
        t = type(v)
        if t is Ref:
            out.append(v.index)
        elif t is not int and t is not str and t is not float and v is not None:
            collect_refs(v, out)
    return out


def encode(value: Any, name_of: Callable[[int], str]) -> Any:
    """The JSON form of an IR argument value."""
    if isinstance(value, Ref):
        return {"ref": name_of(value.index)}
    if isinstance(value, Symbol):
        return {value.kind: value.value}
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"float": repr(value)}
    if isinstance(value, (list, tuple)):
        return [encode(v, name_of) for v in value]
    if isinstance(value, dict):
        return {"kwargs": {str(k): encode(v, name_of) for k, v in value.items()}}
    raise ArgError(f"cannot encode argument of type {type(value).__name__}")


def decode(value: Any, index_of: Callable[[str], int]) -> Any:
    """The IR form of a JSON argument value; ``index_of`` resolves node names."""
    if isinstance(value, dict):
        if len(value) != 1:
            raise ArgError(f"an argument object has exactly one key, got {sorted(value)}")
        ((key, inner),) = value.items()
        if key == "ref":
            if not isinstance(inner, str):
                raise ArgError("'ref' takes a node name")
            return Ref(index_of(inner))
        if key in SYMBOL_KINDS:
            return Symbol(key, str(inner))
        if key == "float":
            if inner not in ("inf", "-inf", "nan"):
                raise ArgError(f"'float' takes inf, -inf or nan, got {inner!r}")
            return float(inner)
        if key == "kwargs" and isinstance(inner, dict):
            return {k: decode(v, index_of) for k, v in inner.items()}
        raise ArgError(f"unknown argument object {key!r}")
    if isinstance(value, list):
        return [decode(v, index_of) for v in value]
    return value
