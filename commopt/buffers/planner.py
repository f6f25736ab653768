"""Planning persistent communication buffers: one arena per process group, fixed offsets.

``plan_buffers(graph, order)`` finds every collective's buffers and their lifetimes on
``order`` (:mod:`commopt.buffers.lifetimes`), rounds sizes up to the alignment, packs each
group's buffers with the best of the greedy-by-size family (:mod:`commopt.buffers.offsets`)
and returns a :class:`~commopt.schemas.buffer_plan.BufferPlan` carrying its digest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from commopt.buffers.digest import document_digest, order_digest
from commopt.buffers.lifetimes import buffer_table, parse_collective_types
from commopt.buffers.offsets import assign_offsets, lower_bound
from commopt.buffers.persistent import NO_PERSISTENT, PersistentParams, find_persistent_params
from commopt.errors import OptionError
from commopt.ir.graph import Graph
from commopt.schemas import buffer_plan as schema
from commopt.schemas.buffer_plan import (
    BufferPlan,
    GroupArena,
    PlanComparison,
    PlannedBuffer,
    PlanTotals,
)
from commopt.trusted import maker

#: Default alignment of every buffer offset and size, in bytes. 512 B is the granularity of
#: PyTorch's CUDA caching allocator (``kMinBlockSize``), so a buffer carved from the arena is
#: aligned exactly like a tensor the allocator would hand NCCL; it is a multiple of the 16 B
#: that NCCL's vectorised (LL128, NVLS multimem) kernels load at once and of every dtype
#: size. The arena itself comes from ``ncclMemAlloc`` / the NCCL memory pool, which aligns
#: the base to the CUDA VMM granularity (2 MiB); NCCL user-buffer registration then needs only
#: the same offset on every rank, which the plan guarantees. Larger values waste memory on
#: small buffers without helping registration.
DEFAULT_ALIGN_BYTES = 512

#: Largest alignment accepted: 2 MiB, the CUDA VMM granularity the arena base itself is
#: aligned to. An offset aligned more finely than its base gains nothing (the address is only
#: as aligned as the base), and every buffer would be rounded up to it.
MAX_ALIGN_BYTES = 2 * 2**20


def align_up(size_bytes: int, align_bytes: int) -> int:
    """``size_bytes`` rounded up to a multiple of ``align_bytes``."""
    return -(-size_bytes // align_bytes) * align_bytes


def check_align(align_bytes: int) -> int:
    """Return ``align_bytes`` if it is a power of two from 1 to :data:`MAX_ALIGN_BYTES`, else
    raise OptionError (a huge value would plan absurd arenas: every buffer rounds up to it)."""
    if isinstance(align_bytes, bool) or not isinstance(align_bytes, int) or align_bytes < 1 \
            or align_bytes & (align_bytes - 1) or align_bytes > MAX_ALIGN_BYTES:
        raise OptionError(f"alignment must be a power of two from 1 to {MAX_ALIGN_BYTES} bytes "
                          f"(2 MiB), got {align_bytes!r}", field="--align")
    return align_bytes


def plan_buffers(
    graph: Graph,
    order: Sequence[int] | None = None,
    *,
    align: int = DEFAULT_ALIGN_BYTES,
    collective_types: str | Iterable[str] | None = None,
    persistent_params: str | Iterable[str] | None = None,
) -> BufferPlan:
    """Plan one arena per process group for the collectives' buffers on ``order``.

    ``order`` defaults to the graph's original order. ``collective_types``: None or 'all'
    for every type, else a comma-separated string or iterable of types.
    ``persistent_params``: None/'none', 'all' or group names whose qualifying parameters
    live in the arena for the whole step (:mod:`commopt.buffers.persistent`). Deterministic:
    the same graph, order and options give the same plan (and digest) in any process.
    """
    check_align(align)
    types = parse_collective_types(collective_types)
    persistent = find_persistent_params(graph, persistent_params)
    if order is None:
        order = graph.original_order
    lifetimes = _Lifetimes(graph, order, types, persistent)
    planned = [_plan_group(graph, name, lifetimes, buffers, lifetimes.packing(buffers, align))
               for name, buffers in lifetimes.groups]
    arenas = [arena for arena, _ in planned]
    totals = PlanTotals(
        buffers=sum(len(a.buffers) for a in arenas),
        arena_bytes=sum(a.arena_bytes for a in arenas),
        lower_bound_bytes=sum(a.lower_bound_bytes for a in arenas),
        per_call_site_bytes=sum(a.per_call_site_bytes for a in arenas),
    )
    plan = BufferPlan(
        graph=graph.name,
        nodes=len(graph.nodes),
        order_sha256=order_digest(graph, order),
        align_bytes=align,
        collective_types=list(types) if types is not None else ["all"],
        groups=arenas,
        totals=totals,
        persistent_params=_persistent_entry(graph, persistent, arenas),
        digest="",
    )
    # the digest from the plain data the buffers were made from: dumping 100,000s of buffer
    # models again would cost more than making them (plan_digest(plan) is equal)
    doc = plan.model_dump(mode="json", exclude={"digest": True, "groups": {"__all__": {"buffers"}}})
    for arena_doc, (_, rows) in zip(doc["groups"], planned, strict=True):
        arena_doc["buffers"] = rows
    plan.digest = document_digest(doc)
    return plan


class _Lifetimes:
    """The buffers of a graph on one order, as rows of its buffer table
    (:class:`~commopt.buffers.lifetimes.BufferTable`) with their lifetimes, grouped by process
    group (sorted by name): what packing and the plan's rows are made from, without a
    :class:`~commopt.buffers.lifetimes.BufferSpec` per buffer."""

    def __init__(self, graph: Graph, order: Sequence[int], types: tuple[str, ...] | None,
                 persistent: PersistentParams = NO_PERSISTENT) -> None:
        table = buffer_table(graph, types, persistent)
        self.first, self.last, self.zero_copy = table.lifetimes(graph, order)
        self.rows, self.padded_bytes = table.rows, table.padded_bytes
        self.groups = sorted(table.group_rows.items())

    def packing(self, buffers: np.ndarray, align: int) -> _Packing:
        """The packing of these buffers (row numbers)."""
        return _Packing.of_lifetimes(self.padded_bytes[buffers].tolist(), self.first[buffers].tolist(),
                                     self.last[buffers].tolist(), align)


class _Packing:
    """One group's buffers packed: aligned sizes, offsets, arena bytes and its bounds (and
    the lifetimes it packed)."""

    def __init__(self, sizes: list[int], offsets: list[int], arena: int, heuristic: str,
                 lower: int, firsts: list[int], lasts: list[int]) -> None:
        self.sizes, self.offsets, self.arena, self.heuristic = sizes, offsets, arena, heuristic
        self.firsts, self.lasts = firsts, lasts
        self.lower_bound = lower
        self.per_call_site = sum(sizes)

    @classmethod
    def of_lifetimes(cls, padded_bytes: list[int], firsts: list[int], lasts: list[int],
                     align: int) -> _Packing:
        """Pack buffers of these sizes (before alignment) and lifetimes
        (:func:`commopt.buffers.offsets.assign_offsets`)."""
        sizes = [align_up(size, align) for size in padded_bytes]
        offsets, arena, heuristic = assign_offsets(sizes, firsts, lasts)
        return cls(sizes, offsets, arena, heuristic, lower_bound(sizes, firsts, lasts), firsts, lasts)


def _packings(graph: Graph, order: Sequence[int], types: tuple[str, ...] | None, align: int,
              persistent: PersistentParams = NO_PERSISTENT) -> list[_Packing]:
    """Per process group (sorted by name), the packing of its buffers on ``order``."""
    lifetimes = _Lifetimes(graph, order, types, persistent)
    return [lifetimes.packing(buffers, align) for _, buffers in lifetimes.groups]


#: A :class:`PlannedBuffer` of values already of its fields' types, in the schema's order.
_planned_buffer = maker(PlannedBuffer)

#: A buffer's role as its name spells it (:meth:`commopt.buffers.lifetimes.BufferSpec.name`).
_ROLE_NAMES = {"input": "in", "output": "out", "inout": "inout"}


def _plan_group(graph: Graph, group: str, lifetimes: _Lifetimes, buffers: np.ndarray,
                packed: _Packing) -> tuple[GroupArena, list[dict]]:
    """One group's arena, and its buffers (row numbers of ``lifetimes``) as the plain data a
    dump of them gives."""
    pg = graph.groups.get(group)
    nodes = graph.nodes
    # the rows: plain data in the schema's key order, the fields a dump omits left out, so
    # they are also what the digest hashes; the buffers made from them without validation
    # (every value is already of its field's type, :mod:`commopt.trusted`): checking
    # 100,000s of rows cost more than making them; the arena holding them is still validated
    rows, planned = [], []
    for (c, role, k, value, _, meta, padded, local, producer, persistent, shared), off, size, first, \
            last, zero_copy in zip(map(lifetimes.rows.__getitem__, buffers.tolist()), packed.offsets,
                                   packed.sizes, packed.firsts, packed.lasts,
                                   lifetimes.zero_copy[buffers].tolist(), strict=True):
        coll = nodes[c]
        row = {
            "name": f"{coll.name}:{_ROLE_NAMES[role]}{k}", "node": coll.name,
            "collective_type": coll.collective.type,
            "role": role, "tensor_index": k, "value": nodes[value].name,
            "offset_bytes": off, "size_bytes": size, "padded_bytes": padded,
            "local_bytes": local, "dtype": meta.dtype, "shape": list(meta.shape),
            "max_shape": list(meta.max_shape) if meta.max_shape is not None else None,
            "first": first, "last": last,
            "producer": nodes[producer].name if producer is not None else None,
            "zero_copy": zero_copy,
        }
        shared_with = [_read_name(graph, c, k) for c, k in shared] if shared else []
        planned.append(_planned_buffer({**row, "persistent": persistent, "shared_with": shared_with}))
        if persistent:
            row["persistent"] = True
        if shared_with:
            row["shared_with"] = shared_with
        rows.append(row)
    arena = GroupArena.model_validate({
        "group": group,
        "group_size": pg.size if pg is not None else 1,
        "arena_bytes": packed.arena,
        "lower_bound_bytes": packed.lower_bound,
        "per_call_site_bytes": packed.per_call_site,
        "heuristic": packed.heuristic,
        "buffers": planned,
    })
    return arena, rows


def _read_name(graph: Graph, collective: int, k: int) -> str:
    """The buffer name a collective's k-th input would have: ``'<collective>:in<k>'``."""
    return f"{graph.nodes[collective].name}:in{k}"


def _persistent_entry(graph: Graph, persistent: PersistentParams,
                      arenas: list[GroupArena]) -> schema.PersistentParams | None:
    """The plan's account of persistent parameters: slots placed, parameters left out and
    why, arena bytes they hold, copies per step they save (None when the option is off)."""
    if persistent.groups == ():
        return None
    nodes = graph.nodes
    placed = {b.name: b for a in arenas for b in a.buffers if b.persistent}
    params, saved, moved = [], 0, 0
    left_out = [schema.NotPersistent(param=nodes[r.param].name, collective=nodes[r.collective].name,
                                     reason=r.reason) for r in persistent.rejected]
    for slot in persistent.slots:
        name = _read_name(graph, *slot.reads[0])
        buf = placed.get(name)
        if buf is None:
            left_out.append(schema.NotPersistent(
                param=nodes[slot.param].name, collective=nodes[slot.reads[0][0]].name,
                reason="all_gathers get no persistent buffers (--comm-buffers leaves them out)"))
            continue
        params.append(schema.PersistentParam(
            param=nodes[slot.param].name, buffer=name, group=slot.group, size_bytes=buf.size_bytes,
            readers=[_read_name(graph, c, k) for c, k in slot.reads]))
        saved += len(slot.reads)
        moved += len(slot.reads) * buf.padded_bytes
    return schema.PersistentParams(
        groups=list(persistent.groups) if persistent.groups is not None else ["all"],
        params=params,
        not_qualified=left_out,
        slot_bytes=sum(p.size_bytes for p in params),
        copies_saved_per_step=saved,
        bytes_not_copied_per_step=moved,
    )


def compare_plans(
    graph: Graph,
    original_order: Sequence[int] | None,
    new_order: Sequence[int],
    *,
    align: int = DEFAULT_ALIGN_BYTES,
    collective_types: str | Iterable[str] | None = None,
    new_plan: BufferPlan | None = None,
    persistent_params: str | Iterable[str] | None = None,
    original_graph: Graph | None = None,
    original_totals: tuple[int, int] | None = None,
) -> PlanComparison:
    """How much the reordering raised the buffer arena over planning on the original order
    (both with the same options); with ``persistent_params``, also what keeping the
    parameters in the arena costs on the new order.

    Pass ``new_plan`` when it was already computed for ``new_order`` (saves planning twice),
    and ``original_totals`` when :func:`original_arena_totals` was (e.g. on another core).
    ``original_graph``: the program ``original_order`` orders when a pass rewrote ``graph``
    (bucketing); by default ``graph``.
    """
    if new_plan is None:
        new_plan = plan_buffers(graph, new_order, align=align, collective_types=collective_types,
                                persistent_params=persistent_params)
    check_align(align)
    types = parse_collective_types(collective_types)
    if original_totals is None:
        original_totals = original_arena_totals(
            graph if original_graph is None else original_graph, original_order, align=align,
            collective_types=collective_types, persistent_params=persistent_params)
    original_arena, original_lower_bound = original_totals
    cost = None
    if new_plan.persistent_params is not None:
        without = sum(p.arena for p in _packings(graph, new_order, types, align))
        cost = schema.PersistentParamsCost(
            **new_plan.persistent_params.model_dump(), arena_bytes_without=without,
            arena_cost_bytes=new_plan.totals.arena_bytes - without)
    t = new_plan.totals
    return PlanComparison(
        arena_bytes=t.arena_bytes,
        lower_bound_bytes=t.lower_bound_bytes,
        per_call_site_bytes=t.per_call_site_bytes,
        original_arena_bytes=original_arena,
        original_lower_bound_bytes=original_lower_bound,
        arena_increase_bytes=t.arena_bytes - original_arena,
        persistent_params=cost,
    )


def original_arena_totals(graph: Graph, original_order: Sequence[int] | None = None, *,
                          align: int = DEFAULT_ALIGN_BYTES,
                          collective_types: str | Iterable[str] | None = None,
                          persistent_params: str | Iterable[str] | None = None) -> tuple[int, int]:
    """(arena bytes, lower bound bytes) summed over the groups when ``graph``'s buffers are
    planned on ``original_order`` (default: its original order): what :func:`compare_plans`
    compares a new plan with. Only the packing is computed, no plan is built."""
    check_align(align)
    if original_order is None:
        original_order = graph.original_order
    persistent = find_persistent_params(graph, persistent_params)
    before = _packings(graph, original_order, parse_collective_types(collective_types), align,
                       persistent)
    return sum(p.arena for p in before), sum(p.lower_bound for p in before)
