"""Buffer lifetimes per order: remembered for the original order and the last few others."""

from __future__ import annotations

import numpy as np
import pytest

from commopt.buffers.lifetimes import LIFETIME_ORDERS_KEPT, buffer_table
from commopt.ir.schedule import Schedule
from commopt.synth import fsdp_tp_stack


def _orders(graph, count):
    """``count`` distinct permutations besides the original order: one wait moved last (lifetimes
    need a permutation, not a valid order)."""
    base = graph.original_order
    waits = list(graph.waits())
    out = []
    for w in waits[:count]:
        order = [i for i in base if i != w] + [w]
        Schedule.of(graph, order)  # a permutation
        out.append(order)
    return out


def test_lifetimes_are_remembered_read_only_and_equal_to_a_fresh_computation():
    graph = fsdp_tp_stack(2, dp=2, tp=2, hidden=64, tokens=32)
    table = buffer_table(graph)
    first = table.lifetimes(graph, graph.original_order)
    assert table.lifetimes(graph, graph.original_order) is first
    fresh = table._lifetimes(np.arange(len(graph.nodes)))
    for kept, computed in zip(first, fresh, strict=True):
        assert np.array_equal(kept, computed)
        with pytest.raises(ValueError):
            kept[:1] = 0


def test_the_original_order_outlives_the_other_orders_remembered():
    graph = fsdp_tp_stack(2, dp=2, tp=2, hidden=64, tokens=32)
    table = buffer_table(graph)
    original = table.lifetimes(graph, graph.original_order)
    orders = _orders(graph, LIFETIME_ORDERS_KEPT + 2)
    results = [table.lifetimes(graph, order) for order in orders]
    assert table.lifetimes(graph, graph.original_order) is original
    assert table.lifetimes(graph, orders[-1]) is results[-1]
    assert table.lifetimes(graph, orders[0]) is not results[0]  # forgotten, computed again
