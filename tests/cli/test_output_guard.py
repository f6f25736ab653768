"""The shared output guard: no command writes over one of its inputs or over another of its
outputs (issue 21, class 1). Each refusal is one line naming both files, exit code 2, and the
input is left byte for byte and untouched (same mtime); nothing else is written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from commopt.errors import OutputError
from commopt.outputs import guard_outputs
from tests.cli_run import run_cli as _run


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samples_dir: Path) -> Path:
    """A scratch directory (the current one) holding g.json, a copy of the ws2 tp sample."""
    monkeypatch.chdir(tmp_path)  # no commopt.toml from the repository applies
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    shutil.copy(samples_dir / "ws2" / "tp.json", tmp_path / "g.json")
    return tmp_path


def _stamp(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def _refused(argv: list[str], victim: Path, capsys, *names: str) -> str:
    """Run ``argv``; assert exit 2 with one error line naming ``names``, ``victim`` untouched and
    no other file created in its directory. Returns the line."""
    before = _stamp(victim)
    listing = sorted(p.name for p in victim.parent.iterdir())
    assert _run(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("commopt: error:"), err
    for name in names:
        assert name in err[0], (name, err[0])
    assert _stamp(victim) == before
    assert sorted(p.name for p in victim.parent.iterdir()) == listing
    return err[0]


@pytest.mark.parametrize("argv, field", [
    (["plan", "g.json", "-o", "g.json"], "--output"),
    (["codegen", "g.json", "-o", "g.json"], "--output"),
    (["report", "g.json", "--markdown", "g.json"], "--markdown"),
    (["report", "g.json", "--trace", "g.json"], "--trace"),
    (["report", "g.json", "--html", "g.json"], "--html"),
    (["check", "g.json", "--markdown", "g.json"], "--markdown"),
    (["convert", "g.json", "g.json"], "DEST"),
    (["optimize", "g.json", "-o", "."], "--output"),
])
def test_writing_over_the_graph_is_refused(work: Path, capsys, argv, field):
    line = _refused(argv, work / "g.json", capsys, "g.json", field)
    assert "would overwrite the input" in line and ("GRAPH" in line or "SOURCE" in line)


@pytest.mark.parametrize("argv, victim, label", [
    (["plan", "g.json", "--groups", "groups.json", "-o", "groups.json"], "groups.json", "--groups"),
    (["codegen", "g.json", "--plan", "p.json", "-o", "p.json"], "p.json", "--plan"),
    (["check", "g.json", "--baseline", "b.json", "--markdown", "b.json"], "b.json", "--baseline"),
    (["check", "g.json", "--table", "t.json", "--markdown", "t.json"], "t.json", "--table"),
    (["report", "g.json", "--profile", "prof.json", "--html", "prof.json"], "prof.json", "--profile"),
    (["report", "g.json", "--reordered", "r.json", "--trace", "r.json"], "r.json", "--reordered"),
    (["calibrate", "trace.json", "-o", "trace.json"], "trace.json", "TRACE"),
])
def test_writing_over_any_other_input_is_refused(work: Path, capsys, argv, victim, label):
    (work / victim).write_text('{"made by": "the user"}\n')
    _refused(argv, work / victim, capsys, victim, label, "would overwrite the input")


def test_the_configuration_file_is_an_input(work: Path, capsys):
    (work / "commopt.toml").write_text("align = 1024\n")
    _refused(["plan", "g.json", "-o", "commopt.toml"], work / "commopt.toml", capsys,
             "configuration file", "commopt.toml")


def test_github_step_summary_may_not_be_an_input(work: Path, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(work / "g.json"))
    _refused(["check", "g.json"], work / "g.json", capsys, "$GITHUB_STEP_SUMMARY", "GRAPH")


@pytest.mark.parametrize("link", ["symlink", "hardlink", "dotted"])
def test_the_same_file_by_another_name_is_refused(work: Path, capsys, link):
    target = work / "alias.json"
    if link == "symlink":
        target.symlink_to(work / "g.json")
    elif link == "hardlink":
        os.link(work / "g.json", target)
    else:
        (work / "sub").mkdir()
        target = Path("sub/../g.json")
    _refused(["plan", "g.json", "-o", str(target)], work / "g.json", capsys, "would overwrite the input")


@pytest.mark.parametrize("argv, names", [
    (["report", "g.json", "--html", "x.out", "--trace", "x.out"], ["--trace", "--html output"]),
    (["report", "g.json", "--markdown", "x.out", "--html", "./x.out"], ["--markdown", "--html output"]),
])
def test_two_outputs_on_one_file_are_refused(work: Path, capsys, argv, names):
    line = _refused(argv, work / "g.json", capsys, *names)
    assert not (work / "x.out").exists() and "give each output its own path" in line


def test_optimize_refuses_an_output_set_over_its_estimator_inputs(work: Path, capsys):
    out = work / "out"
    out.mkdir()
    (out / "summary.json").write_text("{}\n")  # an (empty) duration table that is also an output name
    _refused(["optimize", "g.json", "--table", str(out / "summary.json"), "-o", str(out)],
             out / "summary.json", capsys, "--table", "summary.json")


def test_distinct_outputs_and_inputs_pass_the_guard(work: Path):
    (work / "a.json").write_text("{}")
    guard_outputs([("--html", work / "r.html"), ("--trace", work / "r.json")],
                  [("GRAPH", work / "g.json"), ("--table", work / "a.json"), ("--profile", None)])


def test_guard_names_both_files_and_the_option(work: Path):
    with pytest.raises(OutputError) as info:
        guard_outputs([("--output", work / "g.json")], [("GRAPH", "g.json")])
    message = str(info.value)
    assert message.startswith(f"{work / 'g.json'}, field --output: would overwrite the input GRAPH (g.json)")


def test_optimize_into_a_directory_with_a_users_file_needs_force(work: Path, capsys):
    out = work / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the user's own file")
    line = _refused(["optimize", "g.json", "-o", "out"], out / "notes.txt", capsys, "notes.txt", "--force")
    assert "did not write" in line
    assert _run(["-q", "optimize", "g.json", "-o", "out", "--force"]) == 0
    assert (out / "notes.txt").read_text() == "the user's own file" and (out / "manifest.json").exists()
    # commopt's own set (and the file it was told to leave) is no reason to refuse a rerun
    assert _run(["-q", "optimize", "g.json", "-o", "out", "--force"]) == 0
