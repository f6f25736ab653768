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
from operator import add, attrgetter
from typing import Any

import numpy as np

from commopt import atomic
from commopt.json_lines import compact_encoder
from commopt.report import fmt, tables
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
    """The slices of one thread, as (start, end) in ns by start, for placing zero-length
    markers on it."""

    def __init__(self, starts: np.ndarray | list[int], ends: np.ndarray | list[int]) -> None:
        """The thread's slices from their starts and ends (int64 arrays, or lists of ints
        where a time does not fit), in any order."""
        if isinstance(starts, np.ndarray):
            order = np.argsort(starts, kind="stable")
            self.starts, self.ends = starts[order], ends[order]
        else:
            order = sorted(range(len(starts)), key=starts.__getitem__)
            self.starts = [starts[k] for k in order]
            self.ends = [ends[k] for k in order]

    def snap(self, t: int) -> int:
        """``t`` moved to the nearer edge of a slice it falls strictly inside, if any.

        Markers sit on a boundary between two steps of the compute stream; rounding noise
        of a nanosecond must not put one inside a neighbouring slice.
        """
        k = bisect.bisect_right(self.starts, t) - 1
        if k >= 0 and self.starts[k] < t < self.ends[k]:
            start, end = int(self.starts[k]), int(self.ends[k])
            return start if t - start <= end - t else end
        return t

    def snap_all(self, times: list[int]) -> list[int]:
        """:meth:`snap` of every time, at once where all fit in int64."""
        try:
            t = np.array(times, dtype=np.int64)
            starts = np.asarray(self.starts, dtype=np.int64)
            ends = np.asarray(self.ends, dtype=np.int64)
        except OverflowError:
            return list(map(self.snap, times))
        if not len(starts):
            return times
        k = np.searchsorted(starts, t, side="right") - 1
        start, end = starts[np.maximum(k, 0)], ends[np.maximum(k, 0)]
        inside = (k >= 0) & (start < t) & (t < end)
        nearer = np.where(t - start <= end - t, start, end)
        return np.where(inside, nearer, t).tolist()


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
#: The text of a slice up to ``"ts":``, of its node's name and kind (JSON strings).
_HEAD = '{"name":%s,"cat":%s,"ph":"X","ts":'
#: A slice of the common times (:data:`_DECIMAL_NS`), from its head (a node's :data:`_HEAD`,
#: or an exposed wait's :data:`_EXPOSED_HEAD`): start (whole us, decimals), duration (whole us,
#: decimals), pid and tid, the args of its node, the step, what follows the step (an exposed
#: wait's time blocked, :data:`_EXPOSED_US`) and the end of the line (:func:`_span_line`
#: writes the others).
_SPAN = '%s%d%s,"dur":%d%s%s%s%d%s}%s'
#: The head of an exposed wait's slice (not a collective's), from its node's name.
_EXPOSED_HEAD = f'{{"name":%s,"cat":"{EXPOSED_WAIT_CAT}","ph":"X","ts":'
#: What follows the step in an exposed wait's slice: the time it blocked.
_EXPOSED_US = ',"exposed_us":'
#: The ends of the lines of a collective's slice and of its blocking wait's (flow id).
_FLOW_THROUGH = ',"bind_id":%d,"flow_in":true,"flow_out":true}'
_FLOW_IN = ',"bind_id":%d,"flow_in":true}'
#: The zero-length slices of a collective's issue and of a wait that did not block (their
#: name, time, pid and tid, collective, group, step and flow id as JSON text).
_ISSUE_MARKER = (f'{{"name":%s,"cat":"{ISSUE_CAT}","ph":"X","ts":%s,"dur":0,"pid":%d,"tid":%d,'
                 '"args":{"collective":%s,"group":%s,"step":%d},"bind_id":%d,"flow_out":true}')
_HIDDEN_WAIT_MARKER = (f'{{"name":%s,"cat":"{HIDDEN_WAIT_CAT}","ph":"X","ts":%s,"dur":0,"pid":%d,'
                       '"tid":%d,"args":{"collective":%s,"group":%s,"step":%s,"exposed_us":0},'
                       '"bind_id":%d,"flow_in":true}')


class _NodeTexts:
    """Every node of the report (:data:`_Node` rows, by name) with the text of its slices
    that is the same in every schedule: the head (:data:`_HEAD`) and, for a node that is not
    a collective, the args up to the step (:func:`_node_args_text`), as object arrays (a
    schedule takes its events' texts from them by index, in numpy). Made once per trace, for
    all nodes at once; nodes with the same op, bytes, group and type share one args text."""

    __slots__ = ("columns", "index", "heads", "args")

    def __init__(self, report: OverlapReport) -> None:
        cols = report.nodes.columns
        self.columns = list(cols.values())
        names = cols["name"]
        self.index = dict(zip(names, range(len(names)), strict=True))
        self.heads = _objects(map(_HEAD.__mod__, zip(map(_str, names), map(_str, cols["kind"]),
                                                     strict=True)), len(names))
        def keys() -> Iterator[tuple]:  # made twice rather than kept: one tuple per node
            return zip(cols["op"], cols["bytes"], cols["group"], cols["collective_type"],
                       strict=True)

        args_of = dict.fromkeys(keys())
        for op, nbytes, group, ctype in args_of:
            args_of[op, nbytes, group, ctype] = _node_args_text(
                (None, op, None, None, nbytes, group, ctype), None)
        self.args = _objects(map(args_of.__getitem__, keys()), len(names))

    def row(self, i: int) -> _Node:
        """Node ``i``'s row."""
        return tuple(col[i] for col in self.columns)


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


def _node_args_text(node: _Node, coll: CollectiveReport | None) -> str:
    """The text of a node's slice from ``"args":`` up to the step (:func:`_node_args`)."""
    return ',"args":' + _encode_event(_node_args(node, coll))[:-1] + ',"step":'


def _schedule_events(report: OverlapReport, s: ScheduleReport, pid: int,
                     nodes: _NodeTexts, flow_base: int) -> Iterator[list[str]]:
    """One schedule's events as trace lines (compact JSON objects), in file order, a chunk
    of lines at a time: the slices are kept as columns and written as their chunk is asked
    for, so a schedule's lines are never all held at once."""
    meta, tids = _metadata(report, s, pid)
    yield [_encode_event(ev) for ev in meta]
    flow_of = dict(zip(map(attrgetter("node"), s.collectives),
                       range(flow_base, flow_base + len(s.collectives)), strict=True))
    # a flow ends at the collective's blocking wait, else at its first wait (a marker)
    wait_flow = {w: flow_of[c] for c, w in tables.blocking_wait_nodes(s).items()}
    ending = dict(zip(flow_of, map(_FLOW_THROUGH.__mod__, flow_of.values()), strict=True))
    ending.update(zip(wait_flow, map(_FLOW_IN.__mod__, wait_flow.values()), strict=True))
    compute_tid = tids.get(("compute", 0), 1)
    spans = _SpanTable(s, pid, tids, nodes, ending)
    markers = _markers(s, pid, compute_tid, _Track(*spans.on_thread(compute_tid)), flow_base,
                       wait_flow)
    order = _file_order([spans.tids, markers.tids], [spans.starts, markers.starts],
                        [spans.ends, markers.ends])
    # every line but the common spans', written already (None for those)
    written = np.concatenate([spans.written, _objects(markers.lines, len(markers.lines))])
    common = np.concatenate([spans.common, np.zeros(len(markers.lines), dtype=bool)])
    for k in range(0, len(order), _LINES_PER_CHUNK):
        rows = order[k:k + _LINES_PER_CHUNK]
        is_common = common[rows]
        lines = written[rows]
        if is_common.any():
            lines[is_common] = spans.lines(rows[is_common])
        yield lines.tolist()
    yield [f'{{"name":"{MEMORY_COUNTER}","ph":"C","ts":{_num(_ns(p.time_us))},"pid":{pid},'
           f'"tid":0,"args":{{"bytes":{p.live_bytes}}}}}' for p in s.memory_curve]


class _Lines:
    """Slices as trace lines, in the order they are made, with what orders them in the file:
    per line its thread id, start and end (ns)."""

    __slots__ = ("lines", "tids", "starts", "ends")

    def __init__(self, lines: list[str], tids: list[int], starts: list[int],
                 ends: list[int]) -> None:
        self.lines, self.tids, self.starts, self.ends = lines, tids, starts, ends


def _file_order(tids: list[Sequence[int]], starts: list[Sequence[int]],
                ends: list[Sequence[int]]) -> np.ndarray:
    """The order in the file of the slices of several parts (each given by its slices'
    thread ids, starts and ends, in ns), numbered one part after the other: by thread,
    start, then zero-length markers first among slices starting at the same time (so a
    viewer that keeps file order for equal timestamps never nests a marker inside the next
    slice); slices that tie keep their order."""
    try:
        keys = [np.concatenate([np.asarray(part, dtype=np.int64) for part in parts])
                for parts in (tids, starts, ends)]
    except OverflowError:  # a time beyond int64: Python sorts it
        rows = [(tid, start, end != start) for t, st, en in zip(tids, starts, ends, strict=True)
                for tid, start, end in zip(t, st, en, strict=True)]
        return np.array(sorted(range(len(rows)), key=rows.__getitem__), dtype=np.int64)
    return np.lexsort((keys[2] != keys[1], keys[1], keys[0]))  # stable, as sorted is


class _SpanTable:
    """A schedule's timeline spans (in event order) as columns, and their trace lines for
    any rows asked for. The spans of the common times (and not a collective's exposed span)
    are written by one template (:data:`_SPAN`), many at once, from columns taken by index in
    numpy; the rare others by :func:`_span_line`, beforehand (:attr:`written`)."""

    def __init__(self, s: ScheduleReport, pid: int, tids: dict[tuple[str, int], int],
                 nodes: _NodeTexts, ending: dict[str, str]) -> None:
        """``ending``: the end of a line that carries a flow, by node name."""
        cols = s.events.columns
        names, steps, exposed = cols["node"], cols["step"], cols["exposed"]
        n = len(names)
        colls = s.collectives
        node_of = np.array(list(map(nodes.index.__getitem__, names)), dtype=np.int64)
        self.tids = np.array(list(map(tids.__getitem__, zip(cols["lane"], cols["row"],
                                                            strict=True))), dtype=np.int64)
        # the text of each thread's pid and tid, by tid
        self.at_of = _objects(map(f',"pid":{pid},"tid":%d'.__mod__,
                                  range(max(tids.values(), default=0) + 1)))
        self.steps = _objects(steps, n)
        # per node: a collective's args hold its times here; a flow's end
        coll_at = _node_rows(nodes, dict(zip(map(attrgetter("node"), colls), colls, strict=True)))
        is_coll = np.zeros(len(nodes.args), dtype=bool)
        is_coll[_indices(coll_at)] = True
        is_coll = is_coll[node_of]
        args = nodes.args.copy()
        args[_indices(coll_at)] = _collective_args(list(coll_at.values()),
                                                   args[_indices(coll_at)].tolist())
        self.args = args[node_of]
        tails = np.full(len(nodes.args), "}", dtype=object)
        flows = _node_rows(nodes, ending)
        tails[_indices(flows)] = list(flows.values())
        self.tails = tails[node_of]
        self.heads = nodes.heads[node_of]
        self.extra = np.full(n, "", dtype=object)
        self.written = np.full(n, None, dtype=object)
        is_exposed = np.asarray(exposed, dtype=bool)
        ns = _span_ns_arrays(cols["start_us"], cols["end_us"])
        if ns is None:
            self.starts, self.ends = _span_ns(cols["start_us"], cols["end_us"])
            self.common = np.zeros(n, dtype=bool)
        else:
            self.starts, self.ends = ns
            self.common = (self.starts >= 0) & (self.ends < _DECIMAL_NS) & ~(is_exposed & is_coll)
            waits = np.flatnonzero(self.common & is_exposed)
            self.heads[waits] = list(map(_EXPOSED_HEAD.__mod__,
                                         map(_str, map(names.__getitem__, waits.tolist()))))
            self.extra[waits] = list(map(add, repeat(_EXPOSED_US),
                                         _nums((self.ends[waits] - self.starts[waits]).tolist())))
        general = np.flatnonzero(~self.common).tolist()
        if general:
            coll = {c.node: c for c in colls}
            at = self.at_of[self.tids].tolist()
            self.written[general] = [
                _span_line(nodes, int(node_of[k]), coll.get(names[k]), int(self.starts[k]),
                           int(self.ends[k]), at[k], steps[k], exposed[k], self.tails[k])
                for k in general]

    def on_thread(self, tid: int) -> tuple[np.ndarray, np.ndarray] | tuple[list[int], list[int]]:
        """The starts and ends of the spans on thread ``tid``, in event order (as
        :attr:`starts` holds them: arrays, or lists where a time does not fit)."""
        on = np.flatnonzero(self.tids == tid)
        if isinstance(self.starts, np.ndarray):
            return self.starts[on], self.ends[on]
        return np.asarray(self.starts)[on].tolist(), np.asarray(self.ends)[on].tolist()

    def lines(self, rows: np.ndarray) -> list[str]:
        """The trace lines of the common spans ``rows``, in that order."""
        start = self.starts[rows]
        dur = self.ends[rows] - start
        return list(map(_SPAN.__mod__, zip(
            self.heads[rows].tolist(), (start // 1000).tolist(),
            _DECIMAL_TEXTS[start % 1000].tolist(), (dur // 1000).tolist(),
            _DECIMAL_TEXTS[dur % 1000].tolist(), self.at_of[self.tids[rows]].tolist(),
            self.args[rows].tolist(), self.steps[rows].tolist(), self.extra[rows].tolist(),
            self.tails[rows].tolist(), strict=True)))


def _node_rows(nodes: _NodeTexts, by_name: dict[str, Any]) -> dict[int, Any]:
    """``by_name`` by the index of its node, for the names that are nodes."""
    at = list(map(nodes.index.get, by_name))
    return {i: v for i, v in zip(at, by_name.values(), strict=True) if i is not None}


def _indices(rows: Iterable[int]) -> np.ndarray:
    """``rows`` as an index array (empty too)."""
    return np.fromiter(rows, dtype=np.intp)


def _objects(values: Iterable[Any], n: int = -1) -> np.ndarray:
    """``values`` as a 1-d object array (``n`` of them, when known)."""
    return np.fromiter(values, dtype=object, count=n)


def _span_line(nodes: _NodeTexts, i: int, c: CollectiveReport | None, start: int, end: int,
               at: str, step: int, exposed: bool, tail: str) -> str:
    """The line of one span of node ``i``, whatever its shape and times. ``at``: its pid and
    tid; ``tail``: its line's end."""
    dur = end - start
    node = nodes.row(i)
    args = nodes.args[i] if c is None else _node_args_text(node, c)
    if exposed:  # the compute stream blocked in a wait
        return (f'{{"name":{_str(node[0])},"cat":"{EXPOSED_WAIT_CAT}","ph":"X","ts":{_num(start)},'
                f'"dur":{_num(dur)}{at}' + _exposed_args(node, c, args, step, dur) + tail)
    return f'{nodes.heads[i]}{_num(start)},"dur":{_num(dur)}{at}{args}{step}}}{tail}'


def _fill(values: list[Any], rows: list[int], new: Iterable[Any]) -> None:
    """Set ``values[rows[k]]`` to the k-th of ``new``."""
    for k, value in zip(rows, new, strict=True):
        values[k] = value


def _collective_args(colls: list[CollectiveReport], node_args: list[str]) -> list[str]:
    """The args text of each collective's slice (:func:`_node_args_text`) from the text of
    its node's (``node_args``): the same with its issue and exposed times (in this
    schedule, rounded to the ns) before the step."""
    if not colls:
        return []
    times = fmt.number_rows([(fmt.MS, list(map(attrgetter("issue_us"), colls))),
                             (fmt.MS, list(map(attrgetter("exposed_us"), colls)))])[0]
    times = times[:-1].split(",")
    step = len(',"step":')
    # nodes share few args texts: each is cut once
    heads = {a: a[:-step] for a in dict.fromkeys(node_args)}
    return list(map(_COLLECTIVE_ARGS.__mod__, zip(map(heads.__getitem__, node_args),
                                                  times[::2], times[1::2], strict=True)))


#: A collective's args text from its node's, less the step: then its issue and exposed times.
_COLLECTIVE_ARGS = '%s,"issue_us":%s,"exposed_us":%s,"step":'


def _ns_array(times_us: Sequence[float]) -> np.ndarray | None:
    """:func:`_ns` of every time as an int64 array (numpy's ``rint`` rounds half to even as
    ``round`` does); None where a time does not fit in int64 (or is not finite)."""
    ns = np.asarray(times_us, dtype=np.float64) * 1000.0
    if not np.all(np.abs(ns) < 2.0**62):
        return None
    return np.rint(ns).astype(np.int64)


def _span_ns_arrays(starts_us: Sequence[float],
                    ends_us: Sequence[float]) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_span_ns` as int64 arrays; None where a time does not fit (or is not finite)."""
    starts, ends = _ns_array(starts_us), _ns_array(ends_us)
    if starts is None or ends is None:
        return None
    return starts, np.maximum(ends, starts)


def _span_ns(starts_us: Sequence[float], ends_us: Sequence[float]) -> tuple[list[int], list[int]]:
    """:func:`_ns` of every span's start and end (an end never before its start), for a
    whole schedule at once: numpy's ``rint`` rounds half to even as ``round`` does."""
    arrays = _span_ns_arrays(starts_us, ends_us)
    if arrays is None:
        # beyond int64, or not finite: round itself (which refuses what it cannot round)
        starts = (np.asarray(starts_us, dtype=np.float64) * 1000.0).tolist()
        ends = (np.asarray(ends_us, dtype=np.float64) * 1000.0).tolist()
        starts_ns = [round(t) for t in starts]
        return starts_ns, [max(round(t), s) for t, s in zip(ends, starts_ns, strict=True)]
    return arrays[0].tolist(), arrays[1].tolist()


def _exposed_args(node: _Node, coll: CollectiveReport | None, node_args: str, step: int,
                  dur: int) -> str:
    """The args of an exposed wait's slice, from ``"args":``: its node's (``node_args``, the
    text :func:`_node_args_text` gives), its step and the ``dur`` nanoseconds it blocked."""
    if coll is None:
        return f'{node_args}{step},"exposed_us":{_num(dur)}}}'
    args = _node_args(node, coll)  # a collective's args already hold an exposed_us to replace
    args["step"] = step
    args["exposed_us"] = _us(dur)
    return ',"args":' + _encode_event(args)


def _markers(s: ScheduleReport, pid: int, tid: int, compute: _Track, flow_base: int,
             wait_flow: dict[str, int]) -> _Lines:
    """The zero-length issue and hidden-wait slices on the compute track, as lines: each
    collective's issue, then its wait when no exposed span of it carries the flow."""
    colls = s.collectives
    m = len(colls)
    names = list(map(attrgetter("node"), colls))
    nodes = list(map(_str, names))
    groups = list(map(_str, map(attrgetter("group"), colls)))
    issue_at = compute.snap_all(_ns_all(list(map(attrgetter("issue_us"), colls))))
    issues = list(map(_ISSUE_MARKER.__mod__, zip(
        map(_str, map(add, repeat("issue "), names)), _nums(issue_at), repeat(pid), repeat(tid),
        nodes, groups, map(attrgetter("issue_step"), colls), range(flow_base, flow_base + m))))
    hidden = [k for k, c in enumerate(colls)
              if c.wait is not None and wait_flow.keys().isdisjoint(c.waits)]
    waiting = list(map(colls.__getitem__, hidden))
    wait_at = compute.snap_all(_ns_all([c.end_us if c.wait_start_us is None else c.wait_start_us
                                        for c in waiting]))
    waits = list(map(_HIDDEN_WAIT_MARKER.__mod__, zip(
        [_str(c.wait) for c in waiting], _nums(wait_at), repeat(pid), repeat(tid),
        map(nodes.__getitem__, hidden), map(groups.__getitem__, hidden),
        [_encode_event(c.wait_step) for c in waiting], [flow_base + k for k in hidden])))
    # each collective's issue, then its hidden wait
    before = np.searchsorted(np.array(hidden, dtype=np.int64), np.arange(m))
    issue_rows = (np.arange(m) + before).tolist()
    wait_rows = (np.array(hidden, dtype=np.int64) + np.arange(len(hidden)) + 1).tolist()
    lines: list[str] = [""] * (m + len(hidden))
    at: list[int] = [0] * len(lines)
    for rows, new, times in ((issue_rows, issues, issue_at), (wait_rows, waits, wait_at)):
        _fill(lines, rows, new)
        _fill(at, rows, times)
    return _Lines(lines, [tid] * len(at), at, at)


def _ns_all(times_us: list[float]) -> list[int]:
    """:func:`_ns` of every time, at once where all fit in int64 (``rint`` rounds half to even
    as ``round`` does)."""
    ns = _ns_array(times_us)
    if ns is None:  # beyond int64, or not finite: round itself
        return list(map(_ns, times_us))
    return ns.tolist()


def _num(ns: int) -> str:
    """Whole nanoseconds as the JSON number of :func:`_us` (JSON writes a float as repr).

    Below :data:`_DECIMAL_NS` that is the whole microseconds, then the decimals of the rest
    (``4467``, ``651.5``), with no float made: ``n / 1000`` has at most 15 significant
    digits there, so its repr (the shortest text that reads back as that float) is its exact
    decimal."""
    if 0 <= ns < _DECIMAL_NS:
        return f"{ns // 1000}{_DECIMALS[ns % 1000]}"
    return repr(_us(ns))


def _nums(times: list[int]) -> list[str]:
    """:func:`_num` of every time, for many at once (as one array where all are common)."""
    try:
        ns = np.array(times, dtype=np.int64)
    except OverflowError:
        return list(map(_num, times))
    if not np.all((ns >= 0) & (ns < _DECIMAL_NS)):
        return list(map(_num, times))
    return list(map(add, map(str, (ns // 1000).tolist()),
                    map(_DECIMALS.__getitem__, (ns % 1000).tolist())))


#: Nanoseconds below which :func:`_num` writes the decimals itself (about 11.6 days).
_DECIMAL_NS = 10**15
#: The text after the whole microseconds of a number of nanoseconds, by its last three digits.
_DECIMALS = [f".{k:03d}".rstrip("0") if k else "" for k in range(1000)]
#: :data:`_DECIMALS` as an object array, to take by index in numpy.
_DECIMAL_TEXTS = np.array(_DECIMALS, dtype=object)


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
    """The trace's event lines in chunks (a writer holds one chunk's lines at a time)."""
    nodes = _NodeTexts(report)
    yield from _schedule_events(report, report.before, 1, nodes, 1)
    if report.after is not None:
        yield from _schedule_events(report, report.after, 2, nodes,
                                    1 + len(report.before.collectives))


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
    """The trace file's text in pieces: the head, then one event per line (a piece per list
    of ``parts``)."""
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False, sort_keys=True)},")
    lines.append('"traceEvents": [')
    yield "\n".join(lines)
    first = True
    for lines in parts:
        if lines:
            yield ("\n" if first else ",\n") + ",\n".join(lines)
            first = False
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
