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
