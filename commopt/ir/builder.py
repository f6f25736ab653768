"""Programmatic graph construction, for tests, synthetic benchmark graphs and plug-ins.

    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4, 8))
    y = b.compute("y", "aten.relu.default", [x], (4, 8))
    c = b.collective("ar", "all_reduce", "0", y)
    w = b.wait("ar_wait", c)
    b.output([w])
    graph = b.build()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from commopt.ir.graph import (
    CollectiveInfo,
    Graph,
    Node,
    NodeKind,
    ProcessGroup,
    Ref,
    TensorMeta,
)

_COLLECTIVE_OPS = {
    "all_reduce": "_c10d_functional.all_reduce.default",
    "all_gather": "_c10d_functional.all_gather_into_tensor.default",
    "reduce_scatter": "_c10d_functional.reduce_scatter_tensor.default",
    "all_to_all": "_c10d_functional.all_to_all_single.default",
    "broadcast": "_c10d_functional.broadcast.default",
}


class GraphBuilder:
    """Appends nodes in program order; every method returns the new node's index."""

    def __init__(self, *, name: str = "graph", world_size: int | None = None,
                 mesh: dict[str, int] | None = None) -> None:
        self.name = name
        self.world_size = world_size
        self.mesh = mesh
        self.nodes: list[Node] = []
        self.groups: dict[str, ProcessGroup] = {}

    # -------------------------------------------------------------- groups
    def group(self, name: str, *, size: int | None = None, ranks: Sequence[int] | None = None,
              mesh_dim: str | None = None) -> str:
        """Declare a process group (size defaults to len(ranks))."""
        if size is None:
            if ranks is None:
                raise ValueError("group needs size or ranks")
            size = len(ranks)
        self.groups[name] = ProcessGroup(name, size, tuple(ranks) if ranks is not None else None, mesh_dim)
        return name

    # -------------------------------------------------------------- nodes
    def _add(self, name: str, kind: NodeKind, op: str, inputs: Sequence[int], **kw: Any) -> int:
        idx = len(self.nodes)
        self.nodes.append(
            Node(index=idx, name=name, kind=kind, op=op, inputs=tuple(dict.fromkeys(inputs)), **kw)
        )
        return idx

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32", *,
              role: str = "user_input") -> int:
        """A graph input of the given local shape."""
        return self._add(name, NodeKind.INPUT, "placeholder", (),
                         outputs=(TensorMeta(dtype, tuple(shape)),), attrs={"role": role})

    def compute(self, name: str, op: str, inputs: Sequence[int], shape: Sequence[int] | None,
                dtype: str = "float32", *, duration_us: float | None = None,
                mutates: Sequence[int] = (), alias_of: int | None = None,
                side_effect: bool = False, rng: bool = False, args: Sequence[Any] | None = None,
                kwargs: dict[str, Any] | None = None) -> int:
        """A compute node; ``shape=None`` for a node that produces no tensor."""
        outs = (TensorMeta(dtype, tuple(shape)),) if shape is not None else ()
        return self._add(
            name, NodeKind.COMPUTE, op, inputs, outputs=outs,
            args=tuple(args) if args is not None else tuple(Ref(i) for i in inputs),
            kwargs=dict(kwargs or {}), duration_us=duration_us, mutates=tuple(mutates),
            alias_of=alias_of, side_effect=side_effect, rng=rng,
        )

    def view(self, name: str, source: int, shape: Sequence[int] | None = None,
             op: str = "aten.view.default", args: Sequence[Any] | None = None) -> int:
        """A view aliasing ``source`` (same shape unless given)."""
        src = self.nodes[source].outputs[0]
        meta = TensorMeta(src.dtype, tuple(shape) if shape is not None else src.shape)
        return self._add(name, NodeKind.VIEW, op, (source,), outputs=(meta,),
                         args=tuple(args) if args is not None else (Ref(source), list(meta.shape)),
                         alias_of=source)

    def collective(self, name: str, type: str, group: str, source: int | Sequence[int], *,
                   out_shape: Sequence[int] | None = None, reduce_op: str | None = "sum",
                   in_place: bool = False, duration_us: float | None = None) -> int:
        """A collective over ``group`` reading ``source``; output shape follows the type.

        all_gather multiplies dim 0 by the group size, reduce_scatter divides it; others keep
        the input's shape unless ``out_shape`` is given.
        """
        sources = [source] if isinstance(source, int) else list(source)
        src = self.nodes[sources[0]].outputs[0]
        size = self.groups[group].size
        if len(sources) > 1:  # coalesced: one output per input, each shaped by the type's rule
            outs = tuple(self._collective_out(type, self.nodes[s].outputs[0], size) for s in sources)
        elif out_shape is not None:
            outs = (TensorMeta(src.dtype, tuple(out_shape)),)
        else:
            outs = (self._collective_out(type, src, size),)
        in_bytes = sum(self.nodes[s].outputs[0].padded_nbytes for s in sources)
        info = CollectiveInfo(
            type=type, group=group,
            reduce_op=reduce_op if type in ("all_reduce", "reduce_scatter", "reduce") else None,
            in_bytes=in_bytes, out_bytes=sum(t.padded_nbytes for t in outs),
            coalesced=len(sources) > 1, in_place=in_place,
        )
        op = _COLLECTIVE_OPS.get(type, f"_c10d_functional.{type}.default")
        return self._add(
            name, NodeKind.COLLECTIVE, op, sources, outputs=outs,
            args=(Ref(sources[0]) if len(sources) == 1 else [Ref(s) for s in sources],),
            collective=info, alias_of=sources[0] if in_place else None,
            mutates=tuple(sources) if in_place else (), duration_us=duration_us,
        )

    @staticmethod
    def _collective_out(type: str, src: TensorMeta, size: int) -> TensorMeta:
        shape = list(src.shape)
        if type == "all_gather" and shape:
            shape[0] *= size
        elif type == "reduce_scatter" and shape:
            shape[0] = -(-shape[0] // size)
        return TensorMeta(src.dtype, tuple(shape))

    def wait(self, name: str, collective: int) -> int:
        """The wait completing ``collective``."""
        out = self.nodes[collective].outputs
        return self._add(name, NodeKind.WAIT, "_c10d_functional.wait_tensor.default", (collective,),
                         outputs=out, args=(Ref(collective),), wait_of=collective, alias_of=collective)

    def output(self, values: Sequence[int], name: str = "output") -> int:
        """The output node returning ``values``."""
        return self._add(name, NodeKind.OUTPUT, "output", values, args=([Ref(v) for v in values],))

    def build(self) -> Graph:
        """Validate and build the :class:`Graph`."""
        return Graph.build(list(self.nodes), dict(self.groups), name=self.name,
                           source_format="json", world_size=self.world_size, mesh=self.mesh)
