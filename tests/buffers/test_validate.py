"""validate_plan finds each kind of problem in a plan, and nothing in a good one."""

from __future__ import annotations

import pytest

from commopt.buffers import plan_buffers, plan_digest, validate_plan
from commopt.synth import fsdp_tp_stack


@pytest.fixture(scope="module")
def graph():
    return fsdp_tp_stack(3, dp=2, tp=2, hidden=64, tokens=32)


def _buf(plan, name):
    return next(b for a in plan.groups for b in a.buffers if b.name == name)


def _resealed(plan):
    """The plan with its digest recomputed, so only the edit itself is a problem."""
    plan.digest = plan_digest(plan)
    return plan


def test_a_fresh_plan_has_no_problems(graph):
    assert validate_plan(graph, None, plan_buffers(graph)) == []


def test_edited_plan_fails_the_digest(graph):
    plan = plan_buffers(graph)
    plan.groups[0].heuristic = "hand-edited"
    (problem,) = validate_plan(graph, None, plan)
    assert problem.startswith("digest mismatch")


def test_live_buffers_moved_onto_each_other_are_reported(graph):
    plan = plan_buffers(graph)
    a, b = _buf(plan, "ag0:in0"), _buf(plan, "ag1:in0")  # both live from position 0
    b.offset_bytes = a.offset_bytes
    problems = validate_plan(graph, None, _resealed(plan))
    assert any("'ag0:in0'" in p and "'ag1:in0'" in p and "overlap in memory" in p for p in problems)


def test_misaligned_and_outside_the_arena(graph):
    plan = plan_buffers(graph)
    arena = plan.groups[0]
    buf = _buf(plan, "ag2:out0")
    buf.offset_bytes = arena.arena_bytes + 8
    problems = validate_plan(graph, None, _resealed(plan))
    assert any("'ag2:out0'" in p and "not a multiple of the alignment" in p for p in problems)
    assert any("'ag2:out0'" in p and "outside the arena" in p for p in problems)


def test_missing_buffer_and_size_mismatch(graph):
    plan = plan_buffers(graph)
    arena = plan.groups[1]
    dropped = arena.buffers.pop(0)
    plan.totals.buffers -= 1
    arena.buffers[0].padded_bytes -= 2
    problems = validate_plan(graph, None, _resealed(plan))
    assert f"buffer {dropped.name!r} (group 'tp') is missing from the plan" in problems
    assert any(arena.buffers[0].name in p and "size mismatch" in p for p in problems)


def test_shortened_lifetime_and_false_zero_copy(graph):
    plan = plan_buffers(graph)
    buf = _buf(plan, "ag0:in0")
    buf.last -= 1
    buf.zero_copy = True
    problems = validate_plan(graph, None, _resealed(plan))
    assert any("'ag0:in0'" in p and "does not cover" in p for p in problems)
    assert any("'ag0:in0'" in p and "zero-copy" in p for p in problems)


def test_plan_for_other_collective_types_misses_buffers(graph):
    plan = plan_buffers(graph, collective_types="all_reduce")
    assert validate_plan(graph, None, plan) == []
    plan.collective_types = ["all"]
    problems = validate_plan(graph, None, _resealed(plan))
    assert any("'ag0:in0'" in p and "missing" in p for p in problems)


def test_plan_for_another_graph(graph):
    other = fsdp_tp_stack(2, dp=2, tp=2, hidden=64, tokens=32)
    problems = validate_plan(graph, None, plan_buffers(other))
    assert len(problems) == 1 and "nodes" in problems[0]


def test_wrong_bound_figures_are_reported(graph):
    plan = plan_buffers(graph)
    arena = plan.groups[0]
    arena.lower_bound_bytes += 512
    arena.per_call_site_bytes -= 512
    plan.totals.lower_bound_bytes += 512
    plan.totals.per_call_site_bytes -= 512
    problems = validate_plan(graph, None, _resealed(plan))
    assert len(problems) == 2
    assert "lower bound" in problems[1] and "per-call-site" in problems[0]
