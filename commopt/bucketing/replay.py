"""The makespan of a bucketed program without building its graph.

Choosing buckets tries one candidate merge after another, each differing from the program
kept so far in one bucket. Rewriting the whole graph (:func:`~commopt.bucketing.rewrite.apply_buckets`)
and simulating it per candidate costs about a second per candidate at 10,000 nodes; this module
replays the bucketed program directly on the source graph instead:

- the program is a sequence of ids: source node indices, and ids past them for the nodes the
  buckets add (the same nodes, at the same places, as the rewrite makes: :func:`bucket_sites`);
  a member's wait is gone and its read-back stands for it, so the read-back's end is written
  to the wait's id, where the wait's users read it;
- the replay follows :func:`commopt.sim.engine.makespan_us` rule for rule (same arithmetic in
  the same order), so its makespan is the simulator's makespan of the rewritten graph, exactly
  (tests/bucketing/test_replay.py checks it on corpus graphs);
- a candidate changes nothing before the first site of the bucket it changes: its replay
  starts there, from the clock, streams and node ends the kept program had
  (:meth:`Program.try_bucket`); once nothing is earlier than in the kept program at the
  same place (after the changed sites, the same nodes follow), the rest cannot end earlier
  either, and the replay stops there: the candidate does not pay.

Durations of the added nodes come from the estimator, asked on a small graph of the bucket's
nodes and the members' inputs (:func:`added_durations`): the estimators cost a node from the
node and its inputs' tensors, which that graph holds as the rewritten graph does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from commopt.bucketing.rewrite import Bucket, PendingNode, bucket_nodes, remap_refs
from commopt.ir.args import iter_refs
from commopt.ir.graph import Graph, Node, NodeKind
from commopt.sim.model import ZERO_TIME_KINDS, step_durations, stream_of

_COMPUTE, _COLL, _WAIT, _VIEW, _READBACK = 0, 1, 2, 3, 4
#: A candidate's replay checks every this many nodes whether it can stop (:meth:`Program._dominated`).
_CHUNK = 128


@dataclass
class Added:
    """The nodes one bucket adds, as replay ids: which site (source collective or wait the
    rewrite removes) each block stands before, and the removed source nodes."""

    bucket: Bucket
    sites: dict[int, list[int]]
    removed: frozenset[int]


@dataclass
class _Nodes:
    """Replay facts per id (source nodes first, then added nodes as buckets are tried)."""

    codes: list[int]
    inputs: list[tuple[int, ...]]
    lane: list[object]
    dur: list[float]
    alias: dict[int, int] = field(default_factory=dict)  # read-back id -> the wait it replaces


def source_nodes(graph: Graph, durations_us: Sequence[float]) -> _Nodes:
    """The replay facts of the source graph's nodes (as :func:`commopt.sim.engine._lanes`)."""
    code = {NodeKind.COLLECTIVE: _COLL, NodeKind.WAIT: _WAIT, NodeKind.VIEW: _VIEW}
    nodes = graph.nodes
    return _Nodes([code.get(n.kind, _COMPUTE) for n in nodes], [n.inputs for n in nodes],
                  [stream_of(n) if n.kind is NodeKind.COLLECTIVE else n.wait_of for n in nodes],
                  step_durations(graph, durations_us))


def bucket_sites(graph: Graph, pos: Sequence[int], b: Bucket, tag: str
                 ) -> tuple[dict[int, list[PendingNode]], dict[str, int]]:
    """Where the rewrite puts bucket ``b``'s nodes (``pos``: each source node's place in the
    order): site (the removed source node they stand before) -> nodes; and each member
    read-back's key -> the member wait it stands for. Same placement as
    :func:`~commopt.bucketing.rewrite.apply_buckets`."""
    issue, (head, per_member) = bucket_nodes(graph, b, tag)
    last_c = max(b.members, key=lambda c: pos[c])
    waits = [graph.waits_of(c)[0] for c in b.members]
    first_w = min(waits, key=lambda w: pos[w])
    sites: dict[int, list[PendingNode]] = {last_c: list(issue), first_w: list(head)}
    readback: dict[str, int] = {}
    for w, (items, out_key) in zip(waits, per_member, strict=True):
        sites.setdefault(w, []).extend(items)
        readback[out_key] = w
    return sites, readback


def added_durations(graph: Graph, pending: list[PendingNode],
                    estimate: Callable[[Node, Graph], float]) -> list[float]:
    """The estimator's duration of each added node, asked on a graph of the members' inputs
    (their tensors, nothing else) and the added nodes; 0 for kinds that take no time."""
    keys: dict[object, int] = {}
    nodes: list[Node] = []
    for p in pending:
        for r in iter_refs(p.args):
            if isinstance(r, int) and r not in keys:
                src = graph.nodes[r]
                keys[r] = len(nodes)
                nodes.append(Node(index=len(nodes), name=src.name, kind=NodeKind.INPUT, op=src.op,
                                  outputs=src.outputs))
    first = len(nodes)
    for k, p in enumerate(pending):
        keys[p.key] = first + k
    for p in pending:
        ref = keys.__getitem__
        nodes.append(Node(index=len(nodes), name=p.key, kind=p.kind, op=p.op,
                          inputs=tuple(dict.fromkeys(ref(r) for r in iter_refs(p.args))),
                          outputs=p.outputs, args=remap_refs(p.args, ref), kwargs=remap_refs(p.kwargs, ref),
                          collective=p.collective,
                          wait_of=None if p.wait_of is None else ref(p.wait_of),
                          alias_of=None if p.alias_of is None else ref(p.alias_of)))
    small = Graph(nodes, graph.groups, name=graph.name, source_format=graph.source_format,
                  world_size=graph.world_size, mesh=graph.mesh)
    return [0.0 if n.kind in ZERO_TIME_KINDS else float(estimate(n, small)) for n in nodes[first:]]


@dataclass
class _State:
    """A replayed program: its sequence, each id's place in it, each id's end, and before
    each place the compute clock, the latest collective end and the streams' free times."""

    seq: list[int]
    end: list[float]
    clock: list[float]
    comm_end: list[float]
    streams: list[tuple]
    makespan_us: float
    pos: dict[int, int] = field(default_factory=dict)
    last_read: list[int] = field(default_factory=list)

    def index(self, inputs: list[tuple[int, ...]]) -> None:
        """Fill :attr:`pos` (each id's place in :attr:`seq`) and :attr:`last_read` (the last
        place that reads each id; -1: none)."""
        self.pos = {x: p for p, x in enumerate(self.seq)}
        last = [-1] * len(self.end)
        for p, x in enumerate(self.seq):
            for i in inputs[x]:
                last[i] = p
        self.last_read = last


class Program:
    """The bucketed program of ``graph`` in ``order`` with the buckets kept so far, replayed;
    :meth:`try_bucket` gives the makespan with one bucket added or replaced, replaying only
    from the first place it changes; :meth:`accept` keeps the last one tried. ``steps``
    counts the nodes replayed (the work the choice spends)."""

    def __init__(self, graph: Graph, order: Sequence[int], durations_us: Sequence[float],
                 estimate: Callable[[Node, Graph], float], tags: Callable[[int], str]) -> None:
        self.graph, self.estimate, self.tags = graph, estimate, tags
        self.order_pos = [0] * len(graph)
        for p, i in enumerate(order):
            self.order_pos[i] = p
        self.nodes = source_nodes(graph, durations_us)
        self.added: list[Added] = []  # the buckets of the kept program, in choice order
        self.steps = 0
        self._tried: tuple[int | None, Added, _State] | None = None
        self.state = self._replay(list(order))

    @property
    def makespan_us(self) -> float:
        """The kept program's makespan."""
        return self.state.makespan_us

    def try_bucket(self, bucket: Bucket, replaces: int | None) -> float | None:
        """The makespan with ``bucket`` added (``replaces``: None) or in place of kept bucket
        number ``replaces`` (every member of which it must hold); None when it cannot be
        shorter than the kept program's (:meth:`_dominated`), found without replaying the
        rest of the program."""
        slot = len(self.added) if replaces is None else replaces
        new = self._add(bucket, self.tags(slot))
        old = None if replaces is None else self.added[replaces]
        state = self.state
        changed = set(new.removed) | set(new.sites)
        drop: set[int] = set()
        if old is not None:
            for ids in old.sites.values():
                drop.update(ids)
        spots = [state.pos[x] for x in (changed | drop) if x in state.pos]
        p0, q = min(spots), max(spots) + 1
        window = self._window(state.seq[p0:q], new, old, drop)
        end = state.end + [0.0] * (len(self.nodes.codes) - len(state.end))
        run = _Run(end, state.clock[:p0], state.comm_end[:p0], state.streams[:p0],
                   state.clock[p0], state.comm_end[p0], state.streams[p0])
        self._advance(run, window)
        old_end, n = state.end, len(state.end)
        earlier = {x for x in (*window, *new.removed) if x < n and end[x] < old_end[x]}
        tail = state.seq[q:]
        for j in range(0, len(tail), _CHUNK):
            if self._dominated(run, state, q + j, earlier):
                self._tried = None
                return None
            chunk = tail[j:j + _CHUNK]
            self._advance(run, chunk)
            earlier.update(x for x in chunk if end[x] < old_end[x])
        tried = _State(state.seq[:p0] + window + tail, end, run.clock, run.comm, run.streams,
                       max(run.t, run.comm_end))
        self._tried = (replaces, new, tried)
        return tried.makespan_us

    @staticmethod
    def _dominated(run: _Run, base: _State, p: int, earlier: set[int]) -> bool:
        """Whether, before place ``p`` of the rest (the same nodes as the kept program's from
        there), nothing is earlier than in the kept program: the compute clock, the latest
        collective end, every stream, and the end of every node a later place reads
        (``earlier``: the nodes that ended earlier; those no later place reads are dropped).
        The replay only takes maxima and adds the same durations, so the rest then ends no
        earlier: the makespan cannot drop."""
        if run.t < base.clock[p] or run.comm_end < base.comm_end[p]:
            return False
        last = base.last_read
        earlier.difference_update([x for x in earlier if last[x] < p])
        if earlier:
            return False
        mine = dict(run.streams_now)
        return all(mine.get(g, 0.0) >= free for g, free in base.streams[p])

    def accept(self) -> None:
        """Keep the program of the last :meth:`try_bucket` (one that returned a makespan)."""
        replaces, new, tried = self._tried
        if replaces is None:
            self.added.append(new)
        else:
            self.added[replaces] = new
        tried.index(self.nodes.inputs)
        self.state, self._tried = tried, None

    def _add(self, bucket: Bucket, tag: str) -> Added:
        """Replay ids and facts for ``bucket``'s nodes."""
        sites, readback = bucket_sites(self.graph, self.order_pos, bucket, tag)
        pending = [p for items in sites.values() for p in items]
        nodes = self.nodes
        base = len(nodes.codes)
        ids = {p.key: base + k for k, p in enumerate(pending)}
        code = {NodeKind.COLLECTIVE: _COLL, NodeKind.WAIT: _WAIT, NodeKind.VIEW: _VIEW}
        nodes.dur.extend(added_durations(self.graph, pending, self.estimate))
        for p in pending:
            me = ids[p.key]
            nodes.inputs.append(tuple(dict.fromkeys(r if isinstance(r, int) else ids[r]
                                                    for r in iter_refs(p.args))))
            if p.key in readback:
                nodes.codes.append(_READBACK)
                nodes.alias[me] = readback[p.key]
            else:
                nodes.codes.append(code.get(p.kind, _COMPUTE))
            nodes.lane.append(p.collective.group if p.kind is NodeKind.COLLECTIVE
                              else ids[p.wait_of] if p.wait_of is not None else None)
        removed = set(bucket.members) | {self.graph.waits_of(c)[0] for c in bucket.members}
        return Added(bucket, {s: [ids[p.key] for p in items] for s, items in sites.items()},
                     frozenset(removed))

    @staticmethod
    def _window(items: list[int], new: Added, old: Added | None, drop: set[int]) -> list[int]:
        """``items`` (a slice of the kept sequence) with ``old``'s nodes and ``new``'s removed
        source nodes taken out and ``new``'s nodes put at their sites."""
        site_of: dict[int, int] = {}
        if old is not None:
            for s, ids in old.sites.items():
                for x in ids:
                    site_of[x] = s
        out: list[int] = []
        placed: set[int] = set()
        for x in items:
            if x in drop or x in new.removed:
                s = site_of.get(x, x)
                if s in new.sites and s not in placed:
                    placed.add(s)
                    out.extend(new.sites[s])
                continue
            out.append(x)
        return out

    def _replay(self, seq: list[int]) -> _State:
        """Replay the whole of ``seq`` from the start."""
        run = _Run([0.0] * len(self.nodes.codes), [], [], [], 0.0, 0.0, ())
        self._advance(run, seq)
        state = _State(seq, run.end, run.clock, run.comm, run.streams, max(run.t, run.comm_end))
        state.index(self.nodes.inputs)
        return state

    def _advance(self, run: _Run, seq: list[int]) -> None:
        """Replay ``seq`` on from ``run``'s state, recording the state before each place, with
        the arithmetic of :func:`commopt.sim.engine.makespan_us`."""
        nodes = self.nodes
        codes, inputs, lane, dur, alias = nodes.codes, nodes.inputs, nodes.lane, nodes.dur, nodes.alias
        end, clock, comm, streams = run.end, run.clock, run.comm, run.streams
        t, comm_end, snap = run.t, run.comm_end, run.streams_now
        free = dict(snap)
        for i in seq:
            clock.append(t)
            comm.append(comm_end)
            streams.append(snap)
            ready = 0.0
            for p in inputs[i]:
                if end[p] > ready:
                    ready = end[p]
            code = codes[i]
            if code == _COLL:
                g = lane[i]
                s = max(free.get(g, 0.0), t, ready)
                e = end[i] = free[g] = s + dur[i]
                snap = tuple(free.items())
                if e > comm_end:
                    comm_end = e
            elif code == _VIEW:
                end[i] = ready if ready > t else t
            elif code == _READBACK:
                end[i] = end[alias[i]] = ready if ready > t else t
            else:  # compute, or a wait (its inputs are its collective)
                t = end[i] = (ready if ready > t else t) + dur[i]
        self.steps += len(seq)
        run.t, run.comm_end, run.streams_now = t, comm_end, snap


@dataclass
class _Run:
    """A replay under way: node ends, the state recorded before each place so far, and the
    compute clock, latest collective end and streams (``(group, free at)`` pairs) now."""

    end: list[float]
    clock: list[float]
    comm: list[float]
    streams: list[tuple]
    t: float
    comm_end: float
    streams_now: tuple
