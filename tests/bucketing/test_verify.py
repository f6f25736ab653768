"""commopt verify on bucketed graphs: what the bucket pass writes verifies; a record or a
program that does not follow from the original is a violation naming it."""

from __future__ import annotations

import json

import pytest

from commopt.bucketing import apply_buckets
from commopt.bucketing.verify import verify_graph
from commopt.io import load_graph
from commopt.io.json_graph import load_json_graph, save_json_graph
from tests.bucketing.helpers import largest_buckets, raised_order
from tests.corpus.graphs import CORPUS


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("verify")
    g = load_graph(CORPUS / "ws2" / "llama_fsdp.pt2")
    order = raised_order(g)
    save_json_graph(g, folder / "original.json")
    save_json_graph(apply_buckets(g, order, largest_buckets(g, order)).graph, folder / "bucketed.json")
    return folder


def _edited(files, tmp_path, edit):
    doc = json.loads((files / "bucketed.json").read_text(encoding="utf-8"))
    edit(doc)
    (tmp_path / "edited.json").write_text(json.dumps(doc), encoding="utf-8")
    return load_json_graph(tmp_path / "edited.json")


def test_bucketed_graph_verifies(files) -> None:
    assert verify_graph(load_json_graph(files / "original.json"),
                            load_json_graph(files / "bucketed.json")) == []


def test_bucket_mixing_types_is_refused(files, tmp_path) -> None:
    def edit(doc):
        ag, rs = doc["meta"]["buckets"]
        ag[0][-1], rs[0][-1] = rs[0][-1], ag[0][-1]

    violations = verify_graph(load_json_graph(files / "original.json"), _edited(files, tmp_path, edit))
    assert violations and "cannot be formed from the original" in str(violations[0])


def test_bucket_whose_layout_differs_from_the_rewrite_is_refused(files, tmp_path) -> None:
    def edit(doc):
        cat = next(n for n in doc["nodes"] if n["name"] == "bucket0_cat")
        cat["args"][0].reverse()  # members concatenated in another order than recorded

    violations = verify_graph(load_json_graph(files / "original.json"), _edited(files, tmp_path, edit))
    assert any("'bucket0_cat' changed its args" in str(v) for v in violations)
