"""The plain-data model of a runner script, built from a graph, an order and a buffer plan.

Everything graph-specific that the script needs is decided here, once, and checked: group
rank sets, input shapes per rank, arena sizes and buffer offsets (:mod:`.slots`), which
producers write straight into their buffers (:mod:`.zero_copy`), and the step record of every
node (:mod:`.lowering`), which the script runs in the optimized order on the arenas and in the
original order on fresh tensors. :mod:`commopt.codegen.render` only pastes these values into
the template (:mod:`.spec` holds the types).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from commopt.codegen.lowering import Lowering, check_tensor
from commopt.codegen.names import identifier
from commopt.codegen.slots import order_sha256, plan_tables
from commopt.codegen.spec import BufferSpec, EmulatedSpec, GroupSpec, InputSpec, RunnerModel
from commopt.codegen.zero_copy import zero_copy_targets
from commopt.errors import GraphError, OptionError
from commopt.ir.graph import Graph, NodeKind, TensorMeta
from commopt.ir.schedule import Schedule

__all__ = ["BufferSpec", "EmulatedSpec", "GroupSpec", "InputSpec", "RunnerModel", "build_model",
           "order_sha256"]


def build_model(graph: Graph, order: list[int], plan: Any = None) -> RunnerModel:
    """Check ``graph``, ``order`` and ``plan`` and decide every value of the runner."""
    positions = _check_order(graph, order)
    groups = _group_specs(graph)
    group_var = {g.name: g.var for g in groups}
    arenas, buffers, slots, digest, persistent = plan_tables(graph, order, plan, group_var)
    ops: dict[str, str] = {}
    emulated: list[EmulatedSpec] = []
    notes: list[str] = []
    lowering = Lowering(graph, group_var, ops, emulated)
    targets = zero_copy_targets(graph, slots, positions)
    steps = lowering.steps(order, slots, targets)
    copies, zero_copy = lowering.copies, lowering.zero_copy
    copy_bytes, persistent_reads = lowering.copy_bytes, lowering.persistent_reads
    if persistent:
        notes.append(f"{len(persistent)} parameter(s) live in the arena (copied in once when the "
                     f"inputs are loaded): {persistent_reads} copy-in(s) per step saved")
    used = lowering.used_buffers
    if lowering.runtime_sized:
        notes.append(f"{len(lowering.runtime_sized)} collective(s) with data-dependent sizes get "
                     "fresh tensors sized when the step runs (from its own split sizes), not "
                     "arena buffers")
    predicted = _predicted_peak(graph, order, plan, targets)
    unused = [b for b in buffers if b.var not in used]
    if unused:
        # all_reduce/broadcast run in place on one buffer: a separate input buffer stays idle
        notes.append(f"{len(unused)} planned buffer(s) not used by this runner: "
                     + ", ".join(b.var for b in unused[:8]) + (" ..." if len(unused) > 8 else ""))
        buffers = [b for b in buffers if b.var in used]
    return RunnerModel(
        graph_name=graph.name,
        source=graph.source_path or "",
        world_size=_world_size(graph),
        plan_digest=digest,
        groups=groups,
        inputs=_input_specs(graph),
        arenas=arenas,
        buffers=buffers,
        ops=ops,
        emulated=emulated,
        steps=steps,
        optimized_order=list(order),
        copies_per_iter=copies,
        copy_bytes_per_iter=copy_bytes,
        zero_copy_per_iter=zero_copy,
        persistent_params=persistent,
        persistent_reads_per_iter=persistent_reads,
        predicted_peak_bytes=predicted,
        notes=notes,
    )


def _predicted_peak(graph: Graph, order: list[int], plan: Any, targets) -> int:
    """The peak bytes one rank holds running the optimized step, by commopt's memory model:
    the arenas plus every other live tensor (:func:`commopt.buffers.footprint.plan_footprint`),
    or the plain live-tensor peak without a plan. Largest rank's sizes."""
    from commopt.buffers.footprint import plan_footprint
    from commopt.sim.memory import peak_memory

    if plan is None:
        return peak_memory(graph, order, padded=True)[0]
    return plan_footprint(graph, order, plan, zero_copy=targets).peak_bytes


def _check_order(graph: Graph, order: list[int]) -> tuple[int, ...]:
    """The runner executes ``order`` statement by statement: every node after its inputs.
    Returns each node's position in ``order``. All predecessor edges are compared at once
    (numpy over the graph's predecessor arrays); the error names the first node of the order
    with a predecessor after it, and its first such predecessor."""
    positions = Schedule.of(graph, order).positions
    ptr, preds = (np.frombuffer(a, dtype=np.dtype(a.typecode)) for a in graph.pred_arrays())
    if not len(preds):
        return positions
    pos = np.asarray(positions, dtype=np.int64)
    succ = np.repeat(np.arange(len(graph), dtype=np.int64), np.diff(ptr))
    late = np.flatnonzero(pos[preds] >= pos[succ])
    if len(late):
        edge = late[np.argmin(pos[succ[late]])]  # argmin: the first edge of that node
        i, j = int(succ[edge]), int(preds[edge])
        raise OptionError(
            f"the order puts {graph.nodes[i].name!r} before its predecessor "
            f"{graph.nodes[j].name!r}{_group_order_hint(graph, i, j)}",
            node=graph.nodes[i].name, field="order")
    return positions


def _group_order_hint(graph: Graph, i: int, j: int) -> str:
    """Why ``j`` precedes ``i`` when no data does: both are collectives of one group whose
    order this graph keeps. An order ``commopt.optimize`` returns may change a group's order
    and belongs to the result's graph (``OptimizeResult.graph``), not the loaded one."""
    a, b = graph.nodes[i], graph.nodes[j]
    if j in a.inputs or a.collective is None or b.collective is None \
            or a.collective.group != b.collective.group:
        return ""
    return (f" (both are collectives of group {a.collective.group!r}, whose order this graph keeps; "
            "an order from commopt.optimize belongs to the result's graph, OptimizeResult.graph, "
            "which may let a group's collectives change their order)")


def _world_size(graph: Graph) -> int | None:
    if graph.world_size is not None:
        return graph.world_size
    if graph.mesh:
        return math.prod(graph.mesh.values())
    return None


def _group_specs(graph: Graph) -> list[GroupSpec]:
    """Groups in creation order: numeric c10d names numerically (the order c10d named them)."""
    names = sorted(graph.groups, key=lambda s: (0, int(s), s) if s.isdigit() else (1, 0, s))
    world = _world_size(graph)
    specs = []
    for k, name in enumerate(names):
        g = graph.groups[name]
        rank_sets = _rank_sets(graph, g.name, g.size, g.ranks, g.mesh_dim, world)
        specs.append(GroupSpec(identifier("g", k, name), name, g.size, rank_sets))
    return specs


def _rank_sets(graph: Graph, name: str, size: int, ranks: tuple[int, ...] | None,
               mesh_dim: str | None, world: int | None) -> tuple[tuple[int, ...], ...] | None:
    mesh = graph.mesh or {}
    if mesh_dim is not None and mesh_dim in mesh:
        dims = list(mesh)
        sizes = [mesh[d] for d in dims]
        k = dims.index(mesh_dim)
        strides = [math.prod(sizes[j + 1:]) for j in range(len(sizes))]
        sets = []
        for base in range(math.prod(sizes)):
            if (base // strides[k]) % sizes[k] == 0:
                sets.append(tuple(base + strides[k] * c for c in range(sizes[k])))
        if ranks is None or tuple(sorted(ranks)) in sets:
            return tuple(sets)
    if ranks is not None:
        if len(ranks) != size:
            raise GraphError(f"process group {name!r} lists {len(ranks)} ranks but has size {size}",
                             file=graph.source_path, field="process_groups")
        return (tuple(sorted(ranks)),)
    if world is None or size == world:
        return None
    raise GraphError(
        f"process group {name!r} ({size} of {world} ranks) has no ranks or mesh dimension; "
        "give them with --groups or --mesh", file=graph.source_path, field="process_groups")


def _input_specs(graph: Graph) -> list[InputSpec]:
    specs = []
    world = _world_size(graph)
    input_kind = NodeKind.INPUT  # read once: an enum member's lookup costs more than the test
    for node in graph.nodes:
        if node.kind is not input_kind:
            continue
        if len(node.outputs) != 1:
            raise GraphError("an input node needs exactly one output tensor", file=graph.source_path,
                             node=node.name, field="outputs")
        meta = node.outputs[0]
        check_tensor(graph, node, meta)
        shapes = _shapes_per_rank(graph, meta, world)
        target = node.attrs.get("target")
        specs.append(InputSpec(node.index, node.name, meta.dtype, shapes,
                               str(node.attrs.get("role", "user_input")),
                               target if isinstance(target, str) and target != node.name else None))
    return specs


def _shapes_per_rank(graph: Graph, meta: TensorMeta, world: int | None) -> tuple[tuple[int, ...], ...]:
    """Each rank's local shape where shards are uneven (from the logical shape); else one."""
    if (meta.max_shape is None or meta.logical_shape is None or meta.placements is None
            or not graph.mesh or world is None or len(meta.placements) != len(graph.mesh)):
        return (meta.shape,)
    sizes = list(graph.mesh.values())
    shapes = []
    for rank in range(world):
        coords, rest = [], rank
        for s in reversed(sizes):
            coords.append(rest % s)
            rest //= s
        coords.reverse()
        shape = list(meta.logical_shape)
        for placement, n, c in zip(meta.placements, sizes, coords, strict=True):
            m = re.fullmatch(r"S\((\d+)\)", placement)
            if m and int(m.group(1)) < len(shape):
                d = int(m.group(1))
                chunk = -(-shape[d] // n)
                shape[d] = max(0, min(chunk, shape[d] - c * chunk))
        shapes.append(tuple(shape))
    if shapes[0] != tuple(meta.shape):
        return (meta.shape,)
    return tuple(shapes)
