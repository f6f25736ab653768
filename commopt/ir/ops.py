"""Operator names in the IR (``"aten.mm.default"``) and torch's operator objects."""

from __future__ import annotations

from typing import Any


def resolve_op(op: str) -> Any:
    """The torch operator an IR op name stands for (``"aten.cat.default"`` ->
    ``torch.ops.aten.cat.default``), or None when torch has no such callable. Imports torch."""
    import torch

    parts = op.split(".")
    if len(parts) < 2:
        return None
    obj: Any = torch.ops
    try:
        for p in parts:
            obj = getattr(obj, p)
    except (AttributeError, RuntimeError):
        return None
    return obj if callable(obj) else None
