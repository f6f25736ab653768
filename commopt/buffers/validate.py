"""An independent check of a buffer plan against a graph and an order.

It trusts nothing in the plan: lifetimes and sizes are recomputed here from the graph, with
code separate from the planner's (:mod:`commopt.buffers.lifetimes`), so a planner bug shows up
as a problem instead of being repeated. Checked: the digest, the order the plan was made
for, alignment, buffers outside their arena, buffers missing from the plan or unknown to the
graph, what each buffer holds (its node, collective type, role, tensor index, value,
producer, dtype, shape, max shape and local bytes, field by field) and each arena's group
size, sizes and lifetimes shorter than needed, zero-copy claims that cannot hold, totals, each
arena's lower bound and per-call-site figures, every pair of buffers live at the same
time that overlap in memory, and persistent parameter slots (a parameter nothing writes,
live for the whole order, read only by all_gathers of its group through reshaping views).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from commopt.buffers.digest import order_digest, plan_digest
from commopt.ir.args import iter_refs
from commopt.ir.graph import Graph, NodeKind
from commopt.ir.layout import same_bytes_root
from commopt.ir.sizes import has_data_dependent_output
from commopt.schemas.buffer_plan import BufferPlan, PlannedBuffer

#: PlannedBuffer fields that describe what the graph holds: recomputed from the graph and
#: compared exactly. The others are the planner's placement (checked against the graph's
#: needs: offset and size against alignment, arena and overlaps, size at least the padded
#: size, lifetime covering the needed one, zero-copy only where it can hold, a persistent
#: parameter slot only where it provably holds what every reader reads) or the key.
EXACT_FIELDS = ("node", "collective_type", "role", "tensor_index", "value", "producer", "dtype",
                "shape", "max_shape", "local_bytes")
PLACEMENT_FIELDS = ("name", "offset_bytes", "size_bytes", "padded_bytes", "first", "last", "zero_copy",
                    "persistent", "shared_with")


@dataclass(frozen=True, slots=True)
class _Expected:
    group: str
    padded_bytes: int
    first: int
    last: int
    value_root_is_input: bool
    value_is_view: bool
    value_last_use: int
    exact: dict  # EXACT_FIELDS -> the value the graph gives
    issue: int = -1  # the collective's position: an input copied in needs its buffer from there


def validate_plan(graph: Graph, order: Sequence[int] | None, plan: BufferPlan) -> list[str]:
    """Every problem with ``plan`` for ``graph`` run in ``order`` (empty list: the plan is valid).

    ``order`` defaults to the graph's original order.
    """
    if order is None:
        order = graph.original_order
    problems: list[str] = []
    if plan_digest(plan) != plan.digest:
        problems.append(f"digest mismatch: the plan says {plan.digest[:16]}..., its content hashes to "
                        f"{plan_digest(plan)[:16]}... (edited or corrupted)")
    if plan.nodes != len(graph.nodes) or sorted(order) != list(range(len(graph.nodes))):
        problems.append(f"the plan is for a graph of {plan.nodes} nodes, this graph has {len(graph.nodes)} "
                        f"(or the order is not a permutation)")
        return problems
    if plan.order_sha256 != order_digest(graph, order):
        problems.append("the plan was made for a different order of this graph's nodes")
    align = plan.align_bytes
    if align & (align - 1):
        problems.append(f"alignment {align} is not a power of two")
    types = None if "all" in plan.collective_types else set(plan.collective_types)
    expected = _expected_buffers(graph, order, types)
    seen: dict[str, PlannedBuffer] = {}
    covered: set[str] = set()  # inputs read from a persistent parameter slot
    writers: dict[int, str] | None = None  # storage root -> a node writing it in place
    for arena in plan.groups:
        for buf in arena.buffers:
            where = f"buffer {buf.name!r} (group {arena.group!r})"
            if buf.name in seen or buf.name in covered:
                problems.append(f"{where}: listed twice")
                continue
            seen[buf.name] = buf
            if buf.offset_bytes % align or buf.size_bytes % align:
                problems.append(f"{where}: offset {buf.offset_bytes} or size {buf.size_bytes} "
                                f"is not a multiple of the alignment {align}")
            if buf.offset_bytes + buf.size_bytes > arena.arena_bytes:
                problems.append(f"{where}: ends at {buf.offset_bytes + buf.size_bytes}, outside the "
                                f"arena of {arena.arena_bytes} bytes")
            exp = expected.get(buf.name)
            if exp is None:
                problems.append(f"{where}: no such buffer in the graph")
                continue
            if buf.persistent or buf.shared_with:
                if writers is None:
                    writers = {_root(graph, j): n.name for n in graph.nodes for j in n.mutates}
                covered.update(buf.shared_with)
                if buf.persistent:
                    problems.extend(_persistent_problems(graph, len(order), where, arena.group, buf,
                                                         expected, writers))
                    continue
                problems.extend(_shared_problems(graph, where, arena.group, buf, expected, writers))
                exp = _widened(exp, [expected[r] for r in buf.shared_with if r in expected])
            problems.extend(_compare(where, arena.group, buf, exp))
    for name in covered & set(seen):
        problems.append(f"buffer {name!r} reads a persistent parameter slot and has a buffer of its own")
    for name in expected:
        if name not in seen and name not in covered:
            problems.append(f"buffer {name!r} (group {expected[name].group!r}) is missing from the plan")
    for arena in plan.groups:
        pg = graph.groups.get(arena.group)
        if pg is None:
            problems.append(f"group {arena.group!r}: no such process group in the graph")
        elif arena.group_size != pg.size:
            problems.append(f"group {arena.group!r}: field group_size is {arena.group_size}, the graph's "
                            f"group has {pg.size} ranks")
    problems.extend(_totals_problems(plan))
    for arena in plan.groups:
        problems.extend(_bound_problems(arena))
    for arena in plan.groups:
        problems.extend(_overlaps(arena.group, arena.buffers, expected))
    return problems


def _compare(where: str, group: str, buf: PlannedBuffer, exp: _Expected) -> list[str]:
    out: list[str] = []
    if exp.group != group:
        out.append(f"{where}: belongs to group {exp.group!r}")
    for name in EXACT_FIELDS:
        have, want = getattr(buf, name), exp.exact[name]
        if have != want:
            out.append(f"{where}: field {name} is {have!r}, the graph gives {want!r}")
    if buf.padded_bytes != exp.padded_bytes or buf.size_bytes < exp.padded_bytes:
        out.append(f"{where}: size mismatch: the graph needs {exp.padded_bytes} bytes (padded), the "
                   f"plan says {buf.padded_bytes} padded in {buf.size_bytes} reserved")
    need_first = _needed_first(buf, exp)
    if buf.first > need_first or buf.last < exp.last:
        out.append(f"{where}: lifetime {buf.first}-{buf.last} does not cover the needed "
                   f"{need_first}-{exp.last}")
    if buf.zero_copy and (exp.value_root_is_input or exp.value_is_view or exp.value_last_use > exp.last):
        out.append(f"{where}: marked zero-copy but its value is a graph input, a view that moves "
                   f"bytes, or read after the buffer's lifetime")
    return out


def _persistent_problems(graph: Graph, length: int, where: str, group: str, buf: PlannedBuffer,
                         expected: dict[str, _Expected], writers: dict[int, str]) -> list[str]:
    """A persistent parameter slot: it must hold a parameter nothing writes, of even shard,
    live for the whole order, read only by all_gathers of its group through reshaping views."""
    from commopt.buffers.persistent import RESHAPING_VIEWS

    nodes = graph.nodes
    p = graph.index_of.get(buf.value)
    param = nodes[p] if p is not None else None
    if param is None or param.kind is not NodeKind.INPUT or param.attrs.get("role") != "parameter" \
            or len(param.outputs) != 1:
        return [f"{where}: persistent, but its value {buf.value!r} is not a parameter of the graph"]
    meta = param.outputs[0]
    out: list[str] = []
    want = {"producer": param.name, "dtype": meta.dtype, "shape": list(meta.shape),
            "max_shape": list(meta.max_shape) if meta.max_shape is not None else None,
            "local_bytes": meta.nbytes, "role": "input", "zero_copy": False}
    for name, value in want.items():
        if getattr(buf, name) != value:
            out.append(f"{where}: field {name} is {getattr(buf, name)!r}, the parameter gives {value!r}")
    if meta.max_shape is not None and tuple(meta.max_shape) != tuple(meta.shape):
        out.append(f"{where}: parameter {param.name!r} is an uneven shard: no persistent slot")
    if buf.padded_bytes != meta.padded_nbytes or buf.size_bytes < meta.padded_nbytes:
        out.append(f"{where}: size mismatch: the parameter needs {meta.padded_nbytes} bytes")
    if buf.first != 0 or buf.last < length - 1:
        out.append(f"{where}: lifetime {buf.first}-{buf.last}: a persistent slot must be live for "
                   f"the whole order, 0-{length - 1}")
    if param.index in writers:
        out.append(f"{where}: {writers[param.index]!r} writes parameter {param.name!r} in place")
    for reader in [buf.name, *buf.shared_with]:
        exp = expected.get(reader)
        coll, _, slot = reader.rpartition(":")
        c = graph.index_of.get(coll)
        if exp is None or c is None or not slot.startswith("in"):
            out.append(f"{where}: reader {reader!r} is not a collective input of this graph")
            continue
        info = nodes[c].collective
        if info.type != "all_gather" or exp.group != group:
            out.append(f"{where}: reader {reader!r} is a {info.type} of group {exp.group!r}, not an "
                       f"all_gather of group {group!r}")
        i = graph.index_of[exp.exact["value"]]
        while i != param.index:
            n = nodes[i]
            if n.alias_of is None or n.kind is not NodeKind.VIEW or n.op not in RESHAPING_VIEWS \
                    or n.mutates or n.outputs[0].dtype != meta.dtype or n.outputs[0].numel != meta.numel:
                out.append(f"{where}: reader {reader!r} reads {exp.exact['value']!r}, which is not "
                           f"parameter {param.name!r} through reshaping views")
                break
            i = n.alias_of
    return out


def _shared_problems(graph: Graph, where: str, group: str, buf: PlannedBuffer,
                     expected: dict[str, _Expected], writers: dict[int, str]) -> list[str]:
    """A slot shared by several collective inputs: each reader is a non-in-place all_gather,
    reduce_scatter or all_to_all of the group, reading one storage nothing writes through
    waits and reshaping views, with the same dtype, elements and padded size."""
    from commopt.buffers.persistent import RESHAPING_VIEWS

    nodes = graph.nodes
    out: list[str] = []
    contents = set()
    for reader in [buf.name, *buf.shared_with]:
        exp = expected.get(reader)
        c = graph.index_of.get(reader.rpartition(":")[0])
        if exp is None or c is None or not reader.rpartition(":")[2].startswith("in"):
            out.append(f"{where}: reader {reader!r} is not a collective input of this graph")
            continue
        info = nodes[c].collective
        if info.in_place or info.type not in ("all_gather", "reduce_scatter", "all_to_all") \
                or exp.group != group:
            out.append(f"{where}: reader {reader!r} ({info.type} of group {exp.group!r}) cannot read a "
                       f"shared slot of group {group!r}")
        i = graph.index_of[exp.exact["value"]]
        meta = nodes[i].outputs[0]
        while nodes[i].alias_of is not None and not nodes[i].mutates and (
                nodes[i].kind is NodeKind.WAIT
                or (nodes[i].kind is NodeKind.VIEW and nodes[i].op in RESHAPING_VIEWS)):
            i = nodes[i].alias_of
        root = nodes[i]
        if root.alias_of is not None or len(root.outputs) != 1 or root.outputs[0].dtype != meta.dtype \
                or root.outputs[0].numel != meta.numel:
            out.append(f"{where}: reader {reader!r} reads {exp.exact['value']!r}, not a whole storage "
                       "through waits and reshaping views")
        elif i in writers:
            out.append(f"{where}: {writers[i]!r} writes {root.name!r}, which reader {reader!r} reads: "
                       "one copy cannot serve every reader")
        contents.add((i, meta.dtype, meta.numel, exp.padded_bytes))
    if len(contents) > 1:
        out.append(f"{where}: its readers read different contents: {sorted(contents)}")
    return out


def _widened(exp: _Expected, others: list[_Expected]) -> _Expected:
    """``exp`` with the lifetime every reader of a shared slot needs: from the first issue
    to the last reader's end."""
    import dataclasses

    return dataclasses.replace(exp, last=max([exp.last, *(o.last for o in others)]),
                               issue=min([exp.issue, *(o.issue for o in others)]))


def _root(graph: Graph, i: int) -> int:
    """The node whose storage node ``i``'s value lives in (through views and in-place ops)."""
    while graph.nodes[i].alias_of is not None:
        i = graph.nodes[i].alias_of
    return i


def _totals_problems(plan: BufferPlan) -> list[str]:
    t = plan.totals
    sums = (
        sum(len(a.buffers) for a in plan.groups),
        sum(a.arena_bytes for a in plan.groups),
        sum(a.lower_bound_bytes for a in plan.groups),
        sum(a.per_call_site_bytes for a in plan.groups),
    )
    if (t.buffers, t.arena_bytes, t.lower_bound_bytes, t.per_call_site_bytes) != sums:
        return [f"totals {t.model_dump()} do not match the sums over groups {sums}"]
    return []


def _bound_problems(arena) -> list[str]:
    """The arena's per-call-site and lower-bound figures, recomputed from its buffers."""
    out: list[str] = []
    per_site = sum(b.size_bytes for b in arena.buffers)
    if per_site != arena.per_call_site_bytes:
        out.append(f"group {arena.group!r}: per-call-site bytes {arena.per_call_site_bytes} should be "
                   f"{per_site} (the sum of its buffer sizes)")
    changes: dict[int, int] = {}
    for b in arena.buffers:
        changes[b.first] = changes.get(b.first, 0) + b.size_bytes
        changes[b.last + 1] = changes.get(b.last + 1, 0) - b.size_bytes
    live = bound = 0
    for t in sorted(changes):
        live += changes[t]
        bound = max(bound, live)
    if bound != arena.lower_bound_bytes:
        out.append(f"group {arena.group!r}: lower bound {arena.lower_bound_bytes} should be {bound} "
                   f"(largest sum of buffers live together)")
    return out


def _needed_first(buf: PlannedBuffer, exp: _Expected) -> int:
    """Where the buffer must start: a value copied in at the issue needs it from the issue;
    one its producer writes straight into the buffer (zero-copy) from the producer on."""
    return exp.first if buf.zero_copy or exp.issue < 0 else exp.issue


def _overlaps(group: str, buffers: list[PlannedBuffer], expected: dict[str, _Expected]) -> list[str]:
    """Pairs live at the same time (true lifetimes) whose byte ranges intersect."""
    spans = []
    for b in buffers:
        exp = expected.get(b.name)
        first, last = ((min(b.first, _needed_first(b, exp)), max(b.last, exp.last)) if exp
                       else (b.first, b.last))
        if b.size_bytes > 0:
            spans.append((first, last, b.offset_bytes, b.offset_bytes + b.size_bytes, b.name))
    spans.sort()
    live: list[tuple[int, int, str]] = []  # (offset, end, name), sorted by offset
    ending: list[tuple[int, int, int, str]] = []  # heap of (last, offset, end, name)
    widest = 0
    out: list[str] = []
    for first, last, lo, hi, name in spans:
        while ending and ending[0][0] < first:
            _, off, end, gone = heapq.heappop(ending)
            del live[bisect.bisect_left(live, (off, end, gone))]
        k = bisect.bisect_left(live, (lo - widest, -1, ""))
        while k < len(live) and live[k][0] < hi:
            off, end, other = live[k]
            if end > lo:
                out.append(f"buffers {other!r} [{off}, {end}) and {name!r} [{lo}, {hi}) in group "
                           f"{group!r} overlap in memory while both are live (from position {first})")
            k += 1
        bisect.insort(live, (lo, hi, name))
        heapq.heappush(ending, (last, lo, hi, name))
        widest = max(widest, hi - lo)
    return out


def _expected_buffers(graph: Graph, order: Sequence[int], types: set[str] | None) -> dict[str, _Expected]:
    """Recompute every buffer's group, padded size and lifetime straight from the definition."""
    nodes = graph.nodes
    pos = {i: p for p, i in enumerate(order)}

    def tensor(i: int) -> tuple[int, int]:
        """(storage root, tensor index or -1 for all tensors) of node i's value."""
        chain = [i]
        while nodes[chain[-1]].alias_of is not None:
            chain.append(nodes[chain[-1]].alias_of)
        root = chain[-1]
        if len(nodes[root].outputs) <= 1:
            return root, 0
        below = chain[-2] if len(chain) > 1 else None
        if below is not None:
            nb = nodes[below]
            if nb.kind is NodeKind.VIEW and len(nb.args) >= 2 and type(nb.args[1]) is int:
                return root, nb.args[1]
        return root, -1

    touched: dict[tuple[int, int], int] = {}
    for node in nodes:
        p = pos[node.index]
        for t in [tensor(node.index)] + [tensor(j) for j in node.inputs]:
            if touched.get(t, -1) < p:
                touched[t] = p

    def last_touch(root: int, k: int) -> int:
        return max(touched.get((root, k), -1), touched.get((root, -1), -1))

    out: dict[str, _Expected] = {}
    for c in [n.index for n in nodes if n.kind is NodeKind.COLLECTIVE]:
        node = nodes[c]
        info = node.collective
        if info is None or (types is not None and info.type not in types):
            continue
        done = max([pos[c]] + [pos[w] for w in graph.waits_of(c)])
        refs = list(iter_refs(node.args[0])) if node.args else []
        reads = [i for i in (refs or list(node.inputs)) if nodes[i].outputs]
        for k, i in enumerate(reads):
            if has_data_dependent_output(nodes[i]):
                continue  # sized at run time: never planned (commopt.buffers.lifetimes)
            root, ti = tensor(i)
            root_is_input = nodes[root].kind is NodeKind.INPUT
            first = 0 if root_is_input else pos[root]
            last = done
            if info.in_place:
                croot, _ = tensor(c)
                last = max(done, last_touch(root, ti), last_touch(croot, k if len(node.outputs) > 1 else 0))
            role = "inout" if info.in_place else "in"
            meta = nodes[i].outputs[0]
            out[f"{node.name}:{role}{k}"] = _Expected(
                info.group, meta.padded_nbytes, first, last,
                root_is_input, i != root and same_bytes_root(graph, i) != root, last_touch(root, ti),
                _exact(node.name, info.type, "inout" if info.in_place else "input", k,
                       nodes[i].name, nodes[root].name, meta),
                issue=pos[c],
            )
        if info.in_place:
            continue
        for k, meta in enumerate(node.outputs):
            if has_data_dependent_output(node, k):
                continue
            ti = k if len(node.outputs) > 1 else 0
            out[f"{node.name}:out{k}"] = _Expected(
                info.group, meta.padded_nbytes, pos[c], max(done, last_touch(c, ti)),
                False, False, -1, _exact(node.name, info.type, "output", k, node.name, None, meta),
            )
    return out


def _exact(node: str, ctype: str, role: str, k: int, value: str, producer: str | None, meta) -> dict:
    """What a buffer's :data:`EXACT_FIELDS` must hold, from the graph."""
    return {
        "node": node, "collective_type": ctype, "role": role, "tensor_index": k, "value": value,
        "producer": producer, "dtype": meta.dtype, "shape": list(meta.shape),
        "max_shape": list(meta.max_shape) if meta.max_shape is not None else None,
        "local_bytes": meta.nbytes,
    }
