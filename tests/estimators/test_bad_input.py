"""Bad traces and misbehaving estimator plug-ins: one line naming the problem, exit 2.

Each case crashed with exit 3 and a traceback before: a trace whose durations or sizes are
not numbers, are negative or NaN; a plug-in returning a string or an integer too large for a
float, or raising (SystemExit included) while being built or asked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commopt.io.json_graph import save_json_graph
from commopt.synth import fsdp_tp_stack
from tests.cli_run import run_cli
from tests.estimators.traces import new_format_trace, write


@pytest.fixture
def graph_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no commopt.toml from the repository applies
    path = tmp_path / "g.json"
    save_json_graph(fsdp_tp_stack(2, dp=2, tp=1, hidden=64, tokens=64), path)
    return path


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("commopt: error: "), err
    return lines[0]


def _nccl_kernel(data: dict) -> dict:
    return next(e for e in data["traceEvents"] if e["name"].startswith("ncclKernel"))


def _gemm_kernel(data: dict) -> dict:
    return next(e for e in data["traceEvents"] if e["name"] == "void gemm_kernel()")


# --------------------------------------------------------------------------- traces
@pytest.mark.parametrize("edit, words", [
    (lambda d: _nccl_kernel(d).update(dur="slow"), ["traceEvents[", ".dur", "'slow'"]),
    (lambda d: _gemm_kernel(d).update(dur=-40), ["traceEvents[", ".dur", "-40"]),
    (lambda d: _gemm_kernel(d).update(dur=True), ["traceEvents[", ".dur", "True"]),
    (lambda d: _gemm_kernel(d).update(ts=10**400), [".ts", "not a finite time"]),
    (lambda d: _gemm_kernel(d).update(pid={"a": 1}), [".pid", "integer or a string"]),
    (lambda d: _nccl_kernel(d)["args"].update({"In msg nelems": "many"}), ["In msg nelems", "'many'"]),
    (lambda d: _nccl_kernel(d)["args"].update({"Out msg nelems": -1024}), ["Out msg nelems", "-1024"]),
    (lambda d: _nccl_kernel(d)["args"].update({"Group size": 2.5}), ["Group size", "2.5"]),
    (lambda d: _nccl_kernel(d)["args"].update({"In msg nelems": 10**30}), ["In msg nelems"]),
    (lambda d: d["distributedInfo"].update(pg_config=[{"pg_name": "0", "pg_size": "two"}]), ["pg_size"]),
    (lambda d: next(e for e in d["traceEvents"] if e["name"] == "aten::mm")["args"].update(
        {"Input Dims": [[-64, 32], [32, 16]]}), ["Input Dims", "non-negative"]),
])
def test_calibrate_rejects_bad_numbers_naming_the_trace_and_field(tmp_path, capsys, edit, words):
    data = new_format_trace()
    edit(data)
    trace = write(tmp_path / "t.json", data)
    out = tmp_path / "p.json"
    assert run_cli(["calibrate", str(trace), "-o", str(out)]) == 2
    line = _one_error_line(capsys)
    assert "t.json" in line
    for w in words:
        assert w in line, line
    assert not out.exists()


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_calibrate_rejects_nan_and_infinite_durations(tmp_path, capsys, literal):
    data = new_format_trace()
    _nccl_kernel(data)["dur"] = 12345.5
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(data).replace("12345.5", literal))
    assert run_cli(["calibrate", str(trace), "-o", str(tmp_path / "p.json")]) == 2
    line = _one_error_line(capsys)
    assert "t.json" in line and literal in line


def test_calibrate_names_a_duration_too_large_for_a_float(tmp_path, capsys):
    data = new_format_trace()
    _nccl_kernel(data)["dur"] = 12345.5
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(data).replace("12345.5", "1e999"))
    assert run_cli(["calibrate", str(trace), "-o", str(tmp_path / "p.json")]) == 2
    line = _one_error_line(capsys)
    assert ".dur" in line and "inf" in line


def test_calibrate_rejects_a_trace_that_is_not_utf8(tmp_path, capsys):
    trace = tmp_path / "t.json"
    trace.write_bytes(b'{"traceEvents": ["\xff"]}')
    assert run_cli(["calibrate", str(trace), "-o", str(tmp_path / "p.json")]) == 2
    assert "not UTF-8" in _one_error_line(capsys)


def test_an_event_without_a_name_is_read_as_unnamed(tmp_path, capsys):
    data = new_format_trace()
    del next(e for e in data["traceEvents"] if e["name"] == "aten::mm")["name"]
    trace = write(tmp_path / "t.json", data)
    assert run_cli(["calibrate", str(trace), "-o", str(tmp_path / "p.json")]) == 0


def test_ids_that_cannot_key_a_lookup_tie_the_kernel_to_nothing(tmp_path, capsys):
    data = new_format_trace()
    _gemm_kernel(data)["args"]["correlation"] = [1, 2]  # a list: unhashable
    trace = write(tmp_path / "t.json", data)
    assert run_cli(["calibrate", str(trace), "-o", str(tmp_path / "p.json")]) == 0


def test_the_profile_estimator_reads_a_bad_trace_as_a_user_error(graph_file, tmp_path, capsys):
    data = new_format_trace()
    _gemm_kernel(data)["dur"] = "x"
    trace = write(tmp_path / "t.json", data)
    assert run_cli(["estimate", str(graph_file), "--estimator", "profile", "--profile", str(trace)]) == 2
    assert ".dur" in _one_error_line(capsys)


# --------------------------------------------------------------------------- plug-ins
class ReturnsText:
    name = "text"

    def __init__(self, options):
        pass

    def estimate(self, node, graph):
        return "12.5"


class ReturnsHugeInt:
    name = "huge"

    def __init__(self, options):
        pass

    def estimate(self, node, graph):
        return 10**400


class ReturnsNaN:
    name = "nan"

    def __init__(self, options):
        pass

    def estimate(self, node, graph):
        return float("nan")


class RaisesInConstructor:
    name = "ctor"

    def __init__(self, options):
        raise RuntimeError("no licence server")

    def estimate(self, node, graph):
        return None


class ExitsInConstructor:
    name = "ctor-exit"

    def __init__(self, options):
        raise SystemExit(0)

    def estimate(self, node, graph):
        return None


class ExitsInEstimate:
    name = "exits"

    def __init__(self, options):
        pass

    def estimate(self, node, graph):
        raise SystemExit(3)


class BadName:
    name = 42

    def __init__(self, options):
        pass

    def estimate(self, node, graph):
        return None


@pytest.mark.parametrize("cls, words", [
    ("ReturnsText", ["estimator 'text' returned '12.5' (str)"]),
    ("ReturnsHugeInt", ["estimator 'huge' returned an integer of 401 digits"]),
    ("ReturnsNaN", ["estimator 'nan' returned nan"]),
    ("RaisesInConstructor", ["RaisesInConstructor", "no licence server"]),
    ("ExitsInConstructor", ["ExitsInConstructor", "factory failed: SystemExit"]),
    ("ExitsInEstimate", ["estimator 'exits' failed: SystemExit"]),
    ("BadName", ["BadName", "not a string: 42"]),
])
def test_a_misbehaving_plugin_is_one_line_naming_it(graph_file, capsys, cls, words):
    assert run_cli(["estimate", str(graph_file), "--estimator", f"tests.estimators.test_bad_input:{cls}"]) == 2
    line = _one_error_line(capsys)
    for w in words:
        assert w in line, line
