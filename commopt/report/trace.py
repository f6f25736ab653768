"""Chrome trace-event JSON of the report, for Perfetto and chrome://tracing.

Each schedule is a process (``pid`` 1 and, with a second schedule, 2) with one thread per
lane: the compute stream, then one communication stream per process group, named by its
mesh dimension and size (``tp (4 ranks)``; the c10d name is in the ``thread_name`` event's
args). A lane whose spans overlap gets a thread per sub-row so slices nest. Slices are
complete events (``"ph": "X"``) carrying op, bytes and group, plus a live-memory counter.

Times are microseconds, as the format expects, on a 1 ns grid: every start and end is
rounded once to whole nanoseconds and ``dur`` is the difference of the rounded end and
start, so back-to-back slices on one track touch exactly and never overlap (Perfetto drops a
slice that partially overlaps its neighbour). Slice ends are computed from rounded starts.

Every collective is linked to its issue point and its wait by one flow (Chrome's flow
events v2: ``bind_id`` with ``flow_out`` / ``flow_in`` on the slices themselves): a
zero-length ``issue`` slice on the compute track, the collective's slice on its group's
track, then its wait (the exposed wait slice, or a zero-length ``wait (hidden)`` slice where
the collective had finished in time). Clicking a wait in Perfetto follows the arrow to the
collective it waits for.

The trace is checked structurally by the tests (``tests/report/test_trace.py``); loading it
in Perfetto's own trace processor (the ``perfetto`` pip package) is not part of them, since
that package downloads its binary at run time.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np

from commopt import atomic
from commopt.json_lines import compact_encoder
from commopt.report import tables
from commopt.schemas.report import CollectiveReport, OverlapReport, ScheduleReport

MEMORY_COUNTER = "live memory"
#: Category of the zero-length slices that mark an issue and a wait that did not block.
ISSUE_CAT = "issue"
HIDDEN_WAIT_CAT = "wait (hidden)"
EXPOSED_WAIT_CAT = "exposed wait"


def _ns(us: float) -> int:
    """A time in microseconds on the trace's 1 ns grid."""
    return round(us * 1000.0)


def _us(ns: int) -> float | int:
    """Whole nanoseconds as microseconds with at most three decimals (ints stay ints)."""
    return ns // 1000 if ns % 1000 == 0 else ns / 1000


class _Track:
    """Slices of one thread, kept as (start, end) in ns, for placing zero-length markers."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def snap(self, t: int) -> int:
        """``t`` moved to the nearer edge of a slice it falls strictly inside, if any.

        Markers sit on a boundary between two steps of the compute stream; rounding noise
        of a nanosecond must not put one inside a neighbouring slice.
        """
        k = bisect.bisect_right(self.starts, t) - 1
        if k >= 0 and self.starts[k] < t < self.ends[k]:
            return self.starts[k] if t - self.starts[k] <= self.ends[k] - t else self.ends[k]
        return t

    def sort(self) -> None:
        """Order the slices by start (the compute stream's events come in lane order)."""
        order = sorted(range(len(self.starts)), key=self.starts.__getitem__)
        self.starts = [self.starts[k] for k in order]
        self.ends = [self.ends[k] for k in order]


def _metadata(report: OverlapReport, s: ScheduleReport, pid: int) -> tuple[list[dict[str, Any]],
                                                                          dict[tuple[str, int], int]]:
    """The schedule's process and thread names, and the thread id of each (lane, row)."""
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
         "args": {"name": f"{s.label}: {report.graph}"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
         "args": {"sort_index": pid}},
    ]
    titles = tables.lane_titles(report)
    tids: dict[tuple[str, int], int] = {}
    for lane in s.lanes:
        title = titles.get(lane.name, lane.name)
        for row in range(lane.rows):
            tid = len(tids) + 1
            tids[(lane.name, row)] = tid
            args: dict[str, Any] = {"name": title if row == 0 else f"{title} #{row + 1}"}
            if lane.group is not None:
                args["c10d_group"] = lane.group
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": args})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                        "args": {"sort_index": tid}})
    return out, tids


#: A node of the report as the writer reads it: its :class:`NodeInfo` fields' values in
#: order (name, op, kind, duration_us, bytes, group, collective_type).
_Node = tuple


def _nodes_by_name(report: OverlapReport) -> dict[str, _Node]:
    """Every node of the report by name, as :data:`_Node` tuples."""
    return {row[0]: row for row in zip(*report.nodes.columns.values(), strict=True)}


def _node_args(node: _Node, coll: CollectiveReport | None) -> dict[str, Any]:
    """The per-node part of a slice's args (op, bytes, group, type; a collective's issue and
    exposed time in this schedule)."""
    _, op, _, _, nbytes, group, ctype = node
    args = {"op": op, "bytes": nbytes}
    if group is not None:
        args["group"] = group
    if ctype is not None:
        args["type"] = ctype
    if coll is not None:
        args["issue_us"] = round(coll.issue_us, 3)
        args["exposed_us"] = round(coll.exposed_us, 3)
    return args


def _node_text(node: _Node, coll: CollectiveReport | None,
               args_of: dict[tuple, str]) -> tuple[str, str]:
    """The text of a node's slice up to ``"ts":`` and from ``"args":`` up to the step.
    ``args_of`` keeps the args text of nodes that are not collectives by what it holds: many
    nodes share op, bytes, group and type."""
    name, op, kind, _, nbytes, group, ctype = node
    key = (op, nbytes, group, ctype)
    args = args_of.get(key) if coll is None else None
    if args is None:
        args = ',"args":' + _encode_event(_node_args(node, coll))[:-1] + ',"step":'
        if coll is None:
            args_of[key] = args
    return f'{{"name":{_str(name)},"cat":{_str(kind)},"ph":"X","ts":', args


def _schedule_events(report: OverlapReport, s: ScheduleReport, pid: int,
                     info: dict[str, _Node], flow_base: int,
                     shared: dict[str, tuple[str, str]]) -> list[str]:
    """One schedule's events as trace lines (compact JSON objects), in file order.
    ``shared``: the text of each node that is not a collective (:func:`_node_text`), the same
    in every schedule."""
    meta, tids = _metadata(report, s, pid)
    flow_of = {c.node: flow_base + k for k, c in enumerate(s.collectives)}
    # a flow ends at the collective's blocking wait, else at its first wait (a marker)
    wait_flow = {e.node: flow_of[c] for c, e in tables.blocking_waits(s).items()}
    ending = {node: f',"bind_id":{f},"flow_in":true,"flow_out":true}}' for node, f in flow_of.items()}
    ending.update((node, f',"bind_id":{f},"flow_in":true}}') for node, f in wait_flow.items())
    compute_tid = tids.get(("compute", 0), 1)
    compute = _Track()
    slices = _spans(s, pid, tids, info, shared, ending, compute_tid, compute)
    compute.sort()
    slices += _markers(s, pid, compute_tid, compute, flow_of, wait_flow)
    # zero-length markers first among slices starting at the same time, so a viewer that
    # keeps file order for equal timestamps never nests a marker inside the next slice
    slices.sort(key=itemgetter(0, 1, 2))
    out = [_encode_event(ev) for ev in meta]
    out += [sl[3] for sl in slices]
    for p in s.memory_curve:
        out.append(f'{{"name":"{MEMORY_COUNTER}","ph":"C","ts":{_num(_ns(p.time_us))},"pid":{pid},'
                   f'"tid":0,"args":{{"bytes":{p.live_bytes}}}}}')
    return out


def _spans(s: ScheduleReport, pid: int, tids: dict[tuple[str, int], int],
           info: dict[str, _Node], shared: dict[str, tuple[str, str]], ending: dict[str, str],
           compute_tid: int, compute: _Track) -> list[tuple[int, int, bool, str]]:
    """The schedule's timeline spans as sortable lines (thread id, start ns, whether it has
    a duration, line), in event order; the compute thread's spans also go to ``compute``.
    ``ending``: the end of a line that carries a flow."""
    coll = {c.node: c for c in s.collectives}
    args_of: dict[tuple, str] = {}
    where = {lane_row: (tid, f',"pid":{pid},"tid":{tid}') for lane_row, tid in tids.items()}
    out: list[tuple[int, int, bool, str]] = []
    add = out.append
    add_start, add_end = compute.starts.append, compute.ends.append
    decimals = _DECIMALS
    cols = s.events.columns
    names = cols["node"]
    starts, ends = _span_ns(cols["start_us"], cols["end_us"])
    # looked up for every span at once (a node has one span per schedule, so ``shared``
    # gains nothing this schedule needs while the loop runs)
    for name, c, text, (tid, at), step, exposed, start, end, tail in zip(
            names, map(coll.get, names), map(shared.get, names),
            map(where.__getitem__, zip(cols["lane"], cols["row"], strict=True)), cols["step"],
            cols["exposed"], starts, ends, map(ending.get, names, repeat("}")), strict=True):
        dur = end - start
        if c is not None or text is None:
            text = _node_text(info[name], c, args_of)
            if c is None:
                shared[name] = text
        if exposed:  # the compute stream blocked in a wait
            line = (f'{{"name":{_str(name)},"cat":"{EXPOSED_WAIT_CAT}","ph":"X","ts":{_num(start)},'
                    f'"dur":{_num(dur)}{at}' + _exposed_args(info[name], c, text[1], step, dur)
                    + tail)
        elif 0 <= start and end < _DECIMAL_NS:  # _num, inline
            line = (f'{text[0]}{start // 1000}{decimals[start % 1000]},"dur":{dur // 1000}'
                    f'{decimals[dur % 1000]}{at}{text[1]}{step}}}{tail}')
        else:
            line = f'{text[0]}{_num(start)},"dur":{_num(dur)}{at}{text[1]}{step}}}{tail}'
        if tid == compute_tid:
            add_start(start)
            add_end(end)
        add((tid, start, end != start, line))
    return out


def _span_ns(starts_us: Sequence[float], ends_us: Sequence[float]) -> tuple[list[int], list[int]]:
    """:func:`_ns` of every span's start and end (an end never before its start), for a
    whole schedule at once: numpy's ``rint`` rounds half to even as ``round`` does."""
    starts = np.asarray(starts_us, dtype=np.float64) * 1000.0
    ends = np.asarray(ends_us, dtype=np.float64) * 1000.0
    if not (np.all(np.abs(starts) < 2.0**62) and np.all(np.abs(ends) < 2.0**62)):
        # beyond int64, or not finite: round itself (which refuses what it cannot round)
        starts_ns = [round(t) for t in starts.tolist()]
        return starts_ns, [max(round(t), s) for t, s in zip(ends.tolist(), starts_ns, strict=True)]
    starts = np.rint(starts)
    return (starts.astype(np.int64).tolist(),
            np.maximum(np.rint(ends), starts).astype(np.int64).tolist())


def _exposed_args(node: _Node, coll: CollectiveReport | None, node_args: str, step: int,
                  dur: int) -> str:
    """The args of an exposed wait's slice, from ``"args":``: its node's (``node_args``, the
    text :func:`_node_text` gives), its step and the ``dur`` nanoseconds it blocked."""
    if coll is None:
        return f'{node_args}{step},"exposed_us":{_num(dur)}}}'
    args = _node_args(node, coll)  # a collective's args already hold an exposed_us to replace
    args["step"] = step
    args["exposed_us"] = _us(dur)
    return ',"args":' + _encode_event(args)


def _markers(s: ScheduleReport, pid: int, tid: int, compute: _Track, flow_of: dict[str, int],
             wait_flow: dict[str, int]) -> list[tuple[int, int, bool, str]]:
    """The zero-length issue and hidden-wait slices on the compute track, as sortable lines."""
    out: list[tuple[int, int, bool, str]] = []
    where = f',"pid":{pid},"tid":{tid},"args":{{"collective":'
    for c in s.collectives:
        node, group = _str(c.node), _str(c.group)
        t = compute.snap(_ns(c.issue_us))
        out.append((tid, t, False,
                    f'{{"name":{_str("issue " + c.node)},"cat":"{ISSUE_CAT}","ph":"X","ts":{_num(t)},'
                    f'"dur":0{where}{node},"group":{group},"step":{c.issue_step}}},'
                    f'"bind_id":{flow_of[c.node]},"flow_out":true}}'))
        if c.wait is not None and wait_flow.keys().isdisjoint(c.waits):
            when = c.wait_start_us if c.wait_start_us is not None else c.end_us
            t = compute.snap(_ns(when))
            out.append((tid, t, False,
                        f'{{"name":{_str(c.wait)},"cat":"{HIDDEN_WAIT_CAT}","ph":"X","ts":{_num(t)},'
                        f'"dur":0{where}{node},"group":{group},"step":{_encode_event(c.wait_step)},'
                        f'"exposed_us":0}},"bind_id":{flow_of[c.node]},"flow_in":true}}'))
    return out


def _num(ns: int) -> str:
    """Whole nanoseconds as the JSON number of :func:`_us` (JSON writes a float as repr).

    Below :data:`_DECIMAL_NS` that is the whole microseconds, then the decimals of the rest
    (``4467``, ``651.5``), with no float made: ``n / 1000`` has at most 15 significant
    digits there, so its repr (the shortest text that reads back as that float) is its exact
    decimal."""
    if 0 <= ns < _DECIMAL_NS:
        return f"{ns // 1000}{_DECIMALS[ns % 1000]}"
    return repr(_us(ns))


#: Nanoseconds below which :func:`_num` writes the decimals itself (about 11.6 days).
_DECIMAL_NS = 10**15
#: The text after the whole microseconds of a number of nanoseconds, by its last three digits.
_DECIMALS = [f".{k:03d}".rstrip("0") if k else "" for k in range(1000)]


def render_trace(report: OverlapReport) -> dict[str, Any]:
    """The trace-event document: ``traceEvents`` plus ``displayTimeUnit`` and ``otherData``
    (the file :func:`write_trace` writes, read back)."""
    return json.loads("".join(trace_chunks(report)))


def _head(report: OverlapReport) -> dict[str, Any]:
    return {
        "displayTimeUnit": "ms",
        "otherData": {"generator": "commopt", "graph": report.graph,
                      "estimator": report.estimator, "times": "simulated estimates"},
    }


def _event_parts(report: OverlapReport) -> Iterator[list[str]]:
    """The trace's event lines, one list per schedule (a writer holds one schedule's at a
    time)."""
    info = _nodes_by_name(report)
    shared: dict[str, tuple[str, str]] = {}
    yield _schedule_events(report, report.before, 1, info, 1, shared)
    if report.after is not None:
        yield _schedule_events(report, report.after, 2, info, 1 + len(report.before.collectives),
                               shared)


#: One encoder for every event line (``json.dumps`` with options builds one per call).
_encode_event = compact_encoder(ensure_ascii=False, separators=(",", ":"))
#: A JSON string as that encoder writes it.
_str = json.encoder.encode_basestring


def trace_chunks(report: OverlapReport) -> Iterator[str]:
    """The text of the trace file of ``report`` (:func:`write_trace`) in pieces, in order, for
    writing into any open text file (or joining). The events are built one schedule at a
    time, as the pieces are asked for, so the whole document is never held as one string."""
    return _document_chunks(_head(report), _event_parts(report))


def _document_chunks(head: dict[str, Any], parts: Iterable[list[str]]) -> Iterator[str]:
    """The trace file's text in pieces: the head, then one event per line."""
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False, sort_keys=True)},")
    lines.append('"traceEvents": [')
    yield "\n".join(lines)
    first = True
    for events in parts:
        for k in range(0, len(events), _LINES_PER_CHUNK):
            body = ",\n".join(events[k:k + _LINES_PER_CHUNK])
            yield ("\n" if first else ",\n") + body
            first = False
        events = body = None  # freed before the next schedule's lines are built
    yield "\n]}\n"


#: Event lines joined into one piece of text at a time (the file is written piece by piece).
_LINES_PER_CHUNK = 4096


def dumps_trace(doc: dict[str, Any]) -> str:
    """Serialize a trace deterministically, one event per line (diffable, streamable)."""
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    return "".join(_document_chunks(head, [[_encode_event(ev) for ev in doc["traceEvents"]]]))


def write_trace(report: OverlapReport, path: str | os.PathLike[str]) -> None:
    """Write the Chrome trace JSON of ``report`` to ``path``, atomically; streamed one
    schedule at a time (:func:`trace_chunks`)."""
    atomic.write_chunks(path, trace_chunks(report))
