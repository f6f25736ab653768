"""The Chrome trace: required trace-event fields, tracks, before/after processes, nesting,
no overlapping slices on any track, flows from each collective's issue to its wait, and lane
names, on the hand-made samples and on every sample and corpus graph.

The checks are structural: Perfetto's own trace processor (the ``perfetto`` pip package)
downloads its binary at run time, which these machines cannot do, so it is not used here.
Overlap is checked in exact decimal arithmetic on the serialized numbers, the way a viewer
that converts microseconds to integer nanoseconds (Perfetto) sees them.
"""

from __future__ import annotations

import io
import json
import random
from collections import defaultdict
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest

from commopt.ir.builder import GraphBuilder
from commopt.report.build import build_report
from commopt.report.trace import (
    HIDDEN_WAIT_CAT,
    ISSUE_CAT,
    _collective_args,
    _exposed_args,
    _node_args_text,
    _NodeTexts,
    _num,
    _nums,
    _us,
    dumps_trace,
    render_trace,
    trace_chunks,
    write_trace,
)
from tests.report.samples import (
    durations,
    hand_sim,
    naive_order,
    naive_sim,
    sunk_order,
    two_groups,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLE_GRAPHS = sorted((REPO / "sample_graphs").glob("ws*/*.json")) + sorted(
    (REPO / "sample_graphs").glob("ws*/*.pt2"))
CORPUS_GRAPHS = sorted((REPO / "sample_graphs" / "corpus").glob("ws*/*.pt2"))

# Required fields per event phase, from the Trace Event Format document (Google).
REQUIRED = {
    "X": {"name": str, "ph": str, "ts": (int, float), "dur": (int, float), "pid": int, "tid": int},
    "M": {"name": str, "ph": str, "pid": int, "args": dict},
    "C": {"name": str, "ph": str, "ts": (int, float), "pid": int, "args": dict},
}
METADATA_NAMES = {"process_name", "process_labels", "process_sort_index", "thread_name",
                  "thread_sort_index"}


def _report():
    g = two_groups()
    return build_report(g, naive_order(g), g.original_order, durations(g),
                        estimator_name="table", before_sim=naive_sim(g), after_sim=hand_sim(g))


def overlaps(text: str) -> list[tuple]:
    """Pairs of slices on one track that overlap, reading ``text`` (a serialized trace) in
    exact decimals. Slices may touch (one ends where the next starts) or nest fully."""
    doc = json.loads(text, parse_float=Decimal)
    tracks = defaultdict(list)
    for ev in doc["traceEvents"]:
        if ev["ph"] == "X":
            tracks[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"], ev["name"]))
    bad = []
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends: list = []  # ends of the slices enclosing the current one
        for start, end, name in spans:
            while open_ends and open_ends[-1][0] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1][0]:
                bad.append((open_ends[-1][1], name))
            open_ends.append((end, name))
    return bad


def flows(doc: dict) -> dict[int, list[dict]]:
    """The slices bound to each flow id, in file order."""
    out = defaultdict(list)
    for ev in doc["traceEvents"]:
        if ev["ph"] == "X" and "bind_id" in ev:
            out[ev["bind_id"]].append(ev)
    return out


def validate_trace(doc: dict) -> None:
    """Raise AssertionError unless ``doc`` is a valid JSON-object-format trace whose slices
    never overlap on a track and whose flows each run issue -> collective -> wait."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    for ev in doc["traceEvents"]:
        ph = ev["ph"]
        assert ph in REQUIRED, ev
        for key, typ in REQUIRED[ph].items():
            assert isinstance(ev.get(key), typ), (key, ev)
        if ph == "X":
            assert ev["ts"] >= 0 and ev["dur"] >= 0, ev
        if ph == "M":
            assert ev["name"] in METADATA_NAMES, ev
        if ph == "C":
            assert all(isinstance(v, (int, float)) for v in ev["args"].values()), ev
    assert overlaps(dumps_trace(doc)) == []
    for fid, chain in flows(doc).items():
        kinds = [(ev.get("flow_in", False), ev.get("flow_out", False)) for ev in chain]
        assert sorted(kinds) in ([(False, True), (True, True)],
                                 [(False, True), (True, False), (True, True)]), (fid, chain)
        assert len({ev["pid"] for ev in chain}) == 1, chain


def check_collective_flows(report, doc: dict) -> None:
    """Every collective slice is bound to a flow that starts at its issue and, when it is
    waited for, ends at its wait (on the compute track)."""
    by_id = flows(doc)
    for pid, sched in ((1, report.before), (2, report.after)):
        if sched is None:
            continue
        threads = {ev["tid"]: ev["args"]["name"] for ev in doc["traceEvents"]
                   if ev["ph"] == "M" and ev["name"] == "thread_name" and ev["pid"] == pid}
        compute_tid = next(t for t, n in threads.items() if n == "compute")
        slices = {ev["name"]: ev for ev in doc["traceEvents"]
                  if ev["ph"] == "X" and ev["pid"] == pid and ev.get("cat") != ISSUE_CAT}
        for c in sched.collectives:
            coll = slices[c.node]
            assert coll["flow_in"] and coll["flow_out"], c.node
            chain = by_id[coll["bind_id"]]
            issue = next(ev for ev in chain if not ev.get("flow_in"))
            assert (issue["cat"], issue["tid"], issue["dur"]) == (ISSUE_CAT, compute_tid, 0)
            assert issue["args"]["collective"] == c.node
            assert issue["ts"] <= coll["ts"] + 1e-9
            if c.wait is None:
                continue
            wait = next(ev for ev in chain if not ev.get("flow_out"))
            assert wait["name"] in c.waits and wait["tid"] == compute_tid, (c.node, wait)
            # the wait that blocked when one did, else the first (a zero-length marker)
            assert wait["cat"] == ("exposed wait" if c.exposed_us > 0 else HIDDEN_WAIT_CAT)
            assert wait["name"] == c.wait or c.exposed_us > 0


def test_trace_validates_and_round_trips_through_json(tmp_path):
    path = tmp_path / "trace.json"
    write_trace(_report(), path)
    doc = json.loads(path.read_text())
    validate_trace(doc)
    assert doc == json.loads(dumps_trace(render_trace(_report())))


def test_before_and_after_are_separate_processes_with_names():
    doc = render_trace(_report())
    names = {ev["pid"]: ev["args"]["name"] for ev in doc["traceEvents"]
             if ev["ph"] == "M" and ev["name"] == "process_name"}
    assert names == {1: "before: two_groups", 2: "after: two_groups"}


def test_a_single_schedule_is_not_called_before():
    g = two_groups()
    r = build_report(g, g.original_order, None, durations(g), estimator_name="t",
                     before_sim=hand_sim(g))
    doc = render_trace(r)
    names = [ev["args"]["name"] for ev in doc["traceEvents"]
             if ev["ph"] == "M" and ev["name"] == "process_name"]
    assert names == ["schedule: two_groups"]
    check_collective_flows(r, doc)


def test_one_named_track_per_stream_and_every_slice_on_a_named_track():
    doc = render_trace(_report())
    threads = {(ev["pid"], ev["tid"]): ev["args"] for ev in doc["traceEvents"]
               if ev["ph"] == "M" and ev["name"] == "thread_name"}
    # groups without a mesh dimension read by their c10d name and size
    assert sorted(v["name"] for (pid, _), v in threads.items() if pid == 2) == [
        "compute", "group dp (2 ranks)", "group tp (2 ranks)"]
    assert sorted(v.get("c10d_group", "") for (pid, _), v in threads.items() if pid == 2) == [
        "", "dp", "tp"]
    slices = [ev for ev in doc["traceEvents"] if ev["ph"] == "X"]
    assert all((ev["pid"], ev["tid"]) in threads for ev in slices)
    real = [ev for ev in slices if ev["cat"] not in (ISSUE_CAT, HIDDEN_WAIT_CAT)]
    assert len([ev for ev in real if ev["pid"] == 2]) == 8
    assert len([ev for ev in real if ev["pid"] == 1]) == 10


def test_lanes_are_named_by_mesh_dimension_and_size():
    b = GraphBuilder(name="mesh", world_size=8)
    b.group("1", ranks=[0, 4], mesh_dim="dp")
    b.group("5", ranks=[0, 1, 2, 3], mesh_dim="tp")
    x = b.input("x", (64, 64))
    ar = b.collective("ar", "all_reduce", "5", x)
    ag = b.collective("ag", "all_gather", "1", x)
    y = b.compute("y", "aten.add.Tensor", [b.wait("ar_wait", ar), b.wait("ag_wait", ag)],
                  (64, 64))
    b.output([y])
    g = b.build()
    r = build_report(g, g.original_order, None, [1.0] * len(g), estimator_name="t")
    threads = {ev["args"]["name"]: ev["args"].get("c10d_group") for ev in
               render_trace(r)["traceEvents"] if ev["ph"] == "M" and ev["name"] == "thread_name"}
    assert threads == {"compute": None, "dp (2 ranks)": "1", "tp (4 ranks)": "5"}


def test_complete_events_carry_op_bytes_and_group():
    doc = render_trace(_report())
    ag_b = next(ev for ev in doc["traceEvents"]
                if ev["ph"] == "X" and ev["pid"] == 2 and ev["name"] == "ag_b")
    assert ag_b["args"]["op"] == "_c10d_functional.all_gather_into_tensor.default"
    assert ag_b["args"]["bytes"] == 65536 and ag_b["args"]["group"] == "dp"
    assert (ag_b["ts"], ag_b["dur"]) == (40, 30)
    wait = next(ev for ev in doc["traceEvents"]
                if ev["ph"] == "X" and ev["pid"] == 2 and ev["name"] == "ag_b_wait")
    assert wait["cat"] == "exposed wait" and wait["args"]["exposed_us"] == 10


def _args(body: str, step: int) -> dict:
    """The args a slice's text from ``"args":`` up to the step holds, read back."""
    return json.loads("{" + body[1:] + f"{step}}}}}")["args"]


def test_nodes_share_args_text_but_not_names_or_collective_times():
    r = _report()
    nodes = _NodeTexts(r)
    i = nodes.index["ag_a"]
    ag_a = next(c for c in r.after.collectives if c.node == "ag_a")
    # a node with ag_a's op, bytes, group and type shares its args text, not its name
    twin = r.model_copy(update={"nodes": type(r.nodes)({
        name: [*col, "twin" if name == "name" else "compute" if name == "kind" else col[i]]
        for name, col in r.nodes.columns.items()})})
    twins = _NodeTexts(twin)
    head_a, body_a = twins.heads[-1], twins.args[-1]
    head_b, body_b = twins.heads[i], twins.args[i]
    assert body_a is body_b and head_a != head_b
    assert json.loads(head_a + "0}") == {"name": "twin", "cat": "compute", "ph": "X", "ts": 0}
    assert _args(body_b, 3) == {"op": "_c10d_functional.all_gather_into_tensor.default",
                                "bytes": nodes.row(i)[4], "group": "dp", "type": "all_gather",
                                "step": 3}
    # a collective's args hold its times in this schedule, whatever another node shares
    coll_args = _collective_args([ag_a], [nodes.args[i]])[0]
    assert coll_args == _node_args_text(nodes.row(i), ag_a)
    assert _args(coll_args, 3) == {
        **_args(body_b, 3), "issue_us": ag_a.issue_us, "exposed_us": ag_a.exposed_us, "step": 3}


def test_exposed_wait_args_are_the_json_of_its_node_args_step_and_blocked_time():
    r = _report()
    nodes = {n.name: n for n in r.nodes}
    texts = _NodeTexts(r)
    wait, wait_info = texts.row(texts.index["ag_b_wait"]), nodes["ag_b_wait"]
    body = texts.args[texts.index["ag_b_wait"]]
    assert _exposed_args(wait, None, body, 7, 1500) == ',"args":' + json.dumps(
        {"op": wait_info.op, "bytes": wait_info.bytes, "group": "dp", "type": "all_gather", "step": 7,
         "exposed_us": 1.5}, separators=(",", ":"))
    # a collective's own exposed_us is replaced where it stands, not repeated
    ag_b = next(c for c in r.after.collectives if c.node == "ag_b")
    node = texts.row(texts.index["ag_b"])
    body = _node_args_text(node, ag_b)
    assert _exposed_args(node, ag_b, body, 7, 2000) == ',"args":' + json.dumps(
        {"op": nodes["ag_b"].op, "bytes": nodes["ag_b"].bytes, "group": "dp", "type": "all_gather",
         "issue_us": ag_b.issue_us, "exposed_us": 2, "step": 7}, separators=(",", ":"))


def test_every_collective_flows_from_issue_to_wait():
    r = _report()
    doc = render_trace(r)
    check_collective_flows(r, doc)
    # the hidden wait of ag_a in 'after' is a zero-length slice at its wait time
    hidden = next(ev for ev in doc["traceEvents"] if ev["ph"] == "X" and ev["pid"] == 2
                  and ev["name"] == "ag_a_wait")
    assert (hidden["cat"], hidden["ts"], hidden["dur"]) == (HIDDEN_WAIT_CAT, 50, 0)


def test_rounding_never_makes_neighbours_overlap():
    """Spans of 1.6 ns: rounding start and duration separately made every third one overlap
    its neighbour by a rounding step."""
    b = GraphBuilder(name="tiny", world_size=2)
    b.group("0", ranks=[0, 1])
    prev = b.input("x", (4,))
    for k in range(30):
        prev = b.compute(f"op{k}", "aten.relu.default", [prev], (4,))
    b.output([prev])
    g = b.build()
    d = [0.0016 if n.kind.label == "compute" else 0.0 for n in g.nodes]
    r = build_report(g, g.original_order, None, d, estimator_name="t")
    text = dumps_trace(render_trace(r))
    assert overlaps(text) == []
    ends = [ev["ts"] + ev["dur"] for ev in json.loads(text, parse_float=Decimal)["traceEvents"]
            if ev["ph"] == "X"]
    assert ends[-1] == Decimal("0.048")  # nothing lost: 30 x 1.6 ns


def test_the_overlap_check_sees_an_overlap():
    doc = {"traceEvents": [
        {"name": "a", "ph": "X", "ts": 0.0, "dur": 0.002, "pid": 1, "tid": 1},
        {"name": "b", "ph": "X", "ts": 0.001, "dur": 0.002, "pid": 1, "tid": 1},
        {"name": "c", "ph": "X", "ts": 0.0, "dur": 0.010, "pid": 1, "tid": 2},
        {"name": "d", "ph": "X", "ts": 0.002, "dur": 0.003, "pid": 1, "tid": 2},  # nested
    ]}
    assert overlaps(json.dumps(doc)) == [("a", "b")]


def test_memory_counter_track():
    doc = render_trace(_report())
    counters = [ev for ev in doc["traceEvents"] if ev["ph"] == "C" and ev["pid"] == 2]
    assert max(ev["args"]["bytes"] for ev in counters) == 458752


@cache
def _load(path: Path):
    from commopt.io import load_graph

    return load_graph(path)


@pytest.mark.parametrize("path", SAMPLE_GRAPHS + CORPUS_GRAPHS,
                         ids=lambda p: str(p.relative_to(REPO / "sample_graphs")))
def test_trace_of_every_sample_and_corpus_graph(path, tmp_path):
    """Before (the graph's order) and after (waits sunk): valid JSON, no slice overlapping
    another on any track, a flow from every collective to its wait, lanes named by mesh
    dimension where the groups record one."""
    from commopt.estimators import resolve

    g = _load(path)
    r = build_report(g, g.original_order, sunk_order(g), resolve(None).durations(g),
                     estimator_name="analytical")
    out = tmp_path / "trace.json"
    write_trace(r, out)
    doc = json.loads(out.read_text(encoding="utf-8"))
    validate_trace(doc)
    check_collective_flows(r, doc)
    names = {ev["args"]["name"] for ev in doc["traceEvents"]
             if ev["ph"] == "M" and ev["name"] == "thread_name"}
    for group in g.groups.values():
        if any(c.group == group.name for c in r.before.collectives) and group.mesh_dim:
            assert f"{group.mesh_dim} ({group.size} ranks)" in names


def test_trace_chunks_render_the_file_write_trace_writes_into_any_open_file(tmp_path):
    r = _report()
    path = tmp_path / "trace.json"
    write_trace(r, path)
    fh = io.StringIO()
    fh.writelines(trace_chunks(r))
    assert fh.getvalue() == path.read_text(encoding="utf-8")
    assert json.loads(fh.getvalue()) == render_trace(r)


def test_num_is_the_repr_of_the_microseconds_at_every_magnitude():
    """Whole microseconds and decimals written without a float are exactly the repr of the
    float (or int) the times are, up to 10**15 ns and beyond, where the float's repr is used."""
    rng = random.Random(7)
    edges = [0, 1, 5, 10, 999, 1000, 1001, 1010, 1100, 1500, 2**53 - 1, 2**53, 2**53 + 1,
             10**15 - 1, 10**15, 10**15 + 1, 10**16 + 7, -1, -1000, -1500]
    samples = [rng.randrange(10**k) for k in range(1, 19) for _ in range(2000)]
    for ns in edges + samples:
        assert _num(ns) == repr(_us(ns)), ns
    common = [ns for ns in edges + samples if 0 <= ns < 10**15]
    assert _nums(common) == list(map(_num, common))
    assert _nums(edges + [2**70]) == list(map(_num, edges + [2**70]))
    assert _nums([]) == []


def _shifted(report, us: float):
    """``report`` with every span and collective time of each schedule moved by ``us``."""
    def schedule(s):
        cols = dict(s.events.columns)
        cols["start_us"] = [t + us for t in cols["start_us"]]
        cols["end_us"] = [t + us for t in cols["end_us"]]
        colls = [c.model_copy(update={
            "issue_us": c.issue_us + us, "start_us": c.start_us + us, "end_us": c.end_us + us,
            "wait_start_us": None if c.wait_start_us is None else c.wait_start_us + us})
            for c in s.collectives]
        return s.model_copy(update={"events": type(s.events)(cols), "collectives": colls})
    return report.model_copy(update={"before": schedule(report.before),
                                     "after": schedule(report.after)})


@pytest.mark.parametrize("shift_us", [0.0, 1e12 - 0.0105, 2.0**53, -0.0015])
def test_spans_written_at_once_read_as_each_span_written_alone(monkeypatch, shift_us):
    # times past 11.6 days (1e12 us) take _num's general form, past int64 ns Python's ints
    import commopt.report.trace as trace

    r = _shifted(_report(), shift_us)
    at_once = "".join(trace_chunks(r))
    monkeypatch.setattr(trace, "_span_ns_arrays", lambda starts, ends: None)
    assert "".join(trace_chunks(r)) == at_once
    assert not overlaps(at_once) or shift_us == 2.0**53  # (float64 cannot tell 1 ns apart there)
