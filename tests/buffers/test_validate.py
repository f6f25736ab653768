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
    bufs = plan.groups[0].buffers
    a, b = next((x, y) for x in bufs for y in bufs  # two buffers live at the same time
                if x.name < y.name and x.first <= y.last and y.first <= x.last)
    b.offset_bytes = a.offset_bytes
    problems = validate_plan(graph, None, _resealed(plan))
    assert any(f"'{a.name}'" in p and f"'{b.name}'" in p and "overlap in memory" in p for p in problems)


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


# --------------------------------------------------------------------------- real plans
SAMPLES = __import__("pathlib").Path(__file__).resolve().parents[2] / "sample_graphs"


@pytest.fixture(scope="module")
def optimized_mesh2d(tmp_path_factory):
    """sample_graphs/ws2/mesh2d.pt2 through `commopt optimize`: its archive and its plan."""
    from tests.cli_run import run_cli

    out = tmp_path_factory.mktemp("mesh2d")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(out)
        assert run_cli(["optimize", str(SAMPLES / "ws2" / "mesh2d.pt2"), "-o", str(out), "--no-timings"]) == 0
    return out / "mesh2d.pt2", out / "buffer_plan.json"


def _real(optimized_mesh2d):
    from commopt.buffers.planfile import load_plan
    from commopt.io import load_graph

    archive, plan_file = optimized_mesh2d
    return load_graph(archive), load_plan(str(plan_file))


def test_every_plan_field_is_recomputed_or_checked():
    """A field added to PlannedBuffer must be listed as compared exactly or as placement."""
    from commopt.buffers.validate import EXACT_FIELDS, PLACEMENT_FIELDS
    from commopt.schemas.buffer_plan import PlannedBuffer

    assert set(PlannedBuffer.model_fields) == set(EXACT_FIELDS) | set(PLACEMENT_FIELDS)
    assert not set(EXACT_FIELDS) & set(PLACEMENT_FIELDS)


def test_optimize_plan_is_valid(optimized_mesh2d):
    graph, plan = _real(optimized_mesh2d)
    assert validate_plan(graph, None, plan) == []


@pytest.mark.parametrize("field, value", [
    ("shape", [1, 2]),
    ("dtype", "bfloat16"),
    ("max_shape", [64, 32]),
    ("node", "mm"),
    ("value", "mm"),
    ("producer", "mm"),
    ("collective_type", "all_reduce"),
    ("role", "inout"),
    ("tensor_index", 1),
    ("local_bytes", 4),
])
def test_a_resealed_plan_with_a_wrong_buffer_field_is_rejected(optimized_mesh2d, field, value):
    """Issue 21 class 7: a wrong shape, dtype, node... with the digest recomputed used to pass,
    and a runner built from the plan crashed. The problem names the buffer and the field."""
    graph, plan = _real(optimized_mesh2d)
    buf = next(b for a in plan.groups for b in a.buffers if b.role == "input")
    before = getattr(buf, field)
    setattr(buf, field, value)
    problems = validate_plan(graph, None, _resealed(plan))
    assert f"buffer {buf.name!r} (group {_group_of(plan, buf)!r}): field {field} is {value!r}, " \
           f"the graph gives {before!r}" in problems, problems


def _group_of(plan, buf):
    return next(a.group for a in plan.groups if buf in a.buffers)


def test_a_resealed_plan_with_a_wrong_group_size_is_rejected(optimized_mesh2d):
    graph, plan = _real(optimized_mesh2d)
    arena = plan.groups[0]
    arena.group_size += 2
    problems = validate_plan(graph, None, _resealed(plan))
    assert problems == [f"group {arena.group!r}: field group_size is {arena.group_size}, the graph's "
                        f"group has {arena.group_size - 2} ranks"]


def test_verify_plan_rejects_a_resealed_edit(optimized_mesh2d, tmp_path, capsys):
    """The command: exit 1, one line naming buffer and field (digest recomputed as
    commopt.buffers.digest.plan_digest does)."""
    import json

    from commopt.buffers.digest import canonical_json
    from tests.cli_run import run_cli

    archive, plan_file = optimized_mesh2d
    doc = json.loads(plan_file.read_text())
    buf = doc["groups"][0]["buffers"][0]
    buf["dtype"] = "float16"
    doc["digest"] = __import__("hashlib").sha256(
        canonical_json({k: v for k, v in doc.items() if k != "digest"})).hexdigest()
    edited = tmp_path / "plan.json"
    edited.write_text(json.dumps(doc))
    assert run_cli(["verify-plan", str(archive), str(edited)]) == 1
    out = capsys.readouterr()
    assert out.out.splitlines() == [f"buffer {buf['name']!r} (group {doc['groups'][0]['group']!r}): "
                                    f"field dtype is 'float16', the graph gives 'float32'"]
