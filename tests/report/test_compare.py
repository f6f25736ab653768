"""compare_graphs (``commopt report GRAPH --reordered OTHER``) on a bucketed real-model program."""

from __future__ import annotations

import pytest

import commopt
from commopt.io import load_graph
from commopt.passes.base import BUCKETED_PIPELINE
from commopt.report.compare import compare_graphs
from tests.corpus.graphs import CORPUS

pytestmark = pytest.mark.slow


def test_bucketed_program_is_reported_in_its_own_order_with_its_own_nodes(tmp_path) -> None:
    src = CORPUS / "ws2" / "llama_fsdp.pt2"
    result = commopt.optimize(src, passes=BUCKETED_PIPELINE, output_dir=tmp_path, timings=False)
    assert result.summary.bucketing is not None  # the test bites: the program was rewritten
    original, bucketed = load_graph(src), load_graph(tmp_path / src.name)
    report = compare_graphs(original, bucketed)
    assert any("buckets recorded in the file" in n for n in report.notes)
    assert report.after is not None
    assert report.after.makespan_us == pytest.approx(result.summary.after.makespan_us)
    assert report.before.makespan_us == pytest.approx(result.summary.before.makespan_us)
    assert report.footprint is not None and report.robustness is not None
    names = {n.name for n in report.nodes}
    assert {b.collective for b in result.summary.bucketing.buckets} <= names  # the merged ones


def test_an_order_reordered_within_groups_is_bounded_over_orders_that_may_do_so(tmp_path) -> None:
    """``commopt optimize`` reorders a group's collectives where every rank provably runs the
    program in one order (SimpleFSDP here). The report of its output bounded the order with
    each group's order kept, a bound an order that does not keep it may beat: on the synthetic
    FSDP stacks the report crashed ('lower bound ... above the makespan'). Its certificate is
    now the one optimize gives."""
    from commopt.cross_group import keeps_group_order
    from commopt.report.build import match_order

    src = CORPUS / "ws2" / "llama_fsdp.pt2"
    result = commopt.optimize(src, output_dir=tmp_path, timings=False)
    original, reordered = load_graph(src), load_graph(tmp_path / src.name)
    assert not keeps_group_order(original, match_order(original, reordered))  # the test bites
    report = compare_graphs(original, reordered)
    assert any("within a process group" in n for n in report.notes)
    assert report.after.makespan_us == pytest.approx(result.summary.after.makespan_us)
    assert report.certificate.lower_bound_us == pytest.approx(result.summary.certificate.lower_bound_us)
