"""Schedule: checked once at construction, immutable, positions kept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commopt.errors import CommoptError, ExitCode
from commopt.ir.schedule import Schedule, ScheduleError


@given(st.permutations(list(range(30))))
def test_positions_invert_the_order(order):
    s = Schedule(order)
    assert list(s) == order and s.order == tuple(order)
    assert all(s.position(i) == k for k, i in enumerate(order))
    assert [s[k] for k in range(len(s))] == order


@pytest.mark.parametrize("order, n, words", [
    ([0, 1], 3, "2 entries, the graph has 3 nodes"),
    ([0, 0, 2], 3, "entry 1 of the order (0) appears twice"),
    ([0, 3, 1], 3, "entry 1 of the order (3) is not a node index"),
    ([0, -1, 1], 3, "entry 1 of the order (-1) is not a node index"),
    ([0, 1.0, 2], 3, "entry 1 of the order (1.0) is not a node index"),
    ([0, True, 2], 3, "entry 1 of the order (True) is not a node index"),
])
def test_anything_but_a_permutation_is_one_user_error(order, n, words):
    with pytest.raises(ScheduleError) as info:
        Schedule(order, n)
    assert words in str(info.value) and "field order" in str(info.value)
    assert isinstance(info.value, CommoptError) and info.value.exit_code is ExitCode.USER_ERROR


def test_immutable_and_comparable():
    s = Schedule([2, 0, 1])
    with pytest.raises(TypeError):
        s[0] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        s.extra = 1  # type: ignore[attr-defined]
    assert s == Schedule((2, 0, 1)) == [2, 0, 1] and s != [0, 1, 2]
    assert hash(s) == hash(Schedule([2, 0, 1]))


def test_of_graph_reuses_a_schedule_and_checks_size():
    from commopt.ir.builder import GraphBuilder

    b = GraphBuilder()
    x = b.input("x", (4,))
    b.output([b.compute("y", "aten.relu.default", [x], (4,))])
    g = b.build()
    s = Schedule.of(g, [0, 1, 2])
    assert Schedule.of(g, s) is s
    assert Schedule.original(g) == g.original_order
    with pytest.raises(ScheduleError):
        Schedule.of(g, [0, 1])
