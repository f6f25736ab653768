"""plan_buffers on small graphs built with GraphBuilder: what gets a buffer, where, and when."""

from __future__ import annotations

from commopt.buffers import plan_buffers
from commopt.ir.builder import GraphBuilder


def _two_allreduces():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4, 8))
    y = b.compute("y", "aten.relu.default", [x], (4, 8))
    c1 = b.collective("ar1", "all_reduce", "0", y)
    w1 = b.wait("ar1_wait", c1)
    z = b.compute("z", "aten.relu.default", [w1], (4, 8))
    c2 = b.collective("ar2", "all_reduce", "0", z)
    w2 = b.wait("ar2_wait", c2)
    b.output([w2])
    return b.build()


def test_buffers_of_sequential_collectives_share_memory():
    plan = plan_buffers(_two_allreduces(), align=128)
    (arena,) = plan.groups
    by_name = {buf.name: buf for buf in arena.buffers}
    assert sorted(by_name) == ["ar1:in0", "ar1:out0", "ar2:in0", "ar2:out0"]
    # ar1's input lives from y (position 1) to ar1's wait (3), its output from 2 to z (4)
    assert (by_name["ar1:in0"].first, by_name["ar1:in0"].last) == (1, 3)
    assert (by_name["ar1:out0"].first, by_name["ar1:out0"].last) == (2, 4)
    assert by_name["ar1:in0"].size_bytes == 128 and by_name["ar1:in0"].local_bytes == 128
    # at most two buffers are live together (e.g. ar1:out0 and ar2:in0 at z)
    assert arena.lower_bound_bytes == 2 * 128
    assert arena.arena_bytes == 2 * 128
    assert arena.per_call_site_bytes == 4 * 128
    assert plan.digest and len(plan.digest) == 64
