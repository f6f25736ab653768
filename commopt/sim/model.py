"""The machine model: the rules every stage that replays an order on a clock shares.

The simulator (:mod:`commopt.sim.engine`), the memory accounting (:mod:`commopt.sim.memory`)
and the compute-overlap list scheduler (:mod:`commopt.passes.compute_overlap`) all reason
about the same machine, so its rules live here once:

- **durations**: inputs, outputs and views take no time (:func:`step_durations`);
- **compute slowdown** (off unless asked for): a compute kernel runs ``factor`` times as
  long while any collective is in flight, since NCCL kernels occupy SMs
  (:func:`stretched_end`, :func:`check_compute_slowdown`);
- **streams**: compute runs on one stream, each process group's collectives on a FIFO stream
  of their own; a successor of a collective needs it *finished* only when it waits for it,
  reads its value or queues behind it on its group's stream, otherwise only *issued*
  (:func:`needs_finish`);
- **memory**: a node that owns a storage allocates its bytes when it runs, a storage is freed
  after the last node that uses any alias of it, a collective uses its inputs until its
  waits, graph inputs are never freed (:class:`MemoryModel`). With persistent communication
  buffers (the runner's arenas) a collective's input is copied into its buffer when it is
  issued, so the collective no longer holds the producer's tensor until its wait
  (``hold_inputs_until_wait=False``); what lives in the arenas is counted once, as the
  arenas (:func:`commopt.sim.memory.footprint`).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain, pairwise

import numpy as np

from commopt.ir.graph import Graph, Node, NodeKind

#: Node kinds that take no time on any stream.
ZERO_TIME_KINDS = (NodeKind.INPUT, NodeKind.OUTPUT, NodeKind.VIEW)
_NO_ALLOC = (NodeKind.VIEW, NodeKind.WAIT, NodeKind.OUTPUT)


def step_durations(graph: Graph, durations_us: Sequence[float]) -> list[float]:
    """Per-node durations as the machine runs them: 0 for inputs, outputs and views.

    Raises ``ValueError`` when the durations do not match the graph or one is negative,
    NaN or infinite (a timeline cannot be built from them).
    """
    nodes = graph.nodes
    if len(durations_us) != len(nodes):
        raise ValueError(f"{len(durations_us)} durations for a graph of {len(nodes)} nodes")
    zero = np.frombuffer(_zero_time(graph), dtype=np.uint8).astype(bool)
    try:
        values = np.asarray(durations_us, dtype=float)
    except (TypeError, ValueError):
        values = None
    if values is not None and values.shape == zero.shape:  # the common case, whole-array
        timed = values[~zero]
        if np.isfinite(timed).all() and (timed >= 0.0).all():
            return np.where(zero, 0.0, values).tolist()
    dur = [0.0 if z else float(d) for z, d in zip(zero.tolist(), durations_us, strict=True)]
    for i, d in enumerate(dur):
        if not 0.0 <= d < math.inf:  # also rejects NaN
            raise ValueError(f"node {nodes[i].name!r} has duration {d!r}; durations are finite and >= 0")
    return dur


_ZERO_TIME: weakref.WeakKeyDictionary[Graph, bytes] = weakref.WeakKeyDictionary()


def _zero_time(graph: Graph) -> bytes:
    """1 per node of a kind that takes no time (cached per graph: replays of many orders)."""
    cached = _ZERO_TIME.get(graph)
    if cached is None:
        cached = _ZERO_TIME[graph] = bytes(node.kind in ZERO_TIME_KINDS for node in graph.nodes)
    return cached


def check_compute_slowdown(factor: float) -> float:
    """``factor`` as a compute slowdown: a finite number >= 1, else ``ValueError``.

    Below 1 compute would run faster beside communication, and every lower bound
    (:mod:`commopt.sim.bounds`) assumes a kernel takes at least its duration.
    """
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1.0 <= factor < math.inf:
        raise ValueError(f"a compute slowdown is a finite number >= 1, not {factor!r}")
    return float(factor)


def stretched_end(start: float, work: float, flights: Sequence[tuple[float, float]],
                  factor: float) -> float:
    """When a compute kernel of ``work`` microseconds started at ``start`` ends, if it runs
    ``factor`` times as long while any of ``flights`` (collectives' (start, end), in any
    order, overlapping or not) is in flight and at full speed otherwise."""
    cursor, left = start, work
    if left <= 0.0:
        return cursor
    for a, b in _merged_after(flights, start):
        if a > cursor:
            if left <= a - cursor:
                return cursor + left
            left -= a - cursor
            cursor = a
        slowed = (b - cursor) / factor
        if left <= slowed:
            return cursor + left * factor
        left -= slowed
        cursor = b
    return cursor + left


def _merged_after(flights: Sequence[tuple[float, float]], t: float) -> list[tuple[float, float]]:
    """The union of ``flights`` from ``t`` on, as sorted disjoint intervals."""
    merged: list[tuple[float, float]] = []
    for a, b in sorted((max(a, t), b) for a, b in flights if b > t):
        if merged and a <= merged[-1][1]:
            if b > merged[-1][1]:
                merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def stream_of(node: Node) -> str | None:
    """The process group whose stream runs ``node`` (a collective), or None: the compute stream."""
    if node.kind is NodeKind.COLLECTIVE:
        return node.collective.group if node.collective is not None else "?"
    return None


def needs_finish(graph: Graph, pred: int, succ: int) -> bool:
    """Whether ``succ`` must wait for ``pred`` to *finish* (True) or only to be issued.

    Only a collective can be merely issued: its successors that neither wait for it, read
    its value nor queue behind it on its group's stream may start while it is in flight.
    """
    p = graph.nodes[pred]
    if p.kind is not NodeKind.COLLECTIVE:
        return True
    s = graph.nodes[succ]
    if s.wait_of == pred or pred in s.inputs:
        return True
    return (s.kind is NodeKind.COLLECTIVE and s.collective is not None and p.collective is not None
            and s.collective.group == p.collective.group)


def effective_roots(graph: Graph) -> list[int]:
    """Storage root per node, also for views and waits a loader left without ``alias_of``."""
    root = list(graph.storage_root)
    for node in graph.nodes:
        i = node.index
        if root[i] != i:
            continue
        if node.kind is NodeKind.WAIT and node.wait_of is not None:
            root[i] = root[node.wait_of]
        elif node.kind is NodeKind.VIEW and node.inputs:
            root[i] = root[node.inputs[0]]
    return root


def allocation_bytes(graph: Graph, roots: Sequence[int] | None = None, *,
                     padded: bool = False) -> list[int]:
    """Bytes each node allocates when it runs (0 for aliases, views, waits, the output).

    ``padded=True``: the largest rank's bytes (:attr:`TensorMeta.padded_nbytes`), the same
    on every rank.
    """
    roots = effective_roots(graph) if roots is None else roots
    sizes = [0] * len(graph.nodes)
    # loaders share one TensorMeta among the tensors that look alike (a handful per graph):
    # its bytes are computed once, not once per node
    meta_bytes: dict[int, int] = {}
    for node in graph.nodes:
        i = node.index
        if roots[i] == i and node.kind not in _NO_ALLOC and node.outputs:
            total = 0
            for meta in node.outputs:
                size = meta_bytes.get(id(meta))
                if size is None:
                    size = meta_bytes[id(meta)] = meta.padded_nbytes if padded else meta.nbytes
                total += size
            sizes[i] = total
    return sizes


@dataclass(frozen=True, eq=False)
class MemoryModel:
    """Order-independent memory facts of a graph, computed once (:func:`memory_model`).

    ``alloc[i]``: bytes node ``i`` allocates when it runs. ``roots[i]``: the storage its
    value lives in. ``releases[i]``: the freeable storages (allocated, not graph inputs) node
    ``i`` uses — its inputs', its own, and for a wait its collective's inputs — so a storage
    is freed after the last node whose ``releases`` name it. ``uses[r]``: how many nodes
    name storage ``r``. ``is_input[i]``: graph inputs are live from the start, never freed.
    """

    alloc: list[int]
    roots: list[int]
    releases: list[tuple[int, ...]]
    uses: list[int]
    is_input: list[bool]
    #: ``releases`` flattened: every (node, storage) pair as two arrays, node by node (what
    #: the vectorized replays use; made with the tuples, not from them)
    release_pairs: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)


_MODELS: dict[tuple[bool, bool], weakref.WeakKeyDictionary[Graph, MemoryModel]] = {
    (padded, hold): weakref.WeakKeyDictionary() for padded in (False, True) for hold in (False, True)}


def memory_model(graph: Graph, *, padded: bool = False, hold_inputs_until_wait: bool = True) -> MemoryModel:
    """The graph's :class:`MemoryModel` (cached per graph). ``padded=True`` counts every tensor
    at its largest rank's size, so every rank takes the same decisions.
    ``hold_inputs_until_wait=False``: a wait does not use its collective's inputs (they were
    copied into a persistent buffer at the issue)."""
    key = (padded, hold_inputs_until_wait)
    cached = _MODELS[key].get(graph)
    if cached is not None:
        return cached
    roots, is_input = _storage_facts(graph)
    alloc = _allocations(graph, padded)
    freeable = bytes(a > 0 and not inp for a, inp in zip(alloc, is_input, strict=True))
    releases, uses, pairs = _releases(graph, roots, freeable, hold_inputs_until_wait)
    model = MemoryModel(alloc, roots, releases, uses, is_input, pairs)
    _MODELS[key][graph] = model
    return model


_FACTS: weakref.WeakKeyDictionary[Graph, tuple[list[int], list[bool]]] = weakref.WeakKeyDictionary()


def _storage_facts(graph: Graph) -> tuple[list[int], list[bool]]:
    """The graph's storage roots (:func:`effective_roots`) and which nodes are graph inputs,
    shared by all its models (cached per graph)."""
    facts = _FACTS.get(graph)
    if facts is None:
        facts = _FACTS[graph] = (effective_roots(graph), [node.kind is NodeKind.INPUT for node in graph.nodes])
    return facts


_ALLOCATIONS: dict[bool, weakref.WeakKeyDictionary[Graph, list[int]]] = {
    padded: weakref.WeakKeyDictionary() for padded in (False, True)}


def _allocations(graph: Graph, padded: bool) -> list[int]:
    """:func:`allocation_bytes` on the graph's storage roots, shared by the models with and
    without held inputs (cached per graph: a walk of every node's tensors)."""
    alloc = _ALLOCATIONS[padded].get(graph)
    if alloc is None:
        alloc = _ALLOCATIONS[padded][graph] = allocation_bytes(graph, _storage_facts(graph)[0],
                                                               padded=padded)
    return alloc


#: Per graph, (``releases``, ``uses``, ``release_pairs``) by (freeable storages,
#: hold_inputs_until_wait): the padded and unpadded models mostly name the same storages.
_RELEASES: weakref.WeakKeyDictionary[Graph, dict[tuple[bytes, bool], tuple[list, list[int], tuple]]] = (
    weakref.WeakKeyDictionary())


def _releases(graph: Graph, roots: list[int], freeable: bytes,
              hold: bool) -> tuple[list[tuple[int, ...]], list[int], tuple[np.ndarray, np.ndarray]]:
    """:attr:`MemoryModel.releases`, ``uses`` and ``release_pairs`` for these freeable
    storages (cached per graph): every (node, storage) use as arrays, the freeable ones kept,
    sorted and made unique at once (a set per node took a third of a second at 100k nodes).
    The models with and without ``hold`` differ only in the waits' entries and share the
    other tuples."""
    cache = _RELEASES.setdefault(graph, {})
    found = cache.get((freeable, hold))
    if found is not None:
        return found
    n = len(graph.nodes)
    user, storage = _storage_uses(graph, roots, hold)
    keep = np.frombuffer(freeable, dtype=np.uint8).astype(bool)[storage]
    pairs = sorted_unique(user[keep] * max(1, n) + storage[keep])
    del user, storage, keep
    user = pairs // max(1, n)
    bounds = [0, *np.cumsum(np.bincount(user, minlength=n)).tolist()]
    storage = pairs % max(1, n)
    del pairs
    uses = np.bincount(storage, minlength=n).tolist()
    names = np.asarray(roots, dtype=object)[storage].tolist()  # the roots' int objects, not new ones
    named = np.asarray(roots, dtype=np.int64).reshape(n)[storage]  # the same, as an array
    other = cache.get((freeable, not hold))
    if other is None:
        releases = [tuple(names[a:b]) for a, b in pairwise(bounds)]
    else:  # only the waits' entries differ: the other tuples are shared
        releases = list(other[0])
        for w in graph.waits():
            releases[w] = tuple(names[bounds[w]:bounds[w + 1]])
    found = cache[(freeable, hold)] = (releases, uses, (user, named))
    return found


def _storage_uses(graph: Graph, roots: list[int], hold: bool) -> tuple[np.ndarray, np.ndarray]:
    """Every (node, storage it uses) pair, with repeats: each node uses its inputs' storages
    and its own, and with ``hold`` a wait also its collective's inputs'."""
    nodes = graph.nodes
    root = np.asarray(roots, dtype=np.int64).reshape(len(nodes))
    user, source = input_pairs(graph)
    users, storages = [user, np.arange(len(nodes), dtype=np.int64)], [root[source], root]
    if hold:
        waits = [(w, node.wait_of) for w in graph.waits()
                 if (node := nodes[w]).wait_of is not None and node.kind is NodeKind.WAIT]
        wait = np.asarray([w for w, _ in waits], dtype=np.int64)
        coll = np.asarray([c for _, c in waits], dtype=np.int64)
        # the collective's inputs are its run of the (node, input) pairs, node by node
        begin = np.searchsorted(user, coll)
        count = np.searchsorted(user, coll, side="right") - begin
        ends = np.cumsum(count)
        at = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64) + np.repeat(begin - ends + count, count)
        users.append(np.repeat(wait, count))
        storages.append(root[source[at]])
    return np.concatenate(users), np.concatenate(storages)


_INPUT_PAIRS: weakref.WeakKeyDictionary[Graph, tuple[np.ndarray, np.ndarray]] = weakref.WeakKeyDictionary()


def input_pairs(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """(node, input) for every input of every node, node by node: the data edges as two
    arrays (cached per graph: the memory model and the buffer lifetimes both walk them)."""
    pairs = _INPUT_PAIRS.get(graph)
    if pairs is None:
        inputs = [node.inputs for node in graph.nodes]
        counts = np.fromiter(map(len, inputs), dtype=np.int64, count=len(inputs))
        source = np.fromiter(chain.from_iterable(inputs), dtype=np.int64, count=int(counts.sum()))
        pairs = _INPUT_PAIRS[graph] = (np.repeat(np.arange(len(inputs), dtype=np.int64), counts), source)
    return pairs


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending: a sort and a comparison (``np.unique`` hashes
    integers in numpy 2, several times slower on these arrays)."""
    values = np.sort(values)
    if len(values) > 1:
        values = values[np.concatenate(([True], values[1:] != values[:-1]))]
    return values
