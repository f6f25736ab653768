"""A summary of what a graph contains (``commopt inspect``)."""

from __future__ import annotations

from collections import Counter

from commopt.io.groups import unknown_group_sizes
from commopt.ir.graph import Graph, NodeKind
from commopt.schemas.inspect import CollectiveSummary, InspectReport, TensorSummary


def inspect_graph(graph: Graph) -> InspectReport:
    """Count nodes by kind and collectives by group and type; list inputs, outputs, warnings."""
    kinds = Counter(n.kind.label for n in graph.nodes)
    per: dict[tuple[str, str], list[int]] = {}
    for n in graph.nodes:
        if n.kind is NodeKind.COLLECTIVE and n.collective is not None:
            per.setdefault((n.collective.group, n.collective.type), []).append(n.collective.bytes)
    collectives = []
    unknown_sizes = set(unknown_group_sizes(graph))
    for (g, t), sizes in sorted(per.items()):
        pg = graph.groups[g]
        collectives.append(
            CollectiveSummary(
                group=g, group_size=None if g in unknown_sizes else pg.size, ranks=list(pg.ranks) if pg.ranks else None,
                type=t, count=len(sizes), total_bytes=sum(sizes),
            )
        )
    inputs = [
        TensorSummary(
            name=n.name,
            dtype=n.outputs[0].dtype if n.outputs else None,
            shape=list(n.outputs[0].shape) if n.outputs else None,
            role=n.attrs.get("role"),
        )
        for n in graph.nodes
        if n.kind is NodeKind.INPUT
    ]
    outputs: list[TensorSummary] = []
    for n in graph.nodes:
        if n.kind is NodeKind.OUTPUT:
            for i in n.inputs:
                src = graph.nodes[i]
                t = src.outputs[0] if src.outputs else None
                outputs.append(
                    TensorSummary(
                        name=src.name, dtype=t.dtype if t else None, shape=list(t.shape) if t else None
                    )
                )
    return InspectReport(
        name=graph.name,
        format=graph.source_format,
        path=graph.source_path,
        world_size=graph.world_size,
        nodes=len(graph.nodes),
        kinds={k.label: kinds.get(k.label, 0) for k in NodeKind},
        collectives=collectives,
        inputs=inputs,
        outputs=outputs,
        warnings=graph_warnings(graph),
    )


def graph_warnings(graph: Graph) -> list[str]:
    """Things a user should know before optimizing: unknown group ranks, no collectives..."""
    warnings: list[str] = []
    if not any(n.kind is NodeKind.COLLECTIVE for n in graph.nodes):
        warnings.append("the graph has no collectives: there is no communication to overlap")
    unknown = sorted(g.name for g in graph.groups.values() if g.ranks is None)
    load_warnings = graph.meta.get("load_warnings", [])
    if unknown and not load_warnings:  # loaders that resolve groups already name them
        warnings.append(
            "ranks unknown for process group(s) "
            + ", ".join(repr(u) for u in unknown)
            + ": give --groups FILE or --mesh dp=..,tp=.. (cost models assume one host)"
        )
    barriers = sum(1 for n in graph.nodes if n.side_effect)
    if barriers:
        warnings.append(f"{barriers} side-effecting node(s) act as ordering barriers")
    warnings.extend(load_warnings)
    return warnings
