"""Hypothesis strategies for random graphs with collectives: for any test that takes a graph.

``graphs()`` draws a valid program: inputs (some uneven shards: ``max_shape`` larger than
the local shape); compute on 1-2 values; views (also of waited
collective results, so views sit between a wait and its use); in-place ops; side-effecting
barriers; collectives over 1-3 process groups, in place or not, each waited some steps later
(several in flight at once); an output. The program order itself keeps every invariant
(nothing writes a storage a collective is still reading), so any reordering pass must too.
``graph_and_durations()`` adds a duration per node.
"""

from __future__ import annotations

from hypothesis import strategies as st

from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import Graph, NodeKind, TensorMeta

_COLL_TYPES = ("all_reduce", "all_gather", "reduce_scatter")


@st.composite
def graphs(draw, *, max_steps: int = 40, max_groups: int = 3) -> Graph:
    """A random valid graph (see the module docstring)."""
    n_groups = draw(st.integers(1, max_groups))
    b = GraphBuilder(name="random", world_size=2)
    groups = [b.group(f"g{k}", ranks=[0, 1]) for k in range(n_groups)]
    readable: list[int] = []  # values a node may read: inputs, compute, views, waits
    busy: set[int] = set()  # storage roots a collective in flight reads or writes
    root: dict[int, int] = {}
    pending: list[tuple[int, int, set[int]]] = []  # (collective, steps left, roots it holds)

    def add_value(i: int, r: int) -> None:
        readable.append(i)
        root[i] = r

    for k in range(draw(st.integers(1, 3))):
        i = b.input(f"in{k}", (4, 4))
        if draw(st.booleans()):  # an uneven shard: another rank holds 5 rows
            b.nodes[i].outputs = (TensorMeta("float32", (4, 4), max_shape=(5, 4)),)
        add_value(i, i)
    steps = draw(st.integers(1, max_steps))
    for s in range(steps):
        pending_now = []
        for c, left, held in pending:
            if left <= 0:
                w = b.wait(f"w{c}", c)
                busy.difference_update(held)
                add_value(w, root[c])
            else:
                pending_now.append((c, left - 1, held))
        pending = pending_now
        free = [v for v in readable if root[v] not in busy]
        what = draw(st.sampled_from(("compute", "compute", "view", "inplace", "barrier", "coll", "coll")))
        if what == "compute" or not free:
            srcs = draw(st.lists(st.sampled_from(readable), min_size=1, max_size=2, unique=True))
            i = b.compute(f"c{s}", "aten.add.Tensor", srcs, (4, 4))
            add_value(i, i)
        elif what == "view":
            src = draw(st.sampled_from(readable))
            i = b.view(f"v{s}", src)
            add_value(i, root[src])
        elif what == "inplace":
            targets = [v for v in free if b.nodes[v].kind is not NodeKind.INPUT]
            if not targets:
                continue
            t = draw(st.sampled_from(targets))
            i = b.compute(f"ip{s}", "aten.add_.Tensor", [t], (4, 4), mutates=[t], alias_of=t)
            add_value(i, root[t])
        elif what == "barrier":
            src = draw(st.sampled_from(readable))
            b.compute(f"barrier{s}", "aten._print.default", [src], None, side_effect=True)
        else:
            src = draw(st.sampled_from(free))
            g = draw(st.sampled_from(groups))
            ctype = draw(st.sampled_from(_COLL_TYPES))
            in_place = ctype == "all_reduce" and b.nodes[src].kind is not NodeKind.INPUT and draw(st.booleans())
            c = b.collective(f"coll{s}", ctype, g, src, in_place=in_place)
            root[c] = root[src] if in_place else c
            held = {root[src]}
            busy.update(held)
            pending.append((c, draw(st.integers(0, 6)), held))
    for c, _, held in pending:
        w = b.wait(f"w{c}", c)
        busy.difference_update(held)
        add_value(w, root[c])
    outs = draw(st.lists(st.sampled_from(readable), min_size=1, max_size=3, unique=True))
    b.output(outs)
    return b.build()


@st.composite
def graph_and_durations(draw, **kw) -> tuple[Graph, list[float]]:
    """A random graph and a duration in microseconds per node (0 for inputs/views/output)."""
    g = draw(graphs(**kw))
    durs = []
    for node in g.nodes:
        if node.kind in (NodeKind.COMPUTE, NodeKind.COLLECTIVE):
            durs.append(float(draw(st.integers(0, 100))))
        else:
            durs.append(0.0)
    return g, durs


def random_topological_order(graph, rng) -> list[int]:
    """A valid order of ``graph`` (data and ordering edges), each step a random ready node:
    the orders a property test compares a bound or a plan against."""
    indegree = [len(graph.preds(i)) for i in range(len(graph))]
    ready = [i for i, d in enumerate(indegree) if d == 0]
    order: list[int] = []
    while ready:
        i = ready.pop(rng.randrange(len(ready)))
        order.append(i)
        for j in graph.succs(i):
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
    assert len(order) == len(graph)
    return order
