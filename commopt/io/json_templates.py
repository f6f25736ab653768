"""Loading a JSON graph that commopt wrote, through the few distinct shapes its nodes have.

:func:`commopt.io.json_graph.dumps_document` writes one node per line, and a transformer step
repeats the same few lines hundreds of times, only the node names differing (``fwd_mm49``,
``fwd_mm50``, ...). Here each line becomes a *template*: the line with every node name it
holds (as ``"name"``, ``"ref"``, ``"wait_of"`` or ``"alias_of"``) replaced by a placeholder.
Each distinct template is parsed, checked and read into a prototype node once, by the very
code that reads any node (:func:`commopt.io.json_graph._node`); each line then stamps its
names into a copy of its template's prototype. No line is parsed or encoded on its own: the
line kept for writing back is the file's own text, which is exactly what the writer would
encode because its template is (checked) and the names in it need no escape.

Anything else (a document laid out otherwise, an escape anywhere in the nodes, a template
that is not plain or not in the writer's form, a name that is no node's or repeats) makes
:func:`lined_graph` return None, and the document is read as any other, which words every
error as before.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any

import pydantic_core

from commopt.errors import GraphError
from commopt.io import json_graph as jg
from commopt.ir.graph import Graph, Node, Ref
from commopt.json_lines import dumps_line

#: A non-empty string without escapes (the group) after a field ``name``, ``ref``, ``wait_of`` or
#: ``alias_of`` (where the writer puts node names), from the ``": "`` before it: a search
#: for that text is faster than one for the fields. It also finds strings after
#: other fields ending so (``"filename"``): no field of a node, tensor, collective or argument
#: object, so a prototype takes those only in keyword arguments and attributes, which
#: stamping copies with the line's string.
_NAME_VALUE = re.compile(r'": "(?<=(?:name|"ref|t_of|s_of)": ")([^"\\\x00-\x1f]+)"')
_PLACEHOLDER = '"\\u0000"'  # JSON text of "\x00", which no line holds (no line has an escape)
_NAME_TAIL = '": ' + _PLACEHOLDER  # what replaces a match of _NAME_VALUE in a template
_HEAD_END = '\n  "nodes": [\n'
_NODES_START = _HEAD_END + "    "
_NODES_SEP = ",\n    "
_NAME_START = '{"name": "'
_DOCUMENT_END = "\n  ]\n}\n"


def lined_graph(text: str, file: str | None, name_default: str) -> Graph | None:
    """The graph of a document ``text`` laid out as the writer lays it out, read through
    its node templates; None for any other document or any error (see the module doc)."""
    start = text.find(_NODES_START)
    if start < 0 or not text.endswith(_DOCUMENT_END) or text.find("\\", start) >= 0:
        return None
    head = _head(text[:start])
    if head is None:
        return None
    section = text[start + len(_NODES_START):-len(_DOCUMENT_END)]
    lines = section.split(_NODES_SEP)
    # the head (fields and their order) as the writer's; the rest is the writer's by the split
    if next(jg.document_chunks(head, [])) != text[:start + len(_HEAD_END)]:
        return None
    try:
        nodes, groups = _read(head, section, lines, file)
    except (jg._NotPlain, GraphError, KeyError, ValueError, TypeError, RecursionError):
        return None  # read again by the path that words the error
    graph = jg._graph_of(head, nodes, groups, file)
    if "name" not in head:
        graph.name = name_default
    graph.payload = {**head, "nodes": jg._NodeLines(lines)}
    return graph


def _head(text: str) -> dict[str, Any] | None:
    """The document's fields before its nodes (``text``), with an empty ``nodes`` list last,
    when they are of this format and version (otherwise the usual path says why)."""
    try:
        head = pydantic_core.from_json(text + '\n  "nodes": []\n}', allow_inf_nan=False)
    except ValueError:
        return None
    if (type(head) is not dict or head.get("format", jg.FORMAT_NAME) != jg.FORMAT_NAME
            or head.get("version", jg.FORMAT_VERSION) != jg.FORMAT_VERSION):
        return None
    return head


def _read(head: dict[str, Any], section: str, lines: list[str], file: str | None
          ) -> tuple[list[Node], dict[str, Any]]:
    """The nodes and process groups (as :func:`commopt.io.json_graph._read_nodes` reads them)
    of a document whose nodes are ``lines`` (``section`` their text)."""
    if not jg._is_plain_head(head):
        raise jg._NotPlain
    jg._check_free(head.get("meta"), 2)
    groups = jg._process_groups(head.get("process_groups", ()), file)
    pieces = _NAME_VALUE.split(section)  # text, name, text, name, ..., text
    names_found = pieces[1::2]
    templates = _NAME_TAIL.join(pieces[::2]).split(_NODES_SEP)
    del pieces
    if len(templates) != len(lines):
        raise jg._NotPlain
    counts = {t: t.count(_PLACEHOLDER) for t in dict.fromkeys(templates)}
    # where each line's names start in names_found, and (last) where they end
    starts = list(accumulate(map(counts.__getitem__, templates), initial=0))
    if starts.pop() != len(names_found) or 0 in counts.values():
        raise jg._NotPlain
    n = len(lines)
    if not section.startswith(_NAME_START) or section.count(_NODES_SEP + _NAME_START) != n - 1:
        raise jg._NotPlain  # each line starts with its name: placeholder 0 (see _proto)
    names = [names_found[s] for s in starts]
    index_of = dict(zip(names, range(n), strict=True))
    if len(index_of) < n:
        raise jg._NotPlain  # a repeated name
    return _Stamper(index_of, n, file).nodes(templates, counts, names_found, starts), groups


class _Stamper:
    """Prototype nodes of templates, and nodes stamped from them.

    A prototype is read with placeholder ``i`` of its template (``"\\x00" + str(i)``) taken
    for a node of index ``n + i``: an index no node has, that the stamping maps to the index
    of the line's ``i``-th name."""

    def __init__(self, index_of: dict[str, int], n: int, file: str | None) -> None:
        self.index_of = index_of
        self.n = n
        self.file = file
        self.shared = jg._Shared()
        self.refs = list(map(Ref, range(n)))  # one per node, which every argument shares

    def nodes(self, templates: list[str], counts: dict[str, int], names_found: list[str],
              starts: list[int]) -> list[Node]:
        """Each line's node, from its template and its names."""
        n = self.n
        most = max(counts.values())
        proto_index = dict(self.index_of)
        proto_index.update((f"\x00{i}", n + i) for i in range(most))
        proto_names = jg._Names.of_index(proto_index, self.file)
        # a string found where names go that is no node's (None) is fine in a free value,
        # not where a node is referred to (see _Form.refers)
        found_index = list(map(self.index_of.get, names_found))
        unknown = None in found_index
        refs = self.refs
        ref_of = refs.__getitem__
        forms: dict[str, _Form] = {}
        out = []
        append = out.append
        for pos, t, s in zip(range(n), templates, starts, strict=True):
            form = forms.get(t)
            if form is None:
                form = forms[t] = _Form(self._proto(t, proto_names), n, counts[t])
            if unknown and any(found_index[s + j] is None for j in form.refers):
                raise jg._NotPlain  # parsing words the error
            one = form.one_input
            if one is not None:
                i = found_index[s + one]
                inputs = (i,)
                args = (ref_of(i),)
            elif form.inputs_of is not None:
                got = form.inputs_of(found_index[s:s + form.count])
                inputs = tuple(dict.fromkeys(got)) if len(got) > 1 else got
                args = tuple(map(ref_of, got))
            else:
                c = form.count
                append(self._stamp(form, pos, names_found[s:s + c], found_index[s:s + c]))
                continue
            kind, op, outputs, collective, wait_of, alias_of, side_effect, rng, duration = form.fields
            append(Node(
                pos, names_found[s], kind, op, inputs, outputs, args, {}, collective,
                None if wait_of is None else found_index[s + wait_of],
                None if alias_of is None else found_index[s + alias_of],
                (), side_effect, rng, duration, {},
            ))
        return out

    def _proto(self, template: str, names: jg._Names) -> Node:
        """The node of ``template``, its placeholders numbered; :class:`_NotPlain` unless
        the writer would write the template as it is and it is plain."""
        pieces = template.split(_PLACEHOLDER)
        numbered = pieces[0] + "".join(f'"\\u0000{i}"' + p for i, p in enumerate(pieces[1:]))
        nd = pydantic_core.from_json(numbered, allow_inf_nan=False)
        if type(nd) is not dict or dumps_line(nd) != numbered or nd.get("name") != "\x000":
            raise jg._NotPlain
        node = jg._node(0, nd, names, self.shared)
        if names.error is not None:
            raise jg._NotPlain
        return node

    def _stamp(self, form: _Form, pos: int, names: list[str], idx: list[int]) -> Node:
        """Node ``pos`` of ``form`` with its placeholders' names ``names`` (node indices
        ``idx``)."""
        proto = form.proto
        return Node(
            pos,
            names[0],
            proto.kind,
            proto.op,
            self._indices(proto.inputs, idx),
            proto.outputs,
            tuple([self._value(v, names, idx) for v in proto.args]),
            self._value(proto.kwargs, names, idx) if proto.kwargs else {},
            proto.collective,
            None if form.wait_of is None else idx[form.wait_of],
            None if form.alias_of is None else idx[form.alias_of],
            self._indices(proto.mutates, idx) if proto.mutates else (),
            proto.side_effect,
            proto.rng,
            proto.duration_us,
            self._value(proto.attrs, names, idx) if proto.attrs else {},
        )

    def _indices(self, proto_indices: tuple[int, ...], idx: list[int]) -> tuple[int, ...]:
        """Prototype node indices as the line's: placeholder ``i`` (index ``n + i``) is
        ``idx[i]``; duplicates dropped (the first kept)."""
        n = self.n
        out = tuple([idx[i - n] if i >= n else i for i in proto_indices])
        return tuple(dict.fromkeys(out)) if len(out) > 1 else out

    def _value(self, v: Any, names: list[str], idx: list[int]) -> Any:
        """A copy of prototype value ``v`` (an argument or attribute, its lists and dicts new)
        with the line's names: a reference to placeholder ``i`` refers to node ``idx[i]``,
        placeholder string ``i`` is ``names[i]``."""
        t = type(v)
        if t is Ref:
            i = v.index - self.n
            return v if i < 0 else self.refs[idx[i]]
        if t is str:
            return names[int(v[1:])] if v[:1] == "\x00" else v
        if t is list:
            return [self._value(x, names, idx) for x in v]
        if t is dict:
            return {k: self._value(x, names, idx) for k, x in v.items()}
        return v  # a number, None, or a frozen Symbol


class _Form:
    """A prototype node and where its placeholders go, for :meth:`_Stamper.nodes`: how many
    it has, and those of ``wait_of`` and ``alias_of``. A *simple* prototype (its inputs all
    placeholders, its arguments exactly references to them, in order, no keyword arguments,
    attributes or mutations: most nodes) is stamped without a copy of any value."""

    def __init__(self, proto: Node, n: int, count: int) -> None:
        self.proto = proto
        self.count = count
        self.wait_of = None if proto.wait_of is None else _slot(proto.wait_of, n)
        self.alias_of = None if proto.alias_of is None else _slot(proto.alias_of, n)
        #: the fields of a simple node that stamping takes as they are or by placeholder
        self.fields = (proto.kind, proto.op, proto.outputs, proto.collective, self.wait_of,
                       self.alias_of, proto.side_effect, proto.rng, proto.duration_us)
        slots = tuple(i - n for i in proto.inputs)
        #: the placeholders that name a node referred to (the others are free strings)
        self.refers = [j for j in (*slots, self.wait_of, self.alias_of) if j is not None and j >= 0]
        simple = (all(j >= 0 for j in slots) and list(proto.args) == [Ref(n + j) for j in slots]
                  and not (proto.kwargs or proto.attrs or proto.mutates))
        #: for a simple node of one input, its placeholder; of several or none, its inputs
        #: (before duplicates are dropped) from the line's indices of its placeholders
        self.one_input = slots[0] if simple and len(slots) == 1 else None
        self.inputs_of = _getter(slots) if simple and len(slots) != 1 else None


def _getter(slots: tuple[int, ...]) -> Callable[[list[int]], tuple[int, ...]]:
    """The items at ``slots`` (not one) of a list, as a tuple, without a call per item."""
    if slots:
        return operator.itemgetter(*slots)
    return lambda idx: ()


def _slot(index: int, n: int) -> int:
    """The placeholder of a prototype's node index; :class:`_NotPlain` for a literal one
    (only ``inputs`` and ``mutates`` name nodes without a placeholder)."""
    if index < n:
        raise jg._NotPlain
    return index - n
