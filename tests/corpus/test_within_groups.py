"""``--reorder-within-groups`` on the 2-D corpus graphs (FSDP x TP, world 4), run for real:
the orders reorder collectives of one group, ``verify`` accepts them only with the flag, and
under torchrun on gloo the written archive and the generated runner (``--verify``) compute
bitwise what the original computes."""

from __future__ import annotations

import pytest
import torch

import commopt
from commopt.bucketing.verify import verify_graph
from commopt.cross_group import decide_cross_group, within_groups
from commopt.invariants import check_order
from commopt.io import load_graph
from tests.codegen.conftest import launch_runners
from tests.corpus.graphs import CorpusGraph, runnable

pytestmark = pytest.mark.slow

CASES = [g for g in runnable(4) if g.name in ("llama_tp_fsdp_2d", "llama_tp_sp_2d")]
_RUN: dict[str, object] = {}


def _launch(tmp_path_factory: pytest.TempPathFactory):
    if not _RUN:
        work = tmp_path_factory.mktemp("within_groups")
        cases = []
        for g in CASES:
            out = tmp_path_factory.mktemp(f"opt_within_{g.id}")
            _RUN[g.id] = commopt.optimize(g.path, output_dir=out, reorder_within_groups=True, timings=False)
            _RUN[f"{g.id}/out"] = out
            (runner,) = out.glob("run_*.py")
            cases.append((g.id, str(g.path), str(runner), str(out / g.path.name)))
        _RUN["status"] = launch_runners(cases, 4, work)
        _RUN["work"] = work
    return _RUN["work"], _RUN["status"]


def test_the_two_d_graphs_are_listed():
    assert sorted(g.name for g in CASES) == ["llama_tp_fsdp_2d", "llama_tp_sp_2d"]


@pytest.mark.parametrize("graph", [pytest.param(g, id=g.id) for g in CASES])
def test_collectives_of_one_group_are_reordered_and_verify_with_the_flag(graph: CorpusGraph,
                                                                        tmp_path_factory) -> None:
    _launch(tmp_path_factory)
    result = _RUN[graph.id]
    assert result.summary.cross_group.within_groups
    strict = load_graph(graph.path)
    order = list(result.order)
    assert any(v.invariant == 2 for v in check_order(strict, order, allow_cross_group_reorder=True))
    written = load_graph(_RUN[f"{graph.id}/out"] / graph.path.name)
    assert any(v.invariant == 2 for v in verify_graph(strict, written))
    free, _ = within_groups(strict, decide_cross_group(strict, None))
    assert verify_graph(free, written) == []
    default = commopt.optimize(graph.path, timings=False).summary
    assert result.summary.after.makespan_us < default.after.makespan_us


@pytest.mark.parametrize("graph", [pytest.param(g, id=g.id) for g in CASES])
def test_archive_and_runner_compute_bitwise_the_original(graph: CorpusGraph, tmp_path_factory) -> None:
    work, status = _launch(tmp_path_factory)
    assert status[graph.id] == ["ok"] * 4, status[graph.id]
    for rank in range(4):
        eager = torch.load(work / f"{graph.id}_eager{rank}.pt")
        for got in (torch.load(work / f"{graph.id}_reordered{rank}.pt"),
                    torch.load(work / f"{graph.id}_out{rank}.pt")):
            assert len(got) == len(eager)
            for a, b in zip(got, eager, strict=True):
                assert torch.equal(a, b) if isinstance(b, torch.Tensor) else a == b
