"""The cross-group rule (commopt/cross_group.py): reorder collectives of different groups by
default exactly where every rank provably runs the program in one order."""

from __future__ import annotations

from pathlib import Path

import pytest

from commopt.cross_group import decide_cross_group
from commopt.ir.builder import GraphBuilder

CORPUS = Path(__file__).resolve().parent.parent / "sample_graphs" / "corpus"


def _two_groups(world: int, a: dict, b: dict, *, mesh: dict | None = None, p2p: bool = False):
    builder = GraphBuilder(world_size=world, mesh=mesh)
    builder.group("a", **a)
    builder.group("b", **b)
    x = builder.input("x", (4, 8))
    c1 = builder.collective("c1", "all_reduce", "a", x)
    c2 = builder.collective("c2", "send" if p2p else "all_reduce", "b", x)
    w1, w2 = builder.wait("w1", c1), builder.wait("w2", c2)
    builder.output([builder.compute("z", "aten.add.Tensor", [w1, w2], (4, 8))])
    return builder.build()


@pytest.mark.parametrize("path", ["ws2/llama_tp_fsdp_2d.pt2", "ws2/llama_tp_sp_2d.pt2",
                                  "ws8/llama_tp_fsdp_2d.pt2", "ws8/llama_tp_sp_2d.pt2"])
def test_corpus_2d_meshes_reorder_across_groups_by_default(path: str):
    from commopt.io import load_graph

    rule = decide_cross_group(load_graph(CORPUS / path), None, estimator="analytical")
    assert (rule.allowed, rule.rule) == (True, "spmd"), rule.reason


def test_a_single_group_has_nothing_to_reorder():
    from commopt.io import load_graph

    rule = decide_cross_group(load_graph(CORPUS / "ws8" / "mixtral_ep.pt2"), None)
    assert (rule.allowed, rule.rule) == (False, "one-group")


def test_mesh_slices_are_spmd():
    mesh = {"dp": 2, "tp": 2}
    g = _two_groups(4, {"ranks": [0, 2], "mesh_dim": "dp"}, {"ranks": [0, 1], "mesh_dim": "tp"}, mesh=mesh)
    assert decide_cross_group(g, None).allowed


def test_a_group_that_leaves_ranks_out_keeps_the_order():
    # ranks 2 and 3 are in neither group's slice: they run another program
    g = _two_groups(4, {"ranks": [0, 1, 2, 3]}, {"ranks": [0, 1]})
    rule = decide_cross_group(g, None)
    assert (rule.allowed, rule.rule) == (False, "not-proven")
    assert "group 'b' (2 of 4 ranks)" in rule.reason


def test_a_mesh_dim_that_does_not_match_the_ranks_keeps_the_order():
    mesh = {"dp": 2, "tp": 2}
    g = _two_groups(4, {"ranks": [0, 2], "mesh_dim": "dp"}, {"ranks": [0, 3], "mesh_dim": "tp"}, mesh=mesh)
    assert decide_cross_group(g, None).rule == "not-proven"


def test_unknown_world_size_keeps_the_order():
    g = _two_groups(None, {"size": 2}, {"size": 2})
    rule = decide_cross_group(g, None)
    assert rule.rule == "not-proven" and "world size is unknown" in rule.reason


def test_point_to_point_keeps_the_order():
    g = _two_groups(2, {"ranks": [0, 1]}, {"ranks": [0, 1]}, p2p=True)
    rule = decide_cross_group(g, None)
    assert rule.rule == "not-proven" and "point-to-point" in rule.reason


def test_measured_durations_keep_the_order():
    g = _two_groups(2, {"ranks": [0, 1]}, {"ranks": [0, 1]})
    assert decide_cross_group(g, None, estimator="analytical").allowed
    rule = decide_cross_group(g, None, estimator="benchmark,analytical")
    assert rule.rule == "not-proven" and "measured" in rule.reason


def test_flags_win_and_say_what_they_override():
    g = _two_groups(4, {"ranks": [0, 1, 2, 3]}, {"ranks": [0, 1]})
    forced = decide_cross_group(g, True)
    assert (forced.allowed, forced.rule) == (True, "flag") and "although group 'b'" in forced.reason
    kept = decide_cross_group(_two_groups(2, {"ranks": [0, 1]}, {"ranks": [0, 1]}), False)
    assert (kept.allowed, kept.rule) == (False, "flag")


def test_optimize_reports_the_rule_and_reorders_across_groups():
    """On the 2-D corpus graph the default reorders collectives of different groups (the order
    breaks the kept-global-order check) and the summary says which rule applied."""
    import commopt
    from commopt.bucketing.verify import expanded_order
    from commopt.invariants import check_order

    result = commopt.optimize(CORPUS / "ws2" / "llama_tp_fsdp_2d.pt2", timings=False)
    s = result.summary
    assert s.allow_cross_group_reorder and s.cross_group.rule == "spmd"
    source = result.before_graph
    order = expanded_order(source, result.graph, result.order)  # the loaded program's nodes
    assert check_order(source, order, allow_cross_group_reorder=True) == []
    assert any(v.invariant == 2 for v in check_order(source, order))
    kept = commopt.optimize(CORPUS / "ws2" / "llama_tp_fsdp_2d.pt2", timings=False,
                            allow_cross_group_reorder=False)
    assert kept.summary.cross_group.rule == "flag" and not kept.summary.allow_cross_group_reorder
    assert check_order(kept.graph, kept.order) == []
    assert s.after.makespan_us < kept.summary.after.makespan_us


def test_reordering_within_groups_needs_the_same_proof_and_no_kept_order():
    from commopt.cross_group import within_groups
    from commopt.errors import OptionError

    leaves_out = _two_groups(4, {"ranks": [0, 1, 2, 3]}, {"ranks": [0, 1]})
    with pytest.raises(OptionError, match="not proven: group 'b'"):
        within_groups(leaves_out, decide_cross_group(leaves_out, None))
    mesh = {"dp": 2, "tp": 2}
    g = _two_groups(4, {"ranks": [0, 2], "mesh_dim": "dp"}, {"ranks": [0, 1], "mesh_dim": "tp"}, mesh=mesh)
    with pytest.raises(OptionError, match="--keep-cross-group-order"):
        within_groups(g, decide_cross_group(g, False))
    free, rule = within_groups(g, decide_cross_group(g, None))
    assert not free.group_order and free.nodes is g.nodes and rule.allowed
    assert not any(g.nodes[a].collective and g.nodes[b].collective for a, b in free.ordering_edges)


def test_reordering_within_groups_from_the_command_line(tmp_path, capsys):
    """optimize --reorder-within-groups on the corpus SimpleFSDP step: a faster order that
    issues reduce_scatters out of their input order; verify needs the same flag; a graph
    where one order on every rank is not proven is one line, exit 2."""
    import json

    from commopt.io import save_graph
    from tests.cli_run import run_cli

    src = CORPUS / "ws8" / "llama_fsdp.pt2"
    out = tmp_path / "out"
    assert run_cli(["optimize", str(src), "-o", str(out), "--reorder-within-groups", "--no-timings"]) == 0
    assert "order within process groups reordered too" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["cross_group"]["within_groups"] is True
    assert run_cli(["optimize", str(src), "-o", str(tmp_path / "d"), "--no-timings"]) == 0
    default = json.loads((tmp_path / "d" / "summary.json").read_text(encoding="utf-8"))
    assert summary["after"]["makespan_us"] < default["after"]["makespan_us"]
    capsys.readouterr()
    assert run_cli(["verify", str(src), str(out / src.name)]) == 1
    assert "invariant 2" in capsys.readouterr().out
    assert run_cli(["verify", "--reorder-within-groups", str(src), str(out / src.name)]) == 0
    bad = tmp_path / "leaves_out.json"
    save_graph(_two_groups(4, {"ranks": [0, 1, 2, 3]}, {"ranks": [0, 1]}), bad)
    capsys.readouterr()
    assert run_cli(["optimize", str(bad), "-o", str(tmp_path / "b"), "--reorder-within-groups"]) == 2
    err = capsys.readouterr().err
    assert "not proven" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
