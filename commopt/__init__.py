"""commopt: reorder distributed PyTorch graphs so communication overlaps with compute.

The public Python API. Heavy modules (torch) load only when an attribute that needs them is
first used, so ``import commopt`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from commopt._version import __version__

_LAZY = {
    "load_graph": "commopt.io:load_graph",
    "save_graph": "commopt.io:save_graph",
    "Graph": "commopt.ir.graph:Graph",
    "Node": "commopt.ir.graph:Node",
    "NodeKind": "commopt.ir.graph:NodeKind",
    "CommoptError": "commopt.errors:CommoptError",
    "optimize": "commopt.api:optimize",
    "OptimizeResult": "commopt.result:OptimizeResult",
    "OutputOptions": "commopt.result:OutputOptions",
    "build_outputs": "commopt.outputs:build_outputs",
    "capture": "commopt.integrations.capture:capture",
    "CapturedStep": "commopt.integrations.capture:CapturedStep",
    "fake_world": "commopt.integrations.capture:fake_world",
    "inductor_pass": "commopt.integrations.inductor:inductor_pass",
    "CommoptInductorPass": "commopt.integrations.inductor:CommoptInductorPass",
    "write_outputs": "commopt.outputs:write_outputs",
    "record_process_groups": "commopt.io.groups:record_process_groups",
    "save_with_groups": "commopt.io.groups:save_with_groups",
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'commopt' has no attribute {name!r}")
    module, attr = target.split(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
