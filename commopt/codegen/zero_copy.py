"""Zero-copy analysis: which producers write their result straight into which communication
buffer, and how (:mod:`commopt.ir.out_variants` checks the op's schema). The lowering
then emits those producers writing into their buffer and skips the copy-in."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from commopt.buffers.offsets import Occupancy, TimeRanges
from commopt.codegen.lowering import collective_sources, runnable
from commopt.codegen.slots import Slot
from commopt.ir.graph import IN_PLACE_TYPES, Graph, Node
from commopt.ir.layout import same_bytes_root
from commopt.ir.out_variants import WriteMode, write_mode


def zero_copy_targets(graph: Graph, slots: dict[tuple[int, str, int], Slot],
                      pos: Sequence[int]) -> dict[int, tuple[str, WriteMode, tuple[int, ...] | None]]:
    """Producer index -> (buffer variable, how it writes there, the shape it writes as or
    None for the buffer's own): its out= overload, or a ``copy_`` for a dtype cast (see
    :mod:`commopt.ir.out_variants`).

    The producer is the op whose result the collective sends, or sends through views that
    keep its bytes in order (:func:`commopt.ir.layout.same_bytes_root`: ``view(mm(...))``
    in tensor parallelism); then it writes into the buffer in its own shape and the views
    run on the buffer. all_reduce and broadcast run in place on their output buffer; their
    producer may write there directly when no other buffer uses those bytes between the
    producer and the collective's issue (the output buffer's lifetime starts at the issue).
    """
    producers = {}  # (collective, k) -> the node writing the value the collective sends
    windows = {}  # (collective, k) -> (output slot, first, last): the producer's writing window
    candidates = list(_candidates(graph, slots))
    for coll, role, k, node, sources in candidates:
        producer = same_bytes_root(graph, sources[k])
        if producer is None:
            continue
        producers[coll, k] = producer
        out = slots.get((coll, "output", k))
        if role == "input" and out is not None and node.collective.type in IN_PLACE_TYPES:
            windows[coll, k] = (out, pos[producer], pos[coll] - 1)
    busy = _busy(slots, windows)
    targets: dict[int, tuple[str, WriteMode, tuple[int, ...] | None]] = {}
    for coll, role, k, node, sources in candidates:
        if (coll, k) not in producers:
            continue
        slot = slots[coll, role, k]
        producer = graph.nodes[producers[coll, k]]
        if role == "input" and (coll, k) in windows:
            if busy[coll, k]:
                continue
            slot = windows[coll, k][0]
        elif not slot.zero_copy:
            continue  # the planner did not keep this slot free from the producer on
        if (role == "inout" or node.collective.type in IN_PLACE_TYPES) \
                and not _read_only_by(graph, sources[k], producer.index, coll):
            continue  # the collective overwrites the value other nodes still read
        if not runnable(producer) or len(producer.outputs) != 1:
            continue
        shape = _written_shape(slot, producer, graph.nodes[sources[k]])
        if shape is not False:
            mode = write_mode(producer)
            if mode is not None:
                targets[producer.index] = (slot.var, mode, shape)
    return targets


def _read_only_by(graph: Graph, value: int, producer: int, coll: int) -> bool:
    """Whether the collective is the only reader of the producer's result: each view from
    the producer to ``value`` has one reader, the next, and ``value``'s is the collective."""
    i, reader = value, coll
    while True:
        if list(graph.users(i)) != [reader]:
            return False
        if i == producer:
            return True
        i, reader = graph.nodes[i].alias_of, i


def _written_shape(slot: Slot, producer: Node, sent: Node) -> tuple[int, ...] | None | bool:
    """The shape the producer writes its result into ``slot`` as: None for the slot's own
    (the value sent is the result), the producer's (the value sent is a view of it with the
    same bytes), False when it does not fit (another dtype or size, or uneven shards: the
    slot is sized for the largest rank)."""
    meta = producer.outputs[0]
    if producer.index == sent.index:
        return None if slot.holds(meta) else False
    sent_meta = sent.outputs[0]
    if meta.dtype != slot.dtype or meta.max_shape not in (None, meta.shape) \
            or sent_meta.max_shape not in (None, sent_meta.shape) or not slot.holds(sent_meta) \
            or math.prod(meta.shape) != math.prod(slot.shape):
        return False
    return tuple(meta.shape)


def _candidates(graph: Graph, slots: dict[tuple[int, str, int], Slot]
                ) -> Iterator[tuple[int, str, int, Node, list[int]]]:
    """(collective, role, k, its node, its sources) of each input slot a producer may fill,
    in key order; a slot shared by several readers once (its owner's producer writes it).
    The planner marks the slots it keeps free from the producer on (zero-copy); the input of
    an all_reduce or broadcast is a candidate either way, since its producer writes into the
    collective's output buffer, whose window :func:`_busy` checks here."""
    nodes = graph.nodes
    # filtered before sorting: most slots are outputs (and sorting is the costly part)
    keys = sorted(key for key, slot in slots.items() if key[1] in ("input", "inout") and (
        slot.zero_copy or (key[1] == "input" and nodes[key[0]].collective.type in IN_PLACE_TYPES)))
    seen: set[str] = set()
    for key in keys:
        coll, role, k = key
        var = slots[key].var
        if var in seen:
            continue
        seen.add(var)
        node = nodes[coll]
        sources = collective_sources(node)
        if k < len(sources):
            yield coll, role, k, node, sources


def _busy(slots: dict[tuple[int, str, int], Slot],
          windows: dict[tuple[int, int], tuple[Slot, int, int]]) -> dict[tuple[int, int], bool]:
    """Per window (output slot, first, last): whether another slot of its arena shares
    bytes with the output slot and is live at some position of [first, last]
    (:meth:`Slot.clashes`). Per arena, the slots' bytes go into an :class:`Occupancy` over
    their lifetimes and each window asks it once: a scan of every slot per window was
    quadratic (minutes at a million nodes with tensor parallelism)."""
    by_group: dict[str, list[Slot]] = {}
    for slot in {id(s): s for s in slots.values()}.values():
        by_group.setdefault(slot.group_var, []).append(slot)
    busy: dict[tuple[int, int], bool] = {}
    asked: dict[str, list[tuple[tuple[int, int], Slot, int, int]]] = {}
    for key, (out, first, last) in windows.items():
        live = out.first <= last and first <= out.last  # out would clash with itself
        if out.size_bytes <= 0 or live or last < first:  # rare: asked of every slot
            busy[key] = any(other is not out and out.clashes(other, first, last)
                            for other in by_group[out.group_var])
        else:
            asked.setdefault(out.group_var, []).append((key, out, first, last))
    for group_var, queries in asked.items():
        group = by_group[group_var]
        placed = [s for s in group if s.size_bytes > 0]
        empty = [s for s in group if s.size_bytes <= 0]  # clash inside a range, Slot.clashes
        ranges = TimeRanges([s.first for s in placed] + [q[2] for q in queries],
                            [s.last for s in placed] + [q[3] for q in queries])
        occupancy = Occupancy(ranges)
        for i, s in enumerate(placed):
            occupancy.take(i, s.offset_bytes, s.offset_bytes + s.size_bytes)
        for j, (key, out, first, last) in enumerate(queries, start=len(placed)):
            busy[key] = occupancy.overlaps(j, out.offset_bytes, out.offset_bytes + out.size_bytes) \
                or any(out.clashes(other, first, last) for other in empty)
    return busy
