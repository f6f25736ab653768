"""Reading and writing commopt's JSON graph format (schema: ``schemas/graph.py``)."""

from __future__ import annotations

import json
import math
import re
import typing
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import BaseModel, ValidationError

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
    return parse_json_bytes(_file_bytes(path, error), file=str(path), error=error,
                            check_depth=check_depth)


def _file_bytes(path: str | Path, error: type[CommoptError]) -> bytes:
    """The bytes of file ``path``; one ``error`` naming it when it cannot be read."""
    path = Path(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise error("no such file", file=str(path)) from None
    except IsADirectoryError:
        raise error("is a directory, expected a JSON file", file=str(path)) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=str(path)) from None


def parse_json_bytes(data: bytes, *, file: str | None = None,
                     error: type[CommoptError] = GraphError, check_depth: bool = True) -> Any:
    """:func:`parse_json_text` of UTF-8 bytes; other bytes are one ``error`` naming the offset.

    pydantic-core's parser reads valid input faster than :mod:`json`, and equal short strings
    (op names, dtypes, kinds: a 100,000-node graph repeats them in every node and keeps them
    for the whole command) become one str object. It gives the values :func:`json.loads` gives
    and accepts nothing it rejects (tests/io/test_json_parse.py); what it refuses (also lone
    surrogates and nesting past a few hundred levels) is parsed again by
    :func:`parse_json_text`, so every error reads as before.
    """
    try:
        raw = pydantic_core.from_json(data, allow_inf_nan=False)
    except (ValueError, TypeError):  # TypeError: a pydantic-core without allow_inf_nan
        pass  # parsed again below, outside this handler, by the parser that words errors
    else:
        if check_depth:
            check_values(raw, [raw], 1, file=file, error=error)
        return raw
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
    """Load a commopt JSON graph file into a :class:`Graph`. A file as commopt writes them is
    read through its node templates (:mod:`commopt.io.json_templates`), any other parsed."""
    from commopt.io.json_templates import lined_graph

    path = Path(path)
    with collector_paused():
        data = _file_bytes(path, GraphError)
        try:
            graph = lined_graph(data.decode("utf-8"), str(path), path.stem)
        except UnicodeDecodeError:
            graph = None
        if graph is not None:
            return graph
        raw = parse_json_bytes(data, file=str(path), check_depth=False)  # see graph_from_document
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
    graph = _fast_graph(raw, file)
    if graph is None:
        _check_free_values(raw, file)
        try:
            doc = GraphDocument.model_validate(raw)
        except ValidationError as exc:
            raise _schema_error(exc, raw, file) from None
        graph = graph_from_model(doc, file=file)
    if "name" not in raw:
        graph.name = name_default
    graph.payload = _kept_document(raw)
    return graph


class _NodeLines(list):
    """The node objects of a loaded document as the JSON text :func:`dumps_document` writes
    for each (:func:`_kept_document`)."""


def _kept_document(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` as a graph keeps it for writing back: its node objects as their JSON lines.

    A node's parsed object is a dozen dicts, lists and strings (two thirds of a loaded
    100,000-node graph's memory) that only the writer reads; its line is one string, and
    writing needs exactly that line (the same encoder, once, here instead of in the writer).
    A document whose nodes the encoder refuses (one built in Python) is kept as it is."""
    try:
        lines = _NodeLines(map(dumps_line, raw["nodes"]))
    except (TypeError, ValueError, RecursionError):
        return raw
    return {**raw, "nodes": lines}


def _check_free_values(raw: dict[str, Any], file: str | None) -> None:
    """Depth and finite floats of what the schema leaves free (``meta``, a node's ``args``,
    ``kwargs`` and ``attrs``): they reach codegen, copies and outputs unchecked. Typed fields
    need no walk: the schema rejects a container where it expects a value. (The fast path
    checks the same as it reads a node: :meth:`_Names.decode`.)"""
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
    raw = doc.model_dump(mode="python")
    _check_free_values(raw, file)
    return _graph_of(raw, *_read_nodes(raw, file), file)


# --------------------------------------------------------------------------- fast path
# A 100,000-node file is mostly small, regular node objects. _read_nodes checks each value
# with plain type tests as it reads it, accepting only what the pydantic models accept
# *unchanged* (no coercion) and free values _check_free_values passes: anything else raises
# _NotPlain (or an error), and graph_from_document takes the checked path, which words the
# first error (or coerces, as it always did) and reads pydantic's output with _read_nodes.
_COLL_TYPES = frozenset(typing.get_args(CollectiveTypeName))


class _NotPlain(Exception):
    """A value that the pydantic models refuse or would read differently (coerce)."""


def _is_str(v: Any) -> bool:
    return type(v) is str


def _is_collective_type(v: Any) -> bool:
    return type(v) is str and v in _COLL_TYPES


def _is_bool(v: Any) -> bool:
    return type(v) is bool


def _is_dict(v: Any) -> bool:
    return type(v) is dict


def _is_list(v: Any) -> bool:
    return type(v) is list


#: The types of a JSON list: a list, or a tuple where a document was built in Python (the
#: schema reads it as a list). Tested inline (``type(v) in _LIST_TYPES``): a call per field
#: and node costs more than the test.
_LIST_TYPES = (list, tuple)


def _is_count(v: Any) -> bool:
    return type(v) is int and v >= 0


def _is_positive(v: Any) -> bool:
    return type(v) is int and v >= 1


def _is_str_list(v: Any) -> bool:
    if type(v) is not list:
        return False
    for x in v:
        if type(x) is not str:
            return False
    return True


def _is_int_list(v: Any) -> bool:
    if type(v) is not list:
        return False
    for x in v:
        if type(x) is not int:
            return False
    return True


def _is_mesh(v: Any) -> bool:
    return type(v) is dict and all(type(k) is str and type(x) is int for k, x in v.items())


def _is_anything(v: Any) -> bool:
    return True


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _matcher(model: type[BaseModel],
             checks: dict[str, Callable[[Any], bool]]) -> Callable[[Any], bool]:
    """A test of whether a value is a dict with every field ``model`` requires and only fields
    that ``checks`` holds, each value passing its check. A field of ``model`` without a check
    sends documents that use it through pydantic."""
    required = frozenset(k for k, f in model.model_fields.items() if f.is_required())

    def matches(obj: Any) -> bool:
        if type(obj) is not dict or not obj.keys() >= required:
            return False
        for k, v in obj.items():
            check = checks.get(k)
            if check is None or not check(v):
                return False
        return True

    return matches


_is_tensor = _matcher(TensorModel, {
    "dtype": _is_str, "shape": _is_int_list, "max_shape": _optional(_is_int_list),
    "logical_shape": _optional(_is_int_list), "placements": _optional(_is_str_list),
})
_is_collective = _matcher(CollectiveModel, {
    "type": _is_collective_type, "group": _is_str, "reduce_op": _optional(_is_str),
    "in_bytes": _is_count, "out_bytes": _is_count, "coalesced": _is_bool, "in_place": _is_bool,
})
_is_group = _matcher(ProcessGroupModel, {
    "name": _is_str, "size": _is_positive, "ranks": _optional(_is_int_list),
    "mesh_dim": _optional(_is_str),
})


def _are_groups(v: Any) -> bool:
    return type(v) is list and all(map(_is_group, v))


# "format" and "version" are checked by graph_from_document; the nodes by _node
_is_plain_head = _matcher(GraphDocument, {
    "format": _is_anything, "version": _is_anything, "name": _is_str,
    "world_size": _optional(_is_positive), "mesh": _optional(_is_mesh),
    "process_groups": _are_groups, "nodes": _is_list, "meta": _is_dict,
})
#: The fields a node object may have (extra fields are a schema violation).
_NODE_FIELDS = frozenset(NodeModel.model_fields)


def _fast_graph(raw: dict[str, Any], file: str | None) -> Graph | None:
    """The graph, when every part of ``raw`` is exactly what the schema describes; else None.
    An error it raises is the one the checked path would: the whole document is plain."""
    try:
        nodes, groups = _read_nodes(raw, file)
    except _NotPlain:
        return None
    return _graph_of(raw, nodes, groups, file)


def _read_nodes(raw: dict[str, Any], file: str | None
                ) -> tuple[list[Node], dict[str, ProcessGroup]]:
    """The IR nodes (names resolved to indices) and process groups of a document;
    :class:`_NotPlain` for a value :mod:`commopt.schemas.graph` does not describe exactly.

    An error in the names (a duplicate, an unknown reference, a bad argument object) is raised
    only after every node was read: a later node may break the schema, and then that is the
    error to report (the checked path's order), without pydantic's walk of every node first.
    """
    if not _is_plain_head(raw):
        raise _NotPlain
    _check_free(raw.get("meta"), 2)
    raw_nodes = raw["nodes"]
    names = _Names(raw_nodes, file)
    try:
        groups = _process_groups(raw.get("process_groups", ()), file)
    except GraphError as exc:
        names.fail(exc)
        groups = {}
    shared = _Shared()
    nodes = [_node(pos, nd, names, shared) for pos, nd in enumerate(raw_nodes)]
    if names.error is not None:
        raise names.error
    return nodes, groups


def _check_free(value: Any, depth: int) -> None:
    """:func:`check_values` of one free value at nesting ``depth`` (a node's ``attrs``, an
    argument object, ``meta``); a failure raises :class:`_NotPlain`: the checked path words
    the first in document order (:func:`_check_free_values`)."""
    try:
        check_values(value, [value], depth, floats=True)
    except GraphError:
        raise _NotPlain from None


def _graph_of(raw: dict[str, Any], nodes: list[Node], groups: dict[str, ProcessGroup],
              file: str | None) -> Graph:
    """The validated :class:`Graph` of a document's nodes and groups."""
    _check_kinds(nodes, file)
    _check_roles(nodes, file)
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


def _process_groups(raw_groups: Any, file: str | None) -> dict[str, ProcessGroup]:
    """The process groups by name; one declared twice is an error naming the second."""
    groups: dict[str, ProcessGroup] = {}
    for pos, g in enumerate(raw_groups):
        if g["name"] in groups:
            raise GraphError(f"process group {g['name']!r} is declared twice", file=file,
                             field=f"$.process_groups[{pos}].name")
        groups[g["name"]] = ProcessGroup(
            g["name"], g["size"], tuple(g["ranks"]) if g.get("ranks") is not None else None,
            g.get("mesh_dim"),
        )
    return groups


class _Names:
    """The node names of one document: the index of each, one :class:`Ref` per node that
    arguments share, and the first error found reading the nodes (:meth:`fail`), such as the
    one naming file, node and field for a name that is no node's."""

    def __init__(self, raw_nodes: list[dict[str, Any]], file: str | None) -> None:
        try:
            names = [nd["name"] for nd in raw_nodes]
            self.index_of = dict(zip(names, range(len(names)), strict=True))
        except (TypeError, KeyError):  # a node not an object, without a name, or not a string
            raise _NotPlain from None
        self.raw_nodes = raw_nodes
        self.file = file
        self._refs: list[Ref | None] = [None] * len(raw_nodes)
        self.error: GraphError | None = None
        if len(self.index_of) < len(names):
            self.fail(_duplicate_error(names, file))

    @classmethod
    def of_index(cls, index_of: dict[str, int], file: str | None) -> _Names:
        """Names already indexed (``index_of``, each index below ``len(index_of)``), without
        their nodes' objects: an unknown name is then an error without its node's name."""
        names = cls.__new__(cls)
        names.index_of = index_of
        names.raw_nodes = [{"name": None}] * len(index_of)
        names.file = file
        names._refs = [None] * len(index_of)
        names.error = None
        return names

    def fail(self, error: GraphError) -> None:
        """Keep ``error`` unless an earlier one is kept: reading goes on, to check the rest."""
        if self.error is None:
            self.error = error

    def index(self, name: str, pos: int, field: str) -> int:
        """The index of node ``name``, which field ``field`` of node ``pos`` refers to; for a
        name that is no node's, 0 after :meth:`fail` (the nodes read are not used then)."""
        i = self.index_of.get(name) if type(name) is str else None  # a list is unhashable
        if i is None:
            if type(name) is not str:
                raise _NotPlain
            self.fail(GraphError(f"refers to unknown node {name!r}", file=self.file,
                                 node=self.raw_nodes[pos]["name"], field=f"$.nodes[{pos}].{field}"))
            return 0
        return i

    def indices(self, names: Any, pos: int, field: str) -> list[int]:
        """The indices of the nodes a list of names (field ``field`` of node ``pos``) names."""
        if type(names) not in _LIST_TYPES:
            raise _NotPlain
        return [self.index(s, pos, field) for s in names]

    def decode(self, values: Iterable[Any], pos: int, field: str, refs: list[int],
               depth: int = 5) -> list[Any]:
        """:func:`commopt.ir.args.decode` of each JSON argument in ``values`` (field ``field``
        of node ``pos``, at nesting ``depth``), appending the index of each node referred to
        to ``refs``. A loop over the common cases, references and scalars; a nested list
        recurses, other objects go to :func:`commopt.ir.args.decode`. What
        :func:`_check_free_values` refuses (too deep, an infinite float) raises
        :class:`_NotPlain`."""
        out = []
        index_of = self.index_of
        shared_refs = self._refs
        too_deep = depth > MAX_JSON_DEPTH
        for v in values:
            t = type(v)
            if t is dict:
                ref = v.get("ref")
                if type(ref) is str and len(v) == 1 and not too_deep:
                    i = index_of.get(ref)
                    if i is None:
                        i = self.index(ref, pos, field)  # fails
                    v = shared_refs[i]
                    if v is None:
                        v = shared_refs[i] = Ref(i)
                    refs.append(i)
                else:
                    _check_free(v, depth)
                    v = argcodec.decode(v, lambda s: self.index(s, pos, field))
                    refs.extend(argcodec.iter_refs(v))
            elif t is list:
                if too_deep:
                    raise _NotPlain
                v = self.decode(v, pos, field, refs, depth + 1)
            elif t is float and not math.isfinite(v):
                raise _NotPlain
            out.append(v)
        return out


def _duplicate_error(names: list[str], file: str | None) -> GraphError:
    """The error naming the first node whose name an earlier node has (there is one)."""
    seen: set[str] = set()
    for pos, nm in enumerate(names):
        if nm in seen:
            return GraphError("duplicate node name", file=file, node=nm, field=f"$.nodes[{pos}].name")
        seen.add(nm)
    raise AssertionError("no duplicate name")


class _Shared:
    """Equal tensors, lists of output tensors and collectives as one object each: a
    transformer repeats a few shapes, dtypes and messages across 100,000 nodes.

    Only a key not seen before is checked against the schema (:class:`_NotPlain` if it
    fails): a key equal to one that passed can differ from it only as ``True`` or ``1.0``
    differ from ``1``, which the schema reads as that very number."""

    def __init__(self) -> None:
        self._tensors: dict[tuple, TensorMeta] = {}
        self._outputs: dict[tuple, tuple[TensorMeta, ...]] = {}
        self._collectives: dict[tuple, CollectiveInfo] = {}

    def outputs(self, outs: Any) -> tuple[TensorMeta, ...]:
        """The tensors of a node's JSON ``outputs``."""
        if type(outs) not in _LIST_TYPES:
            raise _NotPlain
        try:
            key = tuple(map(_tensor_key, outs))
            got = self._outputs.get(key)
        except (TypeError, KeyError, AttributeError):  # not a tensor; pydantic says why
            raise _NotPlain from None
        if got is None:
            for t in outs:
                if not _is_tensor(t):
                    raise _NotPlain
            got = self._outputs[key] = tuple(_one_of(self._tensors, k, TensorMeta) for k in key)
        return got

    def collective(self, c: Any) -> CollectiveInfo:
        """The collective of a node's JSON ``collective`` object."""
        if type(c) is not dict or not c.keys() <= _COLLECTIVE_FIELDS:
            raise _NotPlain
        key = (c.get("type"), c.get("group"), c.get("reduce_op"), c.get("in_bytes", 0),
               c.get("out_bytes", 0), c.get("coalesced", False), c.get("in_place", False))
        try:
            got = self._collectives.get(key)
        except TypeError:  # an unhashable value
            raise _NotPlain from None
        if got is None:
            if not _is_collective(c):
                raise _NotPlain
            got = self._collectives[key] = CollectiveInfo(*key)
        return got


_COLLECTIVE_FIELDS = frozenset(CollectiveModel.model_fields)


def _one_of(table: dict[tuple, Any], key: tuple, make: Callable[..., Any]) -> Any:
    """The object ``table`` holds for ``key``, made from the items of ``key`` on first use."""
    got = table.get(key)
    if got is None:
        got = table[key] = make(*key)
    return got


def _tensor_key(t: dict[str, Any]) -> tuple:
    """The fields of :class:`TensorMeta`, in order, from a JSON tensor; KeyError for one with
    fields TensorMeta lacks or a shape that is not a list (so not the schema's list, however
    equal its items)."""
    if len(t) == 2:  # the common case: dtype and shape only
        shape = t["shape"]
        if type(shape) is list:
            return (t["dtype"], tuple(shape), None, None, None)
    elif t.keys() <= _TENSOR_FIELDS:
        return (t["dtype"], _list_tuple(t["shape"]), _list_tuple(t.get("max_shape")),
                _list_tuple(t.get("logical_shape")), _list_tuple(t.get("placements")))
    raise KeyError


_TENSOR_FIELDS = frozenset(TensorModel.model_fields)


def _list_tuple(v: Any) -> tuple | None:
    """A JSON list as a tuple, None as None; KeyError for anything else."""
    if type(v) is list:
        return tuple(v)
    if v is None:
        return None
    raise KeyError


def _node(pos: int, nd: dict[str, Any], names: _Names, shared: _Shared) -> Node:
    """The IR node of JSON node ``nd`` (at ``pos``), names resolved to indices;
    :class:`_NotPlain` for a value that is not exactly what ``NodeModel`` describes."""
    if type(nd) is not dict or not nd.keys() <= _NODE_FIELDS:
        raise _NotPlain
    get = nd.get
    name = nd["name"]  # _Names read it
    kind = get("kind")
    kind = _KIND_OF.get(kind) if type(kind) is str else None
    op = get("op")
    if kind is None or type(name) is not str or not name or type(op) is not str:
        raise _NotPlain
    refs: list[int] = []
    args = get("args", ())
    kw = get("kwargs", _EMPTY)
    if type(args) not in _LIST_TYPES or type(kw) is not dict:
        raise _NotPlain
    try:
        args = tuple(names.decode(args, pos, "args", refs)) if args else ()
        kwargs = dict(zip(kw, names.decode(kw.values(), pos, "kwargs", refs), strict=True)) if kw else {}
    except argcodec.ArgError as exc:
        names.fail(GraphError(str(exc), file=names.file, node=name, field=f"$.nodes[{pos}].args"))
        args, kwargs = (), {}
    ins = get("inputs", ())
    if ins:
        inputs = names.indices(ins, pos, "inputs")
        inputs.extend(refs)
    else:
        inputs = refs
    outs = get("outputs", ())
    c = get("collective")
    wait_of = get("wait_of")
    alias_of = get("alias_of")
    mutates = get("mutates", ())
    side_effect = get("side_effect", False)
    rng = get("rng", False)
    d = get("duration_us")
    attrs = get("attrs", _EMPTY)
    if attrs:
        _check_free(attrs, 4)
    if (type(side_effect) is not bool or type(rng) is not bool or type(attrs) is not dict
            or not (d is None or ((type(d) is float or type(d) is int) and d >= 0))  # NaN is not
            or type(ins) not in _LIST_TYPES or type(mutates) not in _LIST_TYPES):
        raise _NotPlain
    # positional: a third of the time of 16 keywords; test_json_fast_path pins the order
    return Node(
        pos,
        name,
        kind,
        op,
        tuple(dict.fromkeys(inputs)) if len(inputs) > 1 else tuple(inputs),
        shared.outputs(outs),
        args,
        kwargs,
        shared.collective(c) if c is not None else None,
        None if wait_of is None else names.index(wait_of, pos, "wait_of"),
        None if alias_of is None else names.index(alias_of, pos, "alias_of"),
        tuple(names.indices(mutates, pos, "mutates")) if mutates else (),
        side_effect,
        rng,
        float(d) if d is not None else None,
        dict(attrs) if attrs else {},
    )


#: The default of an absent object field, never changed.
_EMPTY: dict[str, Any] = {}
#: The kinds the schema names, by name.
_KIND_OF = {k: NodeKind.parse(k) for k in typing.get_args(NodeKindName)}


def _check_kinds(nodes: list[Node], file: str | None) -> None:
    """A node carries a 'collective' object exactly when it is a collective."""
    collective = NodeKind.COLLECTIVE
    for node in nodes:
        if (node.kind is collective) is (node.collective is None):  # one test for both errors
            if node.collective is None:
                raise GraphError("a collective node needs a 'collective' object", file=file,
                                 node=node.name, field="collective")
            raise GraphError(f"a {node.kind.label} node cannot carry a 'collective' object",
                             file=file, node=node.name, field="collective")


def _check_roles(nodes: list[Node], file: str | None) -> None:
    """``attrs.role`` (an input's: 'parameter', 'buffer', 'user_input', ...) is a string where
    given: inspect reports it, and buffer planning and the runner treat exactly the role
    'parameter' as a parameter, so another type would be misread silently."""
    for node in nodes:
        role = node.attrs.get("role") if node.attrs else None
        if role is not None and type(role) is not str:
            raise GraphError(f"attrs.role must be a string such as 'parameter', not {role!r}",
                             file=file, node=node.name, field="attrs.role")


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
    doc = _document(graph, order)
    nodes = doc["nodes"]
    if type(nodes) is _NodeLines:
        doc["nodes"] = [json.loads(x) if type(x) is str else x for x in nodes]
    return doc


def _document(graph: Graph, order: list[int] | None) -> dict[str, Any]:
    """:func:`graph_to_document`, but for a graph read from JSON its nodes are a
    :class:`_NodeLines` list: the line kept for each node written as read (a str), the object
    of each other node."""
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
    kept = raw["nodes"]
    loaded = graph.meta.get(LOADED_INDEX)
    if loaded is None:
        out = list(map(kept.__getitem__, order))
    else:
        out = []
        for i in order:
            node = graph.nodes[i]
            keep = loaded[i] >= 0 and all(loaded[j] >= 0 for j in node.inputs)
            out.append(kept[loaded[i]] if keep else node_to_dict(graph, node))
    return _NodeLines(out) if type(kept) is _NodeLines else out


def dumps_document(doc: dict[str, Any]) -> str:
    """Serialize a graph document deterministically, one node per line."""
    return "".join(document_chunks(doc, list(map(dumps_line, doc.get("nodes", [])))))


#: Node lines per piece of :func:`document_chunks`: pieces of a few MB, so a large graph's
#: text is never built (and its pages faulted in) whole, nor copied again to be encoded.
_LINES_PER_CHUNK = 16_384


def document_chunks(doc: dict[str, Any], node_lines: list[str]) -> Iterator[str]:
    """The text :func:`dumps_document` gives ``doc`` whose nodes are the JSON texts
    ``node_lines``, in pieces: first the head (every field but the nodes, up to the nodes'
    opening line), then the node lines in batches, then the end."""
    head = ["{"]
    for k, v in doc.items():
        if k != "nodes":
            head.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},")
    head.append('  "nodes": [')
    yield "\n".join(head) + "\n"
    for at in range(0, len(node_lines), _LINES_PER_CHUNK):  # joins of the encoder's texts
        yield ("    " if at == 0 else ",\n    ") + ",\n    ".join(node_lines[at:at + _LINES_PER_CHUNK])
    yield ("\n" if node_lines else "") + "  ]\n}\n"


def json_graph_chunks(graph: Graph, order: list[int] | None = None) -> Iterator[str]:
    """The text of ``graph`` (nodes in ``order``) as a JSON graph file, in pieces: what
    :func:`save_json_graph` writes (a caller may render it ahead of writing)."""
    doc = _document(graph, order)
    nodes = doc["nodes"]
    if type(nodes) is _NodeLines:  # kept lines as they are, other nodes encoded
        return document_chunks(doc, [x if type(x) is str else dumps_line(x) for x in nodes])
    return document_chunks(doc, list(map(dumps_line, nodes)))


def save_json_graph(graph: Graph, path: str | Path, order: list[int] | None = None) -> None:
    """Write ``graph`` (nodes in ``order``) as a JSON graph file, atomically."""
    atomic.write_chunks(path, json_graph_chunks(graph, order))
