"""Structural validation of a node list before a :class:`~commopt.ir.graph.Graph` is built.

Every loader funnels through here, so a malformed graph is reported the same way whatever
format it came from: one :class:`~commopt.errors.GraphError` naming the file and node.
"""

from __future__ import annotations

from commopt.errors import GraphError
from commopt.ir.graph import Node, NodeKind, ProcessGroup


def validate_nodes(
    nodes: list[Node], groups: dict[str, ProcessGroup], *, file: str | None = None
) -> None:
    """Raise :class:`GraphError` for the first structural problem found.

    Checks: indices match positions, names are unique, references point to existing nodes
    listed earlier (a later one is either a cycle, named, or a misordered file), aliases and
    mutations refer to inputs, every wait completes a collective reached through views only,
    every collective is waited, collectives name a known process group, one output node.
    """
    seen: dict[str, int] = {}
    n = len(nodes)
    for pos, node in enumerate(nodes):
        if node.index != pos:
            raise GraphError(f"node index {node.index} does not match its position {pos}", file=file, node=node.name)
        if node.name in seen:
            raise GraphError("duplicate node name", file=file, node=node.name, field="name")
        seen[node.name] = pos
    forward: list[tuple[int, int]] = []
    outputs = 0
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
        if node.kind is NodeKind.OUTPUT:
            outputs += 1
        if node.kind is NodeKind.COLLECTIVE:
            if node.collective is None:
                raise GraphError("collective without collective info", file=file, node=node.name, field="collective")
            if node.collective.group not in groups:
                raise GraphError(
                    f"unknown process group {node.collective.group!r}",
                    file=file, node=node.name, field="collective.group",
                )
        if node.kind is NodeKind.WAIT:
            _check_wait(nodes, node, file)
    if forward:
        _raise_forward(nodes, forward, file)
    if outputs > 1:
        raise GraphError(f"{outputs} output nodes; a graph has at most one", file=file)
    waited = {node.wait_of for node in nodes if node.kind is NodeKind.WAIT}
    for node in nodes:
        if node.kind is NodeKind.COLLECTIVE and node.index not in waited:
            raise GraphError("collective is never waited", file=file, node=node.name)


def _check_wait(nodes: list[Node], node: Node, file: str | None) -> None:
    if len(node.inputs) != 1:
        raise GraphError(
            f"a wait takes exactly one input, got {len(node.inputs)}", file=file, node=node.name, field="inputs"
        )
    cur = nodes[node.inputs[0]]
    # through views and earlier waits of the same value (torch allows waiting twice)
    while cur.kind in (NodeKind.VIEW, NodeKind.WAIT) and cur.alias_of is not None:
        cur = nodes[cur.alias_of]
    if cur.kind is not NodeKind.COLLECTIVE:
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
