"""Can a producer write its result straight into a communication buffer, and how?

The runner saves a copy per step when the op that produces a collective's input writes into
the collective's buffer itself. Two ways exist, each checked against the op's real schema
when the runner is generated, so the script never calls an overload with arguments it does
not take (``aten._to_copy.out`` has no ``dtype``):

- ``out=``: the op's ``.out`` overload, when it has exactly one out argument named ``out``
  and every argument the node passes binds to it, with the same name and type as in the
  functional overload;
- ``copy_``: a pure dtype cast (``_to_copy`` / ``convert_element_type`` that changes nothing
  but the dtype) writes into a buffer of the target dtype with ``buffer.copy_(x)``, which
  casts as it copies.

Anything else falls back to a copy into the buffer before the collective.
"""

from __future__ import annotations

from enum import Enum
from functools import cache
from typing import Any

from commopt.ir.graph import Node, NodeKind
from commopt.ir.op_registry import overload_schema

#: Pure dtype casts: the target dtype comes from a keyword argument or the second positional.
_CAST_OPS = {"aten._to_copy.default", "prims.convert_element_type.default"}
#: Keyword arguments of ``_to_copy`` that may be given without changing anything but the dtype.
_NEUTRAL_CAST_KWARGS = {"dtype": None, "layout": None, "device": None, "pin_memory": None,
                        "non_blocking": False, "memory_format": None}


class WriteMode(Enum):
    """How a producer writes into its communication buffer."""

    OUT = "out"  # op.out(..., out=buffer)
    COPY = "copy_"  # buffer.copy_(x): a dtype cast done by the copy itself


def write_mode(node: Node) -> WriteMode | None:
    """How ``node`` can write its single output into a buffer of the same shape and dtype
    (None: it cannot, the runner copies)."""
    if node.kind is not NodeKind.COMPUTE or len(node.outputs) != 1:
        return None
    if _is_pure_cast(node):
        return WriteMode.COPY
    if out_overload_reason(node) is None:
        return WriteMode.OUT
    return None


def out_overload_reason(node: Node) -> str | None:
    """Why the node's arguments do not fit its op's ``.out`` overload (None: they fit).
    The answer depends only on the op, the number of positional arguments and the keyword
    names, so it is worked out once per such call shape (every layer repeats a few)."""
    return _out_overload_reason(node.op, len(node.args), tuple(node.kwargs))


@cache
def _out_overload_reason(op: str, n_args: int, kwarg_names: tuple) -> str | None:
    schemas = _schemas(op)
    if schemas is None:
        return f"{op} has no .out overload with a single 'out' argument"
    functional, out = schemas
    positional = [a for a in out if not a[2]]
    if n_args > len(positional):
        return f"{n_args} positional arguments, the .out overload takes {len(positional)}"
    for k in range(n_args):
        if k >= len(functional) or functional[k][:2] != positional[k][:2]:
            return f"positional argument {k} differs between {op} and its .out overload"
    by_name = {a[0]: a for a in out}
    functional_by_name = {a[0]: a for a in functional}
    for name in kwarg_names:
        if name not in by_name:
            return f"the .out overload of {op} has no argument {name!r}"
        if functional_by_name.get(name, by_name[name])[1] != by_name[name][1]:
            return f"argument {name!r} has another type in the .out overload of {op}"
    return None


def _is_pure_cast(node: Node) -> bool:
    if node.op not in _CAST_OPS or len(node.args) < 1:
        return False
    if node.op == "prims.convert_element_type.default":
        return len(node.args) == 2 and not node.kwargs
    if len(node.args) != 1 or "dtype" not in node.kwargs:
        return False
    return all(k in _NEUTRAL_CAST_KWARGS and (k in ("dtype", "device") or _neutral(k, v))
               for k, v in node.kwargs.items())


def _neutral(name: str, value: Any) -> bool:
    if name == "memory_format":  # preserve_format keeps the input's layout: a copy_ does too
        return value is None or getattr(value, "value", value) in ("preserve_format",
                                                                   "contiguous_format")
    return value == _NEUTRAL_CAST_KWARGS[name]


@cache
def _schemas(op: str) -> tuple[tuple, tuple] | None:
    """(functional arguments, .out arguments without ``out``) as (name, type, kwarg-only),
    from torch's registry (:mod:`commopt.ir.op_registry`)."""
    parts = op.split(".")
    if len(parts) != 3:
        return None
    namespace, name, overload = parts
    functional = overload_schema(f"{namespace}.{name}", overload)
    out = overload_schema(f"{namespace}.{name}", "out")
    if functional is None or out is None or [a[0] for a in out if a[3]] != ["out"]:
        return None
    return tuple(a[:3] for a in functional), tuple(a[:3] for a in out if not a[3])
