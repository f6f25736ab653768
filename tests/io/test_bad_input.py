"""Bad input: one line naming the problem and where, exit code 2, no traceback, nothing written.

Each case runs ``commopt convert BAD out.json`` (and the library call where the location
fields matter); loading never runs code carried by the file.
"""

from __future__ import annotations

import copy
import io
import json
import pickle
import zipfile
from pathlib import Path

import pytest

from commopt.cli.main import main
from commopt.errors import GraphError
from commopt.io import load_graph

SAMPLE = Path(__file__).resolve().parents[2] / "sample_graphs" / "ws2" / "fsdp.pt2"

BASE = {
    "format": "commopt-graph",
    "version": 1,
    "process_groups": [{"name": "0", "size": 2, "ranks": [0, 1]}],
    "nodes": [
        {"name": "x", "kind": "input", "op": "placeholder", "outputs": [{"dtype": "float32", "shape": [4]}]},
        {"name": "ar", "kind": "collective", "op": "_c10d_functional.all_reduce.default", "inputs": ["x"],
         "collective": {"type": "all_reduce", "group": "0", "reduce_op": "sum", "in_bytes": 16, "out_bytes": 16},
         "outputs": [{"dtype": "float32", "shape": [4]}]},
        {"name": "w", "kind": "wait", "op": "_c10d_functional.wait_tensor.default", "inputs": ["ar"]},
        {"name": "out", "kind": "output", "op": "output", "inputs": ["w"]},
    ],
}


def _convert(src: Path, tmp_path: Path, capsys) -> str:
    """Run ``commopt convert src out.json``; assert exit 2, one line, nothing written."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with pytest.raises(SystemExit) as exc:
        main(["convert", str(src), str(out_dir / "graph.json")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("commopt: error: ")
    assert "Traceback" not in err
    assert list(out_dir.iterdir()) == []
    return lines[0]


def _write_json(tmp_path: Path, doc) -> Path:
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc, indent=1))
    return p


def _edited(fn) -> dict:
    doc = copy.deepcopy(BASE)
    fn(doc)
    return doc


# --------------------------------------------------------------------------- any file
def test_the_base_document_is_valid(tmp_path):
    graph = load_graph(_write_json(tmp_path, BASE))
    assert [n.name for n in graph.nodes] == ["x", "ar", "w", "out"]


def test_missing_path(tmp_path, capsys):
    line = _convert(tmp_path / "nope.pt2", tmp_path, capsys)
    assert "nope.pt2" in line and "no such file" in line


def test_directory(tmp_path, capsys):
    d = tmp_path / "graph.pt2"
    d.mkdir()
    assert "is a directory" in _convert(d, tmp_path, capsys)


@pytest.mark.parametrize("suffix", [".pt2", ".json"])
def test_empty_file(tmp_path, capsys, suffix):
    p = tmp_path / f"empty{suffix}"
    p.write_bytes(b"")
    line = _convert(p, tmp_path, capsys)
    assert f"empty{suffix}" in line and "empty" in line.split(": ", 2)[-1]


# --------------------------------------------------------------------------- .pt2
def test_truncated_zip(tmp_path, capsys):
    p = tmp_path / "truncated.pt2"
    data = SAMPLE.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    line = _convert(p, tmp_path, capsys)
    assert "truncated.pt2" in line and "not a zip archive" in line


def test_corrupt_zip_member(tmp_path, capsys):
    data = bytearray(SAMPLE.read_bytes())
    at = data.index(b'"graph_module"')
    data[at + 1] ^= 0x20  # one flipped bit inside models/model.json: its CRC no longer matches
    p = tmp_path / "corrupt.pt2"
    p.write_bytes(bytes(data))
    line = _convert(p, tmp_path, capsys)
    assert "corrupt.pt2" in line and "corrupt archive member 'models/model.json'" in line


def test_zip_that_is_not_a_torch_export_archive(tmp_path, capsys):
    p = tmp_path / "other.pt2"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("other/readme.txt", "hello")
    line = _convert(p, tmp_path, capsys)
    assert "other.pt2" in line and "not a torch.export archive" in line


def test_text_file_named_pt2(tmp_path, capsys):
    p = tmp_path / "text.pt2"
    p.write_text("not a zip")
    assert "not a zip archive" in _convert(p, tmp_path, capsys)


class _Touch:
    """Unpickling this creates ``path``: what a hostile archive would do."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def _rewrite(src: Path, dst: Path, replace: dict[str, bytes]) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            member = info.filename.split("/", 1)[1]
            zout.writestr(info.filename, replace.get(member, zin.read(info.filename)))


def test_the_hostile_pickle_really_runs_code_when_unpickled(tmp_path):
    marker = tmp_path / "control-marker"
    pickle.loads(pickle.dumps(_Touch(marker)))
    assert marker.exists()  # the payload the next tests use is live


def test_archive_with_a_hostile_sample_input_pickle_is_refused(tmp_path, capsys):
    marker = tmp_path / "pwned"
    p = tmp_path / "evil.pt2"
    _rewrite(SAMPLE, p, {"data/sample_inputs/model.pt": pickle.dumps(_Touch(marker))})
    line = _convert(p, tmp_path, capsys)
    assert "refusing to load" in line and "data/sample_inputs/model.pt" in line
    assert not marker.exists()


def test_archive_with_a_hostile_pickled_weight_is_refused(tmp_path, capsys):
    marker = tmp_path / "pwned"
    with zipfile.ZipFile(SAMPLE) as zf:
        root = zf.namelist()[0].split("/")[0]
        cfg = json.loads(zf.read(f"{root}/data/weights/model_weights_config.json"))
    fqn, meta = sorted(cfg["config"].items())[0]
    meta["use_pickle"] = True
    buf = io.BytesIO()
    pickle.dump(_Touch(marker), buf)
    p = tmp_path / "evil.pt2"
    _rewrite(SAMPLE, p, {
        "data/weights/model_weights_config.json": json.dumps(cfg).encode(),
        f"data/weights/{meta['path_name']}": buf.getvalue(),
    })
    line = _convert(p, tmp_path, capsys)
    assert "refusing to load" in line and meta["path_name"] in line
    assert not marker.exists()


# --------------------------------------------------------------------------- JSON
def test_json_syntax_error_names_line_and_column(tmp_path, capsys):
    p = tmp_path / "syntax.json"
    p.write_text('{\n  "format": "commopt-graph",\n  "nodes": [\n    {"name": "x" "kind": "input"}\n  ]\n}\n')
    line = _convert(p, tmp_path, capsys)
    assert "syntax.json:4:18" in line and "invalid JSON" in line


def test_schema_violation_names_the_json_path(tmp_path, capsys):
    p = _write_json(tmp_path, _edited(lambda d: d["nodes"][1].update(kind="bogus")))
    line = _convert(p, tmp_path, capsys)
    assert "schema violation" in line and "$.nodes[1].kind" in line and "node 'ar'" in line


def test_unsupported_format_version(tmp_path, capsys):
    p = _write_json(tmp_path, _edited(lambda d: d.update(version=99)))
    line = _convert(p, tmp_path, capsys)
    assert "unsupported format version 99" in line and "$.version" in line


def test_duplicate_node_names(tmp_path, capsys):
    p = _write_json(tmp_path, _edited(lambda d: d["nodes"][2].update(name="ar")))
    line = _convert(p, tmp_path, capsys)
    assert "duplicate node name" in line and "node 'ar'" in line


def test_reference_to_an_unknown_node(tmp_path, capsys):
    p = _write_json(tmp_path, _edited(lambda d: d["nodes"][2].update(inputs=["nope"])))
    line = _convert(p, tmp_path, capsys)
    assert "unknown node 'nope'" in line and "node 'w'" in line


def test_cycle_names_the_nodes_on_it(tmp_path, capsys):
    def make_cycle(d):
        d["nodes"][3:3] = [
            {"name": "a", "kind": "compute", "op": "aten.relu.default", "inputs": ["b"]},
            {"name": "b", "kind": "compute", "op": "aten.relu.default", "inputs": ["a"]},
        ]

    line = _convert(_write_json(tmp_path, _edited(make_cycle)), tmp_path, capsys)
    assert "cycle: " in line and ("a -> b -> a" in line or "b -> a -> b" in line)


def test_wait_whose_input_is_not_a_collective(tmp_path, capsys):
    p = _write_json(tmp_path, _edited(lambda d: d["nodes"][2].update(inputs=["x"])))
    line = _convert(p, tmp_path, capsys)
    assert "node 'w'" in line and "'x', which is not a collective" in line


def test_collective_never_waited(tmp_path, capsys):
    def drop_wait(d):
        del d["nodes"][2]
        d["nodes"][2]["inputs"] = ["ar"]

    line = _convert(_write_json(tmp_path, _edited(drop_wait)), tmp_path, capsys)
    assert "node 'ar'" in line and "never waited" in line


def test_library_errors_carry_file_node_and_field(tmp_path):
    p = _write_json(tmp_path, _edited(lambda d: d["nodes"][2].update(inputs=["nope"])))
    with pytest.raises(GraphError) as exc:
        load_graph(p)
    assert (exc.value.file, exc.value.node) == (str(p), "w")
    assert exc.value.field == "$.nodes[2].inputs"


# --------------------------------------------------------------------------- groups
def test_bad_mesh_spec_is_an_option_error(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(SAMPLE), "--mesh", "dp=two"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--mesh" in err and "dp=two" in err and "Traceback" not in err


def test_groups_file_conflicting_with_the_graph(tmp_path, capsys):
    p = tmp_path / "groups.json"
    p.write_text(json.dumps({"format": "commopt-groups", "version": 1,
                             "groups": [{"name": "0", "ranks": [0, 1, 2]}]}))
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(SAMPLE), "--groups", str(p)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "groups.json" in err and "$.groups[0].ranks" in err and "group size 2" in err
