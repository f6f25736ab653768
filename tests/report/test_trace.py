"""The Chrome trace: required trace-event fields, tracks, before/after processes, nesting."""

from __future__ import annotations

import json
from collections import defaultdict

from commopt.report.build import build_report
from commopt.report.trace import dumps_trace, render_trace, write_trace
from tests.report.samples import durations, hand_sim, naive_order, naive_sim, two_groups

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


def validate_trace(doc: dict) -> None:
    """Raise AssertionError unless ``doc`` is a valid JSON-object-format trace."""
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


def test_one_named_track_per_stream_and_every_slice_on_a_named_track():
    doc = render_trace(_report())
    threads = {(ev["pid"], ev["tid"]): ev["args"]["name"] for ev in doc["traceEvents"]
               if ev["ph"] == "M" and ev["name"] == "thread_name"}
    assert sorted(v for (pid, _), v in threads.items() if pid == 2) == [
        "comm:dp", "comm:tp", "compute"]
    slices = [ev for ev in doc["traceEvents"] if ev["ph"] == "X"]
    assert all((ev["pid"], ev["tid"]) in threads for ev in slices)
    assert len([ev for ev in slices if ev["pid"] == 2]) == 8
    assert len([ev for ev in slices if ev["pid"] == 1]) == 10


def test_complete_events_carry_op_bytes_and_group():
    doc = render_trace(_report())
    ag_b = next(ev for ev in doc["traceEvents"]
                if ev["ph"] == "X" and ev["pid"] == 2 and ev["name"] == "ag_b")
    assert ag_b["args"]["op"] == "_c10d_functional.all_gather_into_tensor.default"
    assert ag_b["args"]["bytes"] == 65536 and ag_b["args"]["group"] == "dp"
    assert (ag_b["ts"], ag_b["dur"]) == (40.0, 30.0)
    wait = next(ev for ev in doc["traceEvents"]
                if ev["ph"] == "X" and ev["pid"] == 2 and ev["name"] == "ag_b_wait")
    assert wait["cat"] == "exposed wait" and wait["args"]["exposed_us"] == 10.0


def test_slices_on_one_track_never_partially_overlap():
    doc = render_trace(_report())
    tracks = defaultdict(list)
    for ev in doc["traceEvents"]:
        if ev["ph"] == "X":
            tracks[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"]))
    for spans in tracks.values():
        spans.sort()
        for (_, e1), (s2, _) in zip(spans, spans[1:], strict=False):
            assert s2 >= e1


def test_memory_counter_track():
    doc = render_trace(_report())
    counters = [ev for ev in doc["traceEvents"] if ev["ph"] == "C" and ev["pid"] == 2]
    assert max(ev["args"]["bytes"] for ev in counters) == 458752
