"""Live-memory accounting along an order, on graphs small enough to check by hand."""

from __future__ import annotations

from commopt.ir.builder import GraphBuilder
from commopt.sim import peak_memory, simulate

F32_4x8 = 4 * 8 * 4  # 128 bytes


def test_views_allocate_nothing_and_storage_lives_until_the_last_alias_use():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    y = b.compute("y", "aten.relu.default", [x], (4, 8))
    v = b.view("v", y, (32,))
    z = b.compute("z", "aten.relu.default", [v], (32,))
    b.output([z])
    g = b.build()
    peak, curve = peak_memory(g, g.original_order)
    # x, then y, the view adds nothing, z runs while y is still read through v, then y is freed
    assert list(curve) == [128, 256, 256, 384, 256]
    assert peak == 3 * F32_4x8


def test_order_changes_the_peak():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    a1 = b.compute("a1", "aten.relu.default", [x], (4, 8))
    a2 = b.compute("a2", "aten.sum.default", [a1], ())
    c1 = b.compute("c1", "aten.relu.default", [x], (4, 8))
    c2 = b.compute("c2", "aten.sum.default", [c1], ())
    b.output([a2, c2])
    g = b.build()
    peak_seq, _ = peak_memory(g, [x, a1, a2, c1, c2, 5])
    peak_both, _ = peak_memory(g, [x, a1, c1, a2, c2, 5])
    assert peak_seq == 128 + 4 + 128 + 4  # at c2: x, a2, c1, c2 (a1 was freed after a2)
    assert peak_both == 128 + 128 + 128 + 4  # at a2: x, a1, c1 and a2


def test_collective_output_from_issue_and_input_until_wait():
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    x = b.input("x", (4, 8))
    y = b.compute("y", "aten.relu.default", [x], (4, 8))
    c = b.collective("ag", "all_gather", "g", y)  # output 8x8 = 256 bytes
    k = b.compute("k", "aten.relu.default", [x], (4, 8))
    w = b.wait("w", c)
    b.output([w, k])
    g = b.build()
    _, curve = peak_memory(g, g.original_order)
    # x 128; y 256; ag issued +256 = 512; k +128 = 640 (y still read by ag); after the wait y is freed
    assert list(curve) == [128, 256, 512, 640, 640, 512]
    r = simulate(g, g.original_order, [1.0] * len(g))
    assert r.peak_memory_bytes == 640
    assert r.memory_curve[0] == (0.0, 128) and max(v for _, v in r.memory_curve) == 640


def test_graph_inputs_are_never_freed_and_unused_outputs_are_freed_at_once():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    b.compute("dead", "aten.relu.default", [x], (4, 8))
    b.compute("y", "aten.relu.default", [x], (4, 8))
    b.output([2])
    g = b.build()
    _, curve = peak_memory(g, g.original_order)
    assert list(curve) == [128, 256, 256, 256]
