"""The pass manager: records per pass, invariant violations named, memory budget enforced."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import pytest

from commopt.errors import InvariantViolation
from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import Graph, NodeKind
from commopt.passes.base import Pass, PassContext
from commopt.passes.manager import PassManager
from commopt.passes.sink_waits import SinkWaits
from commopt.sim import simulate


@dataclass(frozen=True)
class WaitsFirst(Pass):
    """A broken pass: puts every wait right after the inputs, before its collective."""

    name: ClassVar[str] = "waits-first"

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int]:
        waits = [i for i in order if graph.nodes[i].kind is NodeKind.WAIT]
        inputs = [i for i in order if graph.nodes[i].kind is NodeKind.INPUT]
        rest = [i for i in order if i not in waits and i not in inputs]
        return inputs + waits + rest


@dataclass(frozen=True)
class AllGathersFirst(Pass):
    """A memory-hungry pass: issues every collective right after the inputs."""

    name: ClassVar[str] = "all-gathers-first"

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int]:
        colls = [i for i in order if graph.nodes[i].kind is NodeKind.COLLECTIVE]
        inputs = [i for i in order if graph.nodes[i].kind is NodeKind.INPUT]
        rest = [i for i in order if i not in colls and i not in inputs]
        return inputs + colls + rest


def _graph() -> Graph:
    b = GraphBuilder(world_size=4)
    b.group("dp", ranks=[0, 1, 2, 3])
    h = b.input("h", (16, 16))
    shards = [b.input(f"w{k}", (64, 1024), role="parameter") for k in range(3)]
    for k in range(3):
        ag = b.collective(f"ag{k}", "all_gather", "dp", shards[k])
        w = b.wait(f"ag{k}_wait", ag)
        h = b.compute(f"mm{k}", "aten.mm.default", [h, w], (16, 16))
    b.output([h])
    return b.build()


def _ctx(graph: Graph, increase: float) -> PassContext:
    durs = [10.0 if n.kind is NodeKind.COMPUTE else 30.0 if n.kind is NodeKind.COLLECTIVE else 0.0
            for n in graph.nodes]
    return PassContext.for_graph(graph, durs, max_memory_increase=increase)


def test_a_pass_breaking_an_invariant_is_named_with_the_passes_before_it():
    g = _graph()
    with pytest.raises(InvariantViolation) as exc:
        PassManager([SinkWaits(), WaitsFirst()]).run(g, g.original_order, _ctx(g, 0.1))
    text = str(exc.value)
    assert "pass 'waits-first' (after sink-waits)" in text
    assert "'ag0_wait' uses 'ag0' but comes before it" in text
    assert "bug in the pass" in text


def test_an_order_over_the_memory_budget_is_not_taken():
    g = _graph()
    result = PassManager([AllGathersFirst()]).run(g, g.original_order, _ctx(g, 0.1))
    (record,) = result.records
    assert record.note is not None and "exceeds the budget" in record.note
    assert record.changed is False and result.order == g.original_order


def test_records_carry_before_and_after_of_each_pass():
    g = _graph()
    result = PassManager([AllGathersFirst(), SinkWaits()]).run(g, g.original_order, _ctx(g, 10.0))
    first, second = result.records
    assert first.note is None and first.changed
    assert first.after.makespan_us < first.before.makespan_us
    assert second.before == first.after
    assert result.final == second.after and result.initial == first.before


def test_only_the_input_and_final_orders_are_simulated_in_full():
    g = _graph()
    ctx = _ctx(g, 10.0)
    result = PassManager([AllGathersFirst(), SinkWaits()]).run(g, g.original_order, ctx)
    first, _ = result.records
    assert result.initial.events and result.final.events and result.final.memory_curve
    assert first.after.events == [] and first.after.collectives == [] and first.after.memory_curve == []
    full = simulate(g, AllGathersFirst().run(g, g.original_order, ctx), ctx.durations_us)
    assert first.after == replace(full, events=[], collectives=[], memory_curve=[])


@dataclass(frozen=True)
class Keeps(Pass):
    """A pass that returns the order it was given."""

    name: ClassVar[str] = "keeps"

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int]:
        return list(order)


def test_an_order_is_checked_once_however_many_passes_return_it(monkeypatch):
    import commopt.passes.manager as manager

    checked: list[tuple[int, ...]] = []
    real = manager.check_order

    def counting(graph, order, **kw):
        checked.append(tuple(order))
        return real(graph, order, **kw)

    monkeypatch.setattr(manager, "check_order", counting)
    g = _graph()
    # the input order is not trusted: the first pass that returns it has it checked
    PassManager([Keeps(), Keeps(), AllGathersFirst(), Keeps()]).run(g, g.original_order, _ctx(g, 10.0))
    assert len(checked) == 2 and checked[0] == tuple(g.original_order) != checked[1]
    # an order over the budget is not taken: the input stays current and unchecked
    checked.clear()
    PassManager([AllGathersFirst(), Keeps(), Keeps()]).run(g, g.original_order, _ctx(g, 0.1))
    assert checked[1:] == [tuple(g.original_order)] and len(checked) == 2


def test_the_passes_caches_of_a_graph_and_its_orders_go_when_the_pipeline_ends():
    from commopt.passes import _common

    g = _graph()
    ctx = _ctx(g, 10.0)
    result = PassManager([AllGathersFirst(), SinkWaits()]).run(g, g.original_order, ctx)
    # sink-waits made the graph's edge tuples and the passes filled the context's memos
    assert g not in _common._EDGE_TUPLES
    assert not ctx._sims and not ctx._fitting
    # what lives on is in the result; asked again, the context simulates anew, the same
    assert ctx.simulate(g, result.order) == result.final
