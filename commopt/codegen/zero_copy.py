"""Zero-copy analysis: which producers write their result straight into which communication
buffer, and how (:mod:`commopt.codegen.out_variants` checks the op's schema). The lowering
then emits those producers writing into their buffer and skips the copy-in."""

from __future__ import annotations

from commopt.codegen.lowering import collective_sources, runnable
from commopt.codegen.out_variants import WriteMode, write_mode
from commopt.codegen.slots import Slot
from commopt.ir.graph import Graph


def zero_copy_targets(graph: Graph, slots: dict[tuple[int, str, int], Slot],
                      pos: dict[int, int]) -> dict[int, tuple[str, WriteMode]]:
    """Producer index -> (buffer variable, how it writes there): its out= overload, or a
    ``copy_`` for a dtype cast (see :mod:`commopt.codegen.out_variants`).

    all_reduce and broadcast run in place on their output buffer; their producer may
    write there directly when no other buffer uses those bytes between the producer
    and the collective's issue (the output buffer's lifetime starts at the issue).
    """
    targets: dict[int, tuple[str, WriteMode]] = {}
    by_group: dict[str, list[Slot]] = {}
    for slot in slots.values():
        by_group.setdefault(slot.group_var, []).append(slot)
    seen: set[str] = set()
    for (coll, role, k), slot in sorted(slots.items()):
        if not slot.zero_copy or role not in ("input", "inout") or slot.var in seen:
            continue  # a slot shared by several readers is written by its owner's producer
        seen.add(slot.var)
        node = graph.nodes[coll]
        sources = collective_sources(node)
        if k >= len(sources):
            continue
        producer = graph.nodes[sources[k]]
        out = slots.get((coll, "output", k))
        if role == "input" and node.collective.type in ("all_reduce", "broadcast") \
                and out is not None:
            start, end = pos[producer.index], pos[coll] - 1
            if any(other is not out and out.clashes(other, start, end)
                   for other in by_group[out.group_var]):
                continue
            slot = out
        if (role == "inout" or node.collective.type in ("all_reduce", "broadcast")) \
                and list(graph.users(producer.index)) != [coll]:
            continue  # the collective overwrites the value other nodes still read
        if runnable(producer) and len(producer.outputs) == 1 \
                and slot.holds(producer.outputs[0]):
            mode = write_mode(producer)
            if mode is not None:
                targets[producer.index] = (slot.var, mode)
    return targets
