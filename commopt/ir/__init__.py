"""The graph IR (see :mod:`commopt.ir.graph`)."""

from commopt.ir.graph import (
    COLLECTIVE_TYPES,
    DTYPE_BYTES,
    CollectiveInfo,
    Graph,
    Node,
    NodeKind,
    ProcessGroup,
    Ref,
    TensorMeta,
)
from commopt.ir.schedule import Schedule, ScheduleError

__all__ = [
    "COLLECTIVE_TYPES",
    "DTYPE_BYTES",
    "CollectiveInfo",
    "Graph",
    "Node",
    "NodeKind",
    "ProcessGroup",
    "Ref",
    "Schedule",
    "ScheduleError",
    "TensorMeta",
]
