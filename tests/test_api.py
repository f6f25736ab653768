"""``commopt.optimize`` as a library call."""

from __future__ import annotations

from pathlib import Path

import pytest

import commopt
from commopt.errors import CommoptError, OptionError
from commopt.ir.graph import NodeKind
from commopt.synth import fsdp_tp_stack

SAMPLES = Path(__file__).resolve().parent.parent / "sample_graphs"


class FailsOnAllReduce:
    """An estimator that breaks on all-reduce nodes (to test error reporting)."""

    name = "fails-on-all-reduce"

    def __init__(self, options=None):  # an estimator factory takes the EstimatorOptions
        self.options = options

    def estimate(self, node, graph):
        if node.collective is not None and node.collective.type == "all_reduce":
            raise RuntimeError("no model for all_reduce")
        return None


def _durations(graph):
    return [40.0 if n.kind is NodeKind.COMPUTE else 100.0 if n.kind is NodeKind.COLLECTIVE else 0.0
            for n in graph.nodes]


def test_optimize_a_graph_object_with_given_durations():
    g = fsdp_tp_stack(4, dp=4, tp=2, hidden=128, tokens=256)
    result = commopt.optimize(g, durations_us=_durations(g), timings=False)
    s = result.summary
    assert s.estimator == "given" and s.hardware is None
    assert sorted(result.order) == g.original_order
    assert s.after.makespan_us < s.before.makespan_us
    assert s.after.exposed_comm_us < s.before.exposed_comm_us
    assert s.lower_bound_us <= s.after.makespan_us
    assert s.makespan_over_lower_bound == pytest.approx(s.after.makespan_us / s.lower_bound_us)
    assert s.optimizer_seconds is None and s.timings is None
    assert result.written == ()


def test_cross_group_reorder_is_at_least_as_good():
    g = fsdp_tp_stack(4, dp=4, tp=2, hidden=128, tokens=256)
    d = _durations(g)
    kept = commopt.optimize(g, durations_us=d).summary.after.makespan_us
    free = commopt.optimize(g, durations_us=d, allow_cross_group_reorder=True).summary.after.makespan_us
    assert free <= kept


def test_write_puts_the_full_output_set_in_the_directory_summary_last(tmp_path: Path):
    g = fsdp_tp_stack(2, dp=2, tp=1, hidden=64, tokens=32, name="small")
    result = commopt.optimize(g, durations_us=_durations(g), output_dir=tmp_path / "o")
    names = [p.name for p in result.written]
    assert names == ["small.json", "buffer_plan.json", "run_small.py", "report.html",
                     "trace.json", "summary.json", "manifest.json"]
    assert result.summary.outputs == names[:-1]  # the manifest lists them, written last
    assert commopt.load_graph(result.written[0]).name == "small"
    assert result.summary.buffer_plan.arena_bytes == result.plan.totals.arena_bytes


def test_wrong_number_of_durations_is_an_option_error():
    g = fsdp_tp_stack(1, dp=2, hidden=64, tokens=32)
    with pytest.raises(OptionError, match="durations"):
        commopt.optimize(g, durations_us=[1.0])


def test_an_estimator_failing_on_a_node_names_node_and_estimator():
    g = fsdp_tp_stack(1, dp=2, tp=2, hidden=64, tokens=32)
    with pytest.raises(CommoptError) as exc:
        commopt.optimize(g, estimator="tests.test_api:FailsOnAllReduce")
    assert exc.value.node == "tp_ar0"
    assert "fails-on-all-reduce" in str(exc.value)


def test_negative_memory_increase_asks_for_less_memory_than_the_original(samples_dir):
    src = samples_dir / "ws8" / "mesh2d.json"
    loose = commopt.optimize(src, max_memory_increase=0.10, timings=False).summary
    assert loose.after.makespan_us < loose.before.makespan_us
    assert loose.footprint.after_bytes <= loose.footprint.budget_bytes
    assert not any(n.startswith("memory budget not met") for n in loose.notes)
    # 5% below the original's footprint: the arenas of mesh2d cannot shrink that much, and the
    # summary says so rather than claiming a budget it did not meet
    tight = commopt.optimize(src, max_memory_increase=-0.05, timings=False).summary
    assert tight.footprint.budget_bytes < tight.footprint.before_bytes
    met = tight.footprint.after_bytes <= tight.footprint.budget_bytes
    assert met != any(n.startswith("memory budget not met") for n in tight.notes)
    assert tight.after.peak_memory_bytes <= tight.before.peak_memory_bytes
    impossible = commopt.optimize(src, max_memory_increase=-0.9, timings=False).summary
    assert any(n.startswith("memory budget not met") for n in impossible.notes)


def test_results_are_frozen_and_outputs_are_built_from_explicit_options(tmp_path):
    """Regression: ``r.plan`` then ``r.write(d, align=4096)`` wrote a plan aligned to 512 (the
    plan was built lazily on first use), and writing twice duplicated the runner note."""
    import dataclasses

    from commopt.buffers.planfile import load_plan

    src = SAMPLES / "ws2" / "fsdp.pt2"
    result = commopt.optimize(src, timings=False)
    assert result.outputs is None and result.plan is None and result.written == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.order = result.graph.original_order  # type: ignore[misc]
    notes_before = list(result.summary.notes)

    aligned = commopt.build_outputs(result, commopt.OutputOptions(align=4096))
    assert aligned.plan.align_bytes == 4096
    first = commopt.write_outputs(result, aligned, tmp_path / "a")
    second = commopt.write_outputs(result, aligned, tmp_path / "b")
    assert load_plan(tmp_path / "a" / "buffer_plan.json").align_bytes == 4096
    assert [p.name for p in first] == [p.name for p in second] == [*aligned.summary.outputs, "manifest.json"]
    assert (tmp_path / "a" / "summary.json").read_bytes() == (tmp_path / "b" / "summary.json").read_bytes()
    runner_notes = [n for n in aligned.summary.notes if n.startswith("runner ")]
    assert len(runner_notes) == 1
    assert result.summary.notes == notes_before  # the result did not change
    assert commopt.build_outputs(result).plan.align_bytes == 512


def test_optimize_refuses_a_group_of_unknown_size_and_takes_it_from_a_live_job(samples_dir):
    """A plain-saved Llama TP program: group '0' has no size until the job (fake backend) is up."""
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from commopt.errors import GraphError

    ep = torch.export.load(str(samples_dir / "ws8" / "llama_tp.pt2"))
    with pytest.raises(GraphError, match=r"size of process group\(s\) '0' unknown.*--world-size N"):
        commopt.optimize(ep)
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    try:
        live = commopt.optimize(ep, timings=False).summary
    finally:
        dist.destroy_process_group()
    given = commopt.optimize(ep, world_size=8, timings=False).summary
    assert live.before.exposed_comm_us > 100.0
    assert live.before == given.before and live.after == given.after


def test_record_process_groups_is_typed_and_documented():
    import inspect

    sig = inspect.signature(commopt.record_process_groups)
    assert "DeviceMesh" in str(sig.parameters["mesh"].annotation)
    assert sig.return_annotation == "GroupsDocument"
    assert "initialized" in commopt.record_process_groups.__doc__


def test_the_footprint_budget_counts_persistent_parameter_slots(tmp_path):
    """With persistent parameters the budget is on the footprint the runner will have: the
    slots are arena bytes for the whole step and the parameters live nowhere else; the
    output set's summary says what the option costs and saves."""
    from commopt.buffers.footprint import estimate_footprint

    g = fsdp_tp_stack(2, dp=2, tp=2, hidden=64, tokens=32)
    result = commopt.optimize(g, persistent_params="dp", output_dir=tmp_path, timings=False)
    s = result.summary
    base = estimate_footprint(g, g.original_order, persistent_params="dp")
    assert (s.footprint.before_bytes, s.footprint.arena_before_bytes) == (base.peak_bytes, base.arena_bytes)
    assert s.footprint.budget_bytes == int(base.peak_bytes * 1.10)
    assert base.arena_bytes > estimate_footprint(g, g.original_order).arena_bytes
    cost = s.buffer_plan.persistent_params
    assert cost.groups == ["dp"] and len(cost.params) == 2
    assert cost.arena_cost_bytes == s.buffer_plan.arena_bytes - cost.arena_bytes_without
    with pytest.raises(OptionError, match="unknown process group"):
        commopt.optimize(g, persistent_params="nosuch")


def test_a_compute_slowdown_is_in_every_number_of_the_run(tmp_path):
    """On a real model's graph (corpus llama_fsdp, 2 ranks): the summary, its certificate, its
    robustness and the report all describe the order simulated with the slowdown."""
    from commopt.estimators import EstimatorOptions
    from commopt.sim import simulate
    from commopt.sim.robustness import makespan_range
    from tests.corpus.graphs import CORPUS

    r = commopt.optimize(CORPUS / "ws2" / "llama_fsdp.pt2", output_dir=tmp_path / "out",
                         estimator=EstimatorOptions(compute_slowdown="1.4"))
    s = r.summary
    assert (s.compute_slowdown.factor, s.compute_slowdown.source) == (1.4, "--compute-slowdown 1.4")
    assert any("1.400x as long while a collective is in flight" in n for n in s.notes)
    slowed = simulate(r.graph, r.order, r.durations_us, compute_slowdown=1.4)
    plain = simulate(r.graph, r.order, r.durations_us)
    assert s.after.makespan_us == slowed.makespan_us > plain.makespan_us  # compute overlaps comm
    assert s.after.makespan_us <= s.before.makespan_us
    assert slowed.slowed_compute_us > 0
    assert s.certificate.lower_bound_us <= s.after.makespan_us
    # a flight of d has room for d / 1.4 of compute: the chain bound rises with the slowdown
    from commopt.sim.bounds import lower_bounds
    from commopt.sim.model import step_durations

    assert s.certificate.lower_bound_us > lower_bounds(r.graph, step_durations(r.graph, r.durations_us)).value
    assert r.report.after.makespan_us == s.after.makespan_us
    worst = makespan_range(r.graph, r.order, r.durations_us, compute_slowdown=1.4).worst_us
    assert s.robustness.after_max_us == worst


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True])
def test_jobs_must_be_a_whole_number_of_processes(tmp_path, jobs):
    from commopt.errors import OptionError
    from commopt.synth import fsdp_tp_stack

    with pytest.raises(OptionError, match="jobs must be a whole number >= 1"):
        commopt.optimize(fsdp_tp_stack(1, dp=2, tp=1, hidden=64, tokens=32), output_dir=tmp_path,
                         jobs=jobs)
    assert not any(tmp_path.iterdir())


def _runs_and_result(monkeypatch, jobs: int, kill_child: bool = False):
    """optimize on a real-model sample where reordering within groups runs the pipeline a
    second time with each group's order kept: the result, and the pipeline runs made in
    this process."""
    import os
    import signal

    from commopt.ir.graph import Graph
    from commopt.passes.manager import PassManager

    runs = []
    parent = os.getpid()
    run, with_group_order = PassManager.run, Graph.with_group_order

    def counted(self, graph, order, ctx, **options):
        runs.append(bool(graph.group_order))
        return run(self, graph, order, ctx, **options)

    def maybe_killed(self, flag=True):
        if kill_child and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return with_group_order(self, flag)

    monkeypatch.setattr(PassManager, "run", counted)
    monkeypatch.setattr(Graph, "with_group_order", maybe_killed)
    result = commopt.optimize(SAMPLES / "realistic" / "llama3_8b_L2.json", timings=False, jobs=jobs)
    return result, runs


@pytest.mark.parametrize("kill_child", [False, True])
def test_the_run_keeping_each_groups_order_runs_beside_the_free_one_with_the_same_result(
        monkeypatch, kill_child):
    """With --jobs 2 the second pipeline run (each group's order kept) runs in a forked child
    while the free run runs here: the same summary and order as one process; a child that
    dies leaves the run to this process."""
    alone, alone_runs = _runs_and_result(monkeypatch, 1)
    assert alone_runs == [False, True]  # the sample needs the second run
    monkeypatch.setattr("commopt.forked.FORK_MIN_NODES", 0)
    beside, beside_runs = _runs_and_result(monkeypatch, 2, kill_child)
    assert beside_runs == ([False, True] if kill_child else [False])
    assert beside.summary == alone.summary and list(beside.order) == list(alone.order)
    assert beside.graph.group_order == alone.graph.group_order


@pytest.mark.parametrize("kill_child", [False, True])
def test_the_graph_identity_comes_from_the_input_order_child_or_is_computed_here(
        monkeypatch, kill_child):
    """With --jobs 2 the child that computes the lower bounds beside the footprint budget
    also computes the graph's identity for the summary (then the input order's scenarios);
    it is the one computed here, and a child that dies leaves it, and what it would have
    computed after it, to this process."""
    import os
    import signal

    from commopt import gate

    path = SAMPLES / "realistic" / "llama3_8b_L2.json"
    alone = commopt.optimize(path, timings=False, jobs=1)
    parent = os.getpid()
    computed_in = []
    identity = gate.graph_identity

    def spied(graph):
        if kill_child and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        computed_in.append("here" if os.getpid() == parent else "child")
        return identity(graph)

    monkeypatch.setattr(gate, "graph_identity", spied)
    monkeypatch.setattr("commopt.forked.FORK_MIN_NODES", 0)
    beside = commopt.optimize(path, timings=False, jobs=2)
    assert computed_in == (["here"] if kill_child else [])  # a child's list is its own
    assert beside.summary.graph_digest == alone.summary.graph_digest == identity(alone.graph)
    assert beside.summary == alone.summary
