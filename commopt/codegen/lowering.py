"""Lowering: the step record each node becomes in the runner's ``STEPS`` table.

A record is plain data (ints, strings, floats, lists, tuples, dicts), one per node in the
graph's order, read by the script's small interpreter (``build_program`` in
``runner_template.py``), which serves both orders from the same table: the optimized order
on the arenas and the original order on fresh tensors. A record starts with
``(node, name, kind, reads)``; ``reads`` are the nodes whose values it needs, from which the
script frees each value after its last reader. The script holds the table as JSON (parsing a
100k-node table as Python source took 20 s; ``json.loads`` a fraction of one), so values inside
arguments that JSON cannot spell are one-key objects (:data:`REF` and friends: a node's
value, a dtype, a tuple, a dict argument...); every JSON object in an argument is such a
tag, so nothing can be mistaken for a reference. What only
the optimized order uses (which buffer a producer writes into, whether a collective copies
its input in) is decided here by walking that order once.
"""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any

from commopt.codegen.names import clean
from commopt.codegen.scalars import is_scalar_op, scalar_function
from commopt.codegen.slots import Slot
from commopt.codegen.spec import EmulatedSpec
from commopt.errors import GraphError
from commopt.ir import validate
from commopt.ir.args import Symbol, collect_refs
from commopt.ir.graph import DTYPE_BYTES, IN_PLACE_TYPES, Graph, Node, NodeKind, Ref, TensorMeta
from commopt.ir.layout import same_bytes_root
from commopt.ir.out_variants import WriteMode
from commopt.ir.sizes import SYMBOLIC_SHAPES_ATTR, has_data_dependent_output

#: Keys of the one-key objects inside arguments: a node's value, and values JSON cannot spell.
REF, DTYPE, DEVICE, LAYOUT, MEMORY_FORMAT, TUPLE, DICT, FLOAT = (
    "v", "dtype", "device", "layout", "memory_format", "tuple", "dict", "float")

#: ``namespace.op.overload``, no dunder parts: the only op strings resolved for real.
_OP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
_GETITEM_OPS = ("getitem", "operator.getitem", "_operator.getitem")
_REDUCE_OPS = {"sum": "SUM", "avg": "AVG", "product": "PRODUCT", "prod": "PRODUCT",
               "min": "MIN", "max": "MAX", "band": "BAND", "bor": "BOR", "bxor": "BXOR"}
_LAYOUTS = ("strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc",
            "_mkldnn", "jagged")
_MEMORY_FORMATS = ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format")
_SUPPORTED_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                          "broadcast", "barrier")
#: How a collective's input reaches its buffer in the optimized order (the ``how`` field).
COPY, WRITTEN, SHARED, PERSISTENT, IN_PLACE = "copy", "written", "shared", "persistent", "in_place"


def runnable(node: Node) -> bool:
    """Whether the node's op is an operator we resolve and call (else it is emulated)."""
    return _resolvable(node.op) and bool(node.args or node.kwargs or not node.inputs)


@cache
def _resolvable(op: str) -> bool:
    return bool(_OP_NAME.match(op)) and not any(p.startswith("__") for p in op.split("."))


#: :func:`commopt.codegen.scalars.is_scalar_op` once per distinct op string.
_scalar_op = cache(is_scalar_op)

#: The node kinds :meth:`Lowering.record` tells apart, read once: an enum member's lookup on
#: its class costs more than the rest of the test, and every node asks up to four.
_INPUT, _OUTPUT, _COLLECTIVE, _WAIT = NodeKind.INPUT, NodeKind.OUTPUT, NodeKind.COLLECTIVE, NodeKind.WAIT

#: What a compute node's op string is, in the order :meth:`Lowering.compute` asks.
_GETITEM, _SCALAR, _RESOLVABLE, _OTHER = range(4)


@cache
def _op_class(op: str) -> int:
    """:data:`_GETITEM`, :data:`_SCALAR`, :data:`_RESOLVABLE` or :data:`_OTHER`: once per
    distinct op string, not once per node."""
    if op in _GETITEM_OPS:
        return _GETITEM
    if _scalar_op(op):
        return _SCALAR
    return _RESOLVABLE if _resolvable(op) else _OTHER


def collective_sources(node: Node) -> list[int]:
    """The nodes whose values a collective sends, one per tensor (its first argument's refs)."""
    if node.args:
        first = node.args[0]
        if type(first) is Ref:  # most collectives: one tensor
            return [first.index]
        refs = [first] if isinstance(first, Ref) else list(first) if isinstance(first, list) else []
        if refs and all(isinstance(r, Ref) for r in refs):
            return [r.index for r in refs]
    return list(node.inputs)


def check_tensor(graph: Graph, node: Node, meta: TensorMeta) -> None:
    """A tensor the runner allocates, checked as every loader checks tensors
    (:func:`commopt.ir.validate.check_tensor`); also covers tensors codegen derives."""
    validate.check_tensor(meta, file=graph.source_path, node=node.name)


def reads(node: Node) -> tuple[int, ...]:
    """Values a node's step reads or keeps alive until it runs: inputs, references and its
    collective (a wait), each once."""
    refs = list(node.inputs)
    for value in node.args:  # :func:`collect_refs` of the arguments, their top level inline
        t = type(value)
        if t is Ref:
            refs.append(value.index)
        elif t is not int and t is not str and t is not float and value is not None:
            collect_refs(value, refs)
    if node.kwargs:
        collect_refs(node.kwargs, refs)
    if node.wait_of is not None:
        refs.append(node.wait_of)
    return tuple(dict.fromkeys(refs))


def _shape(meta: TensorMeta) -> list[int]:
    return list(meta.max_shape or meta.shape)


class Lowering:
    """Turns a graph and its optimized order into step records, one per node.

    Buffers come from the plan's slots; which producers write into their buffer themselves
    is decided before (:func:`commopt.codegen.zero_copy.zero_copy_targets`). Counts of the
    optimized step (copies, zero-copy producers, persistent reads) and the buffers the
    records use are collected as the records are made.
    """

    def __init__(self, graph: Graph, group_var: dict[str, str], ops: dict[str, str],
                 emulated: list[EmulatedSpec]) -> None:
        self.graph = graph
        self.group_var = group_var
        self.ops = ops
        self.op_vars = {op: var for var, op in ops.items()}
        self.emulated = emulated
        self.copies = 0
        self.copy_bytes = 0  # bytes those copies move per step
        self.zero_copy = 0
        self.persistent_reads = 0  # collective tensors read from a persistent parameter slot
        self.runtime_sized: list[str] = []  # collectives whose output is sized when run
        self.targets: dict[int, tuple[str, WriteMode, tuple[int, ...] | None]] = {}
        self.written_slots: set[str] = set()
        self.filled: set[str] = set()
        self.used_buffers: set[str] = set()
        self.checked: set[TensorMeta] = set()  # tensors checked once (shapes repeat per layer)
        #: the objects checked, by id (each kept alive here, so its id is not reused): most
        #: tensors are the graph's own, asked about again, found without hashing their fields
        self.checked_objects: dict[int, TensorMeta] = {}

    def check(self, node: Node, meta: TensorMeta) -> None:
        """:func:`check_tensor`, once per distinct tensor description."""
        if id(meta) in self.checked_objects:
            return
        if meta not in self.checked:
            check_tensor(self.graph, node, meta)
            self.checked.add(meta)
        self.checked_objects[id(meta)] = meta

    def fail(self, node: Node, message: str, field: str | None = None) -> GraphError:
        return GraphError(message, file=self.graph.source_path, node=node.name, field=field)

    def op_var(self, op: str) -> str:
        """The name an op is resolved under at start-up (one per distinct op)."""
        known = self.op_vars.get(op)
        if known is not None:
            return known
        var = clean(op) or "op"
        base, k = var, 2
        while var in self.ops:
            var = f"{base}_{k}"
            k += 1
        self.ops[var] = op
        self.op_vars[op] = var
        return var

    def encode(self, node: Node, value: Any) -> Any:
        """An argument value as record data: references, symbols, tuples and dicts become
        one-key objects."""
        t = type(value)
        if t is int or t is str or value is None or t is bool:  # most values: as they are
            return value
        if t is Ref:
            return {REF: value.index}
        if isinstance(value, Ref):
            return {REF: value.index}
        if isinstance(value, Symbol):
            return self.symbol(node, value)
        if isinstance(value, list):
            return self.encode_all(node, value)
        if isinstance(value, tuple):
            return {TUPLE: self.encode_all(node, value)}
        if isinstance(value, dict):
            if not all(type(k) is str for k in value):
                raise self.fail(node, "argument dictionaries need string keys", "args")
            return {DICT: {k: self.encode(node, v) for k, v in value.items()}}
        if value is None or type(value) in (bool, int, str):
            return value
        if type(value) is float:
            return value if math.isfinite(value) else {FLOAT: repr(value)}
        raise self.fail(node, f"argument of type {type(value).__name__} cannot be generated",
                        "args")

    def encode_all(self, node: Node, values: Any) -> list:
        """:meth:`encode` of each value, references and JSON scalars (most arguments) inline."""
        out = []
        for value in values:
            t = type(value)
            if t is Ref:
                out.append({REF: value.index})
            elif t is int or t is str or value is None or t is bool:
                out.append(value)
            else:
                out.append(self.encode(node, value))
        return out

    def symbol(self, node: Node, sym: Symbol) -> dict:
        value = sym.value.removeprefix("torch.")
        if sym.kind == "dtype" and value in DTYPE_BYTES:
            return {DTYPE: value}
        if sym.kind == "device":
            return {DEVICE: None}
        if sym.kind == "layout" and value in _LAYOUTS:
            return {LAYOUT: value}
        if sym.kind == "memory_format" and value in _MEMORY_FORMATS:
            return {MEMORY_FORMAT: value}
        raise self.fail(node, f"unknown {sym.kind} {sym.value!r}", "args")

    def kwargs(self, node: Node) -> dict[str, Any]:
        """Keyword arguments by name (the device is always the runner's)."""
        if not node.kwargs:
            return {}
        if not all(type(k) is str for k in node.kwargs):
            raise self.fail(node, "keyword argument names must be strings", "kwargs")
        return {k: {DEVICE: None} if k == "device" else self.encode(node, v)
                for k, v in node.kwargs.items()}

    def steps(self, order: list[int], slots: dict | None,
              targets: dict[int, tuple[str, WriteMode, tuple[int, ...] | None]] | None = None) -> list[tuple]:
        """Every node's record, in the graph's order; the buffers of ``order`` (the optimized
        order) where ``slots`` is given."""
        self.targets = dict(targets or {}) if slots is not None else {}
        self.written_slots = {var for var, _, _ in self.targets.values()}  # filled by their producer
        self.filled = set()  # input slots holding their value in this step already
        records: list[tuple | None] = [None] * len(self.graph)
        for i in order:  # the optimized order: which shared slot is filled first
            records[i] = self.record(self.graph.nodes[i], slots)
        return records  # type: ignore[return-value]

    def record(self, node: Node, slots: dict | None) -> tuple:
        kind = node.kind
        if kind is _INPUT:
            return (node.index, node.name, "input", ())
        if kind is _OUTPUT:
            body = self.output(node)
        elif kind is _COLLECTIVE:
            body = self.collective(node, slots)
        elif kind is _WAIT:
            body = self.wait(node)
        elif _op_class(node.op) == _RESOLVABLE and node.index not in self.targets \
                and (node.args or node.kwargs or not node.inputs):
            # most nodes: an op called for real, its result in a fresh tensor
            return (node.index, node.name, "op", reads(node), self.op_var(node.op),
                    self.encode_all(node, node.args), self.kwargs(node) if node.kwargs else {})
        else:
            body = self.compute(node, self.targets.get(node.index))
        return (node.index, node.name, body[0], reads(node), *body[1:])

    def output(self, node: Node) -> tuple:
        values = self.encode(node, node.args[0]) if node.args else []
        return ("output", values if isinstance(values, list) else [values])

    def compute(self, node: Node, target: tuple[str, WriteMode, tuple[int, ...] | None] | None) -> tuple:
        op_class = _op_class(node.op)
        if op_class == _GETITEM and len(node.args) == 2 and isinstance(node.args[0], Ref):
            return ("getitem", self.encode(node, node.args[0]), self.encode(node, node.args[1]))
        if op_class == _SCALAR:
            if node.kwargs:
                raise self.fail(node, f"{node.op} with keyword arguments cannot be generated", "kwargs")
            fn = scalar_function(node.op, len(node.args))
            if fn is None:
                raise self.fail(node, f"{node.op} with {len(node.args)} argument(s) cannot be "
                                "generated", "args")
            return ("scalar", fn, self.encode_all(node, node.args))
        run = runnable(node)
        if not run and has_data_dependent_output(node):
            raise self.fail(node, f"{node.op} has no runnable op and a data-dependent output "
                            "size: the runner cannot emulate it (its size is only known when "
                            "the program runs)", "op")
        if not run and node.kind is NodeKind.VIEW and node.alias_of is not None \
                and len(node.outputs) == 1:
            source = self.graph.nodes[node.alias_of]
            meta = node.outputs[0]
            self.check(node, meta)
            if source.outputs and source.outputs[0].numel == meta.numel:
                return ("reshape", {REF: node.alias_of}, _shape(meta))
        if not run:
            return ("emulated", *self.emulate(node))
        args, kwargs = self.encode_all(node, node.args), self.kwargs(node)
        if target is None:
            return ("op", self.op_var(node.op), args, kwargs)
        out_buffer, mode, shape = target
        self.zero_copy += 1
        self.used_buffers.add(out_buffer)
        if mode is WriteMode.COPY:
            into: tuple = ("copy_", out_buffer)
        else:
            into = ("out", out_buffer, self.op_var(node.op.rsplit(".", 1)[0] + ".out"))
        if shape is not None:  # the value sent is a view of this result: write in its shape
            into += (list(shape),)
        return ("op", self.op_var(node.op), args, kwargs, into)

    def emulate(self, node: Node) -> tuple:
        """An emulated node's busy wait: (microseconds, outputs as (dtype, shape), fill value)."""
        for meta in node.outputs:
            self.check(node, meta)
        duration = node.duration_us or 0.0
        if not math.isfinite(duration) or duration < 0:
            raise self.fail(node, f"duration_us must be finite and >= 0, got {node.duration_us!r}",
                            "duration_us")
        fill = ((node.index % 7) + 1) / 8.0
        outs = tuple((m.dtype, tuple(_shape(m))) for m in node.outputs)
        self.emulated.append(EmulatedSpec(node.index, float(duration), outs, fill))
        return float(duration), [(dtype, list(shape)) for dtype, shape in outs], fill

    def collective(self, node: Node, slots: dict | None) -> tuple:
        info = node.collective
        if info.type not in _SUPPORTED_COLLECTIVES:
            raise self.fail(node, f"the runner cannot run {info.type} collectives yet", "collective")
        if info.group not in self.group_var:
            raise self.fail(node, f"unknown process group {info.group!r}", "collective.group")
        group = self.group_var[info.group]
        if info.type == "barrier":
            return ("collective", "barrier", group, None, False, [], [])
        reduce_op = None
        if info.type in ("all_reduce", "reduce_scatter"):
            reduce_op = _REDUCE_OPS.get((info.reduce_op or "sum").lower())
            if reduce_op is None:
                raise self.fail(node, f"unknown reduce op {info.reduce_op!r}", "collective.reduce_op")
        sources = collective_sources(node)
        if not sources:
            raise self.fail(node, "a collective needs an input", "args")
        tensors = [self.collective_tensor(node, k, s, slots) for k, s in enumerate(sources)]
        extra: list[Any] = []
        if info.type == "broadcast":  # the functional op's src is the root's rank in the group
            extra = [self.encode(node, node.args[1]) if len(node.args) > 1 else 0]
        elif info.type == "all_to_all":
            extra = [self.encode(node, node.args[k]) if len(node.args) > k else None
                     for k in (1, 2)]
        return ("collective", info.type, group, reduce_op, bool(info.coalesced), tensors, extra)

    def collective_tensor(self, node: Node, k: int, s: int, slots: dict | None) -> tuple:
        """One tensor of a collective: ``(source, source shape, input buffer, how, output
        buffer, fresh output dtype, fresh output shape or None when sized at run time)``."""
        src_node = self.graph.nodes[s]
        if not src_node.outputs:
            raise self.fail(node, f"input {src_node.name!r} has no tensor", "args")
        src_meta = src_node.outputs[0]
        self.check(src_node, src_meta)
        out_meta = self.out_meta(node, k, src_meta)
        self.check(node, out_meta)
        shape = None if self.runtime_sized_output(node, k, s) else _shape(out_meta)
        src_shape = _shape(src_meta)
        if node.collective.in_place:
            return (s, src_shape, None, IN_PLACE, None, out_meta.dtype, shape)
        if node.collective.type in IN_PLACE_TYPES:
            return (self.in_place_tensor(node, k, s, src_meta, slots)
                    or (s, src_shape, None, None, None, out_meta.dtype, shape))
        if slots is None:
            return (s, src_shape, None, None, None, out_meta.dtype, shape)
        in_slot = slots.get((node.index, "input", k)) or slots.get((node.index, "inout", k))
        out_slot = slots.get((node.index, "output", k))
        how = None
        if in_slot is not None:
            self.used_buffers.add(in_slot.var)
            how = self.input_how(in_slot, src_meta)
        if out_slot is not None:
            self.used_buffers.add(out_slot.var)
        return (s, src_shape, in_slot.var if in_slot else None, how,
                out_slot.var if out_slot else None, out_meta.dtype, shape)

    def input_how(self, in_slot: Slot, src_meta: TensorMeta) -> str:
        """How a collective's input reaches its slot in the optimized order."""
        if in_slot.persistent:  # the parameter lives in the slot: placed once, at setup
            self.persistent_reads += 1
            return PERSISTENT
        if in_slot.var in self.filled:  # a slot shared by collectives reading one content
            return SHARED
        self.filled.add(in_slot.var)
        if in_slot.var in self.written_slots:
            return WRITTEN
        self._count_copy(src_meta)
        return COPY

    def in_place_tensor(self, node: Node, k: int, s: int, src_meta: TensorMeta,
                        slots: dict | None) -> tuple | None:
        """all_reduce and broadcast run in place on one buffer (the functional op's result is a
        new tensor, so the input is copied in unless its producer wrote there itself); None:
        no buffer, a fresh clone (counted as a copy)."""
        target = None
        if slots is not None:
            target = next((t for role in ("inout", "output", "input")
                           if (t := slots.get((node.index, role, k))) is not None), None)
        if target is None:  # the optimized order clones: a copy per step
            self._count_copy(src_meta)
            return None
        self.used_buffers.add(target.var)
        how = WRITTEN if self._written_by_producer(same_bytes_root(self.graph, s)) == target.var else COPY
        if how == COPY:
            self._count_copy(src_meta)
        return (s, _shape(src_meta), target.var, how, None, src_meta.dtype, _shape(src_meta))

    def runtime_sized_output(self, node: Node, k: int, s: int) -> bool:
        """Whether the collective's output size is data-dependent: the script sizes it from
        the step's own values (its split sizes), never from an assumed value."""
        src_node = self.graph.nodes[s]
        if SYMBOLIC_SHAPES_ATTR not in node.attrs and SYMBOLIC_SHAPES_ATTR not in src_node.attrs:
            return False  # most collectives: every size static
        if not (has_data_dependent_output(node, k) or has_data_dependent_output(src_node)):
            return False
        if node.collective.type not in ("all_to_all", "all_gather", "reduce_scatter"):
            raise self.fail(node, f"a {node.collective.type} with a data-dependent size cannot "
                            "be generated yet", "collective")
        if node.name not in self.runtime_sized:
            self.runtime_sized.append(node.name)
        return True

    def out_meta(self, node: Node, k: int, src: TensorMeta) -> TensorMeta:
        info = node.collective
        if len(node.outputs) > k and (k > 0 or not info.coalesced or len(node.outputs) > 1):
            return node.outputs[k]
        size = self.graph.groups[info.group].size
        shape = _shape(src)
        if info.type == "all_gather" and shape:
            shape[0] *= size
        elif info.type == "reduce_scatter" and shape:
            shape[0] = -(-shape[0] // size)
        return TensorMeta(src.dtype, tuple(shape))

    def _count_copy(self, meta: TensorMeta) -> None:
        """One more tensor copied per step (and its bytes, at the largest rank's size)."""
        self.copies += 1
        self.copy_bytes += meta.padded_nbytes

    def _written_by_producer(self, producer: int) -> str | None:
        """The buffer variable ``producer`` writes into itself (None: it writes nowhere)."""
        target = self.targets.get(producer)
        return target[0] if target is not None else None

    def wait(self, node: Node) -> tuple:
        coll = node.wait_of
        if not node.args:
            value = {REF: coll} if coll is not None else None
        elif type(node.args[0]) is Ref:  # most waits: of their collective's value
            value = {REF: node.args[0].index}
        else:
            value = self.encode(node, node.args[0])
        return ("wait", coll, value)
