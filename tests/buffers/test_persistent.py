"""Persistent parameter buffers: which parameters qualify (corpus graphs), the plan's slots,
its account of costs and reasons, and verify-plan catching a slot that cannot hold."""

from __future__ import annotations

from functools import cache

import pytest

from commopt.buffers import plan_buffers, plan_digest, plan_json, validate_plan
from commopt.buffers.footprint import estimate_footprint, plan_footprint
from commopt.buffers.persistent import find_persistent_params, parse_persistent_params
from commopt.errors import OptionError
from commopt.io import load_graph
from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import TensorMeta
from tests.codegen.conftest import regather_graph
from tests.corpus.graphs import corpus_graphs

CORPUS = {g.name: g for g in corpus_graphs() if g.path.parent.name == "ws2"}


@cache
def _graph(name: str):
    return load_graph(CORPUS[name].path)


def _slots(plan):
    return [b for a in plan.groups for b in a.buffers if b.persistent]


def test_parse_persistent_params() -> None:
    assert parse_persistent_params(None) == () and parse_persistent_params("none") == ()
    assert parse_persistent_params("all") is None
    assert parse_persistent_params("1, 0,1") == ("0", "1")
    for bad in ("", "all,0", "none,all"):
        with pytest.raises(OptionError):
            parse_persistent_params(bad)


def test_unknown_group_is_an_option_error() -> None:
    with pytest.raises(OptionError, match="unknown process group 'dp'"):
        find_persistent_params(regather_graph(), "dp")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama_fsdp", "llama_tp_fsdp_2d"])
def test_fp32_fsdp_parameters_live_in_the_arena(name: str) -> None:
    """SimpleFSDP fp32: every all_gather reads its parameter through a view: each parameter
    gets one slot live for the whole order, no all_gather input is copied any more."""
    g = _graph(name)
    plan = plan_buffers(g, persistent_params="all")
    assert validate_plan(g, None, plan) == []
    gathers = [c for c in g.collectives() if g.nodes[c].collective.type == "all_gather"]
    slots = _slots(plan)
    assert len(slots) == len(gathers) == len(plan.persistent_params.params)
    for b in slots:
        assert (b.first, b.last) == (0, len(g) - 1)
        assert g.nodes[g.index_of[b.value]].attrs["role"] == "parameter"
    entry = plan.persistent_params
    assert entry.not_qualified == []
    assert entry.copies_saved_per_step == len(gathers)
    assert entry.slot_bytes == sum(b.size_bytes for b in slots)
    assert entry.bytes_not_copied_per_step == sum(b.padded_bytes for b in slots)
    without = plan_buffers(g)
    assert plan.totals.arena_bytes > without.totals.arena_bytes  # the slots are never reused
    # the parameters now live only in the arena: the other tensors shrink by their bytes
    fp, fp0 = plan_footprint(g, g.original_order, plan), plan_footprint(g, g.original_order, without)
    params = sum(g.nodes[g.index_of[b.value]].outputs[0].nbytes for b in slots)
    assert fp.other_peak_bytes <= fp0.other_peak_bytes - params
    est = estimate_footprint(g, g.original_order, persistent_params="all")
    assert est.arena_bytes == plan.totals.lower_bound_bytes


@pytest.mark.slow
def test_bf16_cast_parameters_do_not_qualify_and_say_why() -> None:
    """param_dtype bf16: a cast sits between each parameter and its all_gather; the arena
    would hold the cast's result, which changes every step: none qualifies, each is listed."""
    g = _graph("llama_fsdp_bf16")
    plan = plan_buffers(g, persistent_params="all")
    assert validate_plan(g, None, plan) == [] and _slots(plan) == []
    entry = plan.persistent_params
    gathers = [c for c in g.collectives() if g.nodes[c].collective.type == "all_gather"]
    assert len(entry.not_qualified) == len(gathers) and entry.params == []
    assert all("aten._to_copy.default computes the all_gather's input" in r.reason
               for r in entry.not_qualified)
    without = plan_buffers(g)
    assert plan.groups == without.groups  # nothing changed but the account


@pytest.mark.slow
def test_without_the_option_the_plan_file_is_unchanged() -> None:
    g = _graph("llama_fsdp")
    plan = plan_buffers(g)
    text = plan_json(plan)
    assert "persistent" not in text and "shared_with" not in text
    assert plan_buffers(g, persistent_params="none").digest == plan.digest


@pytest.mark.slow
def test_group_selection() -> None:
    """Only the named groups' all_gathers get slots (llama_tp_fsdp_2d gathers over group 1)."""
    g = _graph("llama_tp_fsdp_2d")
    group = {g.nodes[c].collective.group for c in g.collectives()
             if g.nodes[c].collective.type == "all_gather"}
    other = sorted(set(g.groups) - group)[0]
    assert _slots(plan_buffers(g, persistent_params=other)) == []
    assert len(_slots(plan_buffers(g, persistent_params=",".join(group)))) > 0


def test_forward_and_backward_gathers_of_one_parameter_share_its_slot() -> None:
    g = regather_graph()
    plan = plan_buffers(g, persistent_params="all")
    assert validate_plan(g, None, plan) == []
    (slot,) = _slots(plan)
    assert (slot.name, slot.value, slot.shared_with) == ("ag1:in0", "w", ["ag2:in0"])
    assert plan.persistent_params.copies_saved_per_step == 2


def _tampered(plan, edit):
    bad = plan.model_copy(deep=True)
    edit(bad)
    bad.digest = plan_digest(bad)
    return bad


def test_verify_plan_catches_slots_that_cannot_hold() -> None:
    g = regather_graph()
    plan = plan_buffers(g, persistent_params="all")

    def short(p):
        _slots(p)[0].last = 3

    def on_a_cast(p):  # a buffer of an activation claimed persistent
        buf = next(b for a in p.groups for b in a.buffers if b.name == "rs1:in0")
        buf.persistent = True

    def foreign_reader(p):
        _slots(p)[0].shared_with = ["ag2:in0", "ag3:in0"]

    for edit, words in ((short, "live for the whole order"), (on_a_cast, "not a parameter"),
                        (foreign_reader, "which is not parameter 'w'")):
        problems = validate_plan(g, None, _tampered(plan, edit))
        assert any(words in p for p in problems), (words, problems)


def test_a_parameter_written_in_place_or_read_unevenly_does_not_qualify() -> None:
    """An optimizer update inside the step, an uneven shard: no slot, and the reason."""
    b = GraphBuilder(name="update", world_size=2)
    b.group("0", ranks=[0, 1])
    w = b.input("w", (4, 8), role="parameter")
    u = b.input("u", (4, 8), role="parameter")
    b.nodes[u].outputs = (TensorMeta("float32", (4, 8), max_shape=(5, 8)),)
    waits = [b.wait(f"ag{k}_w", b.collective(f"ag{k}", "all_gather", "0", p)) for k, p in enumerate((w, u))]
    upd = b.compute("upd", "aten.add_.Tensor", [w, waits[0]], (4, 8), mutates=[w], alias_of=w)
    b.output([upd, waits[1]])
    g = b.build()
    found = find_persistent_params(g, "all")
    assert found.slots == ()
    reasons = {g.nodes[r.param].name: r.reason for r in found.rejected}
    assert reasons == {"w": "the step updates the parameter in place",
                       "u": "uneven shard: another rank holds a larger one"}
    assert validate_plan(g, None, plan_buffers(g, persistent_params="all")) == []


def test_without_all_gather_buffers_no_parameter_is_placed_and_the_plan_says_why() -> None:
    g = regather_graph()
    plan = plan_buffers(g, collective_types="reduce_scatter", persistent_params="all")
    assert validate_plan(g, None, plan) == [] and _slots(plan) == []
    (left,) = plan.persistent_params.not_qualified
    assert left.param == "w" and "--comm-buffers" in left.reason


@pytest.mark.parametrize("persistent", [None, "all"])
def test_plan_file_writes_each_buffer_as_its_model_dump(persistent) -> None:
    """The plan file reads each buffer's fields directly (planfile._buffer_doc): the same as
    pydantic's dump, persistent slots and shared slots included, planned or loaded."""
    from commopt.buffers.planfile import _buffer_doc

    g = regather_graph()
    plan = plan_buffers(g, persistent_params=persistent)
    loaded = type(plan).model_validate_json(plan_json(plan))
    docs = [_buffer_doc(b) for p in (plan, loaded) for a in p.groups for b in a.buffers]
    assert docs == [b.model_dump(mode="json") for p in (plan, loaded) for a in p.groups for b in a.buffers]
    assert any(d.get("shared_with") for d in docs)
    assert any(d.get("persistent") for d in docs) == (persistent == "all")
    assert [list(d) for d in docs] == [list(b.model_dump(mode="json")) for p in (plan, loaded)
                                       for a in p.groups for b in a.buffers]  # key order too
