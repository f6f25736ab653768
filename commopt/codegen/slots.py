"""The buffer plan as the runner uses it: arenas, buffer views and, per collective tensor,
the :class:`Slot` it reads or writes. A plan is an input file, so everything is checked here."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from commopt.codegen.names import identifier
from commopt.codegen.spec import BufferSpec
from commopt.errors import OptionError
from commopt.ir.graph import DTYPE_BYTES, Graph, NodeKind, TensorMeta


class Slot(NamedTuple):
    """Where one tensor of one collective lives in its group's arena, and when (plan positions).

    A named tuple: one is made per planned buffer (hundreds of thousands at a million nodes),
    and a frozen dataclass's ``__init__`` (an ``object.__setattr__`` per field) cost five
    times as much."""

    var: str
    zero_copy: bool
    group_var: str = ""
    offset_bytes: int = 0
    size_bytes: int = 0
    first: int = 0
    last: int = 0
    dtype: str = ""
    shape: tuple[int, ...] = ()
    #: a parameter's slot for the whole step: the runner puts the parameter there once
    persistent: bool = False

    def holds(self, meta: TensorMeta) -> bool:
        """Whether a result of this dtype and shape can be written into the slot's view as is."""
        return meta.dtype == self.dtype and tuple(meta.max_shape or meta.shape) == self.shape

    def clashes(self, other: Slot, start: int, end: int) -> bool:
        """Whether ``other`` shares bytes with this slot and is live within [start, end]."""
        return (other.group_var == self.group_var
                and other.offset_bytes < self.offset_bytes + self.size_bytes
                and self.offset_bytes < other.offset_bytes + other.size_bytes
                and other.first <= end and start <= other.last)


def plan_tables(graph: Graph, order: list[int], plan: Any, group_var: dict[str, str]):
    """Arenas, buffer views, per (collective, role, tensor) the view to use, the plan's
    digest and the persistent parameters as (buffer view, input name)."""
    if plan is None:
        return [], [], {}, "", []
    expected = order_sha256(graph, order)
    if getattr(plan, "order_sha256", expected) != expected:
        raise OptionError("the buffer plan was made for a different order of this graph; "
                          "plan again for this order", field="plan")
    arenas: list[tuple[str, int]] = []
    buffers: list[BufferSpec] = []
    slots: dict[tuple[int, str, int], Slot] = {}
    persistent: list[tuple[str, str]] = []
    index_of, nodes, collective = graph.index_of, graph.nodes, NodeKind.COLLECTIVE
    for arena in plan.groups:
        if arena.group not in group_var:
            raise OptionError(f"the plan has an arena for unknown group {arena.group!r}",
                              field="plan.groups")
        gv = group_var[arena.group]
        arenas.append((gv, int(arena.arena_bytes)))
        for buf in arena.buffers:
            node_name, dtype, role, tensor_index = buf.node, buf.dtype, buf.role, int(buf.tensor_index)
            coll = index_of.get(node_name)
            if coll is None or nodes[coll].kind is not collective:
                raise OptionError(f"the plan has a buffer for {node_name!r}, not a collective "
                                  "of this graph", field="plan.groups.buffers")
            dtype_bytes = DTYPE_BYTES.get(dtype)
            if dtype_bytes is None:
                raise OptionError(f"buffer {buf.name!r} has unknown dtype {dtype!r}",
                                  field="plan.groups.buffers")
            shape = tuple(map(int, buf.max_shape or buf.shape))
            nbytes = math.prod(shape) * dtype_bytes
            offset = int(buf.offset_bytes)
            if offset % dtype_bytes or offset + nbytes > arena.arena_bytes:
                raise OptionError(f"buffer {buf.name!r} does not fit its arena at its offset",
                                  field="plan.groups.buffers")
            var = identifier("b", len(buffers), f"{node_name}_{role}{buf.tensor_index}")
            buffers.append(BufferSpec(var, gv, offset, dtype, shape))
            is_persistent = bool(getattr(buf, "persistent", False))
            slot = Slot(var, bool(buf.zero_copy), gv, offset, max(int(buf.size_bytes), nbytes),
                        int(buf.first), int(buf.last), dtype, shape, is_persistent)
            slots[(coll, role, tensor_index)] = slot
            if is_persistent:
                persistent.append((var, _persistent_input(graph, buf)))
            shared_with = getattr(buf, "shared_with", ())
            if not shared_with and not is_persistent:  # most buffers: one reader, a copy
                continue
            readers = [_reader_key(graph, r) for r in shared_with]
            _check_one_storage(graph, buf, [(coll, role, tensor_index), *readers])
            for key in readers:
                slots[key] = slot
    return arenas, buffers, slots, str(plan.digest), persistent


def _persistent_input(graph: Graph, buf: Any) -> str:
    """The graph input a persistent slot holds, checked: a parameter of this shape and dtype."""
    i = graph.index_of.get(buf.value)
    node = graph.nodes[i] if i is not None else None
    if node is None or node.kind is not NodeKind.INPUT or node.attrs.get("role") != "parameter" \
            or tuple(node.outputs[0].shape) != tuple(buf.shape) or node.outputs[0].dtype != buf.dtype:
        raise OptionError(f"persistent buffer {buf.name!r} holds {buf.value!r}, not a parameter of "
                          "this graph with its shape and dtype", field="plan.groups.buffers")
    return node.name


def _check_one_storage(graph: Graph, buf: Any, keys: list[tuple[int, str, int]]) -> None:
    """Every reader of a shared or persistent slot sends a value of one storage (the
    parameter's, for a persistent slot): the runner copies it in once, or never."""
    from commopt.codegen.lowering import collective_sources

    roots = set()
    for c, _, k in keys:
        sources = collective_sources(graph.nodes[c])
        roots.add(graph.storage_root[sources[k]] if k < len(sources) else -1)
    want = {graph.index_of.get(buf.value)} if getattr(buf, "persistent", False) else roots
    if len(roots) != 1 or roots != want:
        raise OptionError(f"buffer {buf.name!r} is read by collectives sending different tensors "
                          "(or not its parameter): one slot cannot serve them; run verify-plan",
                          field="plan.groups.buffers.shared_with")


def _reader_key(graph: Graph, reader: str) -> tuple[int, str, int]:
    """(collective, 'input', k) of a reader named ``'<collective>:in<k>'`` in ``shared_with``."""
    coll, _, slot = reader.rpartition(":")
    c = graph.index_of.get(coll)
    if c is None or graph.nodes[c].kind is not NodeKind.COLLECTIVE or not slot.startswith("in") \
            or not slot[2:].isdigit():
        raise OptionError(f"the plan shares a slot with {reader!r}, not a collective input of this "
                          "graph", field="plan.groups.buffers.shared_with")
    return c, "input", int(slot[2:])


def order_sha256(graph: Graph, order: list[int]) -> str:
    """sha256 of the node names in ``order``, one per line: how plans name their order."""
    from commopt.buffers.digest import order_digest

    return order_digest(graph, order)
