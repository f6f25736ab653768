"""Reordering passes over the IR, their registry and the pass manager.

A pass maps (graph, order, context) to a new order and never mutates the graph. Built-ins:
``sink-waits``, ``raise-comms``, ``compute-overlap``; third-party passes come from the
entry-point group ``commopt.passes`` (see :mod:`commopt.passes.registry`).
"""

from commopt.passes.base import (
    DEFAULT_MAX_MEMORY_INCREASE,
    DEFAULT_PIPELINE,
    Pass,
    PassContext,
)

__all__ = ["DEFAULT_MAX_MEMORY_INCREASE", "DEFAULT_PIPELINE", "Pass", "PassContext"]
