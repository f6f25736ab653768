"""torch.export archives (``.pt2``) and in-memory FX graphs in and out of the IR.

Loading checks the archive before torch reads it: ``torch.export.load`` unpickles sample
inputs and some weights with ``weights_only=False`` (and would load compiled AOTInductor
code), so a hostile file could run code. :func:`check_archive` refuses any pickle the
weights-only unpickler rejects, custom/opaque objects, AOTInductor payloads and the legacy
format, before anything is unpickled.

Writing back re-emits the ExportedProgram's FX graph with its nodes in a given order (inputs
stay first, the output last), lints it and saves it with the process-group record.
"""

from __future__ import annotations

import io
import json
import operator
import os
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commopt import atomic
from commopt.errors import GraphError, OptionError
from commopt.io.classify import classify
from commopt.io.groups import (
    ARCHIVE_GROUPS_NAME,
    GroupsDocument,
    dumps_groups,
    groups_document_of,
    parse_groups_text,
    parse_mesh,
    read_groups_file,
    resolve_groups,
    set_group_notes,
    sidecar_path,
)
from commopt.io.unbacked import SizeResolver, resolve_sizes
from commopt.ir.args import Symbol
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
from commopt.ir.ops import resolve_op
from commopt.ir.schedule import Schedule
from commopt.ir.sizes import (
    DATA_DEPENDENT_KEY,
    SYMBOLIC_SHAPES_ATTR,
    data_dependent_sizes,
    describe_assumptions,
)

_MODEL = "model"


# --------------------------------------------------------------------------- archive checks
@dataclass(frozen=True)
class ArchiveInfo:
    """What :func:`check_archive` found: the root folder and the commopt groups record."""

    root: str
    groups_text: str | None
    buckets_text: str | None = None


def check_archive(path: str | os.PathLike[str]) -> ArchiveInfo:
    """Check that ``path`` is a torch.export archive that loads without running its code.

    Raises :class:`GraphError` naming the file (and the archive member) for a file that is
    not a zip, a truncated or corrupt zip, a zip that is not a torch.export archive, and an
    archive carrying pickled objects or compiled code.
    """
    import torch

    file = str(path)
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise GraphError("not a zip archive (truncated or corrupt?); a .pt2 file comes from "
                         "torch.export.save", file=file) from None
    except OSError as exc:
        raise GraphError(f"cannot read: {exc.strerror or exc}", file=file) from None
    with zf:
        names = zf.namelist()
        roots = {n.split("/", 1)[0] for n in names}
        if len(roots) != 1 or not names:
            raise GraphError("a zip file, but not a torch.export archive (no single root folder)", file=file)
        (root,) = roots
        members = {n[len(root) + 1:] for n in names if "/" in n}

        def read(member: str) -> bytes:
            try:
                return zf.read(f"{root}/{member}")
            except (zipfile.BadZipFile, zlib_error(), EOFError, OSError) as exc:
                raise GraphError(f"corrupt archive member {member!r}: {exc}", file=file) from None

        if "archive_format" not in members:
            raise GraphError("a zip file, but not a torch.export archive (no archive_format "
                             "entry; legacy archives are not supported)", file=file)
        if read("archive_format").strip() != b"pt2":
            raise GraphError("a zip file, but not a torch.export archive (archive_format is "
                             "not 'pt2')", file=file)
        if f"models/{_MODEL}.json" not in members:
            raise GraphError(f"torch.export archive without models/{_MODEL}.json", file=file)
        if any(m.startswith("data/aotinductor/") for m in members):
            raise GraphError("the archive carries compiled AOTInductor code; commopt only "
                             "reads exported programs and never loads compiled code", file=file)
        for m in sorted(members):  # CRC check of every member, streamed (weights can be large)
            try:
                with zf.open(f"{root}/{m}") as fh:
                    while fh.read(1 << 22):
                        pass
            except (zipfile.BadZipFile, zlib_error(), EOFError, OSError) as exc:
                raise GraphError(f"corrupt archive member {m!r}: {exc}", file=file) from None

        def check_pickle(member: str) -> None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # protocol notices from the unpickler
                    torch.load(io.BytesIO(read(member)), weights_only=True)
            except GraphError:
                raise
            except Exception as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise GraphError(
                    f"refusing to load: archive member {member!r} holds a pickle that is not plain "
                    f"tensors ({first[:160]}); loading it could run code", file=file,
                ) from None

        for m in sorted(members):
            if m.startswith("data/sample_inputs/"):
                check_pickle(m)
        for legacy in (f"data/weights/{_MODEL}.pt", f"data/constants/{_MODEL}.pt"):
            if legacy in members:
                check_pickle(legacy)
        for kind, cfg in (("weights", f"data/weights/{_MODEL}_weights_config.json"),
                          ("constants", f"data/constants/{_MODEL}_constants_config.json")):
            if cfg not in members:
                continue
            try:
                config = json.loads(read(cfg)).get("config", {})
            except (ValueError, AttributeError):
                raise GraphError(f"corrupt archive member {cfg!r} (not a JSON object)", file=file) from None
            for fqn, meta in sorted(config.items()):
                pname = str(meta.get("path_name", ""))
                member = f"data/{kind}/{pname}"
                if pname.startswith(("custom_obj_", "opaque_obj_")):
                    raise GraphError(
                        f"refusing to load: {kind[:-1]} {fqn!r} is a pickled Python object "
                        f"({member}); loading it could run code", file=file,
                    )
                if meta.get("use_pickle"):
                    if member not in members:
                        raise GraphError(f"archive member {member!r} is missing", file=file)
                    check_pickle(member)
        groups_text = None
        gname = f"extra/{ARCHIVE_GROUPS_NAME}"
        if gname in members:
            try:
                groups_text = read(gname).decode("utf-8")
            except UnicodeDecodeError:
                raise GraphError(f"archive member {gname!r} is not UTF-8 text", file=file) from None
        bname = f"extra/{ARCHIVE_BUCKETS_NAME}"
        buckets_text = read(bname).decode("utf-8", "replace") if bname in members else None
    return ArchiveInfo(root=root, groups_text=groups_text, buckets_text=buckets_text)


def zlib_error() -> type[Exception]:
    """The exception zlib raises on corrupt deflate data."""
    import zlib

    return zlib.error


# --------------------------------------------------------------------------- loading
def load_pt2(path: str | os.PathLike[str], groups: str | os.PathLike[str] | None = None,
             mesh: str | dict[str, int] | None = None, world_size: int | None = None,
             assume: dict[str, int] | None = None) -> Graph:
    """Load a torch.export archive into a :class:`Graph` (``graph.payload``: the ExportedProgram).

    Process-group ranks come from the archive's record, a ``<file>.groups.json`` sidecar,
    ``groups`` (a groups file), ``mesh`` and ``world_size`` (group ``"0"`` is the world), in
    that order of precedence (later wins); see :mod:`commopt.io.groups`. ``assume``: values
    for data-dependent sizes (:func:`graph_from_torch`).
    """
    from commopt.io import check_input_path

    p = check_input_path(path)
    info = check_archive(p)
    records: list[tuple[GroupsDocument, str | None]] = []
    if info.groups_text is not None:
        records.append((parse_groups_text(info.groups_text, file=f"{p}!extra/{ARCHIVE_GROUPS_NAME}"),
                        f"{p}!extra/{ARCHIVE_GROUPS_NAME}"))
    side = sidecar_path(p)
    if side.is_file():
        records.append((read_groups_file(side), str(side)))
    if groups is not None:
        records.append((read_groups_file(groups), str(groups)))
    from commopt.io.export_load import load_exported_program

    try:
        with warnings.catch_warnings():
            # torch's own deprecation notices about its pickled pytree specs are not ours
            warnings.simplefilter("ignore", FutureWarning)
            ep = load_exported_program(str(p))
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GraphError(f"torch.export.load failed: {first[:200]}", file=str(p)) from None
    graph = graph_from_torch(ep, groups=None, mesh=mesh, world_size=world_size, file=str(p),
                             name=p.stem, records=records, assume=assume)
    if info.buckets_text is not None:
        graph.meta["buckets"] = _bucket_record(info.buckets_text, f"{p}!extra/{ARCHIVE_BUCKETS_NAME}")
    return graph


#: The archive member recording the buckets of a bucketed program (commopt.bucketing).
ARCHIVE_BUCKETS_NAME = "commopt_buckets.json"


def _bucket_record(text: str, file: str) -> list:
    """The buckets record: ``[[member names], merged collective name]`` per bucket."""
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    ok = isinstance(doc, list) and all(
        isinstance(e, list) and len(e) == 2 and isinstance(e[1], str) and isinstance(e[0], list)
        and all(isinstance(m, str) for m in e[0]) for e in doc)
    if not ok:
        raise GraphError("not a buckets record: expected [[member names], collective name] per bucket",
                         file=file)
    return doc


def graph_from_torch(obj: Any, groups: str | os.PathLike[str] | GroupsDocument | None = None,
                     mesh: str | dict[str, int] | None = None, world_size: int | None = None, *,
                     file: str | None = None, name: str | None = None,
                     records: list[tuple[GroupsDocument, str | None]] | None = None,
                     assume: dict[str, int] | None = None) -> Graph:
    """Build a :class:`Graph` from an in-memory ``ExportedProgram`` or ``torch.fx.GraphModule``.

    ``groups`` (a groups file or document), ``mesh`` and ``world_size`` supply process-group
    sizes and ranks (``records`` come first: what the archive and its sidecar hold).
    Data-dependent (unbacked) sizes get assumed values (:mod:`commopt.io.unbacked`;
    ``assume``: ``{symbol: value}``, ``"*"`` for every symbol not named), recorded in
    ``graph.meta`` (:mod:`commopt.ir.sizes`).
    """
    recs = list(records or [])
    if isinstance(groups, GroupsDocument):
        recs.append((groups, None))
    elif groups is not None:
        recs.append((read_groups_file(groups), str(groups)))
    gm, roles, out_roles, ranges = _fx_parts(obj)
    sizes = resolve_sizes(gm.graph, ranges, dict(assume or {}), file)
    nodes, group_sizes, sized = _convert(gm.graph, roles, out_roles, file, sizes)
    placeholder_groups = {g: ProcessGroup(g, s or 1) for g, s in group_sizes.items()}
    pgs, world, mesh_d, warnings, unknown_sizes = resolve_groups(
        placeholder_groups, records=recs, mesh=parse_mesh(mesh), given_world_size=world_size,
        sizes_known=sized,
    )
    meta: dict[str, Any] = {}
    set_group_notes(meta, warnings, unknown_sizes)
    if sizes.records:
        meta[DATA_DEPENDENT_KEY] = [r.to_json() for r in sizes.records]
    graph = Graph.build(nodes, pgs, name=name or "exported", source_format="pt2",
                        source_path=file, world_size=world, mesh=mesh_d, meta=meta)
    graph.payload = obj
    return graph


def with_assumed_sizes(graph: Graph, assume: dict[str, int]) -> Graph:
    """``graph`` re-derived from its program with ``assume`` for its data-dependent sizes
    (``{symbol: value}``, ``"*"``: every symbol not named); groups and notes are kept. Every
    size, byte count and the record of what was assumed follow the new values."""
    gm, roles, out_roles, ranges = _fx_parts(graph.payload)
    sizes = resolve_sizes(gm.graph, ranges, dict(assume), graph.source_path)
    nodes, _, _ = _convert(gm.graph, roles, out_roles, graph.source_path, sizes)
    meta = dict(graph.meta)
    meta.pop(DATA_DEPENDENT_KEY, None)
    if sizes.records:
        meta[DATA_DEPENDENT_KEY] = [r.to_json() for r in sizes.records]
    out = Graph.build(nodes, graph.groups, name=graph.name, source_format=graph.source_format,
                      source_path=graph.source_path, world_size=graph.world_size, mesh=graph.mesh,
                      meta=meta)
    out.payload = graph.payload
    return out


def apply_assumptions(graph: Graph, assume: Mapping[str, int]) -> Graph:
    """``graph`` with ``assume`` (``{symbol: value}``, ``"*"``: every symbol not named) for
    its data-dependent sizes; ``graph`` itself when ``assume`` is empty. Only a graph that
    carries its program (loaded from ``.pt2`` or in memory) can be re-sized: a JSON file holds
    numbers."""
    if not assume:
        return graph
    known = data_dependent_sizes(graph)
    if not known:
        raise OptionError("--assume: the graph has no data-dependent sizes (every size is static)",
                          file=graph.source_path, field="--assume")
    if graph.source_format != "pt2" or graph.payload is None:  # see assumed_sizes.can_resize
        raise OptionError(f"--assume needs the program to re-size: this file fixed its "
                          f"data-dependent sizes when it was written ({describe_assumptions(known)}); "
                          "assume them on the .pt2 it came from", file=graph.source_path,
                          field="--assume")
    return with_assumed_sizes(graph, dict(assume))


def _fx_parts(obj: Any) -> tuple[Any, dict[str, tuple[str, Any]], list[tuple[str, Any]], dict | None]:
    """(GraphModule, input roles by placeholder name, output roles, range constraints)."""
    import torch

    if isinstance(obj, torch.export.ExportedProgram):
        roles = {s.arg.name: (s.kind.name.lower(), s.target) for s in obj.graph_signature.input_specs
                 if hasattr(s.arg, "name")}
        out_roles = [(s.kind.name.lower(), s.target) for s in obj.graph_signature.output_specs]
        return obj.graph_module, roles, out_roles, dict(obj.range_constraints)
    if isinstance(obj, torch.fx.GraphModule):
        return obj, {}, [], None
    raise OptionError(
        f"cannot load a {type(obj).__name__}: expected a path, an ExportedProgram or a GraphModule"
    )


def _convert(fx_graph: Any, roles: dict[str, tuple[str, Any]], out_roles: list[tuple[str, Any]],
             file: str | None, sizes: SizeResolver) -> tuple[list[Node], dict[str, int | None], set[str]]:
    """FX nodes -> IR nodes; also the groups used and the sizes the ops prove. Sizes are
    evaluated by ``sizes``; an output with a data-dependent dimension also keeps its
    expressions (``attrs["symbolic_shapes"]``)."""
    index_of: dict[Any, int] = {}
    nodes: list[Node] = []
    group_sizes: dict[str, int | None] = {}
    sized: set[str] = set()
    for fx in fx_graph.nodes:
        i = len(nodes)
        index_of[fx] = i
        outputs = _tensor_metas(fx.meta.get("val"), sizes)
        common = {"index": i, "name": fx.name, "outputs": outputs}
        symbolic = _symbolic_shapes(fx.meta.get("val"), sizes) if sizes.values else None
        if fx.op == "placeholder":
            role, target = roles.get(fx.name, ("user_input", None))
            attrs = {"role": role}
            if target is not None:
                attrs["target"] = str(target)
            nodes.append(Node(kind=NodeKind.INPUT, op="placeholder", attrs=attrs, **common))
            continue
        if fx.op == "get_attr":
            nodes.append(Node(kind=NodeKind.INPUT, op="get_attr", attrs={"role": "attr", "target": str(fx.target)},
                              **common))
            continue
        lossy: list[str] = []
        args = tuple(_arg(a, index_of, lossy) for a in fx.args)
        kwargs = {k: _arg(v, index_of, lossy) for k, v in fx.kwargs.items()}
        inputs = tuple(index_of[n] for n in fx.all_input_nodes)
        attrs: dict[str, Any] = {SYMBOLIC_SHAPES_ATTR: symbolic} if symbolic else {}
        if lossy:
            attrs["lossy_args"] = sorted(set(lossy))
        if fx.op == "output":
            if out_roles:
                attrs["roles"] = [r for r, _ in out_roles]
                attrs["targets"] = [None if t is None else str(t) for _, t in out_roles]
            common["outputs"] = ()
            nodes.append(Node(kind=NodeKind.OUTPUT, op="output", inputs=inputs, args=args,
                              kwargs=kwargs, attrs=attrs, **common))
            continue
        if fx.op != "call_function":
            nodes.append(Node(kind=NodeKind.COMPUTE, op=f"{fx.op}:{fx.target}", inputs=inputs, args=args,
                              kwargs=kwargs, side_effect=True, attrs=attrs, **common))
            continue
        facts = classify(fx.target)
        op = str(fx.target) if hasattr(fx.target, "_schema") else _callable_name(fx.target)
        bound = dict(zip(facts.arg_names, fx.args, strict=False)) if facts.arg_names is not None else {}
        bound.update(fx.kwargs)
        mutates = tuple(dict.fromkeys(
            index_of[n] for w in facts.writes for n in _nodes_in(bound.get(w))
        ))
        alias_of = None
        if facts.alias_arg is not None:
            al = _nodes_in(bound.get(facts.alias_arg))
            alias_of = index_of[al[0]] if al else None
        kind = facts.kind
        collective = None
        if kind is NodeKind.VIEW and facts.alias_arg is None:
            alias_of = index_of[fx.args[0]] if fx.args and hasattr(fx.args[0], "op") else None
        if kind is NodeKind.VIEW and alias_of is None:
            kind = NodeKind.COMPUTE
        if facts.legacy_c10d:
            attrs["legacy_c10d"] = True
        if kind is NodeKind.WAIT:
            alias_of = inputs[0] if len(inputs) == 1 else None
        elif kind is NodeKind.COLLECTIVE:
            collective = _collective_info(fx, facts, bound, nodes, index_of, file, sizes)
            g = collective.group
            size = _group_size(facts, bound)
            if size is not None:
                if g in sized and group_sizes[g] != size:
                    raise GraphError(f"process group {g!r} is used with group sizes {group_sizes[g]} "
                                     f"and {size}", file=file, node=fx.name)
                group_sizes[g] = size
                sized.add(g)
            else:
                group_sizes.setdefault(g, None)
        nodes.append(Node(kind=kind, op=op, inputs=inputs, args=args, kwargs=kwargs,
                          collective=collective, alias_of=alias_of, mutates=mutates,
                          side_effect=facts.side_effect, rng=facts.rng, attrs=attrs, **common))
    return nodes, group_sizes, sized


def _callable_name(target: Any) -> str:
    mod = getattr(target, "__module__", None)
    qual = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)
    return f"{mod}.{qual}" if mod else str(qual)


def _nodes_in(value: Any) -> list[Any]:
    if hasattr(value, "op") and hasattr(value, "all_input_nodes"):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for x in value for v in _nodes_in(x)]
    return []


def _group_size(facts: Any, bound: dict[str, Any]) -> int | None:
    size = bound.get("group_size")
    if isinstance(size, int):
        return size
    if facts.collective[0] == "all_to_all":
        splits = bound.get("output_split_sizes")
        if isinstance(splits, (list, tuple)) and splits:
            return len(splits)
    return None


def _collective_info(fx: Any, facts: Any, bound: dict[str, Any], nodes: list[Node],
                     index_of: dict[Any, int], file: str | None, sizes: SizeResolver) -> CollectiveInfo:
    ctype, coalesced, in_place, _out_arg = facts.collective
    group = bound.get("group_name")
    if group is None:
        raise GraphError("collective without a group name", file=file, node=fx.name, field="args")
    sources = _nodes_in(bound.get("input", bound.get("inputs", bound.get("tensor", bound.get("tensors")))))
    in_bytes = sum(nodes[index_of[s]].padded_nbytes for s in sources)
    out_bytes = sum(t.padded_nbytes for t in _tensor_metas(fx.meta.get("val"), sizes))
    reduce_op = bound.get("reduce_op")
    return CollectiveInfo(
        type=ctype, group=str(group),
        reduce_op=str(reduce_op) if reduce_op is not None and ctype in ("all_reduce", "reduce_scatter") else None,
        in_bytes=in_bytes, out_bytes=out_bytes, coalesced=coalesced, in_place=in_place,
    )


def _tensor_metas(val: Any, sizes: SizeResolver) -> tuple[TensorMeta, ...]:
    import torch

    if isinstance(val, torch.Tensor):
        return (TensorMeta(_dtype_name(val.dtype), tuple(sizes.evaluate(s) for s in val.shape)),)
    if isinstance(val, (list, tuple)):
        return tuple(m for v in val for m in _tensor_metas(v, sizes))
    return ()


def _symbolic_shapes(val: Any, sizes: SizeResolver) -> list[list[int | str]] | None:
    """Per output tensor, each dimension as an int or its data-dependent expression; None
    when no dimension is data-dependent."""
    import torch

    tensors = [val] if isinstance(val, torch.Tensor) else [
        v for v in (val if isinstance(val, (list, tuple)) else ()) if isinstance(v, torch.Tensor)]
    shapes = [[sizes.text(d) for d in t.shape] for t in tensors]
    return shapes if any(isinstance(d, str) for sh in shapes for d in sh) else None


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _arg(value: Any, index_of: dict[Any, int], lossy: list[str]) -> Any:
    """An FX argument as an IR argument (Ref for nodes, Symbol for torch enums)."""
    import torch

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.fx.Node):
        return Ref(index_of[value])
    if isinstance(value, torch.dtype):
        return Symbol("dtype", _dtype_name(value))
    if isinstance(value, torch.device):
        return Symbol("device", str(value))
    if isinstance(value, torch.layout):
        return Symbol("layout", str(value).removeprefix("torch."))
    if isinstance(value, torch.memory_format):
        return Symbol("memory_format", str(value).removeprefix("torch."))
    if isinstance(value, (list, tuple)):
        return [_arg(v, index_of, lossy) for v in value]
    if isinstance(value, dict):
        return {str(k): _arg(v, index_of, lossy) for k, v in value.items()}
    lossy.append(type(value).__name__)
    return str(value)


# --------------------------------------------------------------------------- writing
def reordered_program(graph: Graph, order: list[int] | None = None) -> Any:
    """A new ExportedProgram whose FX graph lists the nodes in :func:`archive_order` of
    ``order`` (linted, recompiled); ``order`` must list each node after its data inputs.
    ``graph.payload`` is not modified.

    A graph a pass rewrote (bucketing) names, in ``meta[LOADED_INDEX]``, the loaded node each
    of its nodes is, and in ``meta[LOADED_REPLACED]`` the node standing for each loaded node it
    removed: loaded nodes are copied with their inputs mapped through both, and each added
    node is made from its op and arguments, its value computed on fake tensors.
    """
    import torch

    new_order = archive_order(graph, order)
    ep = graph.payload
    origin = _fx_nodes_of(graph)
    new_graph = torch.fx.Graph()
    env: dict[Any, Any] = {}  # loaded FX node -> new FX node
    made: dict[int, Any] = {}  # IR index -> new FX node
    replaced = {origin_fx: i for origin_fx, i in _replaced_of(graph)}
    for i in new_order:
        old = origin[i]
        try:
            if old is None:
                new = made[i] = _added_fx_node(new_graph, graph.nodes[i], made)
                continue
            new = env[old] = made[i] = new_graph.node_copy(old, lambda x: _mapped(x, env, made, replaced))
        except KeyError as exc:
            raise ValueError(f"order lists {graph.nodes[i].name!r} before its input {exc.args[0]}") from None
        # node_copy sanitizes names that are not Python identifiers ('my-mm' -> 'my_mm',
        # 'class' -> 'class_1'); keep the original so the archive names its nodes as the input
        # did (verify, the buffer plan and the runner match nodes by name). Originals are
        # unique, and codegen picks its own variable names.
        new.name = old.name
    new_graph.lint()
    gm = torch.fx.GraphModule(ep.graph_module, new_graph)
    gm.meta.update(ep.graph_module.meta)
    gm.recompile()
    renamed = {old.name: made[i].name for old, i in replaced.items() if i in made}
    return ep._update(gm, _renamed_outputs(ep.graph_signature, renamed))


def _renamed_outputs(signature: Any, renamed: dict[str, str]) -> Any:
    """``signature`` with the outputs whose node a pass replaced named after the new node."""
    import dataclasses

    if not renamed:
        return signature
    specs = []
    for spec in signature.output_specs:
        arg = spec.arg
        name = getattr(arg, "name", None)
        if name in renamed:
            spec = dataclasses.replace(spec, arg=dataclasses.replace(arg, name=renamed[name]))
        specs.append(spec)
    return dataclasses.replace(signature, output_specs=specs)


def _fx_nodes_of(graph: Graph) -> list[Any]:
    """The loaded FX node each node of ``graph`` is (None for a node a pass added)."""
    fx_nodes = list(graph.payload.graph_module.graph.nodes)
    origin = graph.meta.get(LOADED_INDEX)
    if origin is None:
        if len(fx_nodes) != len(graph.nodes):
            raise ValueError("the graph's ExportedProgram does not match its nodes")
        return fx_nodes
    return [fx_nodes[k] if k >= 0 else None for k in origin]


def _replaced_of(graph: Graph) -> list[tuple[Any, int]]:
    """(loaded FX node a pass removed, index of the node standing for its value)."""
    fx_nodes = list(graph.payload.graph_module.graph.nodes)
    return [(fx_nodes[k], i) for k, i in graph.meta.get(LOADED_REPLACED, {}).items()]


def _mapped(x: Any, env: dict, made: dict, replaced: dict) -> Any:
    if x in env:
        return env[x]
    return made[replaced[x]]


def _added_fx_node(fx_graph: Any, node: Node, made: dict[int, Any]) -> Any:
    """The FX node for a node a pass added: its op called on its arguments, with the value
    computed on the inputs' fake tensors (what torch.export's serializer and loader need)."""
    import torch

    target = resolve_op(node.op)
    if target is None:
        raise GraphError(f"torch has no operator {node.op!r}", node=node.name, field="op")
    args = _fx_arg(node.args, made)
    kwargs = _fx_arg(node.kwargs, made)
    new = fx_graph.call_function(target, tuple(args), dict(kwargs))
    new.name = node.name
    vals = torch.fx.node.map_arg((args, kwargs), lambda n: n.meta["val"])
    leaves = torch.utils._pytree.tree_leaves(vals)
    fake_mode = torch._guards.detect_fake_mode([v for v in leaves if isinstance(v, torch.Tensor)])
    with fake_mode:
        new.meta["val"] = target(*vals[0], **vals[1])
    return new


def _fx_arg(value: Any, made: dict[int, Any]) -> Any:
    """An IR argument as an FX argument (node references to the new FX nodes)."""
    import torch

    if isinstance(value, Ref):
        return made[value.index]
    if isinstance(value, Symbol):
        return torch.device(value.value) if value.kind == "device" else getattr(torch, value.value)
    if isinstance(value, (list, tuple)):
        return type(value)(_fx_arg(v, made) for v in value)
    if isinstance(value, dict):
        return {k: _fx_arg(v, made) for k, v in value.items()}
    return value


def writes_as_archive(graph: Graph) -> bool:
    """Whether ``graph`` carries the ExportedProgram a ``.pt2`` archive is written from (a graph
    traced from a GraphModule has none)."""
    import torch

    return isinstance(graph.payload, torch.export.ExportedProgram)


def archive_order(graph: Graph, order: Sequence[int] | None = None) -> list[int]:
    """The order of ``graph``'s nodes in a ``.pt2`` archive written in ``order``, as a reload
    gives it back.

    Placeholders and ``get_attr`` nodes come first in their original order (the signature
    depends on it), the output node last, and each ``getitem`` of a multi-output op directly
    after that op: torch.export's serializer stores those getitems with their op and its
    loader recreates them right after it. Every other node keeps its place in ``order``. The
    passes' result is put in this order before anything is planned for it, so the buffer plan,
    the runner and the archive agree.
    """
    if not writes_as_archive(graph):
        raise OptionError("only a graph loaded from .pt2 (or an ExportedProgram) can be written "
                          "as .pt2; write it as .json instead", file=graph.source_path)
    fx_nodes = _fx_nodes_of(graph)
    n = len(fx_nodes)
    order = Schedule(range(n)) if order is None else Schedule.of(graph, order)
    kinds = [fx.op if fx is not None else "call_function" for fx in fx_nodes]
    head = [i for i in range(n) if kinds[i] in ("placeholder", "get_attr")]
    tail = [i for i in range(n) if kinds[i] == "output"]
    pos = {node: i for i, node in enumerate(fx_nodes) if node is not None}
    getitems: dict[int, list[int]] = {}
    for i, node in enumerate(fx_nodes):
        if node is not None and node.op == "call_function" and node.target is operator.getitem and \
                hasattr(node.args[0], "op") and node.args[0].op == "call_function":
            getitems.setdefault(pos[node.args[0]], []).append(i)
    fixed = set(head) | set(tail) | {i for items in getitems.values() for i in items}
    body = []
    for i in order:
        if i not in fixed:
            body.append(i)
            body.extend(sorted(getitems.get(i, ()), key=lambda j: (_getitem_key(fx_nodes[j]), j)))
    return [*head, *body, *tail]


def _getitem_key(node: Any) -> int:
    idx = node.args[1] if len(node.args) > 1 else 0
    return idx if isinstance(idx, int) else 0


def save_pt2(graph: Graph, path: str | os.PathLike[str], order: list[int] | None = None) -> None:
    """Write ``graph`` as a ``.pt2`` archive with its nodes in ``order``, atomically.

    The archive keeps the graph's process groups (those with known ranks) in its record.
    """
    import torch

    doc = groups_document_of(graph)
    extra = {ARCHIVE_GROUPS_NAME: dumps_groups(doc)} if doc.groups or doc.world_size else {}
    if graph.meta.get("buckets"):
        extra[ARCHIVE_BUCKETS_NAME] = json.dumps(graph.meta["buckets"])
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree deprecation notices
        ep = reordered_program(graph, order)
        torch.export.save(ep, buf, extra_files=extra)
    atomic.write_bytes(Path(path), buf.getvalue())
