"""Which communication buffers a graph needs, their sizes and their lifetimes on an order.

Buffers are the inputs and outputs of collectives (one per tensor for coalesced collectives,
one shared ``inout`` buffer per tensor for in-place collectives). Lifetimes are inclusive
positions in the order:

- input: from the collective's issue (the runner copies the value in then) to its last wait,
  since the collective may read its input until then; when the producer writes straight into
  the buffer (zero-copy: the value is the producer's result, or a view of it that keeps its
  bytes in order, :func:`commopt.ir.layout.same_bytes_root`), from the node that allocates the
  value's storage (its storage root, through views; position 0 for a graph input);
- output: from the collective's issue to the last use of the result through any alias (views,
  getitems, waits), and at least to the last wait;
- inout: from the issue (from the storage's allocation when zero-copy) to the last use of any
  alias of it, and at least to the last wait.
- a shared input slot (collectives reading one unwritten content, :mod:`commopt.buffers.shared`):
  from the first reader's issue (or the producer, zero-copy) to the last reader's last wait;
- a persistent parameter slot (:mod:`commopt.buffers.persistent`): the whole order.

Sizes are the largest rank's shard (``TensorMeta.padded_nbytes``) so every rank computes the
same plan; alignment is applied by the planner. A tensor whose size is data-dependent
(:mod:`commopt.ir.sizes`: only the running program knows it) gets no buffer: a fixed slot
sized by an assumed value could be too small, so the runner allocates it fresh each step.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from commopt.buffers.persistent import NO_PERSISTENT, PersistentParams
from commopt.buffers.shared import shared_reads
from commopt.errors import GraphError, OptionError, suggest
from commopt.ir.args import iter_refs
from commopt.ir.graph import (
    COLLECTIVE_TYPES,
    IN_PLACE_TYPES,
    CollectiveInfo,
    Graph,
    Node,
    NodeKind,
    TensorMeta,
)
from commopt.ir.layout import same_bytes_root
from commopt.ir.out_variants import write_mode
from commopt.ir.schedule import Schedule
from commopt.ir.sizes import SYMBOLIC_SHAPES_ATTR, has_data_dependent_output
from commopt.sim.memory import position_array
from commopt.sim.model import input_pairs

#: Index used in alias keys for "every tensor of the node" (a direct alias of a multi-output node).
ALL_TENSORS = -1


@dataclass(frozen=True, slots=True)
class BufferSpec:
    """One buffer to place: what it holds, how big it is and when it is live."""

    collective: int
    role: str
    tensor_index: int
    value: int
    group: str
    meta: TensorMeta
    padded_bytes: int
    local_bytes: int
    first: int
    last: int
    producer: int | None
    zero_copy: bool
    #: a parameter's slot for the whole step (:mod:`commopt.buffers.persistent`), copied in
    #: once when the runner loads its inputs
    persistent: bool = False
    #: the other collective tensors, as (collective, tensor index), reading this same slot
    shared: tuple[tuple[int, int], ...] = ()

    def name(self, graph: Graph) -> str:
        """The buffer's id in the plan: ``'<collective>:<role><tensor_index>'``."""
        role = {"input": "in", "output": "out", "inout": "inout"}[self.role]
        return f"{graph.nodes[self.collective].name}:{role}{self.tensor_index}"


def parse_collective_types(spec: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """``'all'`` / None -> None (every type); ``'none'`` -> () (no persistent buffers: every
    collective allocates its result as the functional op does); ``'all_reduce,all_gather'``
    -> a sorted tuple.

    Unknown names, and ``none`` beside other names, raise :class:`OptionError`.
    """
    if spec is None:
        return None
    items = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s).strip() for s in spec]
    items = [s for s in items if s]
    if not items:
        raise OptionError("no collective types given; use 'all' or a list like all_reduce,all_gather",
                          field="--comm-buffers")
    if "none" in items:
        if len(items) > 1:
            raise OptionError("'none' cannot be combined with other collective types",
                              field="--comm-buffers")
        return ()
    if "all" in items:
        return None
    for s in items:
        if s not in COLLECTIVE_TYPES:
            raise OptionError(f"unknown collective type {s!r}{suggest(s, COLLECTIVE_TYPES)}; "
                              f"known: all, none, {', '.join(COLLECTIVE_TYPES)}", field="--comm-buffers")
    return tuple(sorted(set(items)))


def alias_keys(graph: Graph) -> list[tuple[int, int]]:
    """For every node, the tensor its value lives in: ``(storage root, tensor index)``.

    The index separates the tensors of a multi-output node (a coalesced collective) reached
    through a getitem view taken directly on it; any other alias of such a node gets
    :data:`ALL_TENSORS` (conservative: it may be any of the tensors).
    Single-output storages always have index 0.
    """
    nodes = graph.nodes
    keys: list[tuple[int, int]] = [(0, 0)] * len(nodes)
    for node in nodes:
        a = node.alias_of
        if a is None:
            keys[node.index] = (node.index, 0 if len(node.outputs) <= 1 else ALL_TENSORS)
            continue
        root, k = keys[a]
        if k == ALL_TENSORS and a == root:
            item = _getitem_index(node)
            if item is not None:
                k = item
        keys[node.index] = (root, k)
    return keys


def _getitem_index(node: Node) -> int | None:
    """The tensor index a getitem-like view selects (``args == (Ref(src), k)``), else None."""
    if node.kind is NodeKind.VIEW and len(node.args) >= 2 and type(node.args[1]) is int:
        return node.args[1]
    return None


def last_uses(graph: Graph, pos: Sequence[int], keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """Last position at which each tensor key is touched: by an alias of it or by a reader."""
    last: dict[tuple[int, int], int] = {}
    for node in graph.nodes:
        p = pos[node.index]
        k = keys[node.index]
        if last.get(k, -1) < p:
            last[k] = p
        for j in node.inputs:
            kj = keys[j]
            if last.get(kj, -1) < p:
                last[kj] = p
    return last


def collective_inputs(node: Node) -> list[int]:
    """The tensors a collective reads, in tensor-index order (its first argument's refs)."""
    if node.args:
        refs = list(iter_refs(node.args[0]))
        if refs:
            return refs
    return list(node.inputs)


class _Read(NamedTuple):
    """A tensor a collective reads, with what its buffer needs that no order changes (a
    tuple: made once per read of every collective, where a frozen dataclass's checked
    assignments cost more than the rest of making it)."""

    k: int
    value: int
    root: int
    meta: TensorMeta
    padded_bytes: int
    local_bytes: int
    root_is_input: bool
    #: the value could be written straight into its buffer if its lifetime allows
    #: (:func:`_may_write_in_place`)
    may_write_in_place: bool


class _Site(NamedTuple):
    """One collective's order-independent facts: its node, waits, reads and outputs."""

    c: int
    info: CollectiveInfo
    waits: tuple[int, ...]
    reads: tuple[_Read, ...]
    outputs: tuple[tuple[TensorMeta, int, int] | None, ...]  # (meta, padded, local bytes); None: sized at run time


@dataclass(frozen=True, eq=False)
class _Sites:
    """The order-independent part of :func:`collect_buffers`, computed once per graph: alias
    keys, every (node, key) touch as arrays, and the collectives with their waits and reads."""

    keys: list[tuple[int, int]]
    key_ids: dict[tuple[int, int], int]
    touch_node: np.ndarray
    touch_key: np.ndarray
    sites: tuple[_Site, ...]
    #: each site's collective, and every (site, wait) pair
    site_node: np.ndarray
    wait_site: np.ndarray
    wait_node: np.ndarray


_SITES: weakref.WeakKeyDictionary[Graph, _Sites] = weakref.WeakKeyDictionary()


def _sites(graph: Graph) -> _Sites:
    """The graph's :class:`_Sites` (cached: the passes' footprint budget asks for many orders)."""
    cached = _SITES.get(graph)
    if cached is not None:
        return cached
    nodes = graph.nodes
    keys = alias_keys(graph)
    key_ids: dict[tuple[int, int], int] = {}
    for k in keys:
        key_ids.setdefault(k, len(key_ids))
    touch_node, touch_key = _touches(graph, np.fromiter(map(key_ids.__getitem__, keys),
                                                        dtype=np.int64, count=len(keys)))
    sites = []
    for c in graph.collectives():
        node = nodes[c]
        if node.collective is None:
            raise GraphError("collective node without collective info", node=node.name, file=graph.source_path)
        ins = [i for i in collective_inputs(node) if nodes[i].outputs]
        reads = []
        for k, i in enumerate(ins):
            # (a node without symbolic shapes, nearly all, has static sizes: no call to ask)
            if SYMBOLIC_SHAPES_ATTR in nodes[i].attrs and has_data_dependent_output(nodes[i]):
                continue  # sized when the program runs: a fresh tensor, never a fixed slot
            meta, root = nodes[i].outputs[0], keys[i][0]
            reads.append(_Read(k, i, root, meta, meta.padded_nbytes, meta.nbytes,
                               nodes[root].kind is NodeKind.INPUT,
                               _may_write_in_place(nodes[root]) and (i == root or (
                                   # in place: the runner's generator checks the output
                                   # buffer; planning would hold the idle input slot longer
                                   node.collective.type not in IN_PLACE_TYPES
                                   and same_bytes_root(graph, i) == root))))
        if SYMBOLIC_SHAPES_ATTR in node.attrs:
            outputs = tuple(None if has_data_dependent_output(node, k) else (m, m.padded_nbytes, m.nbytes)
                            for k, m in enumerate(node.outputs))
        else:
            outputs = tuple([(m, m.padded_nbytes, m.nbytes) for m in node.outputs])
        sites.append(_Site(c, node.collective, tuple(graph.waits_of(c)), tuple(reads), outputs))
    waits = [site.waits for site in sites]
    counts = np.fromiter(map(len, waits), dtype=np.int64, count=len(waits))
    cached = _Sites(keys, key_ids, touch_node, touch_key, tuple(sites),
                    np.asarray([site.c for site in sites], dtype=np.int64),
                    np.repeat(np.arange(len(sites), dtype=np.int64), counts),
                    np.fromiter(chain.from_iterable(waits), dtype=np.int64, count=int(counts.sum())))
    _SITES[graph] = cached
    return cached


def _touches(graph: Graph, key_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (node, alias-key id) touch: each node touches its own key and its inputs' keys
    (in no particular order: only the last position per key is asked of them)."""
    user, source = input_pairs(graph)
    ids = np.arange(len(graph.nodes), dtype=np.int64)
    return np.concatenate([ids, user]), np.concatenate([key_id, key_id[source]])


def collect_buffers(
    graph: Graph,
    order: Sequence[int],
    collective_types: Iterable[str] | None = None,
    persistent: PersistentParams = NO_PERSISTENT,
) -> list[BufferSpec]:
    """Every communication buffer of ``graph`` with its lifetime on ``order``.

    Sorted by (collective's original index, role, tensor index): deterministic.
    ``collective_types`` restricts to those types (None: all). ``persistent``: parameters
    that live in the arena (:func:`commopt.buffers.persistent.find_persistent_params`): one
    slot per parameter for the whole order, owned by its first reader and shared by the
    others, which get no input buffer of their own. Other reads of one fixed content share
    a slot too (:mod:`commopt.buffers.shared`), live from the first reader's issue to the
    last reader's wait. The order-independent facts are computed once per graph, so the
    passes' footprint budget may ask for many orders.
    """
    table = buffer_table(graph, collective_types, persistent)
    first, last, zero_copy = table.lifetimes(graph, order)
    return [BufferSpec(c, role, k, value, group, meta, padded, local, f, e, producer, z, kept, shared)
            for (c, role, k, value, group, meta, padded, local, producer, kept, shared), f, e, z
            in zip(table.rows, first.tolist(), last.tolist(), zero_copy.tolist(), strict=True)]


#: Row kinds of a :class:`BufferTable`.
KIND_PERSISTENT, KIND_READ, KIND_READ_IN_PLACE, KIND_OUTPUT = 0, 1, 2, 3


@dataclass(frozen=True, eq=False)
class BufferTable:
    """The buffers :func:`collect_buffers` yields for one graph and options, in its order,
    with everything their lifetimes are computed from as arrays (order-independent, cached
    per graph): :meth:`lifetimes` gives every buffer's lifetime on an order at once.

    ``rows[b]``: buffer b's fixed fields ``(collective, role, tensor_index, value, group, meta,
    padded_bytes, local_bytes, producer, persistent, shared)``. Per buffer: ``kind`` (persistent
    slot, read, in-place read, output), ``site`` (its collective's index in the graph's
    collectives), ``root``/``root_is_input``/``may_write`` (a read's storage root and whether
    its producer may write into the buffer), ``value_keys``/``own_keys`` (alias-key ids whose
    last touch bounds it, two each; an id past the keys reads -1), and the members of shared
    slots as (buffer, site) pairs. ``padded_bytes`` and ``group_rows`` (each process group's
    buffers, groups in the order of their first buffer) serve the footprint estimate and
    the planner alike.
    """

    rows: list[tuple]
    kind: np.ndarray
    site: np.ndarray
    root: np.ndarray
    root_is_input: np.ndarray
    may_write: np.ndarray
    value_keys: np.ndarray
    own_keys: np.ndarray
    member_row: np.ndarray
    member_site: np.ndarray
    sites: _Sites
    padded_bytes: np.ndarray
    group_rows: dict[str, np.ndarray]

    def lifetimes(self, graph: Graph, order: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(first, last, zero_copy) of every buffer on ``order`` (rules in the module
        docstring, exactly as :func:`collect_buffers` reports them). Read-only arrays,
        remembered for the graph's original order and the last few others: the footprint
        budget and the planner both ask for the original order and for the final one."""
        schedule = Schedule.of(graph, order)
        memo = _LIFETIMES.setdefault(self, {})
        found = memo.get(schedule)
        if found is None:
            pos = position_array(schedule)
            found = self._lifetimes(pos)
            for array in found:
                array.setflags(write=False)
            original = bool((pos == np.arange(len(pos))).all())  # nodes in their input order
            others = [key for key, (_, kept) in memo.items() if not kept]
            if not original and len(others) >= LIFETIME_ORDERS_KEPT:
                del memo[others[0]]  # the oldest
            memo[schedule] = (found, original)
            return found
        return found[0]

    def _lifetimes(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`lifetimes`, computed from every node's position."""
        sites = self.sites
        last_touch = np.full(len(sites.key_ids) + 1, -1, dtype=np.int64)
        np.maximum.at(last_touch, sites.touch_key, pos[sites.touch_node])
        issue_s = pos[sites.site_node]
        done_s = np.full(len(issue_s), -1, dtype=np.int64)
        np.maximum.at(done_s, sites.wait_site, pos[sites.wait_node])
        done_s = np.where(done_s >= 0, done_s, issue_s)  # no wait: done when issued
        issue, done = issue_s[self.site], done_s[self.site]
        start, end = issue, done
        if len(self.member_row):  # a shared slot: first reader's issue to last reader's wait
            has = np.zeros(len(issue), dtype=bool)
            has[self.member_row] = True
            m_start = np.full(len(issue), np.iinfo(np.int64).max, dtype=np.int64)
            np.minimum.at(m_start, self.member_row, issue_s[self.member_site])
            m_end = np.full(len(issue), -1, dtype=np.int64)
            np.maximum.at(m_end, self.member_row, done_s[self.member_site])
            start, end = np.where(has, m_start, issue), np.where(has, m_end, done)
        value_last = last_touch[self.value_keys].max(axis=1)
        own_last = last_touch[self.own_keys].max(axis=1)
        kind = self.kind
        end = np.where(kind == KIND_READ_IN_PLACE, np.maximum(np.maximum(done, value_last), own_last), end)
        reads = (kind == KIND_READ) | (kind == KIND_READ_IN_PLACE)
        end = np.where(reads, np.maximum(end, start), end)
        zero_copy = self.may_write & (value_last <= end)
        producer_at = np.where(self.root_is_input, 0, pos[self.root])
        first = np.where(zero_copy, np.minimum(producer_at, start), start)
        outputs = kind == KIND_OUTPUT
        first = np.where(outputs, issue, first)
        last = np.where(outputs, np.maximum(done, own_last), end)
        slots = kind == KIND_PERSISTENT
        first = np.where(slots, 0, first)
        last = np.where(slots, max(0, len(pos) - 1), last)
        return first, last, zero_copy


_TABLES: weakref.WeakKeyDictionary[Graph, dict] = weakref.WeakKeyDictionary()

#: Orders besides the original one whose lifetimes a table remembers (each a few arrays of
#: one int per buffer, and the order itself).
LIFETIME_ORDERS_KEPT = 2
#: Per table, (lifetimes, whether the order is the original one) by schedule.
_LIFETIMES: weakref.WeakKeyDictionary[BufferTable, dict[Schedule, tuple]] = weakref.WeakKeyDictionary()


def buffer_table(graph: Graph, collective_types: Iterable[str] | None = None,
                 persistent: PersistentParams = NO_PERSISTENT) -> BufferTable:
    """The graph's :class:`BufferTable` for these options (cached per graph)."""
    wanted = None if collective_types is None else frozenset(collective_types)
    cache = _TABLES.setdefault(graph, {})
    table = cache.get((wanted, persistent))
    if table is None:
        table = cache[(wanted, persistent)] = _TableBuilder(graph, wanted, persistent).build()
    return table


class _TableBuilder:
    """Builds a :class:`BufferTable`: the rows :func:`collect_buffers` yields, one site at a time."""

    def __init__(self, graph: Graph, wanted: frozenset[str] | None, persistent: PersistentParams) -> None:
        self.graph, self.wanted = graph, wanted
        self.served = persistent.by_read()
        self.sites = _sites(graph)
        self.sharing = _sharing(graph, wanted, self.served)
        self.site_of = {site.c: j for j, site in enumerate(self.sites.sites)}
        self.none = len(self.sites.key_ids)  # the id of a key nothing touches
        self.rows: list[tuple] = []
        self.cols: list[tuple] = []  # kind, site, root, root_is_input, may_write, 4 key ids
        self.members: list[tuple[int, int]] = []

    def key(self, key: tuple[int, int]) -> int:
        return self.sites.key_ids.get(key, self.none)

    def build(self) -> BufferTable:
        for j, site in enumerate(self.sites.sites):
            if self.wanted is None or site.info.type in self.wanted:
                self.add_site(j, site)
        cols, members = _int_columns(self.cols, 9), _int_columns(self.members, 2)
        rows = self.rows
        return BufferTable(rows, cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3].astype(bool),
                           cols[:, 4].astype(bool), cols[:, 5:7], cols[:, 7:9], members[:, 0],
                           members[:, 1], self.sites,
                           np.fromiter(map(itemgetter(6), rows), dtype=np.int64, count=len(rows)),
                           _group_rows(rows))

    def add_site(self, j: int, site: _Site) -> None:
        c, info = site.c, site.info
        keys, none = self.sites.keys, self.none
        role = "inout" if info.in_place else "input"
        for r in site.reads:
            slot = self.served.get((c, r.k))
            if slot is not None:
                if slot.reads[0] == (c, r.k):  # the parameter itself, live throughout
                    meta = self.graph.nodes[slot.param].outputs[0]
                    self.rows.append((c, "input", r.k, slot.param, slot.group, meta, meta.padded_nbytes,
                                      meta.nbytes, slot.param, True, slot.reads[1:]))
                    self.cols.append((KIND_PERSISTENT, j, 0, 0, 0, none, none, none, none))
                continue
            members = self.sharing.get((c, r.k), ())
            if members and members[0] != (c, r.k):
                continue  # reads the slot of the set's first member
            if members:
                self.members.extend((len(self.rows), self.site_of[m]) for m, _ in members)
            root, k = keys[r.value]
            own = (self.key((keys[c][0], r.k)), self.key((keys[c][0], ALL_TENSORS))) if info.in_place \
                else (none, none)
            self.rows.append((c, role, r.k, r.value, info.group, r.meta, r.padded_bytes, r.local_bytes,
                              r.root, False, members[1:]))
            self.cols.append((KIND_READ_IN_PLACE if info.in_place else KIND_READ, j, r.root, r.root_is_input,
                              r.may_write_in_place, self.key((root, k)), self.key((root, ALL_TENSORS)),
                              *own))
        if info.in_place:
            return
        multi = len(site.outputs) > 1
        for k, output in enumerate(site.outputs):
            if output is None:  # data-dependent size: allocated when the step runs
                continue
            meta, padded, local = output
            self.rows.append((c, "output", k, c, info.group, meta, padded, local, None, False, ()))
            self.cols.append((KIND_OUTPUT, j, 0, 0, 0, none, none, self.key((c, k if multi else 0)),
                              self.key((c, ALL_TENSORS)) if multi else none))


def _int_columns(records: list[tuple], width: int) -> np.ndarray:
    """``records`` (tuples of ``width`` ints) as an array, one row each: read as one flat
    iterator (``np.asarray`` inspects every tuple as a sequence, several times slower)."""
    return np.fromiter(chain.from_iterable(records), dtype=np.int64,
                       count=width * len(records)).reshape(len(records), width)


def _group_rows(rows: list[tuple]) -> dict[str, np.ndarray]:
    """Each process group's row numbers (ascending), groups in the order of their first row."""
    names = list(map(itemgetter(4), rows))
    ids = {name: i for i, name in enumerate(dict.fromkeys(names))}
    if len(ids) == 1:
        return {name: np.arange(len(rows), dtype=np.int64) for name in ids}
    code = np.fromiter(map(ids.__getitem__, names), dtype=np.int64, count=len(names))
    return {name: np.flatnonzero(code == i) for name, i in ids.items()}


def _sharing(graph: Graph, wanted: frozenset[str] | None,
             served: dict) -> dict[tuple[int, int], tuple[tuple[int, int], ...]]:
    """The shared input slots of :func:`commopt.buffers.shared.shared_reads` among the reads
    that get a buffer (of a wanted type, not served by a persistent parameter slot)."""
    nodes = graph.nodes
    out: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}
    for read, members in shared_reads(graph).items():
        if read in out:
            continue
        kept = tuple(m for m in members if m not in served
                     and (wanted is None or nodes[m[0]].collective.type in wanted))
        for m in kept if len(kept) > 1 else ():
            out[m] = kept
    return out


def _may_write_in_place(value: Node) -> bool:
    """Zero-copy, as far as no order decides it: the value is the only output of a compute op
    (not a graph input, a view, an in-place or side-effecting op) that can write into a
    buffer the way the runner makes it do (:func:`commopt.ir.out_variants.write_mode`: its
    ``.out`` overload taking the node's arguments, or a cast done by ``copy_``)."""
    if value.kind is not NodeKind.COMPUTE:
        return False
    if len(value.outputs) != 1 or value.mutates or value.side_effect or value.rng or value.alias_of is not None:
        return False
    return write_mode(value) is not None
