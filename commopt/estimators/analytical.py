"""The analytical estimator: a roofline for compute, latency + bandwidth for collectives.

Compute: ``max(FLOPs / (peak for the dtype * efficiency), bytes moved / (HBM bandwidth *
efficiency))``, at least ``min_kernel_us`` for a node that moves data. FLOPs come from
``torch.utils.flop_counter``'s formulas where it has one for the op (matmuls, convolutions,
attention), evaluated on the shapes the IR records (matmuls and dense attention by
:mod:`commopt.estimators.flops`, the same formulas without importing torch); other ops count
as memory-bound.
Allocation and metadata ops take 0.

Collectives: ``latency + factor * message bytes / (link bandwidth * efficiency)`` with the ring
algorithm factor of each type (all_reduce 2(n-1)/n, all_gather / reduce_scatter / all_to_all
(n-1)/n, broadcast / reduce / send / recv 1) and a latency of one base cost plus one hop per
ring step, inter-node steps at the network's hop latency. A group whose ranks sit on more
than one host (``gpus_per_node``) runs at the network bandwidth, otherwise at the intra-node
link's. See ``docs/estimators.md`` for how this differs from torch's ``comm_analysis``.
"""

from __future__ import annotations

import functools
from typing import Any

from commopt.estimators.flops import FORMULAS
from commopt.estimators.hardware import load_hardware
from commopt.ir.graph import DTYPE_BYTES, Graph, Node, NodeKind, Ref
from commopt.schemas.hardware import HardwareSpec

#: Ops that allocate or read metadata without running a kernel.
METADATA_OPS = frozenset({
    "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty",
    "aten.new_empty_strided", "aten.sym_size", "aten.sym_stride", "aten.sym_numel",
    "aten.sym_storage_offset", "aten.alias", "aten.detach", "aten.lift_fresh",
    "aten._assert_async", "aten._assert_scalar", "aten.sym_constrain_range_for_size",
    "aten._assert_tensor_metadata",
})

#: Ops with a FLOP formula in torch's flop counter (``torch.utils.flop_counter.flop_registry``,
#: torch 2.13; a test keeps the two equal): matmuls, attention and convolutions, the compute
#: a step's time is made of. Fixed here so a pass can rank nodes by them without importing
#: torch, the same way on every rank.
HEAVY_OPS = frozenset({
    "aten._convolution", "aten._efficient_attention_backward", "aten._efficient_attention_forward",
    "aten._flash_attention_backward", "aten._flash_attention_forward",
    "aten._scaled_dot_product_cudnn_attention", "aten._scaled_dot_product_cudnn_attention_backward",
    "aten._scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_efficient_attention_backward",
    "aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_flash_attention_backward",
    "aten._scaled_mm", "aten._slow_conv2d_forward", "aten.addmm", "aten.baddbmm", "aten.bmm",
    "aten.convolution", "aten.convolution_backward", "aten.convolution_overrideable",
    "aten.cudnn_convolution", "aten.mm", "flex_attention", "flex_attention_backward",
})


def op_base_name(op: str) -> str:
    """``aten.mm.default`` -> ``aten.mm``; ``aten::mm`` -> ``aten.mm`` (overload dropped)."""
    op = op.replace("::", ".")
    parts = op.split(".")
    if len(parts) >= 3:
        return ".".join(parts[:2])
    return op


def heavy_op(op: str) -> bool:
    """Whether ``op`` is one of :data:`HEAVY_OPS` (any overload, ``aten::`` or ``aten.``)."""
    return op_base_name(op) in HEAVY_OPS


def collective_factor(ctype: str, n: int) -> float:
    """Share of the message each rank sends over its link in a ring implementation."""
    if n <= 1:
        return 0.0
    if ctype == "all_reduce":
        return 2.0 * (n - 1) / n
    if ctype in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if ctype == "barrier":
        return 0.0
    return 1.0  # broadcast, reduce, send, recv: the whole message crosses one link


def collective_steps(ctype: str, n: int) -> int:
    """Ring steps (each costs one hop latency)."""
    if n <= 1:
        return 0
    if ctype in ("send", "recv"):
        return 1
    if ctype in ("all_reduce", "barrier"):
        return 2 * (n - 1)
    return n - 1


def collective_time_us(hw: HardwareSpec, ctype: str, size_bytes: int, n: int, hosts: int) -> float:
    """Time of one collective of ``size_bytes`` (the full message) over ``n`` ranks on ``hosts`` hosts."""
    if n <= 1:
        return 0.0
    steps = collective_steps(ctype, n)
    inter_steps = 0 if hosts <= 1 else min(steps, (2 if ctype == "all_reduce" else 1) * (hosts - 1))
    latency = (hw.base_latency_us + (steps - inter_steps) * hw.intra_node_hop_latency_us
               + inter_steps * hw.inter_node_hop_latency_us)
    bw_gbps = hw.intra_node_bandwidth_gbps if hosts <= 1 else hw.inter_node_bandwidth_gbps
    bytes_per_us = bw_gbps * hw.link_efficiency * 1e3
    return latency + collective_factor(ctype, n) * size_bytes / bytes_per_us


# ``NodeKind.X`` goes through ``EnumType.__getattr__`` on Python 3.11: the per-node test reads these.
_COMPUTE, _COLLECTIVE = NodeKind.COMPUTE, NodeKind.COLLECTIVE


class AnalyticalEstimator:
    """Roofline compute and ring-model collectives on one hardware description."""

    name = "analytical"

    def __init__(self, hardware: str | HardwareSpec | None = None, gpus_per_node: int = 8) -> None:
        self.hw = load_hardware(hardware)
        if gpus_per_node < 1:
            from commopt.errors import OptionError

            raise OptionError("must be at least 1", field="--gpus-per-node")
        self.gpus_per_node = gpus_per_node
        self.notes: list[str] = []
        self._compute_cache: dict[Any, float] = {}
        self._hosts_cache: dict[tuple[Any, ...], tuple[int, int]] = {}
        self._flop_formulas: dict[str, Any] | None = None
        self._flop_failed: set[str] = set()

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # ---------------------------------------------------------------- protocol
    def estimate(self, node: Node, graph: Graph) -> float | None:
        """Duration of ``node`` in microseconds (never None: this is the chain's last resort)."""
        kind = node.kind
        if kind is _COLLECTIVE:
            return self.collective_us(node, graph)
        if kind is _COMPUTE:
            return self.compute_us(node, graph)
        return 0.0

    # ---------------------------------------------------------------- collectives
    def group_layout(self, graph: Graph, group: str) -> tuple[int, int]:
        """(ranks, hosts) of ``group``; unknown ranks assume the fewest hosts (noted once).

        The size must be proven (:func:`commopt.io.groups.proven_group_size` raises a
        one-line error otherwise): a guessed size would make the numbers look good.
        """
        from commopt.io.groups import proven_group_size

        pg = graph.groups.get(group)
        key = (group, pg, graph.world_size)  # one estimator may serve several graphs
        cached = self._hosts_cache.get(key)
        if cached is not None:
            return cached
        n = proven_group_size(graph, group)
        ranks = pg.ranks if pg is not None else tuple(range(n))
        if ranks is not None:
            hosts = len({r // self.gpus_per_node for r in ranks})
        else:
            hosts = -(-n // self.gpus_per_node)
            if n > 1:
                where = "inside one node" if hosts == 1 else f"across {hosts} nodes"
                self._note(
                    f"group {group!r} has no rank list; assuming its {n} ranks are packed {where} "
                    f"({self.gpus_per_node} GPUs per node)"
                )
        self._hosts_cache[key] = (n, hosts)
        return n, hosts

    def collective_us(self, node: Node, graph: Graph) -> float:
        """Ring-model time of a collective node."""
        info = node.collective
        if info is None:
            return 0.0
        n, hosts = self.group_layout(graph, info.group)
        return collective_time_us(self.hw, info.type, info.bytes, n, hosts)

    # ---------------------------------------------------------------- compute
    def compute_us(self, node: Node, graph: Graph) -> float:
        """Roofline time of a compute node, memoized per signature (op, input and output
        shapes and dtypes, constant arguments): a transformer repeats one layer's nodes."""
        nodes = graph.nodes
        in_shapes = tuple(
            (outs[0].shape, outs[0].dtype) if (outs := nodes[i].outputs) else None
            for i in node.inputs
        )
        out_shapes = tuple((t.shape, t.dtype) for t in node.outputs)
        kwargs = node.kwargs
        key = (node.op, in_shapes, out_shapes, _hashable_args(node.args, nodes),
               _hashable(kwargs, nodes) if kwargs else ())  # what _hashable gives an empty dict
        cached = self._compute_cache.get(key)
        if cached is None:
            cached = self._compute_cache[key] = self._roofline_us(node, graph)
        return cached

    def _roofline_us(self, node: Node, graph: Graph) -> float:
        if _base_name(node.op) in METADATA_OPS:
            return 0.0
        nodes = graph.nodes
        moved = sum(nodes[i].nbytes for i in node.inputs) + node.nbytes
        if moved == 0:
            return 0.0
        dtype = node.outputs[0].dtype if node.outputs else (
            nodes[node.inputs[0]].outputs[0].dtype if node.inputs and nodes[node.inputs[0]].outputs else "float32")
        flops = self.flops(node, graph)
        peak = self.hw.peak_tflops.get(dtype) or self.hw.peak_tflops["float32"]
        t_flops = flops / (peak * self.hw.flops_efficiency * 1e6)
        t_bytes = moved / (self.hw.memory_bandwidth_gbps * self.hw.memory_efficiency * 1e3)
        return max(t_flops, t_bytes, self.hw.min_kernel_us)

    def flops(self, node: Node, graph: Graph) -> float:
        """FLOPs of ``node`` by torch's flop_counter formula for its op (0 when it has none):
        the formulas of :mod:`commopt.estimators.flops` where they cover the op, so that
        most graphs are estimated without importing torch, else torch's registry."""
        base = op_base_name(node.op)
        fn = FORMULAS.get(base)
        size: Any = tuple
        out_keyword = "out_shape"  # how commopt's formulas take the output's shape
        if fn is None:
            if base not in HEAVY_OPS:
                return 0.0
            fn = self._formulas().get(base)
            if fn is None:
                return 0.0
            import torch

            size, out_keyword = torch.Size, "out_val"  # torch's shape_wrapper takes the value
        nodes = graph.nodes

        def shape_of(v: Any) -> Any:
            if isinstance(v, Ref):
                outs = nodes[v.index].outputs
                return size(outs[0].shape) if outs else None
            if isinstance(v, (list, tuple)):
                return type(v)(shape_of(x) for x in v)
            if isinstance(v, dict):
                return {k: shape_of(x) for k, x in v.items()}
            return v

        out = size(node.outputs[0].shape) if node.outputs else None
        try:
            return float(fn(*shape_of(node.args), **{out_keyword: out}, **shape_of(node.kwargs)))
        except Exception:  # a formula that cannot read these arguments: count bytes only
            if node.op not in self._flop_failed:
                self._flop_failed.add(node.op)
                self._note(f"no FLOP count for {node.op} with the recorded shapes (first at node "
                           f"{node.name!r}); treated as memory-bound")
            return 0.0

    def _formulas(self) -> dict[str, Any]:
        """torch's flop registry by op name without overload (imports torch)."""
        if self._flop_formulas is None:
            from torch.utils.flop_counter import flop_registry

            table: dict[str, Any] = {}
            for packet, fn in flop_registry.items():
                qual = getattr(packet, "_qualified_op_name", None)
                if qual:
                    table[qual.replace("::", ".")] = fn
            self._flop_formulas = table
        return self._flop_formulas


def _hashable(v: Any, nodes: list[Node]) -> Any:
    t = type(v)
    if t is int or t is float or t is str or t is bool or v is None:
        return v
    if t is Ref:
        outs = nodes[v.index].outputs
        return ("ref", outs[0].shape if outs else None)
    if t is tuple or t is list:
        return tuple([_hashable(x, nodes) for x in v])
    if isinstance(v, Ref):
        return ("ref", nodes[v.index].outputs[0].shape if nodes[v.index].outputs else None)
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x, nodes) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((str(k), _hashable(x, nodes)) for k, x in v.items()))
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v


def _hashable_args(args: tuple[Any, ...], nodes: list[Node]) -> tuple[Any, ...]:
    """``_hashable(args, nodes)`` of a node's ``args``, their references (most arguments)
    read here rather than in a call each."""
    out = []
    for v in args:
        if type(v) is Ref:
            outs = nodes[v.index].outputs
            out.append(("ref", outs[0].shape if outs else None))
        else:
            out.append(_hashable(v, nodes))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _base_name(op: str) -> str:
    return op_base_name(op)


def bytes_of_dtype(dtype: str) -> int:
    """Element size of an IR dtype name (4 when unknown)."""
    return DTYPE_BYTES.get(dtype, 4)


def from_options(options) -> AnalyticalEstimator:
    """The analytical estimator for :class:`~commopt.estimators.options.EstimatorOptions`."""
    return AnalyticalEstimator(options.hardware, options.gpus_per_node)
