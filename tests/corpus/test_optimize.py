"""Every corpus graph: `commopt.optimize` (default options) succeeds and writes its outputs, the
reordered archive keeps every invariant (`commopt verify`), the buffer plan is valid for it
(`commopt verify-plan`)."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import run_cli
from tests.corpus.conftest import optimized_dir
from tests.corpus.graphs import corpus_graphs

GRAPHS = corpus_graphs()


def test_corpus_covers_every_parallelism() -> None:
    names = {g.name for g in GRAPHS}
    assert {"llama_tp", "llama_sp", "llama_tp_sp_2d", "llama_fsdp", "llama_fsdp_bf16",
            "llama_tp_fsdp_2d", "llama_tp_L8", "llama_tp_infer"} <= names
    assert {g.world_size for g in GRAPHS} == {2, 4, 8}


@pytest.mark.parametrize("graph", GRAPHS, ids=[g.id for g in GRAPHS])
def test_optimize_writes_outputs_that_verify(graph, tmp_path_factory, capsys) -> None:
    out = optimized_dir(graph, tmp_path_factory)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["after"]["makespan_us"] <= summary["before"]["makespan_us"], graph.id
    reordered = out / graph.path.name
    assert reordered.exists() and (out / "buffer_plan.json").exists()
    assert list(out.glob("run_*.py")), graph.id
    assert run_cli(["verify", str(graph.path), str(reordered)]) == 0, capsys.readouterr()
    assert run_cli(["verify-plan", str(reordered), str(out / "buffer_plan.json")]) == 0, \
        capsys.readouterr()


MULTI_GROUP = [g for g in GRAPHS if g.name.endswith("_2d")]


@pytest.mark.parametrize("graph", MULTI_GROUP, ids=[g.id for g in MULTI_GROUP])
def test_multi_group_graphs_are_reordered_across_and_within_groups(graph, tmp_path_factory) -> None:
    """The default reorders collectives of different groups on the 2-D corpus graphs and, as
    every rank provably runs them in one order, collectives of one group too (so the gloo
    equivalence and runner --verify tests of the ws4 ones run such programs); the order keeps
    every other invariant and the summary names the rule."""
    from commopt.bucketing.verify import expanded_order
    from commopt.invariants import check_order
    from commopt.io import load_graph

    out = optimized_dir(graph, tmp_path_factory)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["cross_group"]["rule"] == "spmd" and summary["allow_cross_group_reorder"]
    assert summary["cross_group"]["within_groups"], summary["notes"]
    original = load_graph(graph.path)
    written = load_graph(out / graph.path.name)
    order = expanded_order(original, written)  # a bucketed program: its members where it merged them
    assert check_order(original.without_group_order(), order, allow_cross_group_reorder=True) == []
    within = [v for v in check_order(original, order, allow_cross_group_reorder=True) if v.invariant == 2]
    assert within, f"{graph.id}: no collective changed its order within its group"
    crossed = [v for v in check_order(original, order) if v.invariant == 2]
    assert len(crossed) > len(within), f"{graph.id}: no collective changed its order across groups"
