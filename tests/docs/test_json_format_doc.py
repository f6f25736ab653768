"""The example in docs/json-format.md is a valid graph and says what the doc says."""

import json
import re

from commopt.io.json_graph import graph_from_document
from commopt.ir.graph import NodeKind


def test_documented_example_loads(repo_root):
    text = (repo_root / "docs" / "json-format.md").read_text()
    block = re.search(r"```json\n(.*?)```", text, re.S).group(1)
    graph = graph_from_document(json.loads(block))
    assert graph.name == "tiny"
    assert graph.nodes[graph.index_of["ar_wait"]].wait_of == graph.index_of["ar"]
    assert graph.nodes[graph.index_of["other"]].duration_us == 35.0
    assert [n.kind for n in graph.nodes].count(NodeKind.COLLECTIVE) == 1
