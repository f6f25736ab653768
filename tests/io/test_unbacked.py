"""Data-dependent (unbacked) sizes at load: found, assumed with a stated basis, settable.

The real case is the corpus's qwen3_moe_ep (transformers' own dropless all-to-all expert
parallelism: split sizes read back with ``.tolist()``); two tiny exports cover the other
bases (a size torch.export bounds, and one with no basis at all).
"""

from __future__ import annotations

import pytest
import torch

from commopt.errors import GraphError, OptionError
from commopt.io import load_graph
from commopt.io.pt2 import apply_assumptions, graph_from_torch
from commopt.ir.sizes import data_dependent_sizes, has_data_dependent_output, symbolic_shapes
from tests.corpus.graphs import CORPUS

QWEN = CORPUS / "ws2" / "qwen3_moe_ep.pt2"


@pytest.fixture(scope="module")
def qwen():
    return load_graph(QWEN)


def test_split_sizes_are_found_and_assumed_even(qwen):
    sizes = data_dependent_sizes(qwen)
    assert [s.symbol for s in sizes] == [f"u{k}" for k in range(8)]
    # 16 tokens x 2 (batch) x top-2 = 64 rows per all_to_all, 2 ranks: 32 to each peer
    assert {(s.assumed, s.basis) for s in sizes} == {(32, "even-split")}
    for s in sizes:
        assert s.defined_by.startswith("_local_scalar_dense")  # the .tolist() element
        assert len(s.collectives) == 4 and all(c.startswith("all_to_all_single") for c in s.collectives)
    send = {s.symbol: s for s in sizes}
    assert send["u0"].high == 64 and send["u2"].high is None  # what export proved


def test_data_dependent_collectives_are_sized_by_the_assumption(qwen):
    a2a = [n for n in qwen.nodes if n.collective is not None and has_data_dependent_output(n)]
    assert len(a2a) == 8  # the token all_to_alls (not the two count exchanges)
    for n in a2a:
        (shape,) = symbolic_shapes(n)
        assert isinstance(shape[0], str) and shape[1] == 64  # ("u2 + u3", hidden)
        assert n.outputs[0].shape == (64, 64)  # 32 + 32 rows assumed
        assert n.collective.out_bytes == 64 * 64 * 4


def test_assume_sets_values_and_every_size_follows(qwen):
    g = apply_assumptions(qwen, {"u2": 40, "*": 8})
    sizes = {s.symbol: s for s in data_dependent_sizes(g)}
    assert (sizes["u2"].assumed, sizes["u2"].basis) == (40, "given")
    assert (sizes["u3"].assumed, sizes["u3"].basis) == (8, "given-default")
    recv = g.node("all_to_all_single_1")  # receives u2 + u3 rows
    assert recv.outputs[0].shape == (48, 64) and recv.collective.out_bytes == 48 * 64 * 4
    assert load_graph(QWEN, assume={"u2": 40, "*": 8}).node("all_to_all_single_1").outputs == recv.outputs
    assert [n.name for n in g.nodes] == [n.name for n in qwen.nodes]  # same nodes, same indices


def test_assume_errors_name_the_problem(qwen):
    with pytest.raises(OptionError, match=r"u99, which the graph does not have .*u0, u1"):
        apply_assumptions(qwen, {"u99": 3})
    static = load_graph(CORPUS / "ws2" / "llama_sp.pt2")
    with pytest.raises(OptionError, match="no data-dependent sizes"):
        apply_assumptions(static, {"*": 3})


def test_a_size_export_bounds_is_assumed_at_its_bound():
    class NonZero(torch.nn.Module):
        def forward(self, x):
            return (x.nonzero().float().sum(),)

    g = graph_from_torch(torch.export.export(NonZero(), (torch.randn(4, 4),)))
    (s,) = data_dependent_sizes(g)
    assert (s.symbol, s.assumed, s.basis, s.low, s.high) == ("u0", 16, "range", 0, 16)
    assert "torch.export allows" in s.reason


def test_a_size_with_no_basis_is_an_error_until_assumed():
    class FromItem(torch.nn.Module):
        def forward(self, x, n):
            return (torch.zeros(n.item()) + x.sum(),)

    ep = torch.export.export(FromItem(), (torch.randn(4), torch.tensor(3)))
    with pytest.raises(GraphError, match=r"u0 .* no basis for an estimate: .*--assume u0=N"):
        graph_from_torch(ep)
    g = graph_from_torch(ep, assume={"u0": 5})
    (s,) = data_dependent_sizes(g)
    assert (s.assumed, s.basis) == (5, "given")
    assert any(n.outputs and n.outputs[0].shape == (5,) for n in g.nodes)
