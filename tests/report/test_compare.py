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
