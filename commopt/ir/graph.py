"""The graph IR: framework-neutral, index-based, built for 100,000+ nodes.

A :class:`Graph` is a list of :class:`Node` in their original program order; a node refers to
other nodes by integer index only. Derived structure (predecessors and successors over data
and ordering edges, storage roots) is computed once, when the graph is built, into flat
CSR-style arrays that passes, the simulator and the checker share.

Orders produced by passes are plain lists of node indices; the graph itself is never mutated.
"""

from __future__ import annotations

import functools
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import chain
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: Element sizes in bytes, by the dtype names the IR uses (torch's names without ``torch.``).
DTYPE_BYTES: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "complex64": 8,
    "complex128": 16,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "bool": 1,
}


#: Graph meta keys a pass that rewrites the graph (bucketing) sets for the writers, never
#: written to files: each node's index in the program as loaded (-1: added by the pass), and
#: loaded index of each removed node whose value is used -> the node standing for it.
LOADED_INDEX = "loaded_index"
LOADED_REPLACED = "loaded_replaced"


class NodeKind(IntEnum):
    """What a node does, as far as scheduling is concerned."""

    INPUT = 0  # a graph input: parameter, buffer, user input, constant
    OUTPUT = 1  # the single node returning the graph's results
    COMPUTE = 2  # runs a kernel on the compute stream
    VIEW = 3  # aliases its input, costs nothing (views, getitem, metadata ops)
    COLLECTIVE = 4  # issues an asynchronous collective on its group's stream
    WAIT = 5  # blocks the compute stream until its collective finished

    @property
    def label(self) -> str:
        """Lower-case name used in files and reports ('compute', 'wait', ...)."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> NodeKind:
        """The kind named by its lower-case label."""
        return cls[text.upper()]


# ``NodeKind.X`` goes through ``EnumType.__getattr__`` on Python 3.11 (about ten times a
# global's lookup): the loops over every node below compare with these.
_VIEW, _COLLECTIVE, _WAIT = NodeKind.VIEW, NodeKind.COLLECTIVE, NodeKind.WAIT

#: Collective types the IR knows. ``*_coalesced`` variants are expressed with
#: :attr:`CollectiveInfo.coalesced` rather than separate types.
COLLECTIVE_TYPES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "send",
    "recv",
    "barrier",
)

#: Collectives whose result has the shape of their input and that run in place on one buffer
#: (NCCL and gloo write the result over what they send): the runner runs them on their output
#: buffer, which their producer may fill itself.
IN_PLACE_TYPES = frozenset({"all_reduce", "broadcast"})


@dataclass(frozen=True, slots=True)
class TensorMeta:
    """One tensor a node produces.

    ``shape`` is the *local* shape (what this rank allocates and sends); memory and
    communication costs come from it. ``max_shape`` is the largest local shape over all ranks
    when shards are uneven (None when every rank has ``shape``): decisions that must agree
    across ranks use it. ``logical_shape`` and ``placements`` (``"S(0)"``, ``"R"``,
    ``"P(sum)"``, one per mesh dimension) describe the global tensor where known.
    """

    dtype: str
    shape: tuple[int, ...]
    max_shape: tuple[int, ...] | None = None
    logical_shape: tuple[int, ...] | None = None
    placements: tuple[str, ...] | None = None

    @property
    def numel(self) -> int:
        """Number of elements of the local shape."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Local size in bytes."""
        return math.prod(self.shape) * DTYPE_BYTES.get(self.dtype, 4)  # numel, without its call

    @property
    def padded_nbytes(self) -> int:
        """Size in bytes of the largest rank's shard: the same number on every rank."""
        shape = self.max_shape if self.max_shape is not None else self.shape
        return math.prod(shape) * DTYPE_BYTES.get(self.dtype, 4)


@dataclass(frozen=True, slots=True)
class ProcessGroup:
    """A process group: its c10d name, size and, where known, global ranks and mesh dim."""

    name: str
    size: int
    ranks: tuple[int, ...] | None = None
    mesh_dim: str | None = None


@dataclass(frozen=True, slots=True)
class CollectiveInfo:
    """What a collective node communicates.

    Byte counts are per rank and padded to the largest rank's shard, so they are the same
    on every rank. ``in_bytes`` is what this rank contributes, ``out_bytes`` what it
    receives. ``in_place`` collectives write their result into their input's storage.
    """

    type: str
    group: str
    reduce_op: str | None = None
    in_bytes: int = 0
    out_bytes: int = 0
    coalesced: bool = False
    in_place: bool = False

    @property
    def bytes(self) -> int:
        """The message size the cost models use: the larger of input and output."""
        return max(self.in_bytes, self.out_bytes)


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to another node's value inside ``Node.args`` / ``Node.kwargs``."""

    index: int


@dataclass(slots=True)
class Node:
    """One operation of the graph.

    ``inputs`` are the data predecessors (unique indices, in first-use order); ``args`` and
    ``kwargs`` keep the full call with :class:`Ref` for node values so generated code can
    call the op. ``alias_of`` names the input whose storage this node's output shares (views,
    in-place ops, waits); ``mutates`` the inputs whose storage it writes. ``side_effect``
    marks an ordering barrier (send/recv, unknown or mutable schemas); ``rng`` an op that
    draws from the random number generator (``nondeterministic_seeded``): RNG ops keep their
    order among themselves and around barriers, but collectives and waits may cross them.
    """

    index: int
    name: str
    kind: NodeKind
    op: str
    inputs: tuple[int, ...] = ()
    outputs: tuple[TensorMeta, ...] = ()
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    collective: CollectiveInfo | None = None
    wait_of: int | None = None
    alias_of: int | None = None
    mutates: tuple[int, ...] = ()
    side_effect: bool = False
    rng: bool = False
    duration_us: float | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """Bytes of all tensors this node produces (local shapes)."""
        outs = self.outputs
        if len(outs) == 1:  # most nodes: no generator to sum over
            return outs[0].nbytes
        return sum(t.nbytes for t in outs)

    @property
    def padded_nbytes(self) -> int:
        """Bytes of all tensors this node produces, padded to the largest rank's shard."""
        return sum(t.padded_nbytes for t in self.outputs)


class Graph:
    """A graph: nodes in original order plus process groups and derived edge arrays.

    Build one with :meth:`Graph.build` (or a loader); it validates the structure and
    computes ordering edges. Nodes must not be mutated afterwards. ``index_of``, each node's
    index by name, is built from the nodes unless the caller already has it.
    """

    def __init__(
        self,
        nodes: list[Node],
        groups: dict[str, ProcessGroup],
        *,
        name: str = "graph",
        source_format: str = "json",
        source_path: str | None = None,
        world_size: int | None = None,
        mesh: dict[str, int] | None = None,
        meta: dict[str, Any] | None = None,
        payload: Any = None,
        group_order: bool = True,
        index_of: dict[str, int] | None = None,
    ) -> None:
        self.nodes = nodes
        #: whether the collectives of one process group keep their input order (an ordering
        #: edge between consecutive ones, and invariant 2); False: :meth:`without_group_order`
        self.group_order = group_order
        self.groups = groups
        self.name = name
        self.source_format = source_format
        self.source_path = source_path
        self.world_size = world_size
        self.mesh = mesh
        self.meta = meta or {}
        #: Format-specific object kept for writing back (an ExportedProgram for .pt2).
        self.payload = payload
        self.index_of: dict[str, int] = (
            index_of if index_of is not None else {n.name: n.index for n in nodes})
        self.storage_root: list[int] = []
        self.ordering_edges: list[tuple[int, int]] = []
        self._pred_ptr = array("l")
        self._pred_idx = array("l")
        self._succ_ptr = array("l")
        self._succ_idx = array("l")
        self._waits_of: dict[int, tuple[int, ...]] = {}
        self._derive()

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, nodes: list[Node], groups: dict[str, ProcessGroup], **kw: Any) -> Graph:
        """Validate ``nodes`` (see :func:`commopt.ir.validate.validate_nodes`) and build."""
        from commopt.ir.validate import validate_nodes

        index_of = validate_nodes(nodes, groups, file=kw.get("source_path"),
                                  world_size=kw.get("world_size"), mesh=kw.get("mesh"))
        return cls(nodes, groups, index_of=index_of, **kw)

    def without_group_order(self) -> Graph:
        """This graph (the same nodes, groups and payload) with the collectives of one
        process group free to change their relative order: no ordering edge between them,
        and invariant 2 no longer asks for it. Valid only where every rank provably runs the
        program in one order (:func:`commopt.cross_group.not_one_program`): ranks then issue
        each group's collectives in the same new order, which is all a group needs."""
        return self.with_group_order(False)

    def with_group_order(self, kept: bool) -> Graph:
        """This graph (the same nodes, groups and payload) with each group's collectives
        kept in their input order or not (:meth:`without_group_order`); itself when it is so."""
        if self.group_order == kept:
            return self
        return Graph(self.nodes, self.groups, name=self.name, source_format=self.source_format,
                     source_path=self.source_path, world_size=self.world_size, mesh=self.mesh,
                     meta=self.meta, payload=self.payload, group_order=kept,
                     index_of=self.index_of)

    def _derive(self) -> None:
        nodes = self.nodes
        self.storage_root = _storage_roots(nodes)
        self._waits_of = _waits_by_collective(nodes)
        self.ordering_edges = _ordering_edges(nodes, self.storage_root, self._waits_of, self.group_order)
        (self._pred_ptr, self._pred_idx), (self._succ_ptr, self._succ_idx) = _neighbour_arrays(
            nodes, self.ordering_edges)

    # ------------------------------------------------------------------ queries
    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    def node(self, name: str) -> Node:
        """The node called ``name`` (KeyError when absent)."""
        return self.nodes[self.index_of[name]]

    def preds(self, i: int) -> Sequence[int]:
        """Indices node ``i`` must follow: its data inputs and ordering predecessors."""
        return self._pred_idx[self._pred_ptr[i] : self._pred_ptr[i + 1]]

    def succs(self, i: int) -> Sequence[int]:
        """Indices that must follow node ``i`` (data users and ordering successors)."""
        return self._succ_idx[self._succ_ptr[i] : self._succ_ptr[i + 1]]

    def users(self, i: int) -> list[int]:
        """Nodes that take node ``i``'s value as a data input."""
        return [j for j in self.succs(i) if i in self.nodes[j].inputs]

    def pred_arrays(self) -> tuple[array, array]:
        """The CSR arrays (ptr, idx) of all predecessors, for hot loops."""
        return self._pred_ptr, self._pred_idx

    def succ_arrays(self) -> tuple[array, array]:
        """The CSR arrays (ptr, idx) of all successors, for hot loops."""
        return self._succ_ptr, self._succ_idx

    @property
    def original_order(self) -> list[int]:
        """The order the nodes came in: ``[0, 1, ..., n-1]``."""
        return list(range(len(self.nodes)))

    def collectives(self) -> list[int]:
        """Indices of collective nodes in original order (a new list: the caller's to change)."""
        return list(self._collective_indices)

    def waits(self) -> list[int]:
        """Indices of wait nodes in original order (a new list: the caller's to change)."""
        return list(self._wait_indices)

    @functools.cached_property
    def _collective_indices(self) -> tuple[int, ...]:
        # found once: passes, the simulator and the reports each ask, a walk of every node
        return tuple(n.index for n in self.nodes if n.kind is _COLLECTIVE)

    @functools.cached_property
    def _wait_indices(self) -> tuple[int, ...]:
        return tuple(n.index for n in self.nodes if n.kind is _WAIT)

    def waits_of(self, collective: int) -> tuple[int, ...]:
        """The waits completing ``collective`` (one, or one per tensor when coalesced)."""
        return self._waits_of.get(collective, ())


def _storage_roots(nodes: list[Node]) -> list[int]:
    """Each node's storage root: the node whose buffer its value lives in, through aliases."""
    root = list(range(len(nodes)))
    for node in nodes:
        if node.alias_of is not None:
            root[node.index] = root[node.alias_of]
    return root


def _waits_by_collective(nodes: list[Node]) -> dict[int, tuple[int, ...]]:
    """The waits completing each waited collective, in node order."""
    waits_of: dict[int, list[int]] = {}
    for node in nodes:
        if node.wait_of is not None:
            waits_of.setdefault(node.wait_of, []).append(node.index)
    return {c: tuple(ws) for c, ws in waits_of.items()}


def _neighbour_arrays(nodes: list[Node], edges: list[tuple[int, int]]
                      ) -> tuple[tuple[array, array], tuple[array, array]]:
    """The CSR arrays (ptr, idx) of every node's predecessors and of its successors over data
    inputs and ``edges``: each neighbour once, in increasing order. Sorted as numpy arrays
    (three times faster than a list per node at 100,000 nodes) but kept as ``array``
    objects, whose items the passes' loops read several times faster than a numpy array's."""
    import numpy as np  # here: commands that build no graph (``--help``) skip its import

    n = len(nodes)
    inputs = [node.inputs for node in nodes]
    counts = np.fromiter(map(len, inputs), dtype=np.int64, count=n)
    src = np.fromiter(chain.from_iterable(inputs), dtype=np.int64, count=int(counts.sum()))
    dst = np.repeat(np.arange(n, dtype=np.int64), counts)
    if edges:
        ordering = np.array(edges, dtype=np.int64)
        src = np.concatenate((src, ordering[:, 0]))
        dst = np.concatenate((dst, ordering[:, 1]))
    by_dst = np.sort(dst * n + src)  # by target, then source
    by_dst = by_dst[np.diff(by_dst, prepend=-1) != 0]  # each edge once
    by_src = np.sort(by_dst % n * n + by_dst // n)  # the same edges by source, then target
    return _csr(by_dst, n), _csr(by_src, n)


def _csr(keys: np.ndarray, n: int) -> tuple[array, array]:
    """The CSR arrays (ptr, idx) of sorted edge keys ``row * n + column``."""
    import numpy as np

    rows, cols = np.divmod(keys, n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=ptr[1:])
    return array("l", ptr.astype("l").tobytes()), array("l", cols.astype("l").tobytes())


def _ordering_edges(
    nodes: list[Node], root: list[int], waits_of: dict[int, tuple[int, ...]], group_order: bool = True,
) -> list[tuple[int, int]]:
    """Edges no pass may break, beyond data edges.

    - storage: a write to a storage stays after every earlier read and write of it and
      before every later read; a collective reads its input until its wait, so a later
      write also follows that wait (:class:`_StorageHazards`);
    - side effects: side-effecting nodes keep their relative order, and no collective or
      wait crosses one;
    - randomness: RNG ops keep their order among themselves and around side-effecting
      nodes (the generator's draws stay the same), but collectives and waits may cross them;
    - collectives of one process group keep their relative order (every rank must issue
      them in the same order), unless ``group_order`` is False (:meth:`Graph.without_group_order`).
    """
    edges: list[tuple[int, int]] = []
    written = {root[j] for node in nodes for j in node.mutates}
    storage = _StorageHazards(root, waits_of, written, edges) if written else None
    last_barrier: int | None = None
    last_sequenced: int | None = None  # the latest barrier or RNG op
    comm_since_barrier: list[int] = []
    last_coll_in_group: dict[str, int] = {}
    for node in nodes:
        kind = node.kind
        if kind is _VIEW:
            continue
        i = node.index
        if storage is not None:
            storage.add_edges(node)
        if node.side_effect:
            if last_sequenced is not None:
                edges.append((last_sequenced, i))
            for c in comm_since_barrier:
                edges.append((c, i))
            comm_since_barrier = []
            last_barrier = last_sequenced = i
        elif node.rng:
            if last_sequenced is not None:
                edges.append((last_sequenced, i))
            last_sequenced = i
        elif kind is _COLLECTIVE or kind is _WAIT:
            if last_barrier is not None:
                edges.append((last_barrier, i))
            comm_since_barrier.append(i)
        if group_order and kind is _COLLECTIVE and node.collective is not None:
            g = node.collective.group
            prev = last_coll_in_group.get(g)
            if prev is not None:
                edges.append((prev, i))
            last_coll_in_group[g] = i
    return edges


class _StorageHazards:
    """The storage edges of :func:`_ordering_edges`, node by node in program order, appended
    to ``edges``. Only storages in ``written`` can order anything: reads of the others are
    skipped, which at 100,000s of nodes is most of the work."""

    def __init__(self, root: list[int], waits_of: dict[int, tuple[int, ...]], written: set[int],
                 edges: list[tuple[int, int]]) -> None:
        self.root = root
        self.waits_of = waits_of
        self.written = written
        self.edges = edges
        self.last_writer: dict[int, int] = {}
        self.readers_since_write: dict[int, list[int]] = {}
        # waits of collectives that read a storage, pending until a later write
        self.inflight_readers: dict[int, list[int]] = {}

    def add_edges(self, node: Node) -> None:
        """The edges ordering ``node`` (not a view) after the reads and writes before it."""
        i, root, edges, last_writer = node.index, self.root, self.edges, self.last_writer
        for r in {root[j] for j in node.inputs}:
            if r not in self.written:
                continue
            w = last_writer.get(r)
            if w is not None and w != i:
                edges.append((w, i))
            self.readers_since_write.setdefault(r, []).append(i)
            if node.kind is _COLLECTIVE and i in self.waits_of:
                self.inflight_readers.setdefault(r, []).extend(self.waits_of[i])
        for r in {root[j] for j in node.mutates}:
            for rd in self.readers_since_write.get(r, ()):
                if rd != i:
                    edges.append((rd, i))
            for wt in self.inflight_readers.pop(r, []):
                if wt < i:
                    edges.append((wt, i))
            w = last_writer.get(r)
            if w is not None and w != i:
                edges.append((w, i))
            last_writer[r] = i
            self.readers_since_write[r] = []
