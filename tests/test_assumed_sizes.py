"""The summary states what was assumed for data-dependent sizes and sweeps them (corpus MoE)."""

from __future__ import annotations

import json

import pytest

import commopt
from tests.cli_run import run_cli
from tests.corpus.graphs import CORPUS

QWEN8 = CORPUS / "ws8" / "qwen3_moe_ep.pt2"


@pytest.fixture(scope="module")
def large():
    """qwen3_moe_ep at world 8 with large splits: the all_to_alls matter to the makespan."""
    return commopt.optimize(QWEN8, assume=["*=2048"], timings=False)


def test_summary_states_the_assumption_next_to_the_numbers(large):
    dd = large.summary.data_dependent
    assert dd is not None and len(dd.sizes) == 32
    assert {(s.assumed, s.basis) for s in dd.sizes} == {(2048, "given-default")}
    assert large.summary.notes[0] == dd.statement
    assert "32 size(s) are data-dependent" in dd.statement and "= 2048 (given-default)" in dd.statement
    assert large.summary.notes[1].startswith("at 0.5x..2x the assumed sizes")


def test_the_sweep_simulates_both_orders_at_each_scale(large):
    sc = {s.scale: s for s in large.summary.data_dependent.scenarios}
    assert sorted(sc) == [0.5, 1.0, 2.0]
    assert sc[1.0].after == large.summary.after and sc[1.0].before == large.summary.before
    mk = [sc[k].after.makespan_us for k in (0.5, 1.0, 2.0)]
    assert mk[0] < mk[1] < mk[2]  # more tokens, longer step
    # the order chosen for the assumed sizes hides less of twice their communication
    assert sc[2.0].after.exposed_comm_us > sc[1.0].after.exposed_comm_us


def test_static_graphs_have_no_entry():
    result = commopt.optimize(CORPUS / "ws8" / "mixtral_ep.pt2", timings=False)
    assert result.summary.data_dependent is None


def test_cli_assume_reaches_summary_and_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert run_cli(["-q", "optimize", str(CORPUS / "ws2" / "qwen3_moe_ep.pt2"), "-o", str(out),
                    "--assume", "u2=40", "--assume", "*=24", "--no-timings"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    sizes = {s["symbol"]: s for s in summary["data_dependent"]["sizes"]}
    assert (sizes["u2"]["assumed"], sizes["u2"]["basis"]) == (40, "given")
    assert (sizes["u0"]["assumed"], sizes["u0"]["basis"]) == (24, "given-default")
    html = (out / "report.html").read_text()
    assert "Data-dependent sizes (assumed)" in html and "overlap (assumed sizes)" in html


def test_cli_bad_assume_is_one_line_exit_2(tmp_path, capsys):
    code = run_cli(["optimize", str(CORPUS / "ws2" / "qwen3_moe_ep.pt2"), "-o", str(tmp_path / "o"),
                    "--assume", "u99=3"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "u99" in err and "Traceback" not in err
