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


@pytest.mark.parametrize("role", [True, 1, ["parameter"], {"k": "v"}])
def test_an_input_role_that_is_not_a_string_is_refused_with_its_node(tmp_path, capsys, role):
    """Found by the CLI fuzz test: ``"role": true`` reached inspect's report model and ended
    in an internal error; a role that is not a string is malformed input (exit 2)."""
    doc = json.loads(SAMPLE.with_suffix(".json").read_text())
    first = next(n for n in doc["nodes"] if n["kind"] == "input")
    first.setdefault("attrs", {})["role"] = role
    p = tmp_path / "g.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(p)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert f"node {first['name']!r}" in err and "attrs.role" in err and "Traceback" not in err


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


# --------------------------------------------------------------------------- values later stages use
# Each was accepted at load and crashed (exit 3) or was rejected only by some later command.
def _shape(shape):
    return lambda d: d["nodes"][0]["outputs"][0].update(shape=shape)


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["nodes"][0]["outputs"][0].update(dtype="float99"), ["node 'x'", "unknown dtype 'float99'"]),
    (_shape([-4]), ["node 'x'", "[-4]", "non-negative"]),
    (_shape([2**31, 2**31]), ["node 'x'", "larger than"]),
    (_shape([2**62]), ["node 'x'", "larger than"]),
    (lambda d: d["nodes"][1]["collective"].update(reduce_op="bogus"),
     ["node 'ar'", "collective.reduce_op", "unknown reduce op 'bogus'"]),
    (lambda d: d["nodes"][1]["collective"].update(in_bytes=2**62), ["node 'ar'", "collective.in_bytes"]),
    (lambda d: d["nodes"][1].update(duration_us=1e300 * 10), ["node 'ar'", "duration_us"]),
    (lambda d: d["process_groups"][0].update(size=3), ["group '0'", "lists 2 ranks but has size 3"]),
])
def test_values_later_stages_need_are_checked_at_load(tmp_path, capsys, edit, words):
    line = _convert(_write_json(tmp_path, _edited(edit)), tmp_path, capsys)
    assert "bad.json" in line
    for w in words:
        assert w in line, line


def test_infinite_and_nan_literals_name_line_and_column(tmp_path, capsys):
    p = tmp_path / "inf.json"
    p.write_text(json.dumps(BASE, indent=1).replace('"version": 1', '"version": 1, "meta": {"x": Infinity}'))
    line = _convert(p, tmp_path, capsys)
    assert "inf.json:3:" in line and "Infinity is not a JSON number" in line


def test_a_number_too_large_for_a_float_names_its_path(tmp_path, capsys):
    p = tmp_path / "big.json"
    p.write_text(json.dumps(_edited(lambda d: d["nodes"][2].update(attrs={"scale": [1.5]}))).replace("1.5", "1e400"))
    line = _convert(p, tmp_path, capsys)
    assert "$.nodes[2].attrs.scale[0]" in line and "too large for a float" in line


def test_a_duration_too_large_for_a_float(tmp_path, capsys):
    p = tmp_path / "big.json"
    p.write_text(json.dumps(_edited(lambda d: d["nodes"][2].update(duration_us=1.5))).replace("1.5", "1e400"))
    line = _convert(p, tmp_path, capsys)
    assert "node 'w'" in line and "duration_us" in line and "inf" in line


def test_deep_nesting(tmp_path, capsys):
    p = tmp_path / "deep.json"
    p.write_text('{"nodes": ' + "[" * 200_000 + "]" * 200_000 + "}")
    assert "nested deeper than 100 levels" in _convert(p, tmp_path, capsys)


def test_deep_nesting_inside_args_names_the_node_path(tmp_path, capsys):
    deep = json.loads("[" * 500 + "]" * 500)
    line = _convert(_write_json(tmp_path, _edited(lambda d: d["nodes"][3].update(args=[deep]))), tmp_path, capsys)
    assert "$.nodes[3].args[0]" in line and "nested deeper than 100 levels" in line


def test_a_5000_digit_integer(tmp_path, capsys):
    p = tmp_path / "digits.json"
    p.write_text(json.dumps(BASE).replace('"size": 2', '"size": ' + "9" * 5000))
    line = _convert(p, tmp_path, capsys)
    assert "digits.json" in line and "4300 digits" in line


def test_a_lone_surrogate_in_a_name_names_its_path(tmp_path, capsys):
    p = tmp_path / "surrogate.json"
    p.write_text(json.dumps(BASE).replace('"name": "w"', '"name": "w\\ud800"'))
    line = _convert(p, tmp_path, capsys)
    assert "$.nodes[2].name" in line and "lone surrogate" in line


def test_a_surrogate_pair_is_a_valid_name(tmp_path):
    p = tmp_path / "emoji.json"
    p.write_text(json.dumps(BASE).replace('"name": "w"', '"name": "w\\ud83d\\udca5"').replace('["w"]', '["w\\ud83d\\udca5"]'))
    assert load_graph(p).nodes[2].name == "w\U0001f4a5"


def _view_of_collective(direct: bool):
    def edit(d):
        d["nodes"][2:2] = [
            {"name": "v", "kind": "view", "op": "aten.view.default", "args": [{"ref": "ar"}, [2, 2]],
             "alias_of": "ar", "outputs": [{"dtype": "float32", "shape": [2, 2]}]},
            {"name": "early", "kind": "compute", "op": "aten.relu.default",
             "args": [{"ref": "ar" if direct else "v"}], "outputs": [{"dtype": "float32", "shape": [2, 2]}]},
        ]
        d["nodes"][-1]["inputs"] = ["w", "early"]
    return edit


@pytest.mark.parametrize("direct", [True, False])
def test_reading_a_collective_before_its_wait(tmp_path, capsys, direct):
    line = _convert(_write_json(tmp_path, _edited(_view_of_collective(direct))), tmp_path, capsys)
    assert "node 'early'" in line and "collective 'ar'" in line and "without waiting" in line
    assert ("through view 'v'" in line) is not direct


@pytest.mark.parametrize("command", [
    ["inspect"], ["estimate"], ["plan"], ["report"], ["check"], ["codegen", "-o", "OUT/run.py"],
    ["optimize", "-o", "OUT", "--force"],  # the folder holds a file commopt did not write
])
def test_every_command_rejects_what_the_loader_rejects(tmp_path, capsys, command):
    """One validation at load: codegen rejected a negative shape that optimize took (exit 0)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "run_old.py").write_text("# a previous run's runner\n")
    bad = _write_json(tmp_path, _edited(_shape([-1, 4])))
    args = [command[0], str(bad), *(a.replace("OUT", str(out)) for a in command[1:])]
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "node 'x'" in err and "non-negative" in err and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["run_old.py"]


# --------------------------------------------------------------------------- process groups
def _groups(**changes):
    return lambda d: d.update(world_size=2, **changes)


@pytest.mark.parametrize("edit, words", [
    (_groups(process_groups=[{"name": "0", "size": 2, "ranks": [0, 2]}]), ["rank 2 outside the world", "world size 2"]),
    (_groups(process_groups=[{"name": "0", "size": 2, "ranks": [-1, 0]}]), ["rank -1 outside the world"]),
    (_groups(process_groups=[{"name": "0", "size": 2, "ranks": [1, 1]}]), ["lists rank 1 twice"]),
    (_groups(process_groups=[{"name": "0", "size": 2}, {"name": "0", "size": 2}]),
     ["$.process_groups[1].name", "declared twice"]),
    (lambda d: d.update(world_size=1), ["group '0' has 2 ranks but the world has 1"]),
    (_groups(mesh={"dp": 2, "tp": 2}), ["mesh", "4 ranks but the world size is 2"]),
    (lambda d: d.update(world_size=10**40), ["world size", "not in [1,"]),
])
def test_process_groups_that_cannot_exist(tmp_path, capsys, edit, words):
    line = _convert(_write_json(tmp_path, _edited(edit)), tmp_path, capsys)
    assert "bad.json" in line
    for w in words:
        assert w in line, line


def _groups_file(tmp_path, doc) -> Path:
    p = tmp_path / "groups.json"
    p.write_text(json.dumps({"format": "commopt-groups", "version": 1, **doc}))
    return p


@pytest.mark.parametrize("doc, words", [
    ({"world_size": 2, "groups": [{"name": "0", "ranks": [0, 7]}]}, ["$.groups[0].ranks", "rank 7 outside"]),
    ({"groups": [{"name": "0", "ranks": [-3, 0]}]}, ["$.groups[0].ranks", "rank -3"]),
    ({"groups": [{"name": "0", "ranks": [0, 0]}]}, ["$.groups[0].ranks", "rank 0 twice"]),
    ({"groups": [{"name": "0", "ranks": [0, 1]}, {"name": "0", "ranks": [0, 1]}]}, ["$.groups[1].name", "twice"]),
    ({"world_size": 2, "mesh": {"dp": 3}, "groups": []}, ["mesh", "3 ranks but the world size is 2"]),
    ({"world_size": 2, "rank": 5, "groups": []}, ["$.rank", "rank 5 is outside"]),
])
def test_groups_file_with_impossible_ranks(tmp_path, capsys, doc, words):
    g = _groups_file(tmp_path, doc)
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(SAMPLE), "--groups", str(g)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "groups.json" in err and "Traceback" not in err
    for w in words:
        assert w in err, err


def test_groups_file_that_is_not_utf8(tmp_path, capsys):
    p = tmp_path / "groups.json"
    p.write_bytes(b'{"groups": "\xff"}')
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(SAMPLE), "--groups", str(p)])
    assert exc.value.code == 2
    assert "not UTF-8" in capsys.readouterr().err


@pytest.mark.parametrize("options, words", [
    (["--world-size", "1"], ["--world-size"]),
    (["--world-size", str(2**40)], ["--world-size", "must be in [1,"]),
    (["--mesh", "dp=3"], ["--mesh", "3 ranks"]),
    (["--mesh", "dp=100000,tp=100000"], ["--mesh", "more than"]),
    (["--mesh", "dp=²"], ["--mesh", "bad mesh dimension"]),
])
def test_group_options_that_cannot_describe_the_world(tmp_path, capsys, options, words):
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(_write_json(tmp_path, _edited(lambda d: d.update(world_size=2)))), *options])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    for w in words:
        assert w in err, err


def test_a_group_larger_than_the_world_given_by_world_size(tmp_path, capsys):
    doc = _edited(lambda d: d.update(process_groups=[{"name": "0", "size": 2}, {"name": "5", "size": 4}]))
    doc["nodes"][1]["collective"]["group"] = "5"
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(_write_json(tmp_path, doc)), "--world-size", "2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--world-size" in err and "group '5' has 4 ranks but the world has 2" in err
