"""commopt's FLOP formulas give torch's flop counter's counts, and fail where it fails."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from commopt.estimators.analytical import HEAVY_OPS, AnalyticalEstimator, op_base_name
from commopt.estimators.flops import FORMULAS
from commopt.io import load_graph

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs"


def _torch_formula(op: str):
    from torch.utils.flop_counter import flop_registry

    for packet, fn in flop_registry.items():
        if getattr(packet, "_qualified_op_name", "").replace("::", ".") == op:
            return fn
    raise AssertionError(f"torch has no formula for {op}")


def _both(op: str, shapes: list, extra: tuple = ()) -> tuple[object, object]:
    """(commopt's count or the exception type, torch's count or the exception type)."""
    import torch

    def run(fn, size, keyword):
        try:
            return fn(*(size(s) for s in shapes), *extra, **{keyword: None})
        except (ValueError, AssertionError, TypeError):
            return "raises"

    return run(FORMULAS[op], tuple, "out_shape"), run(_torch_formula(op), torch.Size, "out_val")


def test_every_formula_is_for_an_op_torch_counts():
    assert set(FORMULAS) <= HEAVY_OPS


def _random_shapes(op: str, rng: random.Random) -> list[tuple[int, ...]]:
    """Arguments for ``op``, consistent about two times in three."""
    d = [rng.choice((1, 2, 3, 4, 8, 16, 64)) for _ in range(8)]
    if rng.random() < 0.35:  # an inconsistent dimension somewhere
        d[rng.randrange(8)] += 1
    b, m, k, n, h, s, dh = d[0], d[1], d[2], d[3], d[4], d[5], d[6]
    kv = max(1, h // rng.choice((1, 2, 4)))
    if op in ("aten.mm", "aten._scaled_mm"):
        return [(m, k), (d[7] if d[7] != 64 else k, n)] + ([(1,), (1,)] if op == "aten._scaled_mm" else [])
    if op == "aten.addmm":
        return [(n,), (m, k), (k if d[7] != 3 else k + 1, n)]
    if op == "aten.bmm":
        return [(b, m, k), (b if d[7] != 2 else b + 1, k, n)]
    if op == "aten.baddbmm":
        return [(b, m, n), (b, m, k), (b if d[7] != 2 else b + 1, k, n)]
    q, kk, v = (b, h, m, dh), (b, kv, s, dh), (b, kv, s, d[7])
    if op.endswith("_backward"):
        return [(b, h, m, d[7]), q, kk, v]
    return [q, kk, v]


@pytest.mark.parametrize("op", sorted(FORMULAS))
def test_random_shapes_count_as_torch_counts(op):
    rng = random.Random(op)
    raised = counted = 0
    for _ in range(300):
        ours, theirs = _both(op, _random_shapes(op, rng))
        assert ours == theirs, (op, ours, theirs)
        raised += ours == "raises"
        counted += ours != "raises"
    assert raised and counted  # both paths were exercised


def test_a_malformed_shape_raises_in_both():
    assert _both("aten.mm", [(2, 3, 4), (4, 5)]) == ("raises", "raises")
    assert _both("aten._scaled_dot_product_flash_attention", [(1, 2, 3), (1, 2, 3, 4), (1, 2, 3, 4)]) \
        == ("raises", "raises")


@pytest.mark.parametrize("name", ["ws8/llama_tp.json", "realistic/llama3_8b_L2.json", "ws8/moe.json",
                                  "ws8/mesh2d.json", "corpus/ws8/mixtral_ep.pt2",
                                  "corpus/ws8/llama_fsdp_bf16.pt2"])
def test_sample_graph_nodes_count_as_torch_counts(name):
    """Every matmul of real-model sample graphs, through the estimator (which passes the
    recorded shapes and constant arguments) and through torch's formula directly."""
    import torch

    g = load_graph(SAMPLES / name)
    est = AnalyticalEstimator()
    checked = 0
    for node in g.nodes:
        op = op_base_name(node.op)
        if op not in FORMULAS:
            continue
        args = [torch.Size(g.nodes[a.index].outputs[0].shape) if hasattr(a, "index") else a
                for a in node.args]
        expected = _torch_formula(op)(*args, out_val=torch.Size(node.outputs[0].shape))
        assert est.flops(node, g) == expected, node.name
        checked += 1
    assert checked


def test_estimating_a_json_graph_of_matmuls_does_not_import_torch(tmp_path):
    """The estimator's whole point of carrying formulas: a fresh process estimating a JSON
    graph whose heavy ops all have one never imports torch."""
    import subprocess
    import sys

    code = ("import sys; from commopt.io import load_graph; "
            "from commopt.estimators import resolve; "
            f"g = load_graph({str(SAMPLES / 'ws8' / 'llama_tp.json')!r}); "
            "resolve('analytical').durations(g); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
