"""The maximum placement of kernel work into flights, against networkx's maximum flow."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commopt.sim.flow import max_placement


def _networkx(supply, room, eligible) -> float:
    g = nx.DiGraph()
    g.add_node("s")
    g.add_node("t")
    for x, s in enumerate(supply):
        g.add_edge("s", ("x", x), capacity=s)
        for c in eligible[x]:
            g.add_edge(("x", x), ("c", c), capacity=sum(supply) + 1)
    for c, r in enumerate(room):
        g.add_edge(("c", c), "t", capacity=r)
    return nx.maximum_flow_value(g, "s", "t")


def test_a_kernel_beside_two_flights_fills_one_then_the_other():
    # 10 us of work beside both flights of 6 and 3: 9 placed; a second kernel beside only
    # the first takes its room, so the first kernel's work moves to the second flight
    assert max_placement([10.0], [6.0, 3.0], [[0, 1]]) == 9.0
    assert max_placement([4.0, 6.0], [6.0, 3.0], [[0, 1], [0]]) == 9.0
    assert max_placement([5.0], [8.0], [[]]) == 0.0
    assert max_placement([], [], []) == 0.0


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_placement_is_the_maximum_flow(data):
    n = data.draw(st.integers(0, 8))
    m = data.draw(st.integers(0, 5))
    supply = [float(data.draw(st.integers(0, 40))) for _ in range(n)]
    room = [float(data.draw(st.integers(0, 40))) for _ in range(m)]
    eligible = [sorted(data.draw(st.sets(st.integers(0, m - 1), max_size=m))) if m else [] for _ in range(n)]
    assert max_placement(supply, room, eligible) == pytest.approx(_networkx(supply, room, eligible), abs=1e-9)
