"""Reading and writing commopt's JSON graph format (schema: ``schemas/graph.py``)."""

from __future__ import annotations

import json
import math
import re
import typing
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from commopt import atomic
from commopt.errors import CommoptError, GraphError, json_path
from commopt.gc_freeze import collector_paused
from commopt.ir import args as argcodec
from commopt.ir.graph import (
    LOADED_INDEX,
    LOADED_REPLACED,
    CollectiveInfo,
    Graph,
    Node,
    NodeKind,
    ProcessGroup,
    Ref,
    TensorMeta,
)
from commopt.ir.validate import encodable
from commopt.json_lines import dumps_line
from commopt.schemas.graph import (
    FORMAT_NAME,
    FORMAT_VERSION,
    CollectiveModel,
    CollectiveTypeName,
    GraphDocument,
    NodeKindName,
    NodeModel,
    ProcessGroupModel,
    TensorModel,
)

#: Deepest nesting of arrays and objects a JSON input may have. Real files nest a few
#: levels; far deeper ones only exhaust the stack of every later stage that walks them.
MAX_JSON_DEPTH = 100

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def read_json_file(path: str | Path, *, error: type[CommoptError] = GraphError,
                   check_depth: bool = True) -> Any:
    """Parse a JSON file as commopt reads every JSON input (graphs, groups, baselines,
    profiles): errors are one ``error`` naming the file (see :func:`parse_json_text`)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise error("no such file", file=str(path)) from None
    except IsADirectoryError:
        raise error("is a directory, expected a JSON file", file=str(path)) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    return parse_json_bytes(data, file=str(path), error=error, check_depth=check_depth)


def parse_json_bytes(data: bytes, *, file: str | None = None,
                     error: type[CommoptError] = GraphError, check_depth: bool = True) -> Any:
    """:func:`parse_json_text` of UTF-8 bytes; other bytes are one ``error`` naming the offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=file) from None
    return parse_json_text(text, file=file, error=error, check_depth=check_depth)


def parse_json_text(text: str, *, file: str | None = None,
                    error: type[CommoptError] = GraphError, check_depth: bool = True) -> Any:
    """Parse JSON text, rejecting what no later stage could use, as one ``error``.

    Beyond syntax errors (with line and column): an empty text, ``NaN`` / ``Infinity``
    (JSON has no such values, and outputs would not be JSON; line and column), integers of
    more than 4300 digits, lone surrogate escapes (no output could encode them; JSON path)
    and, with ``check_depth``, nesting deeper than :data:`MAX_JSON_DEPTH` (JSON path). A
    graph document checks the depth of its free-form values itself (:func:`check_values`),
    which is cheaper than walking every node.
    """
    if not text.strip():
        raise error("file is empty", file=file)

    def constant(name: str) -> Any:
        at = re.search(r'(?<![\w"])' + re.escape(name) + r'(?![\w"])', text)
        line = col = None
        if at is not None:
            line = text.count("\n", 0, at.start()) + 1
            col = at.start() - text.rfind("\n", 0, at.start())
        raise error(f"{name} is not a JSON number (use a finite number)", file=file, line=line,
                    column=col)

    try:
        raw = json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise error(f"invalid JSON: {exc.msg}", file=file, line=exc.lineno, column=exc.colno) from None
    except RecursionError:
        raise error(f"nested deeper than {MAX_JSON_DEPTH} levels", file=file) from None
    except ValueError as exc:  # int_max_str_digits
        raise error(f"a number is too long to read ({str(exc).split(':')[0].lower()})",
                    file=file) from None
    if _SURROGATE_ESCAPE.search(text):
        _check_strings(raw, file, error)
    if check_depth:
        check_values(raw, [raw], 1, file=file, error=error)
    return raw


def check_values(raw: Any, values: list[Any], depth: int, *, file: str | None = None,
                 error: type[CommoptError] = GraphError, floats: bool = False) -> None:
    """One ``error`` with its JSON path in ``raw`` when a container among ``values`` (found
    at nesting ``depth``), or inside one, is nested deeper than :data:`MAX_JSON_DEPTH`; with
    ``floats``, also for an infinite float in them (a number too large for a float, which
    no output could write as JSON). Breadth first, without recursion."""
    level = [v for v in values if type(v) is list or type(v) is dict]
    while level:
        if depth > MAX_JSON_DEPTH:
            raise error(f"nested deeper than {MAX_JSON_DEPTH} levels", file=file,
                        field=_path_to(raw, level[0]) or None)
        nxt: list[Any] = []
        push = nxt.append
        for v in level:
            for x in v.values() if type(v) is dict else v:
                t = type(x)
                if t is list or t is dict:
                    push(x)
                elif floats and t is float and not math.isfinite(x):
                    raise error("a number too large for a float", file=file,
                                field=_path_to(raw, x) or None)
        level = nxt
        depth += 1


def _check_strings(raw: Any, file: str | None, error: type[CommoptError]) -> None:
    """One ``error`` naming the JSON path of the first key or string that UTF-8 cannot
    encode (a lone surrogate escape): no output could hold it."""
    stack = [raw]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            if not all(map(encodable, v)):
                raise error("a key is not encodable as UTF-8 (a lone surrogate escape)", file=file,
                            field=_path_to(raw, v))
            items = v.values()
        else:
            items = v
        for x in items:
            if type(x) is list or type(x) is dict:
                stack.append(x)
            elif type(x) is str and not encodable(x):
                raise error("a string not encodable as UTF-8 (a lone surrogate escape)", file=file,
                            field=_path_to(raw, x))


def _path_to(raw: Any, target: Any) -> str:
    """JSON path of ``target`` (that very object) inside ``raw`` ('' when absent)."""
    stack: list[tuple[Any, tuple]] = [(raw, ())]
    while stack:
        v, loc = stack.pop()
        if v is target:
            return json_path(loc[:8]) + ("..." if len(loc) > 8 else "")
        if type(v) is dict:
            stack.extend((x, (*loc, k)) for k, x in reversed(list(v.items())))
        elif type(v) is list:
            stack.extend((x, (*loc, i)) for i, x in reversed(list(enumerate(v))))
    return ""


def load_json_graph(path: str | Path) -> Graph:
    """Load a commopt JSON graph file into a :class:`Graph`."""
    path = Path(path)
    with collector_paused():
        raw = read_json_file(path, check_depth=False)  # graph_from_document checks what it must
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
    _check_free_values(raw, file)
    graph = _fast_graph(raw, file)
    if graph is None:
        try:
            doc = GraphDocument.model_validate(raw)
        except ValidationError as exc:
            raise _schema_error(exc, raw, file) from None
        graph = graph_from_model(doc, file=file)
    if "name" not in raw:
        graph.name = name_default
    graph.payload = raw
    return graph


def _check_free_values(raw: dict[str, Any], file: str | None) -> None:
    """Depth and finite floats of what the schema leaves free (``meta``, a node's ``args``,
    ``kwargs`` and ``attrs``): they reach codegen, copies and outputs unchecked. Typed fields
    need no walk: the schema rejects a container where it expects a value."""
    check_values(raw, [raw.get("meta")], 2, file=file, floats=True)
    nodes = raw.get("nodes")
    if type(nodes) is list:
        free = [nd.get(k) for nd in nodes if type(nd) is dict for k in ("args", "kwargs", "attrs")]
        check_values(raw, free, 4, file=file, floats=True)


def _schema_error(exc: ValidationError, raw: dict[str, Any], file: str | None) -> GraphError:
    err = exc.errors()[0]
    loc = err["loc"]
    path = json_path(loc)
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
    return _build(doc.model_dump(mode="python"), file)


# --------------------------------------------------------------------------- fast path
# A 100,000-node file is mostly small, regular node objects. _fast_graph checks each one with
# plain type tests that accept only what the pydantic models accept *unchanged* (no coercion);
# anything else returns None and the document goes through pydantic, which words the error
# (or coerces, as it always did). Both paths then build the graph with _build.
_NODE_KEYS = frozenset(NodeModel.model_fields)
_TENSOR_KEYS = frozenset(TensorModel.model_fields)
_COLL_KEYS = frozenset(CollectiveModel.model_fields)
_GROUP_KEYS = frozenset(ProcessGroupModel.model_fields)
_DOC_KEYS = frozenset(GraphDocument.model_fields)
_KINDS = frozenset(typing.get_args(NodeKindName))
_COLL_TYPES = frozenset(typing.get_args(CollectiveTypeName))


def _is_str_list(v: Any) -> bool:
    return type(v) is list and all(type(x) is str for x in v)


def _is_int_list(v: Any) -> bool:
    return type(v) is list and all(type(x) is int for x in v)


def _fast_tensor(t: Any) -> bool:
    if type(t) is not dict or not t.keys() <= _TENSOR_KEYS:
        return False
    if type(t.get("dtype")) is not str or not _is_int_list(t.get("shape")):
        return False
    for k in ("max_shape", "logical_shape"):
        v = t.get(k)
        if v is not None and not _is_int_list(v):
            return False
    v = t.get("placements")
    return v is None or _is_str_list(v)


def _fast_collective(c: Any) -> bool:
    if type(c) is not dict or not c.keys() <= _COLL_KEYS:
        return False
    if type(c.get("type")) is not str or c["type"] not in _COLL_TYPES or type(c.get("group")) is not str:
        return False
    r = c.get("reduce_op")
    if r is not None and type(r) is not str:
        return False
    for k in ("in_bytes", "out_bytes"):
        v = c.get(k, 0)
        if type(v) is not int or v < 0:
            return False
    return all(type(c.get(k, False)) is bool for k in ("coalesced", "in_place"))


def _fast_node(nd: Any) -> bool:
    if type(nd) is not dict or not nd.keys() <= _NODE_KEYS:
        return False
    name = nd.get("name")
    kind = nd.get("kind")
    if type(name) is not str or not name or type(kind) is not str or kind not in _KINDS \
            or type(nd.get("op")) is not str:
        return False
    for k in ("inputs", "mutates"):
        if k in nd and not _is_str_list(nd[k]):
            return False
    if type(nd.get("args", ())) not in (list, tuple) or type(nd.get("kwargs", {})) is not dict:
        return False
    if type(nd.get("attrs", {})) is not dict or type(nd.get("side_effect", False)) is not bool \
            or type(nd.get("rng", False)) is not bool:
        return False
    outs = nd.get("outputs", ())
    if type(outs) not in (list, tuple) or not all(_fast_tensor(t) for t in outs):
        return False
    for k in ("wait_of", "alias_of"):
        v = nd.get(k)
        if v is not None and type(v) is not str:
            return False
    d = nd.get("duration_us")
    if d is not None and (type(d) not in (int, float) or not d >= 0):
        return False
    c = nd.get("collective")
    return c is None or _fast_collective(c)


def _fast_graph(raw: dict[str, Any], file: str | None) -> Graph | None:
    """The graph, when every part of ``raw`` is exactly what the schema describes; else None."""
    if not raw.keys() <= _DOC_KEYS or type(raw.get("nodes")) is not list:
        return None
    if type(raw.get("name", "")) is not str or type(raw.get("meta", {})) is not dict:
        return None
    ws = raw.get("world_size")
    if ws is not None and (type(ws) is not int or ws < 1):
        return None
    mesh = raw.get("mesh")
    if mesh is not None and (type(mesh) is not dict or not all(
            type(k) is str and type(v) is int for k, v in mesh.items())):
        return None
    pgs = raw.get("process_groups", [])
    if type(pgs) is not list:
        return None
    for g in pgs:
        if type(g) is not dict or not g.keys() <= _GROUP_KEYS or type(g.get("name")) is not str:
            return None
        if type(g.get("size")) is not int or g["size"] < 1:
            return None
        if g.get("ranks") is not None and not _is_int_list(g["ranks"]):
            return None
        if g.get("mesh_dim") is not None and type(g["mesh_dim"]) is not str:
            return None
    for nd in raw["nodes"]:
        if not _fast_node(nd):
            return None
    return _build(raw, file)


def _decode_arg(value: Any, index_of: dict[str, int], refs: list[int], resolve) -> Any:
    """:func:`commopt.ir.args.decode` for the common cases, collecting node refs on the way."""
    t = type(value)
    if t is dict:
        if len(value) == 1 and "ref" in value and type(value["ref"]) is str:
            i = index_of.get(value["ref"])
            if i is None:
                i = resolve(value["ref"])
            refs.append(i)
            return Ref(i)
        out = argcodec.decode(value, resolve)
        refs.extend(argcodec.iter_refs(out))
        return out
    if t is list:
        return [_decode_arg(v, index_of, refs, resolve) for v in value]
    return value


def _build(raw: dict[str, Any], file: str | None) -> Graph:
    """Resolve names to indices and build the IR from a document already known to be valid."""
    raw_nodes = raw["nodes"]
    index_of: dict[str, int] = {}
    for pos, nd in enumerate(raw_nodes):
        nm = nd["name"]
        if nm in index_of:
            raise GraphError("duplicate node name", file=file, node=nm, field=f"$.nodes[{pos}].name")
        index_of[nm] = pos
    seen_groups: set[str] = set()
    for pos, g in enumerate(raw.get("process_groups", ())):
        if g["name"] in seen_groups:
            raise GraphError(f"process group {g['name']!r} is declared twice", file=file,
                             field=f"$.process_groups[{pos}].name")
        seen_groups.add(g["name"])
    groups = {
        g["name"]: ProcessGroup(
            g["name"], g["size"], tuple(g["ranks"]) if g.get("ranks") is not None else None,
            g.get("mesh_dim"),
        )
        for g in raw.get("process_groups", ())
    }
    kinds = {k.label: k for k in NodeKind}
    tensor_cache: dict[tuple, TensorMeta] = {}
    nodes: list[Node] = []
    for pos, nd in enumerate(raw_nodes):
        name = nd["name"]

        def resolve(ref: str, field: str = "args", _name=name, _pos=pos) -> int:
            try:
                return index_of[ref]
            except KeyError:
                raise GraphError(
                    f"refers to unknown node {ref!r}", file=file, node=_name,
                    field=f"$.nodes[{_pos}].{field}",
                ) from None

        refs: list[int] = []
        try:
            args = tuple(_decode_arg(a, index_of, refs, resolve) for a in nd.get("args", ()))
            kw = nd.get("kwargs")
            kwargs = ({k: _decode_arg(v, index_of, refs, lambda s: resolve(s, "kwargs"))
                       for k, v in kw.items()} if kw else {})
        except argcodec.ArgError as exc:
            raise GraphError(str(exc), file=file, node=name, field=f"$.nodes[{pos}].args") from None
        ins = nd.get("inputs")
        inputs = [resolve(s, "inputs") for s in ins] if ins else []
        inputs.extend(refs)
        outputs = []
        for t in nd.get("outputs", ()):
            key = (t["dtype"], tuple(t["shape"]), _opt_tuple(t.get("max_shape")),
                   _opt_tuple(t.get("logical_shape")), _opt_tuple(t.get("placements")))
            meta = tensor_cache.get(key)
            if meta is None:
                meta = tensor_cache[key] = TensorMeta(*key)
            outputs.append(meta)
        coll = None
        c = nd.get("collective")
        if c is not None:
            coll = CollectiveInfo(
                c["type"], c["group"], c.get("reduce_op"), c.get("in_bytes", 0), c.get("out_bytes", 0),
                c.get("coalesced", False), c.get("in_place", False),
            )
        wait_of = nd.get("wait_of")
        alias_of = nd.get("alias_of")
        mutates = nd.get("mutates")
        d = nd.get("duration_us")
        nodes.append(
            Node(
                index=pos,
                name=name,
                kind=kinds[nd["kind"]],
                op=nd["op"],
                inputs=tuple(dict.fromkeys(inputs)) if len(inputs) > 1 else tuple(inputs),
                outputs=tuple(outputs),
                args=args,
                kwargs=kwargs,
                collective=coll,
                wait_of=resolve(wait_of, "wait_of") if wait_of is not None else None,
                alias_of=resolve(alias_of, "alias_of") if alias_of is not None else None,
                mutates=tuple(resolve(s, "mutates") for s in mutates) if mutates else (),
                side_effect=nd.get("side_effect", False),
                rng=nd.get("rng", False),
                duration_us=float(d) if d is not None else None,
                attrs=dict(nd["attrs"]) if nd.get("attrs") else {},
            )
        )
    _check_kinds(nodes, file)
    return Graph.build(
        nodes,
        groups,
        name=raw.get("name", "graph"),
        source_format="json",
        source_path=file,
        world_size=raw.get("world_size"),
        mesh=raw.get("mesh"),
        meta=dict(raw.get("meta") or {}),
    )


def _opt_tuple(v: Any) -> tuple | None:
    return tuple(v) if v is not None else None


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
    if node.rng:
        d["rng"] = True
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
        doc["nodes"] = _raw_nodes(graph, raw, order)
        if "buckets" in graph.meta:
            doc["meta"] = {**doc.get("meta", {}), "buckets": graph.meta["buckets"]}
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
    meta = {k: v for k, v in graph.meta.items() if k not in INTERNAL_META}
    if meta:
        doc["meta"] = meta
    return doc


INTERNAL_META = (LOADED_INDEX, LOADED_REPLACED)


def _raw_nodes(graph: Graph, raw: dict[str, Any], order: list[int]) -> list[Any]:
    """The node objects of ``raw`` (the document ``graph`` was read from) in ``order``; for a
    graph a pass rewrote, nodes it added or whose inputs it replaced are written anew."""
    loaded = graph.meta.get(LOADED_INDEX)
    if loaded is None:
        return [raw["nodes"][i] for i in order]
    out = []
    for i in order:
        node = graph.nodes[i]
        keep = loaded[i] >= 0 and all(loaded[j] >= 0 for j in node.inputs)
        out.append(raw["nodes"][loaded[i]] if keep else node_to_dict(graph, node))
    return out


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
        lines.append("    " + dumps_line(nd) + sep)
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def save_json_graph(graph: Graph, path: str | Path, order: list[int] | None = None) -> None:
    """Write ``graph`` (nodes in ``order``) as a JSON graph file, atomically."""
    atomic.write_text(path, dumps_document(graph_to_document(graph, order)))
