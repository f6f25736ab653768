"""Reading and writing commopt's JSON graph format (schema: ``schemas/graph.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from commopt.errors import GraphError
from commopt.io import atomic
from commopt.ir import args as argcodec
from commopt.ir.graph import (
    CollectiveInfo,
    Graph,
    Node,
    NodeKind,
    ProcessGroup,
    TensorMeta,
)
from commopt.schemas.graph import FORMAT_NAME, FORMAT_VERSION, GraphDocument


def read_json_file(path: Path) -> Any:
    """Parse a JSON file, reporting syntax errors with line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise GraphError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(path)) from None
    if not text.strip():
        raise GraphError("file is empty", file=str(path))
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise GraphError(f"invalid JSON: {exc.msg}", file=str(path), line=exc.lineno, column=exc.colno) from None


def load_json_graph(path: str | Path) -> Graph:
    """Load a commopt JSON graph file into a :class:`Graph`."""
    path = Path(path)
    raw = read_json_file(path)
    return graph_from_document(raw, file=str(path), name_default=path.stem)


def graph_from_document(raw: Any, *, file: str | None = None, name_default: str = "graph") -> Graph:
    """Build a :class:`Graph` from a parsed JSON document (validated against the schema)."""
    if not isinstance(raw, dict):
        raise GraphError("a graph file holds a JSON object at the top", file=file, field="$")
    fmt = raw.get("format", FORMAT_NAME)
    if fmt != FORMAT_NAME:
        raise GraphError(f"format is {fmt!r}, expected {FORMAT_NAME!r}", file=file, field="$.format")
    version = raw.get("version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise GraphError(
            f"unsupported format version {version!r} (this commopt reads version {FORMAT_VERSION})",
            file=file, field="$.version",
        )
    try:
        doc = GraphDocument.model_validate(raw)
    except ValidationError as exc:
        raise _schema_error(exc, raw, file) from None
    graph = graph_from_model(doc, file=file)
    if "name" not in raw:
        graph.name = name_default
    graph.payload = raw
    return graph


def _schema_error(exc: ValidationError, raw: dict[str, Any], file: str | None) -> GraphError:
    err = exc.errors()[0]
    loc = err["loc"]
    path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
    node = None
    if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
        try:
            node = raw["nodes"][loc[1]].get("name")
        except (KeyError, IndexError, AttributeError, TypeError):
            node = None
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return GraphError(f"schema violation: {err['msg']}{more}", file=file, node=node, field=path)


def graph_from_model(doc: GraphDocument, *, file: str | None = None) -> Graph:
    """Resolve names to indices and build the IR from a validated document."""
    index_of: dict[str, int] = {}
    for pos, nm in enumerate(doc.nodes):
        if nm.name in index_of:
            raise GraphError("duplicate node name", file=file, node=nm.name, field=f"$.nodes[{pos}].name")
        index_of[nm.name] = pos
    groups = {
        g.name: ProcessGroup(
            g.name, g.size, tuple(g.ranks) if g.ranks is not None else None, g.mesh_dim
        )
        for g in doc.process_groups
    }
    nodes: list[Node] = []
    for pos, nm in enumerate(doc.nodes):
        where = f"$.nodes[{pos}]"

        def resolve(name: str, field: str, _nm=nm, _where=where) -> int:
            try:
                return index_of[name]
            except KeyError:
                raise GraphError(
                    f"refers to unknown node {name!r}", file=file, node=_nm.name, field=f"{_where}.{field}"
                ) from None

        try:
            args = tuple(argcodec.decode(a, lambda s: resolve(s, "args")) for a in nm.args)
            kwargs = {k: argcodec.decode(v, lambda s: resolve(s, "kwargs")) for k, v in nm.kwargs.items()}
        except argcodec.ArgError as exc:
            raise GraphError(str(exc), file=file, node=nm.name, field=f"{where}.args") from None
        inputs: list[int] = [resolve(s, "inputs") for s in nm.inputs]
        for ref in (*argcodec.iter_refs(args), *argcodec.iter_refs(kwargs)):
            inputs.append(ref)
        coll = None
        if nm.collective is not None:
            c = nm.collective
            coll = CollectiveInfo(
                c.type, c.group, c.reduce_op, c.in_bytes, c.out_bytes, c.coalesced, c.in_place
            )
        nodes.append(
            Node(
                index=pos,
                name=nm.name,
                kind=NodeKind.parse(nm.kind),
                op=nm.op,
                inputs=tuple(dict.fromkeys(inputs)),
                outputs=tuple(
                    TensorMeta(
                        t.dtype,
                        tuple(t.shape),
                        tuple(t.max_shape) if t.max_shape is not None else None,
                        tuple(t.logical_shape) if t.logical_shape is not None else None,
                        tuple(t.placements) if t.placements is not None else None,
                    )
                    for t in nm.outputs
                ),
                args=args,
                kwargs=kwargs,
                collective=coll,
                wait_of=resolve(nm.wait_of, "wait_of") if nm.wait_of is not None else None,
                alias_of=resolve(nm.alias_of, "alias_of") if nm.alias_of is not None else None,
                mutates=tuple(resolve(s, "mutates") for s in nm.mutates),
                side_effect=nm.side_effect,
                duration_us=nm.duration_us,
                attrs=dict(nm.attrs),
            )
        )
    _check_kinds(nodes, file)
    return Graph.build(
        nodes,
        groups,
        name=doc.name,
        source_format="json",
        source_path=file,
        world_size=doc.world_size,
        mesh=doc.mesh,
        meta=dict(doc.meta),
    )


def _check_kinds(nodes: list[Node], file: str | None) -> None:
    for node in nodes:
        if node.kind is NodeKind.COLLECTIVE and node.collective is None:
            raise GraphError("a collective node needs a 'collective' object", file=file, node=node.name, field="collective")
        if node.kind is not NodeKind.COLLECTIVE and node.collective is not None:
            raise GraphError(
                f"a {node.kind.label} node cannot carry a 'collective' object", file=file, node=node.name, field="collective"
            )


# --------------------------------------------------------------------------- writing
def node_to_dict(graph: Graph, node: Node) -> dict[str, Any]:
    """The JSON object of one node (defaults omitted)."""
    name_of = lambda i: graph.nodes[i].name  # noqa: E731
    d: dict[str, Any] = {"name": node.name, "kind": node.kind.label, "op": node.op}
    arg_refs = set(argcodec.iter_refs(node.args)) | set(argcodec.iter_refs(node.kwargs))
    extra_inputs = [name_of(i) for i in node.inputs if i not in arg_refs]
    if extra_inputs:
        d["inputs"] = extra_inputs
    if node.args:
        d["args"] = [argcodec.encode(a, name_of) for a in node.args]
    if node.kwargs:
        d["kwargs"] = {k: argcodec.encode(v, name_of) for k, v in node.kwargs.items()}
    if node.outputs:
        d["outputs"] = [_tensor_to_dict(t) for t in node.outputs]
    if node.collective is not None:
        c = node.collective
        cd: dict[str, Any] = {"type": c.type, "group": c.group}
        if c.reduce_op is not None:
            cd["reduce_op"] = c.reduce_op
        cd["in_bytes"] = c.in_bytes
        cd["out_bytes"] = c.out_bytes
        if c.coalesced:
            cd["coalesced"] = True
        if c.in_place:
            cd["in_place"] = True
        d["collective"] = cd
    if node.wait_of is not None:
        d["wait_of"] = name_of(node.wait_of)
    if node.alias_of is not None:
        d["alias_of"] = name_of(node.alias_of)
    if node.mutates:
        d["mutates"] = [name_of(i) for i in node.mutates]
    if node.side_effect:
        d["side_effect"] = True
    if node.duration_us is not None:
        d["duration_us"] = node.duration_us
    if node.attrs:
        d["attrs"] = node.attrs
    return d


def _tensor_to_dict(t: TensorMeta) -> dict[str, Any]:
    d: dict[str, Any] = {"dtype": t.dtype, "shape": list(t.shape)}
    if t.max_shape is not None:
        d["max_shape"] = list(t.max_shape)
    if t.logical_shape is not None:
        d["logical_shape"] = list(t.logical_shape)
    if t.placements is not None:
        d["placements"] = list(t.placements)
    return d


def graph_to_document(graph: Graph, order: list[int] | None = None) -> dict[str, Any]:
    """The JSON document of ``graph`` with its nodes in ``order`` (default: original).

    A graph that was read from JSON keeps its document as written, only the node list is
    permuted, so fields commopt does not interpret survive the round trip.
    """
    order = graph.original_order if order is None else list(order)
    raw = graph.payload if isinstance(graph.payload, dict) and graph.source_format == "json" else None
    if raw is not None:
        doc = dict(raw)
        doc["nodes"] = [raw["nodes"][i] for i in order]
        return doc
    doc: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "name": graph.name,
    }
    if graph.world_size is not None:
        doc["world_size"] = graph.world_size
    if graph.mesh is not None:
        doc["mesh"] = graph.mesh
    doc["process_groups"] = [
        {k: v for k, v in (
            ("name", g.name), ("size", g.size),
            ("ranks", list(g.ranks) if g.ranks is not None else None), ("mesh_dim", g.mesh_dim),
        ) if v is not None}
        for g in sorted(graph.groups.values(), key=lambda g: g.name)
    ]
    doc["nodes"] = [node_to_dict(graph, graph.nodes[i]) for i in order]
    if graph.meta:
        doc["meta"] = graph.meta
    return doc


def dumps_document(doc: dict[str, Any]) -> str:
    """Serialize a graph document deterministically, one node per line."""
    head = {k: v for k, v in doc.items() if k != "nodes"}
    lines = ["{"]
    items = list(head.items())
    for k, v in items:
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},")
    nodes = doc.get("nodes", [])
    lines.append('  "nodes": [')
    for i, nd in enumerate(nodes):
        sep = "," if i + 1 < len(nodes) else ""
        lines.append("    " + json.dumps(nd, ensure_ascii=False) + sep)
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def save_json_graph(graph: Graph, path: str | Path, order: list[int] | None = None) -> None:
    """Write ``graph`` (nodes in ``order``) as a JSON graph file, atomically."""
    atomic.write_text(path, dumps_document(graph_to_document(graph, order)))
