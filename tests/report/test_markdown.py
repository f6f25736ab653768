"""The Markdown summary and the GitHub step summary."""

from __future__ import annotations

from commopt.report.build import build_report
from commopt.report.markdown import append_step_summary, render_markdown, write_markdown
from tests.report.samples import durations, hand_sim, naive_order, naive_sim, two_groups


def _report():
    g = two_groups()
    return build_report(g, naive_order(g), g.original_order, durations(g),
                        estimator_name="table", before_sim=naive_sim(g), after_sim=hand_sim(g))


def test_summary_table_then_groups_then_exposed():
    text = render_markdown(_report())
    lines = text.splitlines()
    head = lines.index("| metric | before | after | change |")
    groups = lines.index("### Communication by process group")
    top = lines.index("### Most exposed collectives (after)")
    assert head < groups < top
    assert "| makespan | 170.0 us | 85.0 us | -50.0% |" in lines
    assert "| overlap | 0.0% | 89.5% | +89.5 pt |" in lines
    assert any(line.startswith("| 1 | ag_b | group dp (2 ranks) |") and "queued" in line
               for line in lines)


def test_pipes_in_names_do_not_break_tables():
    r = _report()
    r.notes.append("a | b")
    r.estimator = "x|y"
    text = render_markdown(r)
    assert "x\\|y" in text and "a \\| b" in text


def test_step_summary_appends(tmp_path):
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    assert append_step_summary("## mine\n", env={"GITHUB_STEP_SUMMARY": str(target)}) == target
    assert target.read_text() == "earlier step\n## mine\n"
    assert append_step_summary("x", env={}) is None


def test_write_markdown(tmp_path):
    write_markdown(_report(), tmp_path / "r.md")
    assert (tmp_path / "r.md").read_text().startswith("## commopt overlap report: `two_groups`")
