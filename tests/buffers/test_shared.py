"""Collectives reading one unwritten content share one input slot (commopt.buffers.shared)."""

from __future__ import annotations

from commopt.buffers import plan_buffers, plan_digest, validate_plan
from commopt.buffers.shared import shared_reads
from commopt.codegen import build_model
from commopt.ir.builder import GraphBuilder
from tests.codegen.conftest import regather_graph


def test_reads_of_one_content_share_a_slot_live_for_every_reader() -> None:
    g = regather_graph()
    plan = plan_buffers(g)
    assert validate_plan(g, None, plan) == []
    bufs = {b.name: b for a in plan.groups for b in a.buffers}
    assert "ag2:in0" not in bufs and "ag3:in0" not in bufs
    assert bufs["ag1:in0"].shared_with == ["ag2:in0"]  # two views of the parameter w
    assert bufs["rs1:in0"].shared_with == ["ag3:in0"]  # the activation r, two collectives
    pos = {i: p for p, i in enumerate(g.original_order)}
    assert bufs["ag1:in0"].first == pos[g.index_of["ag1"]]
    assert bufs["ag1:in0"].last == pos[g.index_of["ag2_w"]]
    # the runner copies each content in once: w once (its first gather), r never (zero-copy)
    model = build_model(g, g.original_order, plan)
    assert (model.copies_per_iter, model.copy_bytes_per_iter) == (1, 32 * 4)
    hows = [t[3] for r in model.steps if r[2] == "collective" for t in r[8]]
    assert hows.count("shared") == 2  # reads the copy already in its shared slot


def test_a_written_storage_or_a_selecting_view_is_not_shared() -> None:
    b = GraphBuilder(name="written", world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4, 8))
    y = b.compute("y", "aten.relu.default", [x], (4, 8))
    w1 = b.wait("a_w", b.collective("a", "all_gather", "0", y))
    upd = b.compute("upd", "aten.add_.Tensor", [y, w1], (4, 8), mutates=[y], alias_of=y)
    w2 = b.wait("b_w", b.collective("b", "all_gather", "0", upd))
    t = b.view("t", x, (8, 4), op="aten.t.default")
    w3 = b.wait("c_w", b.collective("c", "all_gather", "0", t))
    w4 = b.wait("d_w", b.collective("d", "all_gather", "0", x))
    b.output([w2, w3, w4])
    g = b.build()
    assert shared_reads(g) == {}
    assert validate_plan(g, None, plan_buffers(g)) == []


def test_verify_plan_catches_a_slot_shared_by_different_contents() -> None:
    g = regather_graph()
    plan = plan_buffers(g)
    bad = plan.model_copy(deep=True)
    rs1 = next(b for a in bad.groups for b in a.buffers if b.name == "rs1:in0")
    ag1 = next(b for a in bad.groups for b in a.buffers if b.name == "ag1:in0")
    rs1.shared_with, ag1.shared_with = ["ag3:in0", "ag2:in0"], []
    bad.digest = plan_digest(bad)
    problems = validate_plan(g, None, bad)
    assert any("read different contents" in p for p in problems), problems
