"""Lowering: the statements each node of an order becomes in the runner's step function.

Compute nodes call their resolved op (or write into their communication buffer, as the
zero-copy analysis decided), collectives launch asynchronously on their arena views, waits
wait and finish reductions, views alias. Values are freed after their last use (FX-style).
"""

from __future__ import annotations

import keyword
import math
import re
from typing import Any

from commopt.codegen.names import clean, comment, identifier, literal
from commopt.codegen.out_variants import WriteMode
from commopt.codegen.scalars import is_scalar_op, scalar_expression
from commopt.codegen.slots import Slot
from commopt.codegen.spec import EmulatedSpec
from commopt.errors import GraphError
from commopt.ir import validate
from commopt.ir.args import Symbol, iter_refs
from commopt.ir.graph import DTYPE_BYTES, Graph, Node, NodeKind, Ref, TensorMeta
from commopt.ir.sizes import has_data_dependent_output

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


def runnable(node: Node) -> bool:
    """Whether the node's op is an operator we resolve and call (else it is emulated)."""
    if not _OP_NAME.match(node.op) or any(p.startswith("__") for p in node.op.split(".")):
        return False
    return bool(node.args or node.kwargs or not node.inputs)


def collective_sources(node: Node) -> list[int]:
    """The nodes whose values a collective sends, one per tensor (its first argument's refs)."""
    if node.args:
        first = node.args[0]
        refs = [first] if isinstance(first, Ref) else list(first) if isinstance(first, list) else []
        if refs and all(isinstance(r, Ref) for r in refs):
            return [r.index for r in refs]
    return list(node.inputs)


def check_tensor(graph: Graph, node: Node, meta: TensorMeta) -> None:
    """A tensor the runner allocates, checked as every loader checks tensors
    (:func:`commopt.ir.validate.check_tensor`); also covers tensors codegen derives."""
    validate.check_tensor(meta, file=graph.source_path, node=node.name)


class Lowering:
    """Turns an order into the statements of one step function: what each node becomes.

    Buffers come from the plan's slots; which producers write into their buffer themselves
    is decided before (:func:`commopt.codegen.zero_copy.zero_copy_targets`). The views the
    statements use are collected in ``used_buffers`` as they are emitted.
    """

    def __init__(self, graph: Graph, value_var: list[str], group_var: dict[str, str],
                 ops: dict[str, str], emulated: list[EmulatedSpec], notes: list[str]) -> None:
        self.graph = graph
        self.value_var = value_var
        self.group_var = group_var
        self.ops = ops
        self.op_vars = {op: var for var, op in ops.items()}
        self.emulated = emulated
        self.emulated_var: dict[int, str] = {}
        self.notes = notes
        self.copies = 0
        self.copy_bytes = 0  # bytes those copies move per step
        self.zero_copy = 0
        self.persistent_reads = 0  # collective tensors read from a persistent parameter slot
        self.runtime_sized: set[str] = set()  # collectives whose output is sized when run
        self.targets: dict[int, tuple[str, WriteMode]] = {}
        self.written_slots: set[str] = set()
        self.filled: set[str] = set()
        self.used_buffers: set[str] = set()

    def fail(self, node: Node, message: str, field: str | None = None) -> GraphError:
        return GraphError(message, file=self.graph.source_path, node=node.name, field=field)

    def op_var(self, op: str) -> str:
        """The variable an op is resolved into at start-up (one per distinct op)."""
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

    def expr(self, node: Node, value: Any) -> str:
        """Source text of an argument value (references become variables)."""
        if isinstance(value, Ref):
            return self.value_var[value.index]
        if isinstance(value, Symbol):
            return self.symbol(node, value)
        if isinstance(value, list):
            return "[" + ", ".join(self.expr(node, v) for v in value) + "]"
        if isinstance(value, tuple):
            inner = ", ".join(self.expr(node, v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{literal(str(k))}: {self.expr(node, v)}"
                                   for k, v in value.items()) + "}"
        try:
            return literal(value)
        except TypeError:
            raise self.fail(node, f"argument of type {type(value).__name__} cannot be generated",
                            "args") from None

    def symbol(self, node: Node, sym: Symbol) -> str:
        value = sym.value.removeprefix("torch.")
        if sym.kind == "dtype" and value in DTYPE_BYTES:
            return f"torch.{value}"
        if sym.kind == "device":
            return "device"
        if sym.kind == "layout" and value in _LAYOUTS:
            return f"torch.{value}"
        if sym.kind == "memory_format" and value in _MEMORY_FORMATS:
            return f"torch.{value}"
        raise self.fail(node, f"unknown {sym.kind} {sym.value!r}", "args")

    def call(self, node: Node, extra_kwargs: str = "") -> str:
        """Arguments of a call: positional, then keywords (the device is always the runner's)."""
        parts = [self.expr(node, a) for a in node.args]

        def plain(k: object) -> bool:
            return isinstance(k, str) and k.isidentifier() and not keyword.iskeyword(k)

        for k, v in node.kwargs.items():
            if k == "device":
                parts.append("device=device")
            elif plain(k):
                parts.append(f"{k}={self.expr(node, v)}")
        odd = {k: v for k, v in node.kwargs.items() if not plain(k)}
        if odd:
            parts.append("**" + self.expr(node, odd))
        if extra_kwargs:
            parts.append(extra_kwargs)
        return ", ".join(parts)

    def emulated_for(self, node: Node) -> str:
        var = self.emulated_var.get(node.index)
        if var is None:
            for meta in node.outputs:
                check_tensor(self.graph, node, meta)
            if not math.isfinite(node.duration_us or 0.0) or (node.duration_us or 0.0) < 0:
                raise self.fail(node, f"duration_us must be finite and >= 0, got {node.duration_us!r}",
                                "duration_us")
            var = identifier("e", node.index, node.name)
            fill = ((node.index % 7) + 1) / 8.0
            outs = tuple((m.dtype, tuple(m.max_shape or m.shape)) for m in node.outputs)
            self.emulated.append(EmulatedSpec(var, float(node.duration_us or 0.0), outs, fill))
            self.emulated_var[node.index] = var
        return var

    def describe(self, node: Node) -> str:
        """What a node's header comment says: its op, or its collective and group."""
        info = node.collective
        if node.kind is NodeKind.COLLECTIVE and info is not None:
            size = self.graph.groups[info.group].size if info.group in self.graph.groups else "?"
            return f"{info.type} over group {comment(info.group, 30)} ({size} ranks)"
        if node.kind is NodeKind.WAIT and node.wait_of is not None:
            return f"wait for {comment(self.graph.nodes[node.wait_of].name, 50)}"
        return comment(node.op, 60)

    def body(self, order: list[int], slots: dict | None,
             targets: dict[int, tuple[str, WriteMode]] | None = None) -> list[str]:
        """Statements of a step function running ``order``; arenas when ``slots`` is given."""
        graph = self.graph
        self.copies = self.zero_copy = self.persistent_reads = self.copy_bytes = 0
        last_use = self._last_use(order)
        self.targets = dict(targets or {}) if slots is not None else {}
        self.written_slots = {var for var, _ in self.targets.values()}  # filled by their producer
        self.filled = set()  # input slots holding their value in this step already
        lines: list[str] = []
        waited: set[int] = set()
        returned = "[]"
        used = {j for i in order for j in reads(graph.nodes[i])}
        for pos, i in enumerate(order):
            node = graph.nodes[i]
            start = len(lines)
            if node.kind is NodeKind.INPUT:
                if not any(graph.nodes[j].kind is NodeKind.INPUT for j in order[max(0, pos - 1):pos]):
                    lines.append("# graph inputs (parameters, buffers, user inputs) by name")
                lines.append(f"{self.value_var[i]} = inputs[{literal(node.name)}]")
            elif node.kind is NodeKind.OUTPUT:
                returned = self.expr(node, node.args[0]) if node.args else "[]"
                if not returned.startswith("["):
                    returned = f"[{returned}]"
                lines.append(f"outputs = {returned}")
                returned = "outputs"
            elif node.kind is NodeKind.COLLECTIVE:
                lines.append(f"# {comment(node.name, 60)}: {self.describe(node)}")
                lines.extend(self.collective(node, slots))
            elif node.kind is NodeKind.WAIT:
                lines.append(f"# {comment(node.name, 60)}: {self.describe(node)}")
                lines.extend(self.wait(node, waited, slots))
            else:
                lines.append(f"# {comment(node.name, 60)}: {self.describe(node)}")
                lines.extend(self.compute(node, self.targets.get(i)))
            if i not in used:
                lines = drop_unused(lines, start, self.value_var[i])
            dead = [self.value_var[j] for j in last_use.get(pos, ())]
            if dead:
                lines.append(f"del {', '.join(dead)}")
        lines.append(f"return {returned}")
        return lines

    def _last_use(self, order: list[int]) -> dict[int, list[int]]:
        """Position in ``order`` -> values not used after it (to free them, FX-style)."""
        graph = self.graph
        last: dict[int, int] = {}
        for pos, i in enumerate(order):
            for j in reads(graph.nodes[i]):
                last[j] = pos
        out: dict[int, list[int]] = {}
        produced = set()
        for i in order:
            produced.add(i)
        for j, pos in sorted(last.items()):
            if graph.nodes[order[pos]].kind is not NodeKind.OUTPUT and j in produced:
                out.setdefault(pos, []).append(j)
        return out

    def compute(self, node: Node, target: tuple[str, WriteMode] | None) -> list[str]:
        var = self.value_var[node.index]
        if node.op in _GETITEM_OPS and len(node.args) == 2 and isinstance(node.args[0], Ref):
            return [f"{var} = {self.expr(node, node.args[0])}[{self.expr(node, node.args[1])}]"]
        if is_scalar_op(node.op):
            if node.kwargs:
                raise self.fail(node, f"{node.op} with keyword arguments cannot be generated", "kwargs")
            text = scalar_expression(node.op, [self.expr(node, a) for a in node.args])
            if text is None:
                raise self.fail(node, f"{node.op} with {len(node.args)} argument(s) cannot be "
                                "generated", "args")
            return [f"{var} = {text}  # size arithmetic, on this step's values"]
        if has_data_dependent_output(node) and not runnable(node):
            raise self.fail(node, f"{node.op} has no runnable op and a data-dependent output "
                            "size: the runner cannot emulate it (its size is only known when "
                            "the program runs)", "op")
        if not runnable(node) and node.kind is NodeKind.VIEW and node.alias_of is not None \
                and len(node.outputs) == 1:
            source = self.graph.nodes[node.alias_of]
            meta = node.outputs[0]
            check_tensor(self.graph, node, meta)
            if source.outputs and source.outputs[0].numel == meta.numel:
                shape = list(meta.max_shape or meta.shape)
                return [f"{var} = {self.value_var[node.alias_of]}.reshape({shape!r})"
                        "  # view without a call: same storage, its shape"]
        if not runnable(node):
            ev = self.emulated_for(node)
            return [f"emulate({literal(float(node.duration_us or 0.0))})  # emulated: no runnable op",
                    f"{var} = emulated.{ev}"]
        if target is not None:
            out_buffer, mode = target
            self.zero_copy += 1
            self.used_buffers.add(out_buffer)
            if mode is WriteMode.COPY:
                return [f"{var} = views.{out_buffer}.copy_({self.expr(node, node.args[0])})"
                        "  # zero-copy: the cast writes into its comm buffer"]
            out_op = node.op.rsplit(".", 1)[0] + ".out"
            return [f"{var} = ops.{self.op_var(out_op)}({self.call(node, f'out=views.{out_buffer}')})"
                    "  # zero-copy: writes into its comm buffer"]
        return [f"{var} = ops.{self.op_var(node.op)}({self.call(node)})"]

    def out_meta(self, node: Node, k: int, src: TensorMeta) -> TensorMeta:
        info = node.collective
        if len(node.outputs) > k and (k > 0 or not info.coalesced or len(node.outputs) > 1):
            return node.outputs[k]
        size = self.graph.groups[info.group].size
        shape = list(src.max_shape or src.shape)
        if info.type == "all_gather" and shape:
            shape[0] *= size
        elif info.type == "reduce_scatter" and shape:
            shape[0] = -(-shape[0] // size)
        return TensorMeta(src.dtype, tuple(shape))

    def collective(self, node: Node, slots: dict | None) -> list[str]:
        info = node.collective
        if info.type not in _SUPPORTED_COLLECTIVES:
            raise self.fail(node, f"the runner cannot run {info.type} collectives yet", "collective")
        if info.group not in self.group_var:
            raise self.fail(node, f"unknown process group {info.group!r}", "collective.group")
        group = f"groups.{self.group_var[info.group]}"
        var = self.value_var[node.index]
        lines: list[str] = []
        if info.type == "barrier":
            lines.append(f"works[{node.index}] = [dist.barrier(group={group}, async_op=True)]")
            lines.append(f"{var} = None")
            return lines
        op_kw = ""
        if info.type in ("all_reduce", "reduce_scatter"):
            reduce_op = _REDUCE_OPS.get((info.reduce_op or "sum").lower())
            if reduce_op is None:
                raise self.fail(node, f"unknown reduce op {info.reduce_op!r}", "collective.reduce_op")
            # AVG is not on every backend (gloo): sum here, divide at the wait.
            op_kw = f"op=dist.ReduceOp.{'SUM' if reduce_op == 'AVG' else reduce_op}, "
        sources = collective_sources(node)
        if not sources:
            raise self.fail(node, "a collective needs an input", "args")
        outs, issues = [], []
        for k, s in enumerate(sources):
            src_node = self.graph.nodes[s]
            if not src_node.outputs:
                raise self.fail(node, f"input {src_node.name!r} has no tensor", "args")
            src_meta = src_node.outputs[0]
            check_tensor(self.graph, src_node, src_meta)
            if info.in_place:
                buf_in = buf_out = self.value_var[s]
            else:
                buf_in, buf_out = self.collective_buffers(node, k, s, src_meta, slots, lines)
            outs.append(buf_out)
            if info.type == "all_reduce":
                call = f"dist.all_reduce({buf_out}, {op_kw}group={group}, async_op=True)"
            elif info.type == "broadcast":
                # the functional op's src is the root's rank within the group
                src_rank = self.expr(node, node.args[1]) if len(node.args) > 1 else "0"
                call = (f"dist.broadcast({buf_out}, group_src={src_rank}, group={group}, "
                        "async_op=True)")
            elif info.type == "all_gather":
                call = f"ALL_GATHER({buf_out}, {buf_in}, group={group}, async_op=True)"
            elif info.type == "reduce_scatter":
                call = f"REDUCE_SCATTER({buf_out}, {buf_in}, {op_kw}group={group}, async_op=True)"
            else:
                out_splits = self.expr(node, node.args[1]) if len(node.args) > 1 else "None"
                in_splits = self.expr(node, node.args[2]) if len(node.args) > 2 else "None"
                call = (f"dist.all_to_all_single({buf_out}, {buf_in}, {out_splits}, {in_splits}, "
                        f"group={group}, async_op=True)")
            issues.append(call)
        if len(issues) == 1:
            lines.append(f"works[{node.index}] = [{issues[0]}]")
        else:
            lines.append(f"works[{node.index}] = [")
            lines.extend(f"    {c}," for c in issues)
            lines.append("]")
        value = outs[0] if not info.coalesced else "[" + ", ".join(outs) + "]"
        if value != var:
            lines.append(f"{var} = {value}")
        return lines

    def _count_copy(self, meta: TensorMeta) -> None:
        """One more tensor copied per step (and its bytes, at the largest rank's size)."""
        self.copies += 1
        self.copy_bytes += meta.padded_nbytes

    def _written_by_producer(self, producer: int) -> str | None:
        """The buffer variable ``producer`` writes into itself (None: it writes nowhere)."""
        target = self.targets.get(producer)
        return target[0] if target is not None else None

    def collective_buffers(self, node: Node, k: int, s: int, src_meta: TensorMeta,
                           slots: dict | None, lines: list[str]) -> tuple[str, str]:
        """(input, output) tensors of one tensor of a collective; appends copy-in lines.

        all_reduce and broadcast run in place on one buffer (the functional op's result is a
        new tensor, so the input is copied in unless its producer wrote there itself).
        """
        info = node.collective
        src = self.value_var[s]
        var = self.value_var[node.index]
        fresh = f"{var}_{k}" if info.coalesced else var

        def slot(role: str) -> Slot | None:
            return slots.get((node.index, role, k)) if slots is not None else None

        if info.type in ("all_reduce", "broadcast"):
            target = slot("inout") or slot("output") or slot("input")
            if target is None:
                self._count_copy(src_meta)  # no buffer planned: a fresh copy, as the functional op makes
                lines.append(f"{fresh} = {src}.clone()")
                return fresh, fresh
            buf = f"views.{target.var}"
            self.used_buffers.add(target.var)
            if self._written_by_producer(s) != target.var:
                self._count_copy(src_meta)
                lines.append(f"{buf}.copy_({src})  # copy in")
            return buf, buf
        out_meta = self.out_meta(node, k, src_meta)
        check_tensor(self.graph, node, out_meta)
        in_slot = slot("input") or slot("inout")
        if in_slot is None:
            buf_in = f"{src}.contiguous()"
        elif in_slot.persistent:  # the parameter lives in the slot: placed once, at setup
            self.persistent_reads += 1
            self.used_buffers.add(in_slot.var)
            buf_in = f"views.{in_slot.var}.view({list(src_meta.max_shape or src_meta.shape)!r})"
            lines.append(f"# reads its parameter where it lives: persistent slot {in_slot.var}, no copy")
        else:
            shape = list(src_meta.max_shape or src_meta.shape)
            buf_in = f"views.{in_slot.var}" + ("" if tuple(shape) == in_slot.shape else f".view({shape!r})")
            self.used_buffers.add(in_slot.var)
            if in_slot.var in self.filled:  # a slot shared by collectives reading one content
                lines.append(f"# reads the copy already in its shared slot {in_slot.var}")
            elif in_slot.var not in self.written_slots:
                self._count_copy(src_meta)
                lines.append(f"{buf_in}.copy_({src})  # copy in")
            self.filled.add(in_slot.var)
        out_slot = slot("output")
        if out_slot is not None:
            self.used_buffers.add(out_slot.var)
            return buf_in, f"views.{out_slot.var}"
        if has_data_dependent_output(node, k) or has_data_dependent_output(self.graph.nodes[s]):
            shape_text = self.runtime_shape(node, src)
        else:
            shape_text = repr(list(out_meta.max_shape or out_meta.shape))
        lines.append(f"{fresh} = torch.empty({shape_text}, dtype=torch.{out_meta.dtype}, device=device)")
        return buf_in, fresh

    def runtime_shape(self, node: Node, src: str) -> str:
        """The output shape of collective ``node`` computed when the step runs, from the
        tensor it sends (``src``) and its split sizes: for data-dependent sizes, which only
        the running program knows."""
        info = node.collective
        size = self.graph.groups[info.group].size
        self.runtime_sized.add(node.name)
        if info.type == "all_to_all":
            if len(node.args) > 1 and node.args[1] is not None:
                return f"[sum({self.expr(node, node.args[1])}), *{src}.shape[1:]]"
            return f"list({src}.shape)"
        if info.type == "all_gather":
            return f"[{src}.shape[0] * {size}, *{src}.shape[1:]]"
        if info.type == "reduce_scatter":
            return f"[{src}.shape[0] // {size}, *{src}.shape[1:]]"
        raise self.fail(node, f"a {info.type} with a data-dependent size cannot be generated yet",
                        "collective")

    def wait(self, node: Node, waited: set[int], slots: dict | None) -> list[str]:
        coll = node.wait_of
        lines = []
        if coll is not None and coll not in waited:
            waited.add(coll)
            lines.append(f"for work in works.pop({coll}):")
            lines.append("    work.wait()")
            info = self.graph.nodes[coll].collective
            if (info is not None and info.type in ("all_reduce", "reduce_scatter")
                    and (info.reduce_op or "").lower() == "avg"):
                size = self.graph.groups[info.group].size
                if info.coalesced:
                    lines.append(f"for value in {self.value_var[coll]}:")
                    lines.append(f"    value.div_({size})  # avg: summed, divided here")
                else:
                    lines.append(f"{self.value_var[coll]}.div_({size})  # avg: summed, divided here")
        value = self.expr(node, node.args[0]) if node.args else (
            self.value_var[coll] if coll is not None else "None")
        lines.append(f"{self.value_var[node.index]} = {value}")
        return lines


def reads(node: Node) -> tuple[int, ...]:
    """Values a node's generated code reads: inputs, references and its collective."""
    refs = (*node.inputs, *iter_refs(node.args), *iter_refs(node.kwargs))
    return (*refs, node.wait_of) if node.wait_of is not None else refs


def drop_unused(lines: list[str], start: int, var: str) -> list[str]:
    """Remove assignments to ``var`` (never read) from ``lines[start:]``; calls stay."""
    prefix = f"{var} = "
    kept = lines[:start]
    for line in lines[start:]:
        if line.startswith(prefix):
            rhs = line[len(prefix):]
            if rhs.startswith(("ops.", "views.")):  # a call, or a cast written into a buffer
                kept.append(rhs)
            continue
        kept.append(line)
    return kept
