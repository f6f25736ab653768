"""The root command: version, command list, suggestions, exit codes, colour, JSON on stdout."""

import json

import click
from click.testing import CliRunner

from commopt._version import __version__
from commopt.cli.main import COMMANDS, cli


@click.command("boom")
def boom_cmd() -> None:
    """A command with a bug in it."""
    raise RuntimeError("kaboom")


def _invoke(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env)


def test_version_and_every_registered_command_is_listed():
    r = _invoke("--version")
    assert r.exit_code == 0 and __version__ in r.output
    r = _invoke("--help")
    assert r.exit_code == 0
    for name in COMMANDS:
        assert name in r.output, name


def test_unknown_command_suggests_the_closest_and_exits_2():
    r = _invoke("optimise", "x")
    assert r.exit_code == 2
    assert "did you mean 'optimize'?" in r.output


def test_internal_error_shows_traceback_and_asks_for_a_report(monkeypatch):
    monkeypatch.setitem(COMMANDS, "boom", "tests.cli.test_main:boom_cmd")
    r = _invoke("boom")
    assert r.exit_code == 3
    assert "RuntimeError: kaboom" in r.output and "this is a bug in commopt" in r.output


def test_inspect_text_json_and_colour(samples_dir):
    g = str(samples_dir / "ws8" / "tp.json")
    r = _invoke("inspect", g, "--format", "json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["nodes"] > 0 and doc["collectives"] and doc["kinds"]["collective"] > 0
    plain = _invoke("--color", "never", "inspect", g)
    assert plain.exit_code == 0 and "\x1b[" not in plain.output
    no_color = _invoke("inspect", g, env={"NO_COLOR": "1"})
    assert "\x1b[" not in no_color.output
    coloured = _invoke("--color", "always", "inspect", g)
    assert "\x1b[" in coloured.output


def test_bad_graph_is_one_line_on_stderr_with_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "commopt-graph", "version": 7, "nodes": []}')
    r = _invoke("inspect", str(bad))
    assert r.exit_code == 2
    assert r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("commopt: error: ") and "unsupported format version 7" in line


def test_bad_option_value_is_one_line_with_where_to_look():
    r = _invoke("optimize", "g.json", "-o", "out", "--gpus-per-node", "0")
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("commopt: error: Invalid value for '--gpus-per-node'")
    assert line.endswith("(see 'commopt optimize --help')")


def test_version_names_torch_and_python():
    import platform

    r = _invoke("--version")
    assert "torch " in r.output and f"Python {platform.python_version()}" in r.output


def test_global_options_work_after_the_command_too(samples_dir):
    from commopt.cli.main import global_options_first

    assert global_options_first(["inspect", "g.json", "-q", "--color", "never", "--debug"]) == \
        ["-q", "--color", "never", "--debug", "inspect", "g.json"]
    assert global_options_first(["-v", "optimize", "g", "-o", "out", "-qq", "--color=always"]) == \
        ["-v", "-qq", "--color=always", "optimize", "g", "-o", "out"]
    assert global_options_first(["report", "--", "-q"]) == ["report", "--", "-q"]
    graph = str(samples_dir / "ws2" / "tp.json")
    after = _invoke("inspect", graph, "--color", "never", "-q")
    before = _invoke("--color", "never", "-q", "inspect", graph)
    assert after.exit_code == before.exit_code == 0
    assert after.output == before.output


def test_no_color_removes_every_style_and_force_color_forces_it(samples_dir):
    graph = str(samples_dir / "ws2" / "tp.json")
    forced = _invoke("inspect", graph, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert forced.exit_code == 0 and "\x1b[" in forced.output  # bold headers are styled
    plain = _invoke("inspect", graph, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert plain.exit_code == 0 and "\x1b[" not in plain.output  # bold too is gone


def test_the_console_entry_point_flushes_its_output_and_keeps_exit_codes(tmp_path):
    """``python -m commopt`` (cli.main.run) ends the process without the teardown: what it
    printed to a pipe still arrives whole, and exit codes are the command's."""
    import subprocess
    import sys
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "sample_graphs" / "ws8" / "llama_tp.json"
    ok = subprocess.run([sys.executable, "-m", "commopt", "inspect", str(sample), "--format", "json"],
                        capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["nodes"] > 600
    bad = subprocess.run([sys.executable, "-m", "commopt", "inspect", str(tmp_path / "missing.json")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("commopt: error:") and "missing.json" in bad.stderr


def test_a_result_is_kept_until_exit_only_when_the_process_ends_with_the_command(monkeypatch):
    """The ``commopt`` script ends without teardown right after the command, so a command's
    result is left for the operating system to reclaim; an in-process caller keeps nothing."""
    import gc
    import weakref

    from commopt.cli import app as app_module
    from commopt.cli.app import App

    monkeypatch.setattr(app_module, "_KEPT_UNTIL_EXIT", [])

    class Result:
        pass

    for follows in (False, True):
        result = Result()
        alive = weakref.ref(result)
        App(exit_follows=follows).keep_until_exit(result)
        del result
        gc.collect()
        assert (alive() is not None) == follows
    assert len(app_module._KEPT_UNTIL_EXIT) == 1


def test_a_graph_loaded_by_a_command_is_kept_until_exit_by_the_console_script(monkeypatch, samples_dir):
    from commopt.cli import app as app_module
    from commopt.cli.app import App
    from commopt.cli.options import load_graph_for_cli

    monkeypatch.setattr(app_module, "_KEPT_UNTIL_EXIT", [])
    path = str(samples_dir / "realistic" / "llama3_8b_L2.json")
    for follows in (False, True):
        with click.Context(click.Command("inspect"), obj=App(exit_follows=follows)):
            g = load_graph_for_cli(path, echo_warnings=False)
        assert any(kept is g for kept in app_module._KEPT_UNTIL_EXIT) == follows
