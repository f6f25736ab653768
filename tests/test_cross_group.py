"""The cross-group rule (commopt/cross_group.py): reorder collectives of different groups by
default exactly where every rank provably runs the program in one order."""

from __future__ import annotations

from pathlib import Path

import pytest

from commopt.cross_group import decide_cross_group
from commopt.ir.builder import GraphBuilder

CORPUS = Path(__file__).resolve().parent.parent / "sample_graphs" / "corpus"


def _two_groups(world: int, a: dict, b: dict, *, mesh: dict | None = None, p2p: bool = False,
                per_group: int = 1):
    """All-reduces of groups "a" and "b" (``per_group`` each; with ``p2p`` b's first sends)
    on one input, summed."""
    builder = GraphBuilder(world_size=world, mesh=mesh)
    builder.group("a", **a)
    builder.group("b", **b)
    x = builder.input("x", (4, 8))
    waits = []
    for i in range(per_group):
        c1 = builder.collective(f"c1_{i}" if i else "c1", "all_reduce", "a", x)
        kind = "send" if p2p and not i else "all_reduce"
        c2 = builder.collective(f"c2_{i}" if i else "c2", kind, "b", x)
        waits += [builder.wait(f"w1_{i}" if i else "w1", c1), builder.wait(f"w2_{i}" if i else "w2", c2)]
    total = waits[0]
    for j, w in enumerate(waits[1:]):
        total = builder.compute("z" if j == len(waits) - 2 else f"s{j}", "aten.add.Tensor", [total, w], (4, 8))
    builder.output([total])
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

    result = commopt.optimize(CORPUS / "ws2" / "llama_tp_fsdp_2d.pt2", timings=False,
                              reorder_within_groups=False)
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
    """True asks for it (an error without the proof or against a kept cross-group order);
    None, the default, frees a group's order exactly where True would succeed; False keeps
    it; a graph whose groups have one collective each has no order within a group."""
    from commopt.cross_group import within_groups
    from commopt.errors import OptionError

    leaves_out = _two_groups(4, {"ranks": [0, 1, 2, 3]}, {"ranks": [0, 1]}, per_group=2)
    with pytest.raises(OptionError, match="not proven: group 'b'"):
        within_groups(leaves_out, decide_cross_group(leaves_out, None))
    assert within_groups(leaves_out, decide_cross_group(leaves_out, None), None)[0] is leaves_out
    mesh = {"dp": 2, "tp": 2}
    g = _two_groups(4, {"ranks": [0, 2], "mesh_dim": "dp"}, {"ranks": [0, 1], "mesh_dim": "tp"},
                    mesh=mesh, per_group=2)
    with pytest.raises(OptionError, match="--keep-cross-group-order"):
        within_groups(g, decide_cross_group(g, False))
    assert within_groups(g, decide_cross_group(g, False), None)[0] is g
    assert within_groups(g, decide_cross_group(g, None), False)[0] is g
    for requested in (True, None):
        free, rule = within_groups(g, decide_cross_group(g, None), requested)
        assert not free.group_order and free.nodes is g.nodes and rule.allowed
        assert "one group may change their order" in rule.reason
        assert not any(g.nodes[a].collective and g.nodes[b].collective for a, b in free.ordering_edges)
    single = _two_groups(4, {"ranks": [0, 2], "mesh_dim": "dp"}, {"ranks": [0, 1], "mesh_dim": "tp"},
                         mesh=mesh)
    assert within_groups(single, decide_cross_group(single, None), True)[0] is single


def test_reordering_within_groups_from_the_command_line(tmp_path, capsys):
    """optimize on the corpus SimpleFSDP step frees each group's order by default: a faster
    order than --keep-group-order, issuing reduce_scatters out of their input order; verify
    accepts it by default and names invariant 2 with --keep-group-order; asking for it where
    one order on every rank is not proven is one line, exit 2."""
    import json

    from commopt.io import save_graph
    from tests.cli_run import run_cli

    src = CORPUS / "ws8" / "llama_fsdp.pt2"
    out = tmp_path / "out"
    assert run_cli(["optimize", str(src), "-o", str(out), "--no-timings"]) == 0
    assert "order within process groups free too" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["cross_group"]["within_groups"] is True
    assert run_cli(["optimize", str(src), "-o", str(tmp_path / "k"), "--no-timings",
                    "--keep-group-order"]) == 0
    kept = json.loads((tmp_path / "k" / "summary.json").read_text(encoding="utf-8"))
    assert kept["cross_group"]["within_groups"] is False
    assert summary["after"]["makespan_us"] < kept["after"]["makespan_us"]
    capsys.readouterr()
    assert run_cli(["verify", "--keep-group-order", str(src), str(out / src.name)]) == 1
    assert "invariant 2" in capsys.readouterr().out
    assert run_cli(["verify", str(src), str(out / src.name)]) == 0
    assert run_cli(["verify", str(src), str(tmp_path / "k" / src.name), "--keep-group-order"]) == 0
    bad = tmp_path / "leaves_out.json"
    save_graph(_two_groups(4, {"ranks": [0, 1, 2, 3]}, {"ranks": [0, 1]}, per_group=2), bad)
    capsys.readouterr()
    assert run_cli(["optimize", str(bad), "-o", str(tmp_path / "b"), "--reorder-within-groups"]) == 2
    err = capsys.readouterr().err
    assert "not proven" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert run_cli(["optimize", str(bad), "-o", str(tmp_path / "b2"), "--no-timings"]) == 0
    assert json.loads((tmp_path / "b2" / "summary.json").read_text())["cross_group"]["within_groups"] is False


def test_large_graphs_keep_each_groups_order_by_default(monkeypatch):
    """Above the node limit the default keeps each group's order (one run of the passes) and
    a note says so; asking for it still frees it."""
    import commopt
    import commopt.api

    src = CORPUS / "ws8" / "llama_fsdp.pt2"
    monkeypatch.setattr(commopt.api, "WITHIN_GROUPS_DEFAULT_MAX_NODES", 100)
    s = commopt.optimize(src, timings=False).summary
    assert not s.cross_group.within_groups
    assert any("on by default up to 100 nodes" in n for n in s.notes)
    assert commopt.optimize(src, timings=False, reorder_within_groups=True).summary.cross_group.within_groups


def test_a_free_order_at_its_lower_bound_skips_the_run_with_each_groups_order(monkeypatch):
    """The second run (each group's order kept) is skipped only where the free order is
    within the slack of its lower bound, which bounds the kept order too; both runs' pass
    timings are listed otherwise."""
    import commopt
    import commopt.api

    src = CORPUS / "ws8" / "llama_fsdp.pt2"
    both = commopt.optimize(src)
    s = both.summary
    assert s.after.makespan_us > both.pipeline.final.lower_bound_us * (1 + commopt.api.WITHIN_GROUPS_BOUND_SLACK)
    assert any(t.name.endswith("(run not kept)") for t in s.timings.passes)
    assert any("keeping each group's order 6" in n for n in s.notes)
    monkeypatch.setattr(commopt.api, "WITHIN_GROUPS_BOUND_SLACK",
                        s.after.makespan_us / both.pipeline.final.lower_bound_us)
    once = commopt.optimize(src).summary
    assert once.after.makespan_us == s.after.makespan_us
    assert not any(t.name.endswith("(run not kept)") for t in once.timings.passes)
    assert any("of the lower bound, so keeping each group's order (not run)" in n for n in once.notes)


def test_a_kept_group_order_is_certified_against_every_order_the_rule_allows():
    """When the run keeping each group's order wins, its certificate still bounds every
    order the rule allows (the graph without group order), not only those keeping it: on
    the corpus bf16 SimpleFSDP step that bound is lower, so a gap measured against the kept
    order's bound alone would claim more than the default can prove. No corpus graph's
    kept run wins any more (the demo graph's does, at 20k nodes), so the free run here is
    the input order unchanged: the run keeping each group's order then wins."""
    import commopt
    from commopt.api import _group_order_kept
    from commopt.estimators import EstimatorOptions, resolve
    from commopt.io import load_graph
    from commopt.passes.base import DEFAULT_PIPELINE, PassContext
    from commopt.passes.manager import PassManager
    from commopt.passes.registry import get_registry
    from commopt.sim import simulate

    path = CORPUS / "ws2" / "llama_fsdp_bf16.pt2"
    g = load_graph(path)
    durations = resolve(options=EstimatorOptions()).durations(g)  # optimize's default estimator
    free = g.without_group_order()

    def context(graph):
        return PassContext.for_graph(graph, durations, allow_cross_group_reorder=True)

    unchanged = PassManager([]).run(free, free.original_order, context(free))
    manager = PassManager([get_registry().create(n) for n in DEFAULT_PIPELINE])
    notes: list[str] = []
    chosen, result, other = _group_order_kept(free, unchanged, manager, context, notes)
    assert chosen.group_order and other is unchanged
    assert any("keeping each group's order finished first" in n for n in notes)
    free_lb = simulate(free, g.original_order, durations).lower_bound_us
    strict_lb = simulate(g, g.original_order, durations).lower_bound_us
    assert free_lb < strict_lb
    assert result.final.lower_bound_us == pytest.approx(free_lb)
    assert result.final.makespan_us < unchanged.final.makespan_us
    kept = commopt.optimize(path, timings=False, reorder_within_groups=False)
    assert kept.summary.certificate.lower_bound_us == pytest.approx(strict_lb)



def test_keeps_group_order_tells_a_swap_within_a_group_from_one_across_groups():
    from commopt.cross_group import keeps_group_order

    b = GraphBuilder(world_size=2)
    b.group("a", size=2)
    b.group("b", size=2)
    x = b.input("x", (4,))
    colls = {name: b.collective(name, "all_reduce", group, x)
             for name, group in (("c1", "a"), ("c2", "b"), ("c3", "a"))}
    waits = [b.wait(f"w_{name}", c) for name, c in colls.items()]
    b.output(waits)
    g = b.build()
    base = list(g.original_order)

    def swapped(u: str, v: str) -> list[int]:
        order = list(base)
        pu, pv = order.index(colls[u]), order.index(colls[v])
        order[pu], order[pv] = order[pv], order[pu]
        return order

    assert keeps_group_order(g, base)
    assert keeps_group_order(g, swapped("c1", "c2"))  # across groups only
    assert not keeps_group_order(g, swapped("c1", "c3"))  # group a's two
