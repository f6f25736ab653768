"""Loading and writing graphs: a generated 100,000-node JSON graph and the largest sample.

JSON: the file is written from ``commopt.synth.graph_with_nodes``; load is the whole
``load_graph`` call (parse, the strict fast-path check, IR build, validation, derived edges);
the pydantic row validates the same parsed document with the schema models instead of the fast
path (what every load cost before, and what a document the fast path does not accept costs).
.pt2: the largest committed sample, loaded (archive safety check, ``torch.export.load``,
classification) and written back in a new order; then the largest sample JSON and the
largest realistic graph (Llama-3-8B at 64 ranks, JSON), loaded and written back the same way.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench import graphs
from bench.util import table

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_graphs"
TARGET_NODES = 100_000
QUICK_NODES = 20_000
LOAD_TARGET_S = 5.0


def _timed(fn, repeat: int):
    """(median wall s, median CPU s of this process, last result) over ``repeat`` runs."""
    import statistics

    walls, cpus, result = [], [], None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), result


def _json_rows(nodes_wanted: int, repeat: int) -> list[list]:
    from commopt.gc_freeze import collector_paused
    from commopt.io import load_graph, save_graph
    from commopt.io.json_graph import graph_from_model, read_json_file
    from commopt.schemas.graph import GraphDocument
    from commopt.synth import graph_with_nodes

    graph = graph_with_nodes(nodes_wanted)
    rows = []
    with tempfile.TemporaryDirectory(prefix="commopt-bench-io-") as tmp:
        path = Path(tmp) / "synth.json"
        save_w, save_c, _ = _timed(lambda: save_graph(graph, path), 1)
        size_mb = path.stat().st_size / 1e6
        load_w, load_c, loaded = _timed(lambda: load_graph(path), repeat)
        assert len(loaded) == len(graph)
        del loaded
        with collector_paused():  # as load_graph runs them
            parse_w, parse_c, raw = _timed(lambda: read_json_file(path), repeat)
            pyd_w, pyd_c, _ = _timed(lambda: graph_from_model(GraphDocument.model_validate(raw)), 1)
    n = len(graph)
    verdict = "yes" if load_w < LOAD_TARGET_S else "NO"
    rows.append([f"synthetic JSON, {n:,} nodes ({size_mb:.1f} MB)", "load_graph", load_w, load_c,
                 f"{verdict} (target < {LOAD_TARGET_S:.0f} s)"])
    rows.append(["", "of which json.loads", parse_w, parse_c, ""])
    rows.append(["", "pydantic path instead of the fast path (parsed doc)", pyd_w, pyd_c, ""])
    rows.append(["", "save_graph (JSON)", save_w, save_c, ""])
    return rows


def _sample_rows(repeat: int) -> list[list]:
    from commopt.io import load_graph, save_graph
    from commopt.synth import late_first_order

    rows = []
    largest = []
    for suffix in (".pt2", ".json"):
        files = sorted(SAMPLES.glob(f"ws*/*{suffix}"), key=lambda p: (p.stat().st_size, str(p)))
        if files:
            largest.append((f"largest {suffix} sample", files[-1]))
    realistic = sorted((bg.path for bg in graphs.realistic_graphs()), key=lambda p: (p.stat().st_size, str(p)))
    if realistic:
        largest.append(("largest realistic graph", realistic[-1]))
    for what, path in largest:
        label = f"{what}: {path.parent.name}/{path.name} ({path.stat().st_size / 1e3:,.0f} kB)"
        load_w, load_c, graph = _timed(lambda p=path: load_graph(p), repeat)
        rows.append([label, f"load_graph ({len(graph)} nodes)", load_w, load_c, ""])
        order = late_first_order(graph)
        with tempfile.TemporaryDirectory(prefix="commopt-bench-io-") as tmp:
            out = Path(tmp) / path.name
            save_w, save_c, _ = _timed(lambda g=graph, o=out, od=order: save_graph(g, o, od), repeat)
        rows.append(["", "save_graph (in a new order)", save_w, save_c, ""])
    return rows


def run(quick: bool) -> str:
    """Markdown section: JSON load at 100k nodes (20k with ``quick``), largest samples."""
    repeat = 1 if quick else 3
    rows = _json_rows(QUICK_NODES if quick else TARGET_NODES, repeat)
    rows += _sample_rows(repeat)
    return "## Graph IO\n\n" + __doc__.split("\n\n", 1)[1].strip() + "\n\n" + table(
        ["graph", "step", "wall s (median)", "CPU s (median)", "meets target"], rows) + "\n"
