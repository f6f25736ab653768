"""The pass manager: records per pass, invariant violations named, memory budget enforced."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import pytest

from commopt.errors import InvariantViolation
from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import Graph, NodeKind
from commopt.passes.base import Pass, PassContext
from commopt.passes.manager import PassManager
from commopt.passes.raise_comms import RaiseComms
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


def test_a_final_order_left_to_the_caller_is_its_numbers_until_completed():
    """``final_in_full=False``: the final order's simulation is its numbers only, the same as
    in a full run; the caller's full simulation completes the result as the run would have."""
    g = _graph()
    passes = [AllGathersFirst(), SinkWaits()]
    full = PassManager(passes).run(g, g.original_order, _ctx(g, 10.0))
    later = PassManager(passes).run(g, g.original_order, _ctx(g, 10.0), final_in_full=False)
    assert later.order == full.order and later.final is not later.initial
    assert later.final.events == [] and later.final.memory_curve == []
    assert later.final == replace(full.final, events=[], collectives=[], memory_curve=[])
    assert later.records[-1].after is later.final
    done = later.with_final(simulate(g, later.order, _ctx(g, 10.0).durations_us))
    assert done.final == full.final and done.order == full.order
    assert [replace(r, seconds=0.0) for r in done.records] == [replace(r, seconds=0.0) for r in full.records]
    assert done.records[-1].after is done.final and later.records[-1].after is later.final


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


@dataclass(frozen=True)
class FailsOnTheInputOrder(Pass):
    """A pass that raises when given the graph's original order, else keeps its input."""

    name: ClassVar[str] = "fails-on-the-input-order"

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int]:
        if list(order) == list(graph.original_order):
            raise RuntimeError("met the input order")
        return list(order)


# counted as one of commopt's passes, which alone run beside (a plug-in's effects happen once)
FailsOnTheInputOrder.__module__ = "commopt.passes.test_double"


def _numbers(result) -> list[tuple]:
    return [(r.name, r.changed, r.note, r.before.makespan_us, r.after.makespan_us,
             r.before.exposed_comm_us, r.after.exposed_comm_us) for r in result.records]


def _beside(monkeypatch) -> list[int]:
    """Forking on any graph, and the pass index each run of passes started from."""
    starts: list[int] = []
    steps = PassManager._steps

    def recorded(self, run, start, first=None):
        starts.append(start)
        return steps(self, run, start, first)

    monkeypatch.setattr("commopt.forked.FORK_MIN_NODES", 0)
    monkeypatch.setattr(PassManager, "_steps", recorded)
    return starts


def test_a_first_pass_run_beside_that_keeps_the_order_keeps_the_passes_run_meanwhile(monkeypatch):
    """With jobs=2 the first pass runs in a forked child while the others run from the input
    order; when it keeps that order their records are taken: the same as in one process."""
    g = _graph()
    start = SinkWaits().run(g, RaiseComms().run(g, g.original_order, _ctx(g, 1.0)), _ctx(g, 1.0))
    passes = [SinkWaits(), RaiseComms(), SinkWaits()]
    alone = PassManager(passes).run(g, start, _ctx(g, 1.0))
    starts = _beside(monkeypatch)
    beside = PassManager(passes, jobs=2).run(g, start, _ctx(g, 1.0))
    assert starts == [1] and alone.records[0].changed is False
    assert _numbers(beside) == _numbers(alone) and beside.order == alone.order


def test_a_first_pass_run_beside_that_changes_the_order_runs_the_others_again(monkeypatch):
    """The first pass moved nodes: what ran meanwhile is dropped, including its error (one
    process would not meet it), and the passes run again from the first pass's order."""
    g = _graph()
    passes = [RaiseComms(), FailsOnTheInputOrder(), SinkWaits()]
    alone = PassManager(passes).run(g, g.original_order, _ctx(g, 1.0))
    starts = _beside(monkeypatch)
    beside = PassManager(passes, jobs=2).run(g, g.original_order, _ctx(g, 1.0))
    assert starts == [1, 0] and alone.records[0].changed is True
    assert _numbers(beside) == _numbers(alone) and beside.order == alone.order


def test_an_error_the_passes_meet_beside_a_first_pass_that_keeps_the_order_is_raised(monkeypatch):
    g = _graph()
    starts = _beside(monkeypatch)
    with pytest.raises(RuntimeError, match="met the input order"):
        PassManager([SinkWaits(), FailsOnTheInputOrder()], jobs=2).run(
            g, g.original_order, _ctx(g, 1.0))
    assert starts == [1]


@dataclass(frozen=True)
class DiesInAChild(Pass):
    """A pass whose process is killed unless it is the test's own: keeps its input order."""

    name: ClassVar[str] = "dies-in-a-child"
    parent: int = 0

    def run(self, graph: Graph, order: Sequence[int], ctx: PassContext) -> list[int]:
        if os.getpid() != self.parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return list(order)


DiesInAChild.__module__ = "commopt.passes.test_double"


def test_a_first_pass_whose_child_dies_runs_here(monkeypatch):
    g = _graph()
    passes = [DiesInAChild(parent=os.getpid()), RaiseComms()]
    alone = PassManager(passes).run(g, g.original_order, _ctx(g, 1.0))
    starts = _beside(monkeypatch)
    beside = PassManager(passes, jobs=2).run(g, g.original_order, _ctx(g, 1.0))
    assert starts == [1, 0]
    assert _numbers(beside) == _numbers(alone) and beside.order == alone.order
