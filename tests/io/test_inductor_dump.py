"""Post-grad graphs read from torch.compile's own dumps (TORCH_COMPILE_DEBUG and TORCH_TRACE),
produced here by compiling a SimpleFSDP training step in a fake 2-rank world."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from commopt.errors import GraphError
from commopt.io import load_graph
from commopt.io.inductor_dump import DumpedGraph, find_graphs, parse_graph_module
from tests.cli_run import run_cli

REPO = Path(__file__).resolve().parents[2]

COMPILE = textwrap.dedent("""
    import torch, torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from tests.integrations.test_capture import fsdp_model_and_step
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    step, params, x, target = fsdp_model_and_step(2)
    torch.compile(step, dynamic=False)(params, x, target)
""")


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    """A directory with both dumps of one compiled step: torch_compile_debug/ and trace/."""
    out = tmp_path_factory.mktemp("dump")
    env = dict(os.environ, TORCH_COMPILE_DEBUG="1", TORCH_TRACE=str(out / "trace"),
               TORCHINDUCTOR_CACHE_DIR=str(out / "cache"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", COMPILE], cwd=out, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _signature(graph):
    return [(n.name, n.op, n.kind.label, tuple((m.dtype, m.shape) for m in n.outputs)) for n in graph.nodes]


@pytest.mark.slow
def test_both_dumps_give_the_same_post_grad_graphs(dump):
    debug = find_graphs(dump / "torch_compile_debug")
    trace = find_graphs(dump / "trace")
    assert sorted(g.name.split("_")[-2] for g in debug) == ["backward", "forward"]
    assert [g.name for g in trace] == ["graph0-frame0.0", "graph1-frame0.0"]  # forward, backward
    fwd = load_graph(f"{dump / 'torch_compile_debug'}::{next(g.name for g in debug if 'forward' in g.name)}")
    bwd = load_graph(f"{dump / 'trace'}::graph1-frame0.0")
    assert _signature(fwd) == _signature(load_graph(f"{dump / 'trace'}::graph0-frame0.0"))
    assert [fwd.nodes[i].collective.type for i in fwd.collectives()] == ["all_gather"] * 8
    assert [bwd.nodes[i].collective.type for i in bwd.collectives()] == ["reduce_scatter"] * 8
    assert fwd.groups["0"].size == 2  # proven by the ops' group_size arguments


@pytest.mark.slow
def test_parsed_graph_agrees_with_shape_propagation(dump):
    # every annotation the parser turned into a meta tensor is what running the resolved ops
    # on fake tensors of the inputs gives: the ops, arguments and shapes were read right
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    dumped = next(g for g in find_graphs(dump / "trace") if g.name.startswith("graph1"))
    gm = parse_graph_module(dumped)
    expected = {n.name: n.meta["val"] for n in gm.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)}
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    inputs = [None if n.meta["val"] is None else mode.from_tensor(torch.empty_like(n.meta["val"], device="cpu"))
              for n in gm.graph.find_nodes(op="placeholder")]
    FakeTensorProp(gm, mode).propagate(*inputs)
    checked = 0
    for n in gm.graph.nodes:
        if n.name in expected and n.op == "call_function":
            assert tuple(n.meta["val"].shape) == tuple(expected[n.name].shape), n.name
            assert n.meta["val"].dtype == expected[n.name].dtype, n.name
            checked += 1
    assert checked > 40


@pytest.mark.slow
def test_report_and_optimize_read_the_dump(dump, tmp_path, capsys):
    graph = f"{dump / 'torch_compile_debug'}"
    assert run_cli(["report", graph, "--world-size", "2"]) == 2
    assert "pick one as PATH::NAME" in capsys.readouterr().err
    name = next(g.name for g in find_graphs(graph) if "backward" in g.name)
    assert run_cli(["report", f"{graph}::{name}", "--world-size", "2"]) == 0
    assert run_cli(["optimize", f"{graph}::{name}", "--world-size", "2", "-o", str(tmp_path / "o"),
                    "--no-timings"]) == 0
    written = load_graph(tmp_path / "o" / "fx_graph_transformed.json")
    assert len(written) == len(load_graph(f"{graph}::{name}", world_size=2))


PRINTED = '''
class GraphModule(torch.nn.Module):
    def forward(self, a: "f32[4, 4][4, 1]cpu"):
        all_reduce: "f32[4, 4][4, 1]cpu" = torch.ops._c10d_functional.all_reduce.default(a, 'sum', '0')
        mm: "f32[4, 4][4, 1]cpu" = torch.ops.aten.mm.default(a, a);  a = None
        wait_tensor: "f32[4, 4][4, 1]cpu" = torch.ops._c10d_functional.wait_tensor.default(all_reduce);  all_reduce = None
        add: "f32[4, 4][4, 1]cpu" = torch.ops.aten.add.Tensor(mm, wait_tensor);  mm = wait_tensor = None
        return (add,)
'''


def test_a_printed_graph_file_loads_and_needs_its_group_size(tmp_path):
    f = tmp_path / "fx_graph_transformed.py"
    f.write_text(PRINTED)
    g = load_graph(f, world_size=4)
    assert [n.name for n in g.nodes] == ["a", "all_reduce", "mm", "wait_tensor", "add", "output"]
    assert g.groups["0"].size == 4 and g.nodes[g.collectives()[0]].collective.in_bytes == 64
    assert load_graph(f).meta.get("unknown_group_sizes") == ["0"]  # all_reduce does not say


@pytest.mark.parametrize(("text", "message"), [
    (PRINTED.replace("torch.ops.aten.mm.default", "os.system"), "only torch.ops.<ns>.<op>.<overload>"),
    (PRINTED.replace("torch.ops.aten.mm.default", "torch.ops.aten.no_such_op.default"), "unknown operator"),
    (PRINTED.replace('"f32[4, 4][4, 1]cpu"):', '"f32[s0, 4][4, 1]cpu"):'), "dynamic shapes are not supported"),
    (PRINTED.replace("(a, a)", "(a, b)"), "'b' is used before it is defined"),
    ("def forward(self:\n", "not a printed FX graph"),
])
def test_unreadable_graphs_are_one_line_errors_with_the_line(tmp_path, text, message):
    f = tmp_path / "fx_graph_transformed.py"
    f.write_text(text)
    with pytest.raises(GraphError, match=message) as exc:
        load_graph(f)
    assert exc.value.file == str(f) and exc.value.line is not None


def test_a_trace_log_without_post_grad_graphs_is_an_error(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    log.write_text('V1125 x.py:1] {"dynamo_start": {}}\n')
    with pytest.raises(GraphError, match="no inductor_post_grad_graph record"):
        load_graph(log)


def test_selecting_a_missing_graph_lists_the_graphs(tmp_path):
    f = tmp_path / "g" / "fx_graph_transformed.py"
    f.parent.mkdir()
    f.write_text(PRINTED)
    with pytest.raises(GraphError, match="no graph named 'nope'.*holds: g"):
        load_graph(f"{tmp_path}::nope")
    assert find_graphs(tmp_path) == [DumpedGraph("g", PRINTED, str(f))]
