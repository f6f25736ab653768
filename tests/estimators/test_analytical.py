"""The analytical estimator: roofline compute, ring-model collectives, hardware files."""

from __future__ import annotations

import json

import pytest

from commopt.errors import OptionError
from commopt.estimators.analytical import AnalyticalEstimator, collective_time_us
from commopt.estimators.hardware import PRESETS, load_hardware
from commopt.ir.builder import GraphBuilder


def _mm_graph(m: int, k: int, n: int, dtype: str = "bfloat16"):
    b = GraphBuilder()
    a = b.input("a", (m, k), dtype)
    w = b.input("w", (k, n), dtype)
    mm = b.compute("mm", "aten.mm.default", [a, w], (m, n), dtype)
    r = b.compute("relu", "aten.relu.default", [mm], (m, n), dtype)
    e = b.compute("e", "aten.empty.memory_format", [], (m, n), dtype, args=[[m, n]])
    v = b.view("v", r, (m * n,))
    b.output([v, e])
    return b.build()


def test_large_matmul_is_compute_bound_at_peak_times_efficiency():
    g = _mm_graph(8192, 8192, 8192)
    est = AnalyticalEstimator("h100")
    hw = PRESETS["h100"]
    flops = 2 * 8192**3
    expected = flops / (hw.peak_tflops["bfloat16"] * hw.flops_efficiency * 1e6)
    assert est.estimate(g.node("mm"), g) == pytest.approx(expected)
    assert est.flops(g.node("mm"), g) == flops


def test_elementwise_is_memory_bound_and_metadata_is_free():
    g = _mm_graph(8192, 8192, 8192)
    est = AnalyticalEstimator("h100")
    hw = PRESETS["h100"]
    moved = 2 * 8192 * 8192 * 2  # read + write, bf16
    assert est.estimate(g.node("relu"), g) == pytest.approx(
        moved / (hw.memory_bandwidth_gbps * hw.memory_efficiency * 1e3))
    assert est.estimate(g.node("e"), g) == 0.0
    assert est.estimate(g.node("v"), g) == 0.0


def test_tiny_kernels_cost_at_least_the_minimum():
    g = _mm_graph(4, 4, 4)
    est = AnalyticalEstimator("h100")
    assert est.estimate(g.node("relu"), g) == PRESETS["h100"].min_kernel_us


def test_ring_factors_by_collective_type():
    hw = PRESETS["h100"]
    size = 1 << 30
    bw = hw.intra_node_bandwidth_gbps * hw.link_efficiency * 1e3
    lat = hw.base_latency_us + 7 * hw.intra_node_hop_latency_us
    assert collective_time_us(hw, "all_gather", size, 8, 1) == pytest.approx(lat + 7 / 8 * size / bw)
    assert collective_time_us(hw, "reduce_scatter", size, 8, 1) == pytest.approx(lat + 7 / 8 * size / bw)
    assert collective_time_us(hw, "all_to_all", size, 8, 1) == pytest.approx(lat + 7 / 8 * size / bw)
    lat_ar = hw.base_latency_us + 14 * hw.intra_node_hop_latency_us
    assert collective_time_us(hw, "all_reduce", size, 8, 1) == pytest.approx(lat_ar + 14 / 8 * size / bw)
    assert collective_time_us(hw, "all_reduce", size, 1, 1) == 0.0


def _ar_graph(ranks, size=None):
    b = GraphBuilder(world_size=16)
    if ranks is None:
        b.group("g", size=size)
    else:
        b.group("g", ranks=ranks)
    x = b.input("x", (1024, 1024))
    c = b.collective("ar", "all_reduce", "g", x)
    b.output([b.wait("w", c)])
    return b.build()


def test_a_group_spanning_nodes_uses_the_network():
    inside = _ar_graph(list(range(8)))
    across = _ar_graph([0, 2, 4, 6, 8, 10, 12, 14])
    est = AnalyticalEstimator("h100", gpus_per_node=8)
    t_in = est.estimate(inside.node("ar"), inside)
    t_across = AnalyticalEstimator("h100").estimate(across.node("ar"), across)
    assert t_across > 5 * t_in  # 50 GB/s NIC against 450 GB/s NVLink
    # with 16 GPUs per node the same ranks sit in one node
    assert AnalyticalEstimator("h100", gpus_per_node=16).estimate(across.node("ar"), across) == pytest.approx(t_in)


def test_unknown_ranks_assume_one_node_and_say_so():
    g = _ar_graph(None, size=8)
    est = AnalyticalEstimator("h100")
    assert est.estimate(g.node("ar"), g) == pytest.approx(
        AnalyticalEstimator("h100").estimate(_ar_graph(list(range(8))).node("ar"), _ar_graph(list(range(8)))))
    assert any("no rank list" in n and "inside one node" in n for n in est.notes)


def test_every_preset_loads_and_aliases_work():
    for name in ("h100", "h200", "a100", "b200", "mi300x", "H100-SXM", "a100-80gb"):
        assert load_hardware(name).memory_bandwidth_gbps > 0
    with pytest.raises(OptionError, match="did you mean 'h100'"):
        load_hardware("h10")


def test_hardware_file(tmp_path):
    data = PRESETS["a100"].model_dump()
    data["name"] = "my box"
    good = tmp_path / "hw.json"
    good.write_text(json.dumps(data))
    assert load_hardware(str(good)).name == "my box"
    del data["memory_bandwidth_gbps"]
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps(data))
    with pytest.raises(OptionError) as err:
        load_hardware(str(missing))
    assert "field memory_bandwidth_gbps" in str(err.value) and "missing.json" in str(err.value)
    data = PRESETS["a100"].model_dump()
    data["inter_node_bandwidth_gbps"] = -5
    neg = tmp_path / "neg.json"
    neg.write_text(json.dumps(data))
    with pytest.raises(OptionError, match="field inter_node_bandwidth_gbps: .*greater than 0"):
        load_hardware(str(neg))
    data = PRESETS["a100"].model_dump()
    data["peak_tflops"]["bfloat16"] = -1
    neg.write_text(json.dumps(data))
    with pytest.raises(OptionError, match="peak_tflops.bfloat16"):
        load_hardware(str(neg))
    with pytest.raises(OptionError, match="no such hardware file"):
        load_hardware(str(tmp_path / "nope.json"))


def test_one_estimator_serves_graphs_with_same_group_names_but_different_sizes():
    from commopt.estimators.analytical import AnalyticalEstimator
    from commopt.synth import fsdp_tp_stack

    est = AnalyticalEstimator()
    small = fsdp_tp_stack(1, dp=2, hidden=256, tokens=64)
    big = fsdp_tp_stack(1, dp=8, hidden=256, tokens=64)
    ag_small = est.estimate(small.node("ag0"), small)
    ag_big = est.estimate(big.node("ag0"), big)
    fresh_big = AnalyticalEstimator().estimate(big.node("ag0"), big)
    assert ag_big == fresh_big and ag_big != ag_small


def test_a_group_of_unknown_size_is_an_error_not_a_size_of_one(samples_dir, tmp_path):
    """Llama TP re-saved without its groups record: its all_reduces carry no group size."""
    import torch

    from commopt.errors import GraphError
    from commopt.io import load_graph
    from commopt.ir.graph import NodeKind

    plain = tmp_path / "llama_tp.pt2"
    torch.export.save(torch.export.load(str(samples_dir / "ws8" / "llama_tp.pt2")), str(plain))
    graph = load_graph(plain)
    reduce = next(n for n in graph.nodes if n.kind is NodeKind.COLLECTIVE)
    with pytest.raises(GraphError, match=r"size of process group\(s\) '0' unknown"):
        AnalyticalEstimator().estimate(reduce, graph)
    sized = load_graph(plain, world_size=8)
    expected = collective_time_us(load_hardware(None), "all_reduce", reduce.collective.bytes, 8, 1)
    assert AnalyticalEstimator().estimate(sized.nodes[reduce.index], sized) == pytest.approx(expected)
    assert expected > 0


def test_heavy_ops_are_the_ops_torchs_flop_counter_has_a_formula_for():
    """compute-overlap ranks compute by these without importing torch; they must stay the ops
    of torch's flop registry (a new torch may add some: then add them here)."""
    from torch.utils.flop_counter import flop_registry

    from commopt.estimators.analytical import HEAVY_OPS, heavy_op, op_base_name

    names = {getattr(p, "_qualified_op_name", None) or str(p) for p in flop_registry}
    assert {op_base_name(n.replace("::", ".")) for n in names} == HEAVY_OPS
    assert heavy_op("aten.mm.default") and heavy_op("aten::addmm") and not heavy_op("aten.add.Tensor")
