"""Process-group ranks: recorded at export, read back, supplied by file or mesh, inferred."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commopt.errors import GraphError, OptionError
from commopt.io import load_graph
from commopt.io.groups import (
    mesh_slice,
    mesh_slices,
    parse_mesh,
    proven_group_size,
    record_process_groups,
    require_known_group_sizes,
    resolve_groups,
    sidecar_path,
)
from commopt.ir.graph import ProcessGroup

WS8 = Path(__file__).resolve().parents[2] / "sample_graphs" / "ws8"


def _without_record(src: Path, dst: Path) -> Path:
    """A copy of ``src`` saved by plain torch.export.save: no commopt groups record."""
    import torch

    torch.export.save(torch.export.load(str(src)), str(dst))
    return dst


def test_parse_mesh_keeps_dimension_order():
    assert list(parse_mesh("dp=2, tp=4").items()) == [("dp", 2), ("tp", 4)]
    for bad in ("dp", "dp=0", "dp=2,dp=2", "2=dp", "dp=x"):
        with pytest.raises(OptionError):
            parse_mesh(bad)


def test_mesh_slices_are_row_major():
    mesh = {"dp": 2, "tp": 4}
    assert mesh_slice(mesh, "tp", 0) == [0, 1, 2, 3]
    assert mesh_slice(mesh, "dp", 0) == [0, 4]
    assert mesh_slice(mesh, "dp", 5) == [1, 5]
    assert mesh_slices(mesh, "tp") == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_record_process_groups_names_mesh_dimensions():
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    try:
        mesh = init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
        doc = record_process_groups(mesh)
        dp_name, tp_name = mesh.get_group("dp").group_name, mesh.get_group("tp").group_name
    finally:
        dist.destroy_process_group()
    by_name = {g.name: g for g in doc.groups}
    assert (doc.world_size, doc.rank, doc.mesh) == (8, 0, {"dp": 2, "tp": 4})
    assert by_name["0"].ranks == list(range(8)) and by_name["0"].mesh_dim is None
    assert (by_name[dp_name].ranks, by_name[dp_name].mesh_dim) == ([0, 4], "dp")
    assert (by_name[tp_name].ranks, by_name[tp_name].mesh_dim) == ([0, 1, 2, 3], "tp")


def test_archive_record_is_read_back():
    graph = load_graph(WS8 / "mesh2d.pt2")
    assert graph.world_size == 8 and graph.mesh == {"dp": 2, "tp": 4}
    assert {(g.name, g.ranks, g.mesh_dim) for g in graph.groups.values()} == {
        ("1", (0, 4), "dp"), ("5", (0, 1, 2, 3), "tp")}
    assert "load_warnings" not in graph.meta


def test_without_record_the_warning_names_the_groups_and_the_remedy(tmp_path):
    graph = load_graph(_without_record(WS8 / "mesh2d.pt2", tmp_path / "m.pt2"))
    assert {g.name: g.size for g in graph.groups.values()} == {"1": 2, "5": 4}
    assert all(g.ranks is None for g in graph.groups.values())
    (warning,) = graph.meta["load_warnings"]
    assert "'1', '5'" in warning and "--groups" in warning and "--mesh" in warning


def test_mesh_option_matches_groups_to_dimensions_by_size(tmp_path):
    graph = load_graph(_without_record(WS8 / "mesh2d.pt2", tmp_path / "m.pt2"), mesh="dp=2,tp=4")
    assert graph.groups["1"].ranks == (0, 4) and graph.groups["1"].mesh_dim == "dp"
    assert graph.groups["5"].ranks == (0, 1, 2, 3) and graph.groups["5"].mesh_dim == "tp"
    assert graph.world_size == 8 and "load_warnings" not in graph.meta


def test_mesh_with_two_dimensions_of_one_size_is_ambiguous(tmp_path):
    graph = load_graph(_without_record(WS8 / "mesh2d.pt2", tmp_path / "m.pt2"), mesh="dp=2,pp=2,tp=4")
    assert graph.groups["1"].ranks is None and graph.groups["5"].mesh_dim == "tp"
    text = " ".join(graph.meta["load_warnings"])
    assert "'1' (size 2: mesh dims dp, pp)" in text


def test_world_sized_group_is_inferred_once_the_world_size_is_known(tmp_path):
    stripped = _without_record(WS8 / "fsdp.pt2", tmp_path / "f.pt2")
    assert load_graph(stripped).groups["0"].ranks is None
    assert load_graph(stripped, mesh="dp=8").groups["0"].ranks == tuple(range(8))


def test_group_without_size_in_its_ops_is_unknown_not_guessed(tmp_path):
    graph = load_graph(_without_record(WS8 / "llama_tp.pt2", tmp_path / "l.pt2"))
    assert graph.meta["unknown_group_sizes"] == ["0"]
    text = " ".join(graph.meta["load_warnings"])
    assert "size of process group(s) '0' unknown" in text and "--world-size N" in text
    with pytest.raises(GraphError) as exc:
        require_known_group_sizes(graph)
    message = str(exc.value)
    assert "\n" not in message and "'0'" in message
    for remedy in ("--world-size", "--mesh", "--groups", "save_with_groups"):
        assert remedy in message
    with pytest.raises(GraphError, match="'0'"):
        proven_group_size(graph, "0")


def test_world_size_makes_the_default_group_the_world(tmp_path):
    stripped = _without_record(WS8 / "llama_tp.pt2", tmp_path / "l.pt2")
    for graph in (load_graph(stripped, world_size=8), load_graph(stripped, mesh="tp=8")):
        assert graph.groups["0"].size == 8 and graph.groups["0"].ranks == tuple(range(8))
        assert graph.world_size == 8 and "unknown_group_sizes" not in graph.meta
        require_known_group_sizes(graph)


def test_world_size_must_agree_with_the_record_and_the_ops(tmp_path):
    with pytest.raises(OptionError, match="--world-size 4 contradicts the world size 8"):
        load_graph(WS8 / "llama_tp.pt2", world_size=4)
    # fsdp's all_gathers prove group '0' has 8 ranks: it cannot be the world of 4
    stripped = _without_record(WS8 / "fsdp.pt2", tmp_path / "f.pt2")
    with pytest.raises(OptionError, match="group size 8 and the world size is 4"):
        load_graph(stripped, world_size=4)


def test_a_known_group_size_is_never_lent_to_an_unknown_group():
    groups = {"1": ProcessGroup("1", 2), "5": ProcessGroup("5", 1)}
    out, world, _, warnings, unknown = resolve_groups(groups, sizes_known={"1"})
    assert unknown == ["5"] and out["1"].size == 2 and world is None
    assert any("size of process group(s) '5' unknown" in w for w in warnings)


def test_world_size_applies_to_json_graphs_and_graph_objects():
    graph = load_graph(WS8 / "tp.json")
    assert load_graph(graph, world_size=8).world_size == 8
    with pytest.raises(OptionError, match="--world-size"):
        load_graph(WS8 / "tp.json", world_size=2)


def test_live_process_groups_give_an_in_memory_program_its_sizes():
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    ep = torch.export.load(str(WS8 / "llama_tp.pt2"))
    assert load_graph(ep).meta["unknown_group_sizes"] == ["0"]  # no job: nothing proves it
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    try:
        graph = load_graph(ep)
    finally:
        dist.destroy_process_group()
    assert graph.groups["0"].size == 8 and graph.groups["0"].ranks == tuple(range(8))
    assert "unknown_group_sizes" not in graph.meta and graph.world_size == 8


def test_sidecar_and_groups_file_supply_ranks_later_one_wins(tmp_path):
    stripped = _without_record(WS8 / "tp.pt2", tmp_path / "t.pt2")
    sidecar_path(stripped).write_text(json.dumps(
        {"format": "commopt-groups", "version": 1, "world_size": 8,
         "groups": [{"name": "0", "ranks": list(range(8))}]}))
    graph = load_graph(stripped)
    assert graph.groups["0"].ranks == tuple(range(8)) and graph.world_size == 8
    assert "load_warnings" not in graph.meta
    override = tmp_path / "groups.json"
    override.write_text(json.dumps({"groups": [{"name": "0", "ranks": [0, 2, 4, 6], "mesh_dim": "dp"}]}))
    graph = load_graph(stripped, groups=str(override))
    assert graph.groups["0"].ranks == (0, 2, 4, 6) and graph.groups["0"].size == 4


def test_groups_file_applies_to_json_graphs_too(tmp_path):
    override = tmp_path / "groups.json"
    override.write_text(json.dumps({"groups": [{"name": "5", "ranks": [4, 5, 6, 7], "mesh_dim": "tp"}]}))
    graph = load_graph(WS8 / "mesh2d.json", groups=str(override))
    assert graph.groups["5"].ranks == (4, 5, 6, 7) and graph.groups["1"].ranks == (0, 4)


def test_inspect_lists_the_warning(tmp_path, capsys):
    from commopt.cli.main import main

    stripped = _without_record(WS8 / "mesh2d.pt2", tmp_path / "m.pt2")
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(stripped), "--format", "json"])
    assert exc.value.code == 0
    report = json.loads(capsys.readouterr().out)
    assert any("ranks of process group(s) '1', '5' unknown" in w for w in report["warnings"])
