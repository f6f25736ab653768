"""Which communication buffers a graph needs, their sizes and their lifetimes on an order.

Buffers are the inputs and outputs of collectives (one per tensor for coalesced collectives,
one shared ``inout`` buffer per tensor for in-place collectives). Lifetimes are inclusive
positions in the order:

- input: from the collective's issue (the runner copies the value in then) to its last wait,
  since the collective may read its input until then; when the producer writes straight into
  the buffer (zero-copy), from the node that allocates the value's storage (its storage root,
  through views; position 0 for a graph input);
- output: from the collective's issue to the last use of the result through any alias (views,
  getitems, waits), and at least to the last wait;
- inout: from the issue (from the storage's allocation when zero-copy) to the last use of any
  alias of it, and at least to the last wait.

Sizes are the largest rank's shard (``TensorMeta.padded_nbytes``) so every rank computes the
same plan; alignment is applied by the planner. A tensor whose size is data-dependent
(:mod:`commopt.ir.sizes`: only the running program knows it) gets no buffer: a fixed slot
sized by an assumed value could be too small, so the runner allocates it fresh each step.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from commopt.errors import GraphError, OptionError, suggest
from commopt.ir.args import iter_refs
from commopt.ir.graph import COLLECTIVE_TYPES, Graph, Node, NodeKind, TensorMeta
from commopt.ir.schedule import Schedule
from commopt.ir.sizes import has_data_dependent_output

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


def collect_buffers(
    graph: Graph,
    order: Sequence[int],
    collective_types: Iterable[str] | None = None,
) -> list[BufferSpec]:
    """Every communication buffer of ``graph`` with its lifetime on ``order``.

    Sorted by (collective's original index, role, tensor index): deterministic.
    ``collective_types`` restricts to those types (None: all).
    """
    pos = Schedule.of(graph, order).positions
    wanted = None if collective_types is None else frozenset(collective_types)
    keys = alias_keys(graph)
    last = last_uses(graph, pos, keys)
    nodes = graph.nodes
    out: list[BufferSpec] = []
    candidates: list[int] = []
    for c in graph.collectives():
        node = nodes[c]
        info = node.collective
        if info is None:
            raise GraphError("collective node without collective info", node=node.name, file=graph.source_path)
        if wanted is not None and info.type not in wanted:
            continue
        waits = graph.waits_of(c)
        done = max((pos[w] for w in waits), default=pos[c])
        ins = [i for i in collective_inputs(node) if nodes[i].outputs]
        if info.in_place:
            for k, i in enumerate(ins):
                if has_data_dependent_output(nodes[i]):
                    continue  # sized when the program runs: a fresh tensor, never a fixed slot
                root = keys[i][0]
                end = max(done, _last_of_root(last, keys[i]), last.get((keys[c][0], k), -1),
                          last.get((keys[c][0], ALL_TENSORS), -1))
                out.append(_input_spec(graph, pos, c, "inout", k, i, root, end))
                candidates.append(len(out) - 1)
            continue
        for k, i in enumerate(ins):
            if has_data_dependent_output(nodes[i]):
                continue
            root = keys[i][0]
            out.append(_input_spec(graph, pos, c, "input", k, i, root, done))
            candidates.append(len(out) - 1)
        multi = len(node.outputs) > 1
        for k, meta in enumerate(node.outputs):
            if has_data_dependent_output(node, k):
                continue
            key = (c, k if multi else 0)
            end = max(done, last.get(key, -1), last.get((c, ALL_TENSORS), -1) if multi else -1)
            out.append(BufferSpec(
                collective=c, role="output", tensor_index=k, value=c, group=info.group, meta=meta,
                padded_bytes=meta.padded_nbytes, local_bytes=meta.nbytes,
                first=pos[c], last=end, producer=None, zero_copy=False,
            ))
    for b in candidates:
        spec = out[b]
        if _can_write_in_place(graph, spec, keys, last):
            out[b] = _replace_zero_copy(spec)
        else:  # the runner copies the value in when the collective is issued
            out[b] = replace(spec, first=pos[spec.collective])
    return out


def _last_of_root(last: dict[tuple[int, int], int], key: tuple[int, int]) -> int:
    root, k = key
    return max(last.get((root, k), -1), last.get((root, ALL_TENSORS), -1))


def _input_spec(graph: Graph, pos: Sequence[int], c: int, role: str, k: int, value: int,
                root: int, end: int) -> BufferSpec:
    nodes = graph.nodes
    meta = nodes[value].outputs[0]
    root_node = nodes[root]
    first = 0 if root_node.kind is NodeKind.INPUT else pos[root]
    return BufferSpec(
        collective=c, role=role, tensor_index=k, value=value,
        group=nodes[c].collective.group, meta=meta, padded_bytes=meta.padded_nbytes,
        local_bytes=meta.nbytes, first=min(first, pos[c]), last=max(end, pos[c]),
        producer=root, zero_copy=False,
    )


def _can_write_in_place(graph: Graph, spec: BufferSpec, keys: Sequence[tuple[int, int]],
                        last: dict[tuple[int, int], int]) -> bool:
    """Zero-copy: the value is the direct, only output of a compute op with an out= variant,
    not a graph input or a view, and nothing touches it after the buffer's lifetime."""
    value = graph.nodes[spec.value]
    if spec.value != spec.producer or value.kind is not NodeKind.COMPUTE:
        return False
    if len(value.outputs) != 1 or value.mutates or value.side_effect or value.alias_of is not None:
        return False
    if _last_of_root(last, keys[spec.value]) > spec.last:
        return False
    return has_out_variant(value.op)


@functools.lru_cache(maxsize=4096)
def has_out_variant(op: str) -> bool:
    """Whether the operator overload named ``op`` (``'aten.mm.default'``) has an out= overload.

    Asks torch's operator registry (imported here, on first use); unknown ops give False.
    """
    parts = op.split(".")
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        return False
    import torch

    try:
        packet = getattr(getattr(torch.ops, parts[0]), parts[1])
        overloads = packet.overloads()
    except (AttributeError, RuntimeError):
        return False
    return any(o == "out" or o.endswith("_out") for o in overloads)


def _replace_zero_copy(spec: BufferSpec) -> BufferSpec:
    return replace(spec, zero_copy=True)
