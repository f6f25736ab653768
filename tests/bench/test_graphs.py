"""bench.graphs.realistic_graphs: the realistic graphs the benchmarks measure are the manifest's."""

from __future__ import annotations

import json

from bench import graphs
from commopt.io import load_graph


def test_realistic_graphs_are_the_manifest_entries_smallest_first():
    manifest = json.loads((graphs.REALISTIC_DIR / "MANIFEST.json").read_text())["graphs"]
    listed = graphs.realistic_graphs()
    assert [bg.path.name for bg in listed] == [e["file"] for e in sorted(manifest, key=lambda e: e["nodes"])]
    assert all(bg.path.is_file() and not bg.generated and bg.name.startswith("realistic:") for bg in listed)
    assert graphs.realistic_graphs(quick=True) == listed[:1]
    smallest = load_graph(listed[0].path)
    assert len(smallest) == min(e["nodes"] for e in manifest)
