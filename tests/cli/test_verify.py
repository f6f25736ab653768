"""`commopt verify` and `commopt passes` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commopt.io.json_graph import graph_to_document, save_json_graph
from commopt.passes.base import DEFAULT_PIPELINE
from commopt.schemas.verify import PassList, VerifyReport
from commopt.synth import fsdp_tp_stack
from tests.cli_run import run_cli as _run


@pytest.fixture
def graph_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "g.json"
    save_json_graph(fsdp_tp_stack(2, dp=2, tp=2, hidden=64, tokens=32), path)
    return path


def test_identity_reorder_is_ok(graph_file: Path, capsys):
    assert _run(["verify", str(graph_file), str(graph_file)]) == 0
    assert capsys.readouterr().out.startswith("ok:")


def test_broken_reorder_lists_every_violation_and_exits_1(graph_file: Path, tmp_path: Path, capsys):
    doc = json.loads(graph_file.read_text())
    names = [n["name"] for n in doc["nodes"]]
    nodes = {n["name"]: n for n in doc["nodes"]}
    # the first all-gather's wait moves before the all-gather, and a view is dropped
    i_ag, i_wait = names.index("ag0"), names.index("ag0_wait")
    names[i_ag], names[i_wait] = names[i_wait], names[i_ag]
    names.remove("bwd_gT0")
    doc["nodes"] = [nodes[n] for n in names]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert _run(["verify", str(graph_file), str(bad), "--format", "json"]) == 1
    report = VerifyReport.model_validate_json(capsys.readouterr().out)
    assert [(v.invariant, v.nodes) for v in report.violations] == [
        (0, ["bwd_gT0"]),
        (1, ["ag0", "ag0_wait"]),
    ]
    assert _run(["verify", str(graph_file), str(bad)]) == 1
    captured = capsys.readouterr()
    assert "invariant 1 (topological order): 'ag0_wait' uses 'ag0' but comes before it" in captured.out
    assert "2 invariant violation(s)" in captured.err


def test_reordered_json_from_another_tool(graph_file: Path, tmp_path: Path, capsys):
    from commopt.io import load_graph

    g = load_graph(graph_file)
    order = g.original_order
    i_ar, i_ag1 = g.index_of["tp_ar0"], g.index_of["ag1"]
    # issue ag1 (group dp) before tp_ar0 (group tp): only a cross-group reorder, which the
    # default rule accepts on this SPMD graph (groups are mesh slices) and the opt-out refuses
    order.remove(i_ag1)
    order.insert(order.index(i_ar), i_ag1)
    other = tmp_path / "other.json"
    other.write_text(json.dumps(graph_to_document(g, order)))
    assert _run(["verify", str(graph_file), str(other), "--keep-cross-group-order", "--format", "json"]) == 1
    report = VerifyReport.model_validate_json(capsys.readouterr().out)
    assert not report.ok and not report.allow_cross_group_reorder
    assert [(v.invariant, v.nodes) for v in report.violations] == [(2, ["tp_ar0", "ag1"])]
    assert _run(["verify", str(graph_file), str(other), "--format", "json"]) == 0
    assert VerifyReport.model_validate_json(capsys.readouterr().out).allow_cross_group_reorder
    assert _run(["verify", str(graph_file), str(other), "--allow-cross-group-reorder"]) == 0


def test_passes_lists_builtins_and_default_pipeline(capsys):
    assert _run(["passes", "--format", "json"]) == 0
    payload = PassList.model_validate_json(capsys.readouterr().out)
    names = [p.name for p in payload.passes]
    assert {"sink-waits", "raise-comms", "compute-overlap"} <= set(names)
    assert payload.default_pipeline == list(DEFAULT_PIPELINE)
    assert all(p.broken is None for p in payload.passes if p.source == "built-in")


def _optimized_json(graph_file: Path, tmp_path: Path) -> Path:
    assert _run(["optimize", str(graph_file), "-o", str(tmp_path / "out"), "--no-timings"]) == 0
    return tmp_path / "out" / "g.json"


SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs"
MESH2D = SAMPLES / "ws2" / "mesh2d.json"  # 4 ranks, groups '1' (dp) and '3' (tp), kwargs, symbols


@pytest.fixture(scope="module")
def mesh2d_optimized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sample_graphs/ws2/mesh2d.json as `commopt optimize` writes it (verifies clean)."""
    out = tmp_path_factory.mktemp("mesh2d")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(out)
        assert _run(["optimize", str(MESH2D), "-o", str(out), "--no-timings"]) == 0
    return out / "mesh2d.json"


def _node(doc: dict, name: str) -> dict:
    (nd,) = [n for n in doc["nodes"] if n["name"] == name]
    return nd


def _edit(node: str, *keys_value):
    """A change setting ``doc.nodes[node][keys...] = value`` (value ``_DROP`` deletes the key)."""
    *keys, value = keys_value

    def change(doc):
        target = _node(doc, node)
        for k in keys[:-1]:
            target = target.setdefault(k, {}) if isinstance(target, dict) else target[k]
        if value is _DROP:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return change


_DROP = object()


def _graph_edit(fn):
    def change(doc):
        fn(doc)
    return change


def _group(doc: dict, name: str) -> dict:
    (g,) = [g for g in doc["process_groups"] if g["name"] == name]
    return g


def _swap_outputs(doc):
    out = _node(doc, "output")["args"][0]
    out[1], out[2] = out[2], out[1]


#: (what changes, the change, the line verify prints): one per attribute class of issue 21
#: class 2. Every one leaves a file that loads; verify names the node (or group) and the
#: first changed field with both values.
MUTATIONS = [
    ("kind", _edit("gelu", "kind", "view"),
     "'gelu' changed its kind: 'compute' -> 'view'"),
    ("op", _edit("gelu", "op", "aten.relu.default"),
     "'gelu' changed its op: 'aten.gelu.default' -> 'aten.relu.default'"),
    ("input reference", _edit("add", "args", 1, {"ref": "mm_1"}),
     "'add' changed its inputs: ['wait_tensor_3', 'x_seq_shard'] -> ['mm_1', 'x_seq_shard']"),
    ("constant list argument", _edit("permute", "args", 1, [0, 1]),
     "'permute' changed its args[1][0]: 1 -> 0"),
    ("float constant written as int", _edit("pow_2", "args", 1, 1),
     "'pow_2' changed its args[1]: 1.0 -> 1"),
    ("keyword argument", _edit("full_like", "kwargs", "pin_memory", True),
     "'full_like' changed its kwargs['pin_memory']: False -> True"),
    ("new keyword argument", _edit("gelu", "kwargs", "approximate", "tanh"),
     "'gelu' changed its kwargs['approximate']: (absent) -> 'tanh'"),
    ("symbol", _edit("full_like", "kwargs", "memory_format", {"memory_format": "contiguous_format"}),
     "'full_like' changed its kwargs['memory_format'].value: 'preserve_format' -> 'contiguous_format'"),
    ("graph output order", _swap_outputs,
     "'output' changed its args[0][1]: {'ref': 'wait_tensor_14'} -> {'ref': 'wait_tensor_11'}"),
    ("output dtype", _edit("mm", "outputs", 0, "dtype", "bfloat16"),
     "'mm' changed its outputs[0].dtype: 'float32' -> 'bfloat16'"),
    ("output shape", _edit("mm", "outputs", 0, "shape", [16, 65]),
     "'mm' changed its outputs[0].shape[1]: 64 -> 65"),
    ("output max_shape", _edit("mm", "outputs", 0, "max_shape", [16, 64]),
     "'mm' changed its outputs[0].max_shape: None -> (16, 64)"),
    ("output placements", _edit("mm", "outputs", 0, "placements", ["S(0)", "R"]),
     "'mm' changed its outputs[0].placements: None -> ('S(0)', 'R')"),
    ("reduce op", _edit("reduce_scatter_tensor", "collective", "reduce_op", "max"),
     "'reduce_scatter_tensor' changed its collective.reduce_op: 'sum' -> 'max'"),
    ("reduce op argument", _edit("reduce_scatter_tensor", "args", 1, "max"),
     "'reduce_scatter_tensor' changed its args[1]: 'sum' -> 'max'"),
    ("collective type", _edit("all_gather_into_tensor", "collective", "type", "all_to_all"),
     "'all_gather_into_tensor' changed its collective.type: 'all_gather' -> 'all_to_all'"),
    ("collective group", _edit("reduce_scatter_tensor", "collective", "group", "1"),
     "'reduce_scatter_tensor' changed its collective.group: '3' -> '1'"),
    ("group name argument", _edit("reduce_scatter_tensor", "args", 3, "1"),
     "'reduce_scatter_tensor' changed its args[3]: '3' -> '1'"),
    ("group size argument", _edit("all_gather_into_tensor", "args", 1, 4),
     "'all_gather_into_tensor' changed its args[1]: 2 -> 4"),
    ("byte count", _edit("all_gather_into_tensor", "collective", "out_bytes", 1),
     "'all_gather_into_tensor' changed its collective.out_bytes: 8192 -> 1"),
    ("coalesced", _edit("all_gather_into_tensor", "collective", "coalesced", True),
     "'all_gather_into_tensor' changed its collective.coalesced: False -> True"),
    ("alias", _edit("gelu", "alias_of", "mm"),
     "'gelu' changed its alias_of: None -> 'mm'"),
    ("mutation", _edit("gelu", "mutates", ["mm"]),
     "'gelu' changed its mutates: [] -> ['mm']"),
    ("side effect", _edit("gelu", "side_effect", True),
     "'gelu' changed its side_effect: False -> True"),
    ("graph input role", _edit("x_seq_shard", "attrs", "role", "parameter"),
     "'x_seq_shard' changed its attrs['role']: 'user_input' -> 'parameter'"),
    ("world size", _graph_edit(lambda d: d.update(world_size=8, mesh={"dp": 2, "tp": 2, "pp": 2})),
     "the graph changed its world_size: 4 -> 8"),
    ("mesh", _graph_edit(lambda d: d.update(mesh={"dp": 2, "tp": 2, "pp": 1})),
     "the graph changed its mesh['pp']: (absent) -> 1"),
    ("group ranks", _graph_edit(lambda d: _group(d, "1").update(ranks=[1, 3])),
     "process group '1' changed its ranks[0]: 0 -> 1"),
    ("group mesh dim", _graph_edit(lambda d: _group(d, "1").update(mesh_dim="pp")),
     "process group '1' changed its mesh_dim: 'dp' -> 'pp'"),
    ("group size", _graph_edit(lambda d: _group(d, "1").update(size=4, ranks=[0, 1, 2, 3], mesh_dim=None)),
     "process group '1' changed its size: 2 -> 4"),
    ("group added", _graph_edit(lambda d: d["process_groups"].append({"name": "9", "size": 1})),
     "process group '9' is not in the original graph"),
]


@pytest.mark.parametrize("what, change, line", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_a_changed_computation_is_not_a_reorder(mesh2d_optimized: Path, tmp_path: Path, capsys,
                                                what, change, line):
    """A reorder changes the order only: verify rejects (exit 1) every change to what is
    computed, naming the node or group, the field and both values (issue 21: a 'sum'
    replaced by 'max' in an optimized graph used to pass)."""
    doc = json.loads(mesh2d_optimized.read_text())
    change(doc)
    bad = tmp_path / "mutated.json"
    bad.write_text(json.dumps(doc))
    code = _run(["verify", str(MESH2D), str(bad)])
    out = capsys.readouterr()
    assert code == 1, (what, out)
    assert f"invariant 0 (same nodes): {line}" in out.out.splitlines(), out.out


@pytest.mark.parametrize("node, change, where", [
    ("wait_tensor", _edit("wait_tensor", "wait_of", "all_gather_into_tensor_1"),
     "node 'wait_tensor', field wait_of: wait_of names 'all_gather_into_tensor_1'"),
    ("gelu", _edit("gelu", "args", 0, {"ref": "nope"}),
     "node 'gelu', field $.nodes[{k}].args: refers to unknown node 'nope'"),
])
def test_a_permutation_whose_content_does_not_load_is_bad_input(mesh2d_optimized: Path, tmp_path: Path,
                                                                 capsys, node, change, where):
    """A file with exactly the original's nodes that the loader refuses in any order (out of
    order too) is exit 2 with the loader's one line, naming the node's place in that file,
    not a pass on kind, op and inputs alone."""
    doc = json.loads(mesh2d_optimized.read_text())
    names = [n["name"] for n in doc["nodes"]]
    i, j = names.index("all_gather_into_tensor"), names.index("wait_tensor")
    doc["nodes"][i], doc["nodes"][j] = doc["nodes"][j], doc["nodes"][i]
    change(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert _run(["verify", str(MESH2D), str(bad)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    k = [n["name"] for n in doc["nodes"]].index(node)
    assert f"bad.json, {where.format(k=k)}" in line, line


def test_optimized_mesh2d_verifies(mesh2d_optimized: Path, capsys):
    assert _run(["verify", str(MESH2D), str(mesh2d_optimized)]) == 0, capsys.readouterr()


def test_a_changed_node_in_a_file_that_does_not_run_in_order(mesh2d_optimized: Path, tmp_path: Path,
                                                              capsys):
    """A file whose own order does not load is still compared attribute by attribute."""
    doc = json.loads(mesh2d_optimized.read_text())
    names = [n["name"] for n in doc["nodes"]]
    i, j = names.index("all_gather_into_tensor"), names.index("wait_tensor")
    doc["nodes"][i], doc["nodes"][j] = doc["nodes"][j], doc["nodes"][i]
    _edit("reduce_scatter_tensor", "collective", "reduce_op", "avg")(doc)
    bad = tmp_path / "broken.json"
    bad.write_text(json.dumps(doc))
    assert _run(["verify", str(MESH2D), str(bad)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "invariant 0 (same nodes): 'reduce_scatter_tensor' changed its collective.reduce_op: " \
           "'sum' -> 'avg'" in lines
    assert any(ln.startswith("invariant 1 ") and "'wait_tensor'" in ln for ln in lines), lines


def test_only_a_changed_nodes_first_field_is_reported(graph_file: Path, tmp_path: Path, capsys):
    from commopt.invariants import verify_reordered
    from commopt.io import load_graph

    g0 = load_graph(graph_file)
    g1 = load_graph(_optimized_json(graph_file, tmp_path))
    (node,) = [n for n in g1.nodes if n.kind.label == "view" and n.args][:1]
    node.args = (*node.args[:-1], "changed")
    node.side_effect = True
    (v,) = verify_reordered(g0, g1)
    assert v.invariant == 0 and v.message.startswith(f"{node.name!r} changed its args[")
    assert v.message.endswith("-> 'changed'")


SAMPLE_FILES = sorted(str(p.relative_to(SAMPLES)) for p in SAMPLES.glob("ws*/*.*")
                      if p.suffix in (".json", ".pt2") and p.name != "MANIFEST.json")


@pytest.mark.slow
@pytest.mark.parametrize("sample", SAMPLE_FILES)
def test_optimize_output_of_every_sample_verifies(sample: str, tmp_path: Path, capsys):
    """optimize's own output on every sample (ws2, ws8; JSON and .pt2) is a pure reorder.
    (The corpus archives: tests/corpus/test_optimize.py.)"""
    src = SAMPLES / sample
    out = tmp_path / "out"
    assert _run(["optimize", str(src), "-o", str(out), "--no-timings"]) == 0, capsys.readouterr()
    assert _run(["verify", str(src), str(out / src.name)]) == 0, capsys.readouterr()


def test_optimized_archive_keeps_node_names_that_are_not_identifiers(tmp_path: Path, capsys):
    """Issue 21 class 9: FX sanitizes names that are not Python identifiers when it copies a
    node ('my-mm' -> 'my_mm', 'class' -> 'class_1'); the .pt2 writer keeps the originals, so
    optimize followed by verify works and the archive names its nodes as the input did."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ep = torch.export.load(str(SAMPLES / "ws2" / "fsdp.pt2"))
    renames = {"wait_tensor": "class", "permute": "my-mm", "mm": "mm_é"}
    for fx in ep.graph.nodes:
        if fx.name in renames:
            fx.name = renames[fx.name]
    src = tmp_path / "odd.pt2"
    torch.export.save(ep, str(src))
    out = tmp_path / "out"
    assert _run(["optimize", str(src), "-o", str(out), "--no-timings"]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert _run(["verify", str(src), str(out / "odd.pt2")]) == 0, capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        names = [fx.name for fx in torch.export.load(str(out / "odd.pt2")).graph.nodes]
    assert set(renames.values()) <= set(names)
    assert names != [fx.name for fx in ep.graph.nodes], "nothing was reordered"
    plan = json.loads((out / "buffer_plan.json").read_text())
    assert _run(["verify-plan", str(out / "odd.pt2"), str(out / "buffer_plan.json")]) == 0, \
        capsys.readouterr()
    assert plan["groups"]
