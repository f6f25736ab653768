"""Configuration layering: defaults < file < command line, and errors naming file and key."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from commopt.cli.main import cli
from commopt.config import CLI_SOURCE, DEFAULT_SOURCE, find_config_file, load_config
from commopt.errors import CommoptError


def test_pyproject_table_overrides_defaults_and_flags_override_file(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.commopt]\nhardware = "a100"\ngpus_per_node = 4\n')
    sub = tmp_path / "models" / "llama"
    sub.mkdir(parents=True)
    cfg = load_config(sub)
    assert cfg.file == tmp_path / "pyproject.toml"
    assert cfg["hardware"] == "a100" and cfg.sources["hardware"] == str(tmp_path / "pyproject.toml")
    assert cfg.sources["estimator"] == DEFAULT_SOURCE
    merged = cfg.with_overrides({"hardware": "h200", "passes": None})
    assert merged["hardware"] == "h200" and merged.sources["hardware"] == CLI_SOURCE
    assert merged["gpus_per_node"] == 4


def test_commopt_toml_wins_over_pyproject_in_same_directory(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.commopt]\nhardware = "a100"\n')
    (tmp_path / "commopt.toml").write_text('hardware = "b200"\n')
    assert find_config_file(tmp_path) == tmp_path / "commopt.toml"
    assert load_config(tmp_path)["hardware"] == "b200"


def test_pyproject_without_table_is_skipped(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert find_config_file(tmp_path) is None


@pytest.mark.parametrize(
    "text, message",
    [
        ('hardwre = "a100"\n', "unknown setting (did you mean 'hardware'?)"),
        ("min_overlap = 3\n", "bad setting"),
        ("hardware = \n", "invalid TOML"),
    ],
)
def test_bad_config_is_one_located_error(tmp_path: Path, text: str, message: str):
    (tmp_path / "commopt.toml").write_text(text)
    with pytest.raises(CommoptError) as info:
        load_config(tmp_path)
    assert message in str(info.value)
    assert str(tmp_path / "commopt.toml") in str(info.value)


def test_config_command_shows_sources(tmp_path: Path, monkeypatch):
    (tmp_path / "commopt.toml").write_text("max_regression = 5\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["config", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert '"source": "' + str(tmp_path / "commopt.toml") + '"' in result.output
    assert '"value": 5.0' in result.output


@pytest.mark.parametrize("name", ["commopt.toml", "pyproject.toml"])
@pytest.mark.parametrize("data, message", [
    (b'hardware = "\xe9"\n', "not UTF-8 text"),
    (b"max_peak_memory = " + b"9" * 5000 + b"\n", "4300 digits"),
    (b"x = " + b"[" * 50_000 + b"]" * 50_000 + b"\n", "nested too deeply"),
])
def test_unreadable_config_is_one_line_exit_2(tmp_path: Path, monkeypatch, name: str, data: bytes, message: str):
    """Each crashed with a traceback (exit 3) before."""
    if name == "pyproject.toml":
        data = b"[tool.commopt]\n" + data
    (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["config"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0] and message in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_relative_paths_resolve_against_the_config_files_directory(tmp_path: Path):
    (tmp_path / "commopt.toml").write_text(
        'profile = "profiles/p.json"\ntable = "t.csv"\nhardware = "hw/custom.json"\n')
    cfg = load_config(tmp_path / "deep" / "er")  # found by walking up; need not exist
    assert cfg["profile"] == str(tmp_path.resolve() / "profiles" / "p.json")
    assert cfg["table"] == str(tmp_path.resolve() / "t.csv")
    assert cfg["hardware"] == str(tmp_path.resolve() / "hw" / "custom.json")


def test_absolute_paths_and_hardware_presets_are_kept(tmp_path: Path):
    table = tmp_path / "elsewhere" / "t.csv"
    (tmp_path / "commopt.toml").write_text(f'table = "{table.as_posix()}"\nhardware = "a100"\n')
    cfg = load_config(tmp_path)
    assert cfg["table"] == str(table) and cfg["hardware"] == "a100"


def _graph(path: Path) -> Path:
    from commopt.io.json_graph import save_json_graph
    from commopt.synth import fsdp_tp_stack

    save_json_graph(fsdp_tp_stack(2, dp=4, tp=2, hidden=256, tokens=512), path)
    return path


def test_a_config_table_works_from_another_directory(tmp_path: Path, monkeypatch):
    """The table sits next to the config; commopt runs from a subdirectory and reads it."""
    from commopt.schemas.estimate import EstimateReport

    project = tmp_path / "project"
    (project / "tables").mkdir(parents=True)
    (project / "tables" / "durations.csv").write_text("op,duration_us\naten.mm,123.5\n")
    (project / "pyproject.toml").write_text('[tool.commopt]\ntable = "tables/durations.csv"\n')
    graph = _graph(tmp_path / "g.json")
    workdir = project / "runs" / "today"
    workdir.mkdir(parents=True)
    monkeypatch.chdir(workdir)
    result = CliRunner().invoke(cli, ["estimate", str(graph), "--format", "json"])
    assert result.exit_code == 0, result.output
    rep = EstimateReport.model_validate_json(result.stdout)
    assert rep.estimator == "table,analytical"
    mm = next(d for d in rep.durations if d.name == "fwd_mm0")
    assert (mm.duration_us, mm.source) == (123.5, "table")


@pytest.mark.parametrize("name, key", [("commopt.toml", "{}"), ("pyproject.toml", "tool.commopt.{}")])
@pytest.mark.parametrize("setting, argv, message", [
    ("align = 3", ["plan", "-o", "plan.json"], "alignment must be a power of two"),
    ('estimator = "profle"', ["estimate"], "no estimator 'profle' (did you mean 'profile'?)"),
    ('profile = "missing.json"', ["estimate"], "no such profile or trace file"),
    ('comm_buffers = "all_reduse"', ["plan", "-o", "plan.json"], "all_reduse"),
    ("min_overlap = nan", ["check"], "finite number"),
])
def test_a_bad_config_value_names_the_file_and_key(tmp_path: Path, monkeypatch, name, key, setting, argv, message):
    """Not '--align', which the user never passed."""
    graph = _graph(tmp_path / "g.json")
    config = tmp_path / "conf" / name
    config.parent.mkdir()
    config.write_text(("[tool.commopt]\n" if name == "pyproject.toml" else "") + setting + "\n")
    monkeypatch.chdir(config.parent)
    result = CliRunner().invoke(cli, [argv[0], str(graph), *argv[1:]])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    expected = f"{config}: key {key.format(setting.split(' =')[0])}: "
    assert len(lines) == 1 and expected in lines[0] and message in lines[0], lines
    assert "--" not in lines[0].split(message)[0] and "Traceback" not in result.output


def test_a_bad_flag_still_names_the_flag_over_a_config_value(tmp_path: Path, monkeypatch):
    graph = _graph(tmp_path / "g.json")
    (tmp_path / "commopt.toml").write_text("align = 3\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["plan", str(graph), "-o", "plan.json", "--align", "5"])
    assert result.exit_code == 2 and "field --align" in result.stderr and "commopt.toml" not in result.stderr
    result = CliRunner().invoke(cli, ["plan", str(graph), "-o", "plan.json", "--align", "64"])
    assert result.exit_code == 0, result.output


def test_solver_and_time_limit_are_config_keys(tmp_path: Path, monkeypatch):
    """``solver``/``time_limit`` in the file reach optimize (summary.json's solver run); the
    flags win over them."""
    pytest.importorskip("ortools")
    import json

    graph = _graph(tmp_path / "g.json")
    (tmp_path / "commopt.toml").write_text('solver = "exact"\ntime_limit = 1.5\n')
    monkeypatch.chdir(tmp_path)
    for out, flags in (("a", []), ("b", ["--solver", "heuristic"]), ("c", ["--time-limit", "2"])):
        result = CliRunner().invoke(cli, ["optimize", str(graph), "-o", out, "-q", *flags])
        assert result.exit_code == 0, result.output
    runs = [json.loads((tmp_path / out / "summary.json").read_text())["certificate"]["solver"]
            for out in "abc"]
    assert runs[0]["time_limit_seconds"] == 1.5 and runs[1] is None
    assert runs[2]["time_limit_seconds"] == 2.0
    assert load_config(tmp_path).sources["time_limit"] == str(tmp_path / "commopt.toml")


@pytest.mark.parametrize("text", ['solver = "fast"\n', "time_limit = 0\n", "time_limit = inf\n"])
def test_bad_solver_settings_name_the_file_and_key(tmp_path: Path, text: str):
    (tmp_path / "commopt.toml").write_text(text)
    with pytest.raises(CommoptError) as info:
        load_config(tmp_path)
    assert f"key {text.split(' =')[0]}: bad setting" in str(info.value)


def test_a_time_limit_flag_without_the_exact_solver_is_an_error(tmp_path: Path, monkeypatch):
    graph = _graph(tmp_path / "g.json")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["optimize", str(graph), "-o", "out", "--time-limit", "3"])
    assert result.exit_code == 2 and "--time-limit applies to --solver exact" in result.stderr
