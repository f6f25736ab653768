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


def test_the_2d_stack_records_its_mesh_so_one_order_is_proven():
    """The 2-D stack's TP pairs and DP quads are recorded as slices of its (dp, tp) mesh, so
    commopt's rule proves that every rank runs it in one order; the FSDP stack needs no mesh."""
    from commopt.cross_group import not_one_program
    from commopt.io.groups import mesh_slices
    from commopt.io.pt2 import graph_from_torch

    graphs.init_fake_pg()
    try:
        spec = graphs.GraphSpec("tiny2d", graphs._mesh2d_model, {"layers": 1, "hidden": 64, "tokens": 16},
                                on_mesh=True)
        doc = graphs._groups_record(spec)
        g = graph_from_torch(graphs.export_program(spec), groups=doc)
        assert g.mesh == graphs.MESH_2D
        for name, dim in graphs.MESH_DIM_OF.items():
            assert g.groups[name].mesh_dim == dim and graphs.GROUP_RANKS[name] in mesh_slices(g.mesh, dim)
        assert not_one_program(g) is None
        flat = graphs._groups_record(graphs.GraphSpec("f", graphs._fsdp_model, {}))
        assert flat.mesh is None and all(r.mesh_dim is None for r in flat.groups)
    finally:
        graphs.shutdown_fake_pg()
