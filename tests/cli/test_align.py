"""``--align`` is a power of two from 1 B to 2 MiB in every command that takes it, in the
configuration file and in the Python API (issue 21, class 11): a huge value used to plan
terabyte arenas."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import commopt
from commopt.buffers.planner import MAX_ALIGN_BYTES
from commopt.errors import OptionError
from tests.cli_run import run_cli as _run


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samples_dir: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copy(samples_dir / "ws2" / "tp.json", tmp_path / "g.json")
    return tmp_path


@pytest.mark.parametrize("command", [["plan", "g.json"], ["optimize", "g.json", "-o", "out"]])
@pytest.mark.parametrize("value", ["1099511627776", str(2 * MAX_ALIGN_BYTES), "0", "-512", "100"])
def test_out_of_range_align_is_one_line_exit_2(work: Path, capsys, command, value):
    assert _run([*command, "--align", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "field --align" in err[0] and "power of two from 1 to 2097152" in err[0]
    assert sorted(p.name for p in work.iterdir()) == ["g.json"]


def test_the_largest_alignment_is_accepted(work: Path, capsys):
    assert _run(["plan", "g.json", "--align", str(MAX_ALIGN_BYTES), "--format", "json"]) == 0
    assert f'"align_bytes": {MAX_ALIGN_BYTES}' in capsys.readouterr().out


def test_a_config_file_alignment_is_bounded_too(work: Path, capsys):
    (work / "commopt.toml").write_text("align = 1099511627776\n")
    assert _run(["plan", "g.json"]) == 2
    assert "power of two from 1 to 2097152" in capsys.readouterr().err


def test_the_api_refuses_a_huge_alignment_before_any_work(work: Path):
    with pytest.raises(OptionError, match="power of two from 1 to 2097152"):
        commopt.OutputOptions(align=2**40)
    with pytest.raises(OptionError, match="--align"):
        commopt.optimize(work / "missing.json", output_dir=work / "out", align=2**40)  # before loading
    assert not (work / "out").exists()
