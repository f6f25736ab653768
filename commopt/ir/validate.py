"""Structural validation of a node list before a :class:`~commopt.ir.graph.Graph` is built.

Every loader funnels through here, so a malformed graph is reported the same way whatever
format it came from: one :class:`~commopt.errors.GraphError` naming the file and node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from commopt.errors import GraphError
from commopt.ir.graph import DTYPE_BYTES, CollectiveInfo, Node, NodeKind, ProcessGroup, TensorMeta

#: Largest tensor or message (bytes) a graph may describe: 16 TiB, far beyond any device,
#: small enough that sums over 100,000s of nodes stay exact in int64 arrays and floats.
MAX_TENSOR_BYTES = 2**44

#: Largest world size (ranks) a graph, a groups record or an option may give.
MAX_WORLD_SIZE = 2**20

#: Largest duration (microseconds) a graph file may set on a node: about 31 years.
MAX_DURATION_US = 1e15

#: Reduce ops a collective may name (compared case-insensitively; torch's spellings).
REDUCE_OPS = frozenset({"sum", "avg", "product", "prod", "min", "max", "band", "bor", "bxor"})


# ``NodeKind.X`` goes through ``EnumType.__getattr__`` on Python 3.11 (about ten times a
# global's lookup): the loops over every node below compare with these.
_VIEW, _WAIT, _OUTPUT, _COLLECTIVE = NodeKind.VIEW, NodeKind.WAIT, NodeKind.OUTPUT, NodeKind.COLLECTIVE


def validate_nodes(
    nodes: list[Node], groups: dict[str, ProcessGroup], *, file: str | None = None,
    world_size: int | None = None, mesh: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Raise :class:`GraphError` for the first structural problem found; return each node's
    index by name, which :meth:`Graph.build <commopt.ir.graph.Graph.build>` keeps rather
    than building it again.

    Checks: indices match positions, names are unique and encodable, references point to
    existing nodes listed earlier (a later one is either a cycle, named, or a misordered
    file), aliases and mutations refer to inputs, every wait completes a collective reached
    through views only, no other node reads a collective's value before its wait, every
    collective is waited, collectives name a known process group and reduce op, tensors have
    a known dtype and a sane shape, durations are finite, and the process groups fit the
    world and mesh (:func:`validate_groups`). Later stages rely on all of it, so every loader
    rejects such a graph here instead of a later command failing on it.
    """
    index_of = _check_nodes(nodes, file)
    validate_groups(groups, world_size=world_size, mesh=mesh, file=file, field="process_groups")
    _check_references(nodes, groups, file)
    return index_of


def _check_nodes(nodes: list[Node], file: str | None) -> dict[str, int]:
    """Each node's index by name, after checking node by node that its index is its position,
    its name is new and its values are sound (:func:`_check_node_values`)."""
    index_of: dict[str, int] = {}
    checked: set[int] = set()  # ids of the tensors and collectives checked: loaders share equal ones
    for pos, node in enumerate(nodes):
        name = node.name
        if node.index != pos:
            raise GraphError(f"node index {node.index} does not match its position {pos}", file=file, node=name)
        if name in index_of:
            raise GraphError("duplicate node name", file=file, node=name, field="name")
        index_of[name] = pos
        c = node.collective
        if not (id(node.outputs) in checked and node.duration_us is None  # most nodes: nothing
                and (c is None or id(c) in checked) and type(name) is str and name.isascii()
                and name):  # new to check (_check_node_values would pass, adding nothing)
            _check_node_values(node, file, checked)
    return index_of


def _check_references(nodes: list[Node], groups: Mapping[str, ProcessGroup], file: str | None) -> None:
    """What holds between nodes, in one pass: inputs are earlier nodes, aliases and mutations
    are inputs, collectives have a known group and are waited, waits complete collectives,
    nothing else reads a collective's value, and there is at most one output."""
    n = len(nodes)
    forward: list[tuple[int, int]] = []
    outputs = 0
    collectives: list[int] = []
    waited: set[int] = set()
    collective_of: dict[int, int] = {}  # a collective and each view of its result -> the collective
    collective_values = collective_of.keys()  # only waits may read these
    early_read: tuple[Node, int] | None = None  # the first other node reading one, and its input
    for node in nodes:
        for j in node.inputs:
            if not 0 <= j < n:
                raise GraphError(f"input {j} is not a node", file=file, node=node.name, field="inputs")
            if j >= node.index:
                forward.append((node.index, j))
        if forward:
            continue
        if node.alias_of is not None and node.alias_of not in node.inputs:
            raise GraphError(
                f"aliases {nodes[node.alias_of].name!r}, which is not one of its inputs",
                file=file, node=node.name, field="alias_of",
            )
        for m in node.mutates:
            if m not in node.inputs:
                raise GraphError(
                    f"mutates {nodes[m].name!r}, which is not one of its inputs",
                    file=file, node=node.name, field="mutates",
                )
        kind = node.kind
        if kind is _VIEW:
            if node.alias_of in collective_of:
                collective_of[node.index] = collective_of[node.alias_of]
            continue
        if kind is _WAIT:
            _check_wait(nodes, node, file)
            waited.add(node.wait_of)
            continue
        if kind is _OUTPUT:
            outputs += 1
        elif kind is _COLLECTIVE:
            _check_group(node, groups, file)
            collectives.append(node.index)
            collective_of[node.index] = node.index
        if early_read is None and not collective_values.isdisjoint(node.inputs):
            early_read = node, next(j for j in node.inputs if j in collective_of)
    if forward:
        _raise_forward(nodes, forward, file)
    if outputs > 1:
        raise GraphError(f"{outputs} output nodes; a graph has at most one", file=file)
    for c in collectives:
        if c not in waited:
            raise GraphError("collective is never waited", file=file, node=nodes[c].name)
    if early_read is not None:
        _raise_read_before_wait(nodes, *early_read, collective_of, file)


def _check_group(node: Node, groups: Mapping[str, ProcessGroup], file: str | None) -> None:
    """The collective node has collective info naming a known process group."""
    if node.collective is None:
        raise GraphError("collective without collective info", file=file, node=node.name, field="collective")
    if node.collective.group not in groups:
        raise GraphError(
            f"unknown process group {node.collective.group!r}",
            file=file, node=node.name, field="collective.group",
        )


def check_tensor(meta: TensorMeta, *, file: str | None = None, node: str | None = None,
                 field: str = "outputs") -> None:
    """A tensor commopt sizes, plans and allocates: a known dtype, non-negative integer
    sizes, and at most :data:`MAX_TENSOR_BYTES` (also for ``max_shape``)."""
    if meta.dtype not in DTYPE_BYTES:
        from commopt.errors import suggest

        raise GraphError(f"unknown dtype {meta.dtype!r}{suggest(meta.dtype, sorted(DTYPE_BYTES))}",
                         file=file, node=node, field=field)
    for shape in (meta.shape, meta.max_shape, meta.logical_shape):
        if shape is None:
            continue
        if not all(type(d) is int and d >= 0 for d in shape):
            raise GraphError(f"shape {list(shape)!r}: sizes must be non-negative integers",
                             file=file, node=node, field=field)
    for shape in (meta.shape, meta.max_shape):
        if shape is not None and math.prod(shape) * DTYPE_BYTES[meta.dtype] > MAX_TENSOR_BYTES:
            raise GraphError(f"shape {_short(shape)} is larger than {MAX_TENSOR_BYTES:,} bytes",
                             file=file, node=node, field=field)


def _short(shape: tuple[int, ...]) -> str:
    text = repr(list(shape))
    return text if len(text) <= 80 else text[:77] + "..."


def _check_node_values(node: Node, file: str | None, checked: set[int]) -> None:
    """Values of one node later stages compute with: name, tensors, duration, collective.
    Tensors and collectives whose id is in ``checked`` passed already; ``checked`` collects
    the ids of those this call checks."""
    name = node.name
    if not isinstance(name, str) or not name:
        raise GraphError("a node name is a non-empty string", file=file, node=None, field="name")
    if not (name.isascii() or encodable(name)):  # isascii: the common case, without encoding
        raise GraphError(f"node name {name!r} is not encodable as UTF-8 (a lone surrogate?)",
                         file=file, field="name")
    outs = node.outputs
    if id(outs) not in checked:  # loaders share equal output tuples: one test for most nodes
        for meta in outs:
            if id(meta) not in checked:
                check_tensor(meta, file=file, node=name)
                checked.add(id(meta))
        checked.add(id(outs))
    d = node.duration_us
    if d is not None and not (isinstance(d, (int, float)) and 0 <= d <= MAX_DURATION_US):
        raise GraphError(f"duration {d!r} is not a finite number of microseconds in "
                         f"[0, {MAX_DURATION_US:g}]", file=file, node=name, field="duration_us")
    c = node.collective
    if c is not None and id(c) not in checked:
        _check_collective(c, file, name)
        checked.add(id(c))


def _check_collective(c: CollectiveInfo, file: str | None, node: str) -> None:
    """Byte counts the cost models can use and a reduce op torch knows."""
    for name in ("in_bytes", "out_bytes"):
        v = getattr(c, name)
        if not (type(v) is int and 0 <= v <= MAX_TENSOR_BYTES):
            raise GraphError(f"{v!r} bytes is not an integer in [0, {MAX_TENSOR_BYTES:,}]",
                             file=file, node=node, field=f"collective.{name}")
    if c.reduce_op is not None and (not isinstance(c.reduce_op, str) or c.reduce_op.lower() not in REDUCE_OPS):
        raise GraphError(f"unknown reduce op {c.reduce_op!r} (known: {', '.join(sorted(REDUCE_OPS))})",
                         file=file, node=node, field="collective.reduce_op")


def encodable(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (a lone surrogate cannot: no output could
    hold it, so a name or string with one is rejected where it is read)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def validate_groups(groups: Mapping[str, ProcessGroup], *, world_size: int | None = None,
                    mesh: Mapping[str, int] | None = None, file: str | None = None,
                    field: str | None = "process_groups") -> None:
    """Raise :class:`GraphError` when the process groups cannot exist in the world and mesh.

    Checks: the world size is in [1, :data:`MAX_WORLD_SIZE`]; every mesh dimension is at
    least 1 and their product is the world size; a group's ranks are distinct, non-negative,
    inside the world and as many as its size; a group is no larger than the world; a group
    running along a mesh dimension has that dimension's size. Codegen and the cost models
    trust these, so every loader and every ``--groups`` / ``--mesh`` / ``--world-size``
    override goes through here.
    """
    if world_size is not None and not (type(world_size) is int and 1 <= world_size <= MAX_WORLD_SIZE):
        raise GraphError(f"world size {_num(world_size)} is not in [1, {MAX_WORLD_SIZE:,}]",
                         file=file, field="world_size")
    if mesh is not None:
        for dim, size in mesh.items():
            if not (type(size) is int and 1 <= size <= MAX_WORLD_SIZE):
                raise GraphError(f"mesh dimension {dim!r} has size {_num(size)}; sizes are in "
                                 f"[1, {MAX_WORLD_SIZE:,}]", file=file, field="mesh")
        product = math.prod(mesh.values())
        if world_size is not None and product != world_size:
            raise GraphError(f"the mesh {dict(mesh)} has {product} ranks but the world size is "
                             f"{world_size}", file=file, field="mesh")
        if product > MAX_WORLD_SIZE:
            raise GraphError(f"the mesh {dict(mesh)} has more than {MAX_WORLD_SIZE:,} ranks",
                             file=file, field="mesh")
    for name, g in groups.items():
        where = f"group {name!r}"
        if not (type(g.size) is int and 1 <= g.size <= MAX_WORLD_SIZE):
            raise GraphError(f"{where} has size {_num(g.size)}; sizes are in [1, {MAX_WORLD_SIZE:,}]",
                             file=file, field=field)
        if g.ranks is not None and len(g.ranks) != g.size:
            raise GraphError(f"{where} lists {len(g.ranks)} ranks but has size {g.size}",
                             file=file, field=field)
        if world_size is not None and g.size > world_size:
            raise GraphError(f"{where} has {g.size} ranks but the world has {world_size}",
                             file=file, field=field)
        if g.ranks is not None:
            ranks = g.ranks
            bad = [r for r in ranks if type(r) is not int or r < 0
                   or (world_size is not None and r >= world_size)]
            if bad:
                world = f" (world size {world_size})" if world_size is not None else ""
                raise GraphError(f"{where} has rank {_num(bad[0])} outside the world{world}",
                                 file=file, field=field)
            if len(set(ranks)) != len(ranks):
                dup = next(r for r in ranks if ranks.count(r) > 1)
                raise GraphError(f"{where} lists rank {dup} twice", file=file, field=field)
        if mesh is not None and g.mesh_dim is not None and g.mesh_dim in mesh and g.size != mesh[g.mesh_dim]:
            raise GraphError(f"{where} has size {g.size} but runs along mesh dim {g.mesh_dim!r} of "
                             f"size {mesh[g.mesh_dim]}", file=file, field=field)


def _num(v: object) -> str:
    """A number for a message, shortened when it is huge."""
    text = repr(v) if not isinstance(v, int) or abs(v) < 10**30 else f"~1e{len(str(abs(v))) - 1}"
    return text if len(text) <= 40 else text[:37] + "..."


def _raise_read_before_wait(nodes: list[Node], reader: Node, j: int, collective_of: dict[int, int],
                            file: str | None) -> None:
    """The error for ``reader``, which uses collective ``collective_of[j]``'s value through its
    input ``j`` (the collective or a view of its value) without waiting for it: only a wait
    may, anything else reads a buffer the collective is still writing."""
    via = nodes[j] if nodes[j].kind is NodeKind.VIEW else None
    through = f" through view {via.name!r}" if via is not None else ""
    raise GraphError(
        f"reads the result of collective {nodes[collective_of[j]].name!r}{through} without waiting for it "
        "(only a wait may use a collective's value)",
        file=file, node=reader.name, field="inputs",
    )


def _check_wait(nodes: list[Node], node: Node, file: str | None) -> None:
    if len(node.inputs) != 1:
        raise GraphError(
            f"a wait takes exactly one input, got {len(node.inputs)}", file=file, node=node.name, field="inputs"
        )
    cur = nodes[node.inputs[0]]
    # through views and earlier waits of the same value (torch allows waiting twice)
    while (cur.kind is _VIEW or cur.kind is _WAIT) and cur.alias_of is not None:
        cur = nodes[cur.alias_of]
    if cur.kind is not _COLLECTIVE:
        raise GraphError(
            f"waits on {nodes[node.inputs[0]].name!r}, which is not a collective",
            file=file, node=node.name, field="inputs",
        )
    if node.wait_of is not None and node.wait_of != cur.index:
        raise GraphError(
            f"wait_of names {nodes[node.wait_of].name!r} but its input comes from {cur.name!r}",
            file=file, node=node.name, field="wait_of",
        )
    node.wait_of = cur.index


def _raise_forward(nodes: list[Node], forward: list[tuple[int, int]], file: str | None) -> None:
    """A reference to a later node: name the cycle if there is one, else the misordering."""
    import networkx as nx

    g = nx.DiGraph()
    for node in nodes:
        for j in node.inputs:
            g.add_edge(j, node.index)
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        user, used = forward[0]
        raise GraphError(
            f"uses {nodes[used].name!r}, which is listed after it; list nodes in an order that runs",
            file=file, node=nodes[user].name, field="inputs",
        ) from None
    names = [nodes[a].name for a, _ in cycle]
    raise GraphError(
        "cycle: " + " -> ".join(names + [names[0]]), file=file, node=names[0], field="inputs"
    )
