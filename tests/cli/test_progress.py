"""Long work shows its stages on a terminal and nothing when stderr is piped (issue 18): the
CLI draws the stages library code reports (commopt.progress) with rich on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_run import run_cli as _run
from tests.estimators.traces import new_format_trace, write


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    d = tmp_path / "traces"
    d.mkdir()
    write(d / "rank0.json", new_format_trace())
    write(d / "rank1.json", new_format_trace())
    return d


@pytest.mark.parametrize("command", ["calibrate", "report"])
def test_stages_are_shown_on_a_terminal_and_silent_when_piped(command, trace_dir, tmp_path,
                                                             samples_dir, capsys):
    argv = ([command, str(trace_dir), "-o", str(tmp_path / "p.json")] if command == "calibrate"
            else [command, str(samples_dir / "ws2" / "tp.json")])
    stage = "read rank0.json" if command == "calibrate" else "estimate and simulate"
    assert _run(argv) == 0  # piped (pytest captures stderr): no progress
    assert stage not in capsys.readouterr().err
    assert _run(["--color", "always", *argv]) == 0  # a terminal: every stage, each with a tick
    err = capsys.readouterr().err
    assert stage in err and "✓" in err
    if command == "calibrate":
        assert "read rank1.json" in err and "fit collectives and compute" in err
