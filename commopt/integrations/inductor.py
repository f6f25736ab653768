"""commopt's order inside ``torch.compile``: a post-grad pass for Inductor.

    import torch, commopt
    opt = commopt.inductor_pass(estimator="analytical")     # the CLI's estimator options
    with torch._inductor.config.patch(opt.inductor_config()):
        compiled = torch.compile(step)

Inductor calls ``post_grad_custom_post_pass`` on every graph it compiles (the forward and
the backward of a training step), after its own pattern passes and before it lowers the
graph. The graph is functional there, with ``_c10d_functional`` collectives and their
``wait_tensor`` as separate nodes, which is exactly what commopt reorders: the pass converts
it (:func:`commopt.io.pt2.graph_from_torch`, with the live process groups), runs
:func:`commopt.optimize` and moves the FX nodes into the new order.

Inductor then keeps that order -- its stable topological sort does not move a node whose
inputs come first -- unless one of its scheduler passes reorders again: the peak-memory
reorder (``reorder_for_peak_memory``, on by default) and the compute/comm overlap reorder
(``reorder_for_compute_comm_overlap``) both work on the scheduler's node list and would undo
commopt's placement, and the post-grad overlap scheduler
(``aten_distributed_optimizations.enable_overlap_scheduling``) runs after custom passes. :meth:`CommoptInductorPass.inductor_config` turns both off (commopt's
own memory budget stands in for the first). Fusion still merges neighbouring pointwise
kernels; :func:`emitted_events` reads the generated code back so a test (or a user) can
check that each collective is issued and waited where commopt placed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from commopt.errors import OptionError
from commopt.estimators.options import EstimatorOptions
from commopt.passes.base import DEFAULT_PIPELINE
from commopt.sim.memory import DEFAULT_MAX_MEMORY_INCREASE

try:  # the base class Inductor's cache key understands; torch is a dependency of the pass
    from torch._inductor.custom_graph_pass import CustomGraphPass as _PassBase
except ImportError:  # pragma: no cover - torch without Inductor
    _PassBase = object  # type: ignore[assignment,misc]


@dataclass(frozen=True)
class CompiledGraphOrder:
    """What the pass did to one graph Inductor compiled."""

    nodes: int
    collectives: int
    exposed_before_us: float
    exposed_after_us: float
    #: FX node names in the order commopt gave them (placeholders and output left out).
    order: tuple[str, ...]
    #: that order as :func:`order_events` projects it, to compare with the generated code.
    events: tuple[str, ...]
    notes: tuple[str, ...] = ()


#: The passes the Inductor pass runs by default: commopt's default pipeline without ``bucket``.
REORDER_PIPELINE = ",".join(p for p in DEFAULT_PIPELINE if p != "bucket")


class CommoptInductorPass(_PassBase):
    """A ``post_grad_custom_post_pass`` applying commopt's pass pipeline to each graph.

    ``estimator`` (a spec or :class:`~commopt.estimators.EstimatorOptions`), ``passes`` and
    ``max_memory_increase`` mean what they mean to ``commopt optimize``, except that the pass
    only reorders: the default pipeline runs without the bucket pass (which rewrites the
    graph; Inductor's own bucketing can merge collectives there) and a pipeline that rewrites
    the graph is an error. Memory is budgeted on
    live tensors: Inductor plans its buffers by liveness and has no persistent comm buffers.
    ``records`` lists what the pass did to each graph, in compile order.
    """

    def __init__(self, *, estimator: str | EstimatorOptions = "analytical",
                 passes: str | None = None,
                 max_memory_increase: float = DEFAULT_MAX_MEMORY_INCREASE,
                 allow_cross_group_reorder: bool = False) -> None:
        from commopt.sim.memory import check_max_memory_increase

        check_max_memory_increase(max_memory_increase)
        self.estimator = (estimator if isinstance(estimator, EstimatorOptions)
                          else EstimatorOptions(estimator=estimator))
        self.passes = passes
        self.max_memory_increase = max_memory_increase
        self.allow_cross_group_reorder = allow_cross_group_reorder
        self.records: list[CompiledGraphOrder] = []

    def __call__(self, graph: Any) -> None:
        """Reorder ``graph`` (an ``torch.fx.Graph``, in place) into commopt's order."""
        import commopt
        from commopt.io import load_graph

        gm = graph.owning_module
        if gm is None:
            raise OptionError("the FX graph has no owning GraphModule: not an Inductor graph")
        g = load_graph(gm)  # the live process groups give every group's ranks
        if not g.collectives():
            self.records.append(CompiledGraphOrder(len(g), 0, 0.0, 0.0, (), (), ("no collectives",)))
            return
        result = commopt.optimize(g, estimator=self.estimator, passes=self.passes or REORDER_PIPELINE,
                                  max_memory_increase=self.max_memory_increase,
                                  allow_cross_group_reorder=self.allow_cross_group_reorder,
                                  memory_accounting="live-tensors", timings=False)
        if result.source_graph is not None:
            raise OptionError("inside torch.compile commopt only reorders Inductor's graph; the "
                              "bucket pass rewrites it: leave 'bucket' out of the passes", field="passes")
        fx_nodes = list(graph.nodes)
        moved = [fx_nodes[i] for i in result.order
                 if fx_nodes[i].op not in ("placeholder", "get_attr", "output")]
        apply_order(graph, moved)
        s = result.summary
        self.records.append(CompiledGraphOrder(
            len(g), len(g.collectives()), s.before.exposed_comm_us, s.after.exposed_comm_us,
            tuple(n.name for n in moved), order_events(moved), tuple(s.notes)))

    def uuid(self) -> None:
        """None: Inductor does not cache graphs compiled with this pass (the order depends on
        the estimator's inputs, which no file hash captures)."""
        return None

    def inductor_config(self) -> dict[str, Any]:
        """The ``torch._inductor.config`` settings that apply this pass and keep its order:
        the pass itself, Inductor's own reorders off (its scheduler's peak-memory and
        comm-overlap reorders, and the post-grad overlap scheduler that runs after custom
        passes), no FX graph cache."""
        return {"post_grad_custom_post_pass": self,
                "reorder_for_peak_memory": False,
                "reorder_for_compute_comm_overlap": False,
                "aten_distributed_optimizations.enable_overlap_scheduling": False,
                "fx_graph_cache": False}


def inductor_pass(**options: Any) -> CommoptInductorPass:
    """A :class:`CommoptInductorPass` (options as ``commopt optimize``: ``estimator``,
    ``passes``, ``max_memory_increase``, ``allow_cross_group_reorder``)."""
    return CommoptInductorPass(**options)


def apply_order(graph: Any, nodes: list[Any]) -> None:
    """Move ``nodes`` (every node of ``graph`` but its placeholders, attributes and output)
    into this order, just before the output node; checks the result with ``graph.lint()``."""
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    for n in nodes:
        output.prepend(n)
    graph.lint()


# --------------------------------------------------------------------------- where collectives are
#: Matmul-like ops Inductor emits as one extern kernel call each (never fused on CPU/GPU by
#: default), so their place in the generated code can be compared with commopt's order.
_EXTERN_MATMULS = ("mm", "addmm", "bmm", "baddbmm")


def order_events(nodes: list[Any]) -> tuple[str, ...]:
    """The order of ``nodes`` (FX nodes) projected on what Inductor's code shows one call for:
    ``issue <op>`` / ``wait <k>`` (k: which issued collective, by issue order) / ``mm``.

    Pointwise ops are left out on purpose: Inductor fuses them into neighbouring kernels.
    """
    from commopt.io.classify import classify
    from commopt.ir.graph import NodeKind

    events: list[str] = []
    issued: dict[Any, int] = {}
    for n in nodes:
        if n.op != "call_function":
            continue
        facts = classify(n.target)
        name = getattr(getattr(n.target, "_overloadpacket", None), "__name__", "")
        if facts.kind is NodeKind.COLLECTIVE:
            issued[n] = len(issued)
            events.append(f"issue {name.rstrip('_')}")
        elif facts.kind is NodeKind.WAIT:
            src = n.args[0]
            while src not in issued and getattr(src, "op", None) == "call_function" and src.args:
                src = src.args[0]  # a getitem of a coalesced collective
            events.append(f"wait {issued.get(src, '?')}")
        elif name in _EXTERN_MATMULS:
            events.append("mm")
    return tuple(events)


_ISSUE = re.compile(r"^\s*(?:(\w+) = )?torch\.ops\._c10d_functional\.(\w+)\.default\((\w+)")
_MATMUL = re.compile(r"^\s*extern_kernels\.(" + "|".join(_EXTERN_MATMULS) + r")\(")


def emitted_events(code: str) -> tuple[str, ...]:
    """The same projection (:func:`order_events`) of the ``call`` function in Inductor's
    generated wrapper ``code``: collective issues and waits (a wait names the collective
    whose output buffer it waits on) and extern matmul calls, in the order the code runs."""
    body = code.split("def call(", 1)[-1].split("\nrunner = ", 1)[0]
    events: list[str] = []
    issued: dict[str, int] = {}
    count = 0
    for line in body.splitlines():
        m = _ISSUE.match(line)
        if m:
            target, op, first = m.groups()
            if op == "wait_tensor":
                events.append(f"wait {issued.pop(first, '?')}")
            else:
                issued[target or first] = count
                count += 1
                events.append(f"issue {op.rstrip('_')}")
        elif _MATMUL.match(line):
            events.append("mm")
    return tuple(events)
