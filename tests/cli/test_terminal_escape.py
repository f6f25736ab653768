"""Names from input files never act on the terminal (issue 21, class 12): control characters
(C0, ESC, DEL, C1) and lone surrogates are printed as visible escapes in text output, error
lines and JSON, whatever ``--color`` says; rich markup in a name is printed, not applied."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from commopt.cli.app import terminal_safe
from tests.cli_run import run_cli as _run

#: A graph name that would set the window title, clear the screen, send a C1 CSI, and close a
#: markup tag that was never opened (a MarkupError if the name were read as markup).
HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\x7f\x9b31m[/bold]"
RAW = ("\x1b]", "\x1b[2J", "\x7f", "\x9b")


@pytest.fixture
def hostile_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samples_dir: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    doc = json.loads((samples_dir / "ws2" / "tp.json").read_text())
    doc["name"] = HOSTILE
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(doc))
    return path


def test_terminal_safe_escapes_controls_and_surrogates_only():
    assert terminal_safe("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert terminal_safe("\x00\x7f\x9b\x85") == "\\x00\\x7f\\x9b\\x85"
    assert terminal_safe("name\udcff") == "name\\udcff"
    assert terminal_safe("tab\tand\nnewline, ünïcödé ✓") == "tab\tand\nnewline, ünïcödé ✓"
    assert terminal_safe("two\nlines\r", one_line=True) == "two\\x0alines\\x0d"


@pytest.mark.parametrize("color", ["never", "always", "auto"])
@pytest.mark.parametrize("command", [["inspect"], ["plan"], ["estimate"], ["optimize", "-o", "out"]])
def test_text_output_escapes_the_graph_name(hostile_graph: Path, capsys, color, command):
    argv = ["--color", color, command[0], str(hostile_graph), *command[1:]]
    assert _run(argv) == 0
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        for raw in RAW:
            assert raw not in stream, (raw, stream[:300])
    assert "evil\\x1b]0;pwned" in captured.out + captured.err
    assert "[/bold]" in captured.out + captured.err  # printed as text, not read as markup


def test_json_output_escapes_every_control_and_keeps_the_value(hostile_graph: Path, capsys):
    assert _run(["inspect", str(hostile_graph), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert not any(raw in out for raw in (*RAW, "\x07"))
    assert json.loads(out)["name"] == HOSTILE


def test_error_lines_escape_file_names(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    name = "missing\x1b[2J\nline2.json"
    assert _run(["plan", name]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err
    assert "missing\\x1b[2J\\x0aline2.json" in err


def test_an_undecodable_output_name_is_printed_escaped(tmp_path: Path, monkeypatch, capsys,
                                                                samples_dir: Path):
    monkeypatch.chdir(tmp_path)
    shutil.copy(samples_dir / "ws2" / "tp.json", tmp_path / "g.json")
    out = "plan\udcff.json"  # the bytes b'plan\xff.json' as Python gives them from argv
    assert _run(["plan", "g.json", "-o", f"afile\udcff/{out}", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["graph"] == "tp"
    assert "wrote afile\\udcff/plan\\udcff.json" in captured.err


def test_json_output_with_an_undecodable_path_is_valid_json(tmp_path: Path, monkeypatch, capsys,
                                                            samples_dir: Path):
    monkeypatch.chdir(tmp_path)
    shutil.copy(samples_dir / "ws2" / "tp.json", tmp_path / "g.json")
    assert _run(["codegen", "g.json", "-o", "run\udcff.py", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert "\\udcff" in out and json.loads(out)["path"] == "run\udcff.py"
    assert (tmp_path / "run\udcff.py").is_file()
