"""Persistent communication buffers: plan one arena per process group, and check a plan.

- :func:`plan_buffers` (graph, order) -> :class:`~commopt.schemas.buffer_plan.BufferPlan`
- :func:`validate_plan` (graph, order, plan) -> list of problems (empty: valid)
- :func:`compare_plans` what a reordering costs in arena bytes versus the original order
- :func:`save_plan` / :func:`load_plan` the ``buffer_plan.json`` file
"""

from commopt.buffers.digest import order_digest, plan_digest
from commopt.buffers.lifetimes import BufferSpec, collect_buffers, parse_collective_types
from commopt.buffers.planfile import load_plan, plan_json, save_plan
from commopt.buffers.planner import (
    DEFAULT_ALIGN_BYTES,
    align_up,
    compare_plans,
    plan_buffers,
)
from commopt.buffers.validate import validate_plan

__all__ = [
    "DEFAULT_ALIGN_BYTES",
    "BufferSpec",
    "align_up",
    "collect_buffers",
    "compare_plans",
    "load_plan",
    "order_digest",
    "parse_collective_types",
    "plan_buffers",
    "plan_digest",
    "plan_json",
    "save_plan",
    "validate_plan",
]
